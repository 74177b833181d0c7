/**
 * selfheal/mastra with the real @mastra/core: a `new Agent({ model, tools })` whose tools are
 * healed by `healTools` and whose model is healed by `healModel` (selfheal/ai-sdk's). Tool runs
 * use the AI SDK's scripted mock model (a v3 model, as Mastra takes it); model faults come from
 * a real OpenAI-compatible server on 127.0.0.1 (selfheal/testing's fake provider) through the
 * real `@ai-sdk/openai-compatible` provider. selfheal runs on a VirtualClock: a wait is asserted
 * from the span and the virtual time, never from the wall clock. Mastra needs Node 22.13+: on an
 * older Node the suite is one skipped test named by the notice, which is also printed.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3Prompt } from "@ai-sdk/provider";
import { context, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { tool as aiSdkTool } from "ai";
import type { MockLanguageModelV3 } from "ai/test";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { callContextOf, healModel, healTools } from "../../src/adapters/mastra.js";
import {
  HttpResponseError,
  isHumanEscalationRequiredError,
  type SelfHealing,
} from "../../src/index.js";
import {
  startFakeProvider,
  type FakeProvider,
  type VirtualClock,
} from "../../src/testing/index.js";
import { scriptedModel, textTurn, toolTurn } from "../fixtures/adapters/ai-sdk-models.js";
import { CHILD_HANG_MS, builtJs } from "../helpers/built-js.js";
import { configError, NO_RECOVERY, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";

/** Mastra (`@mastra/core` 1.x) declares `engines: node >= 22.13.0`. */
const [MAJOR = 0, MINOR = 0] = process.versions.node.split(".").map(Number);
const MASTRA_RUNS = MAJOR > 22 || (MAJOR === 22 && MINOR >= 13);
const MASTRA_SKIPPED = "[skipped] Mastra (@mastra/core) needs Node 22.13+";

/** @mastra/core's modules, loaded only where they run. */
async function loadMastra() {
  const [agent, tools, logger] = await Promise.all([
    import("@mastra/core/agent"),
    import("@mastra/core/tools"),
    import("@mastra/core/logger"),
  ]);
  return { Agent: agent.Agent, Tool: tools.Tool, createTool: tools.createTool, ...logger };
}
type Mastra = Awaited<ReturnType<typeof loadMastra>>;

const mastra = MASTRA_RUNS ? await loadMastra() : undefined;
if (!mastra) {
  console.info(MASTRA_SKIPPED);
  it.skip(MASTRA_SKIPPED, () => undefined);
}

const otel = recordingProvider();

/** An instance on virtual time whose spans are recorded; the default recovery plans. */
function setup() {
  otel.reset();
  return recoveryInstance(otel.provider);
}

const only = (name: string): ReadableSpan => {
  const spans = otel.named(name);
  expect(spans).toHaveLength(1);
  return spans[0] as ReadableSpan;
};
const attrs = (name: string) => only(name).attributes;

/** The tool results the model read on its last call (Mastra's tool messages), in order. */
function toolOutputs(model: MockLanguageModelV3): unknown[] {
  const prompt: LanguageModelV3Prompt = model.doGenerateCalls.at(-1)?.prompt ?? [];
  return prompt.flatMap((message) =>
    message.role === "tool"
      ? message.content.flatMap((part) => (part.type === "tool-result" ? [part.output] : []))
      : [],
  );
}

/** A 429 as a docs API sends it: Retry-After in seconds, an OpenAI-style error body. */
function rateLimited(retryAfterSeconds: number): Promise<HttpResponseError> {
  const body = JSON.stringify({ error: { message: "slow down", type: "rate_limit" } });
  const headers = { "retry-after": String(retryAfterSeconds) };
  return HttpResponseError.from(new Response(body, { status: 429, headers }));
}

const serviceDown = () =>
  new HttpResponseError(503, new Headers(), "upstream down", "https://orders.test");

function suites({ Agent, Tool, createTool, noopLogger }: Mastra) {
  /** A Mastra agent on `model` with `tools`; Mastra's own logging off (the tests read spans). */
  function supportAgent(model: ConstructorParameters<typeof Agent>[0]["model"], tools = {}) {
    const agent = new Agent({
      id: "support",
      name: "Support",
      instructions: "Answer from the docs.",
      model,
      tools,
    });
    agent.__setLogger(noopLogger);
    return agent;
  }

  /**
   * The agent's answer to `prompt`, run on selfheal's virtual time. Against a real server, in
   * small steps: virtual time moves while a request is in flight, and the limits of a healed
   * stream (first token 20 s, idle 15 s) stay hundreds of steps away.
   */
  function ask(
    clock: VirtualClock,
    agent: ReturnType<typeof supportAgent>,
    prompt: string,
    stepMs = 100,
  ) {
    return clock.run(agent.generate(prompt), { stepMs });
  }

  const docsTool = (answer: (query: string) => unknown) =>
    createTool({
      id: "search-docs",
      description: "Searches the docs",
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => {
        await Promise.resolve();
        return answer(query);
      },
    });

  const refundTool = (refunds: string[]) =>
    createTool({
      id: "issue-refund",
      description: "Refunds an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => {
        refunds.push(orderId);
        return Promise.resolve(`refunded ${orderId}`);
      },
    });

  /** A model that calls `name` with `input` once (call id `call-1`), then answers `text`. */
  const callsThenAnswers = (name: string, input: unknown, text: string) =>
    scriptedModel([toolTurn([name, input, "call-1"]), textTurn(text)]);

  describe("Mastra Agent: healTools makes each tool's execute a selfheal call", () => {
    it("recovers a tool rate-limited once (429, Retry-After 2 s): the wait is the server's, the model reads the answer, the span tree says how", async () => {
      const { sh, clock, events } = setup();
      let calls = 0;
      const search = docsTool(async (query) => {
        if (++calls === 1) throw await rateLimited(2);
        return `3 articles about ${query}`;
      });
      const model = callsThenAnswers("search_docs", { query: "refunds" }, "Refunds take 5 days.");
      const tools = healTools(sh, { search_docs: search }, { readOnly: ["search_docs"] });
      const agent = supportAgent(model, tools);

      // Under the caller's span: Mastra runs the tool in the caller's OpenTelemetry context.
      const request = otel.provider.getTracer("app").startSpan("POST /chat");
      const started = clock.now();
      const result = await context.with(trace.setSpan(context.active(), request), () =>
        ask(clock, agent, "How long do refunds take?"),
      );
      request.end();

      expect(result.text).toBe("Refunds take 5 days.");
      expect(calls).toBe(2);
      expect(toolOutputs(model)).toEqual([{ type: "text", value: "3 articles about refunds" }]);
      expect(clock.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(tree(otel.spans())).toEqual([
        {
          "POST /chat": [
            { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
          ],
        },
      ]);
      expect(attrs("agent.tool_call")).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "call-1",
        "selfheal.call.outcome": "recovered",
      });
      expect(attrs("agent.diagnosis")).toMatchObject({
        "selfheal.diagnosis.pattern": "RATE_LIMIT",
        "http.response.status_code": 429,
        "selfheal.diagnosis.retry_after_ms": 2_000,
      });
      expect(attrs("agent.recovery")).toMatchObject({
        "selfheal.recovery.strategy": "retry_once",
        "selfheal.recovery.wait_ms": 2_000,
        "selfheal.recovery.outcome": "success",
      });
      expect(events.map((e) => [e.tool, e.pattern, e.outcome])).toEqual([
        ["search_docs", "RATE_LIMIT", "recovered"],
      ]);
    });

    it("refuses a write while the agent is critical: the write never runs, the model reads selfheal's refusal as the tool's error", async () => {
      const { sh } = virtualInstance({
        tracerProvider: otel.provider,
        health: { successRate: { minSamples: 4 }, cacheMs: 0 },
      });
      otel.reset();
      const refunds: string[] = [];
      const tools = healTools(
        sh,
        {
          lookup_order: docsTool(() => {
            throw serviceDown();
          }),
          issue_refund: refundTool(refunds),
        },
        { readOnly: ["lookup_order"] }, // issue_refund is not declared: a write
      );
      const lookups = [1, 2, 3, 4].map(
        (i) => ["lookup_order", { query: `o-${i}` }, `l${i}`] as [string, unknown, string],
      );
      const first = supportAgent(
        scriptedModel([toolTurn(...lookups), textTurn("Orders are unreachable.")]),
        tools,
      );
      await first.generate("Look up my orders");
      expect((await sh.status()).status).toBe("critical");

      const model = callsThenAnswers("issue_refund", { orderId: "A-42" }, "I could not refund.");
      const second = supportAgent(model, tools);
      const result = await second.generate("Refund A-42");

      expect(result.text).toBe("I could not refund.");
      expect(refunds).toEqual([]);
      expect(toolOutputs(model)).toEqual([
        {
          type: "error-text",
          value:
            'selfheal: write tool "issue_refund" refused: the agent\'s health is critical; read-only mode until it recovers (nothing was sent, retrying later is safe)',
        },
      ]);
      const blocked = otel
        .named("agent.tool_call")
        .filter((s) => s.attributes["selfheal.call.outcome"] === "blocked");
      expect(blocked.map((s) => s.attributes["gen_ai.tool.name"])).toEqual(["issue_refund"]);
      expect(blocked[0]?.attributes["selfheal.tool.read_only"]).toBe(false);
    });

    it("times an attempt out through Mastra's abortSignal; the tool reads its call context (attempt, idempotency key, the model's call id)", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
      otel.reset();
      const seen: unknown[] = [];
      const ship = createTool({
        id: "ship-order",
        description: "Ships an order",
        inputSchema: z.object({ orderId: z.string() }),
        execute: ({ orderId }, { abortSignal }) => {
          const ctx = callContextOf({ abortSignal });
          seen.push({
            attempt: ctx?.attempt,
            idempotencyKey: ctx?.idempotencyKey,
            toolCallId: ctx?.toolCallId,
          });
          // Hangs until selfheal's timeout aborts it through Mastra's own abortSignal.
          return new Promise((_resolve, reject) => {
            abortSignal?.addEventListener("abort", () => {
              reject(new Error(`aborted ${orderId}`));
            });
          });
        },
      });
      const tools = healTools(
        sh,
        { ship_order: ship },
        {
          tools: {
            ship_order: {
              timeoutMs: 3_000,
              idempotencyKey: (input) => `ship-${(input as { orderId: string }).orderId}`,
            },
          },
        },
      );
      const model = callsThenAnswers("ship_order", { orderId: "B-7" }, "Shipping is slow today.");
      await ask(clock, supportAgent(model, tools), "Ship B-7");

      expect(seen).toEqual([{ attempt: 1, idempotencyKey: "ship-B-7", toolCallId: "call-1" }]);
      expect(toolOutputs(model)).toEqual([
        { type: "error-text", value: 'selfheal: tool "ship_order" timed out after 3000 ms' },
      ]);
      expect(attrs("agent.tool_call")["selfheal.call.outcome"]).toBe("error");
    });

    it("heals an AI SDK tool handed to the agent the same way (its own options: abortSignal, toolCallId)", async () => {
      const { sh, clock } = setup();
      let calls = 0;
      const lookup = aiSdkTool({
        description: "Reads an order",
        inputSchema: z.object({ orderId: z.string() }),
        execute: ({ orderId }) => {
          if (++calls === 1) throw serviceDown();
          return { orderId, status: "delivered" };
        },
      });
      const tools = healTools(sh, { lookup_order: lookup }, { readOnly: ["lookup_order"] });
      const model = callsThenAnswers("lookup_order", { orderId: "A-42" }, "It was delivered.");
      const result = await ask(clock, supportAgent(model, tools), "Where is A-42?");

      expect(result.text).toBe("It was delivered.");
      expect(calls).toBe(2);
      expect(toolOutputs(model)).toEqual([
        { type: "json", value: { orderId: "A-42", status: "delivered" } },
      ]);
      expect(attrs("agent.tool_call")).toMatchObject({
        "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.id": "call-1",
        "selfheal.call.outcome": "recovered",
      });
    });
  });

  describe("Mastra Agent: healTools heals once and refuses options that would pass silently", () => {
    it("a healed tool is still the Mastra tool (class, id, schema); healing it again, or a copy per request, nests no second call", async () => {
      const { sh, clock } = setup();
      const search = docsTool(() => "found");
      const once = healTools(sh, { search_docs: search }, { readOnly: ["search_docs"] });
      const healed = once.search_docs;
      expect(healed).toBeInstanceOf(Tool);
      expect([healed.id, healed.description, healed.inputSchema]).toEqual([
        search.id,
        search.description,
        search.inputSchema,
      ]);
      expect(healed.execute).not.toBe(search.execute);
      // A request layer heals the set it was given, already healed at startup.
      const twice = healTools(sh, once, { readOnly: ["search_docs"] });
      expect(twice.search_docs.execute).toBe(healed.execute);
      const model = callsThenAnswers("search_docs", { query: "q" }, "ok");
      await ask(clock, supportAgent(model, twice), "?");
      expect(otel.named("agent.tool_call")).toHaveLength(1);

      // Tools built per request share one registration; each copy's own execute runs.
      const answers: unknown[] = [];
      for (const user of ["ana", "bo"]) {
        const perRequest = healTools(
          sh,
          { whoami: docsTool(() => user) },
          { readOnly: ["whoami"] },
        );
        const m = callsThenAnswers("whoami", { query: "" }, "hi");
        await ask(clock, supportAgent(m, perRequest), "who am I?");
        answers.push(...toolOutputs(m));
      }
      expect(answers).toEqual([
        { type: "text", value: "ana" },
        { type: "text", value: "bo" },
      ]);
      // The same name healed as a write would be a second tool under one name.
      expect(configError(() => healTools(sh, { whoami: docsTool(() => "x") })).field).toBe(
        "healTools.options.readOnly",
      );
    });

    it("passes tools without execute through; rejects a misspelt read, a per-tool readOnly and unknown options", () => {
      const { sh } = setup();
      const clientSide = createTool({
        id: "ask-user",
        description: "Asks the user",
        inputSchema: z.object({ question: z.string() }),
      });
      const tools = { ask_user: clientSide, search_docs: docsTool(() => "x") };
      expect(healTools(sh, tools, { readOnly: ["search_docs"] }).ask_user).toBe(clientSide);
      expect(configError(() => healTools(sh, tools, { readOnly: ["serch_docs"] })).field).toBe(
        "healTools.options.readOnly",
      );
      expect(
        configError(() =>
          healTools(sh, tools, { tools: { search_docs: { readOnly: true } as never } }),
        ).field,
      ).toBe("healTools.options.tools.search_docs.readOnly");
      expect(configError(() => healTools(sh, tools, { tools: { serch_docs: {} } })).field).toBe(
        "healTools.options.tools.serch_docs",
      );
      expect(configError(() => healTools(sh, tools, { spans: "attach" } as never)).field).toBe(
        "healTools.options.spans",
      );
      expect(
        configError(() => healTools(sh, tools, { readOnly: () => "yes" as never })).field,
      ).toBe("healTools.options.readOnly");
    });
  });

  describe("Mastra Agent: healModel (selfheal/ai-sdk's) heals the agent's model, against an OpenAI-compatible server on 127.0.0.1", () => {
    const servers: FakeProvider[] = [];
    afterEach(async () => {
      await Promise.all(servers.splice(0).map((s) => s.close()));
    });

    /** A real provider model (`@ai-sdk/openai-compatible`, v3) on a fake server, healed. */
    async function healedAgent(
      sh: SelfHealing,
      modelId: string,
      create: typeof createOpenAICompatible = createOpenAICompatible,
    ) {
      const server = await startFakeProvider({ reply: "Paris.", tokenIntervalMs: 0 });
      servers.push(server);
      const provider = create({ name: "acme", baseURL: server.url, apiKey: "k" });
      return { server, agent: supportAgent(healModel(sh, provider.chatModel(modelId))) };
    }

    /** Virtual ms per step while a real request is in flight (see `ask`). */
    const REAL_TIME_STEP_MS = 10;

    /** Recovery on virtual time with a deadline no real request can reach. */
    const modelInstance = () => recoveryInstance(otel.provider, { deadlineMs: 3_600_000 });

    it("a 429 with Retry-After: 2 is sent again after the server's 2 s: the agent answers, the span tree says how", async () => {
      const { sh, clock, events } = modelInstance();
      otel.reset();
      const { server, agent } = await healedAgent(sh, "acme-large");
      server.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
      const started = clock.now();
      const result = await ask(clock, agent, "Capital of France?", REAL_TIME_STEP_MS);

      expect(result.text).toBe("Paris.");
      expect(server.requests).toBe(2);
      expect(clock.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(tree(otel.spans())).toEqual([
        { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
      ]);
      expect(attrs("agent.tool_call")).toMatchObject({
        "selfheal.tool.name": "acme-large",
        "gen_ai.provider.name": "acme.chat",
        "selfheal.call.outcome": "recovered",
        "selfheal.response.empty": false,
      });
      expect(attrs("agent.diagnosis")).toMatchObject({
        "selfheal.diagnosis.pattern": "RATE_LIMIT",
        "selfheal.diagnosis.retry_after_ms": 2_000,
        "http.response.status_code": 429,
      });
      expect(attrs("agent.recovery")).toMatchObject({
        "selfheal.recovery.strategy": "retry_once",
        "selfheal.recovery.wait_ms": 2_000,
        "selfheal.recovery.outcome": "success",
      });
      expect(events.map((e) => [e.pattern, e.outcome])).toEqual([["RATE_LIMIT", "recovered"]]);
    });

    it("a 401 is sent once: diagnosed AUTH, never retried (by selfheal or by Mastra), escalated", async () => {
      const { sh, clock, events } = modelInstance();
      otel.reset();
      const { server, agent } = await healedAgent(sh, "keyless");
      server.injector.inject("auth", { first: 1 });
      const error = await ask(clock, agent, "Capital of France?", REAL_TIME_STEP_MS).catch(
        (e: unknown) => e,
      );

      expect(isHumanEscalationRequiredError(error)).toBe(true);
      expect(server.requests).toBe(1);
      expect(attrs("agent.diagnosis")).toMatchObject({
        "selfheal.diagnosis.pattern": "AUTH",
        "http.response.status_code": 401,
      });
      // No second route to fail over to, and a key that is wrong stays wrong: no retry.
      expect(
        otel
          .named("agent.recovery")
          .map((s) => [
            s.attributes["selfheal.recovery.strategy"],
            s.attributes["selfheal.recovery.outcome"],
          ]),
      ).toEqual([
        ["failover_to_secondary", "skipped"],
        ["escalate_to_human", "applied"],
      ]);
      expect(events.map((e) => [e.pattern, e.outcome])).toEqual([["AUTH", "escalated"]]);
    });

    it("a v4 model (an AI SDK 7 provider, @ai-sdk/openai-compatible 3) is healed the same way", async () => {
      const { sh, clock } = modelInstance();
      otel.reset();
      const { createOpenAICompatible: createV4 } = await import("@ai-sdk/openai-compatible3");
      // Typed as the v3 provider: Mastra 1.71's declarations bundle @ai-sdk/provider 4.0.17, to
      // which the models of provider 4.0.38 are not assignable (at run time Mastra takes them).
      const { server, agent } = await healedAgent(
        sh,
        "acme-v4",
        createV4 as unknown as typeof createOpenAICompatible,
      );
      server.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
      const result = await ask(clock, agent, "Capital of France?", REAL_TIME_STEP_MS);

      expect(result.text).toBe("Paris.");
      expect(server.requests).toBe(2);
      expect(attrs("agent.tool_call")).toMatchObject({
        "selfheal.tool.name": "acme-v4",
        "selfheal.call.outcome": "recovered",
      });
      expect(attrs("agent.recovery")["selfheal.recovery.wait_ms"]).toBe(2_000);
    });

    it("agent.stream: a 429 before the first token is retried after its Retry-After, then the answer streams through", async () => {
      const { sh, clock } = modelInstance();
      otel.reset();
      const { server, agent } = await healedAgent(sh, "acme-stream");
      server.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 1 });
      const text = clock.run(
        agent.stream("Capital of France?").then((output) => output.text),
        { stepMs: REAL_TIME_STEP_MS },
      );

      expect(await text).toBe("Paris.");
      expect([server.requests, server.streamed]).toEqual([2, 2]);
      expect(attrs("agent.tool_call")).toMatchObject({
        "selfheal.tool.name": "acme-stream:stream",
        "selfheal.call.outcome": "recovered",
      });
      expect(attrs("agent.recovery")["selfheal.recovery.wait_ms"]).toBe(1_000);
    });
  });

  describe("examples/mastra.ts (against the built package, as a user runs it)", () => {
    // Needs the `./mastra` subpath export in package.json and `npm run build` (as `npm test` does).
    it("prints the span tree, the recovered rate limits and the refused write", async () => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [builtJs("examples/mastra.ts")],
        // Loading @mastra/core alone takes seconds (hundreds of modules): a hang guard only.
        { timeout: CHILD_HANG_MS },
      );
      expect(stdout).toContain(
        "\n  span agent.tool_call  tool=search_docs outcome=recovered\n    span agent.tool_call.error",
      );
      expect(stdout).toContain("diagnosis search_docs: RATE_LIMIT (retry after 1000 ms)");
      expect(stdout).toContain("recovery search_docs: retry_once => recovered");
      expect(stdout).toContain("answer: Refunds take 5 days.");
      expect(stdout).toContain("diagnosis acme-large: RATE_LIMIT (retry after 1000 ms)");
      expect(stdout).toContain("model answered after its rate limit: Paris.");
      expect(stdout).toContain('the model read: selfheal: write tool "issue_refund" refused');
      expect(stdout).toContain("refunds sent: 0");
    }, 150_000);
  });
}

if (mastra) suites(mastra);
