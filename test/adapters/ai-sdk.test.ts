import { pathToFileURL } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { context, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  callContextOf,
  healModel,
  healTools,
  selfHealMiddleware,
} from "../../src/adapters/ai-sdk.js";
import {
  HttpResponseError,
  isHealthCheckFailedError,
  isHumanEscalationRequiredError,
  isReadOnlyModeError,
  isToolTimeoutError,
  type SelfHealingOptions,
} from "../../src/index.js";
import { builtJs, CHILD_HANG_MS } from "../helpers/built-js.js";
import { configError, NO_RECOVERY, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import * as fixtures from "../fixtures/adapters/ai-sdk-models.js";
import {
  textStream,
  textTurn,
  toolCallStream,
  toolTurn,
  type GenerateResult,
  type StreamPart,
} from "../fixtures/adapters/ai-sdk-models.js";
import { aiSdks } from "../fixtures/adapters/ai-sdk-versions.js";

const SDKS = await aiSdks();
const otel = recordingProvider();
const sdkTracer = otel.provider.getTracer("ai");
/** The SDK's telemetry on, into the same recording provider as selfheal's spans. */
const TELEMETRY = { isEnabled: true, tracer: sdkTracer };

/** An instance on virtual time whose spans are recorded; recovery as in `recovery`. */
function setup(options: Partial<SelfHealingOptions> = {}) {
  otel.reset();
  return recoveryInstance(otel.provider, {}, options);
}

const only = (name: string): ReadableSpan => {
  const spans = otel.named(name);
  expect(spans).toHaveLength(1);
  return spans[0] as ReadableSpan;
};

const attrs = (name: string) => only(name).attributes;

/** The tool-error parts of a generateText result, over all steps. */
function toolErrors(result: { steps: { content: { type: string }[] }[] }) {
  return result.steps
    .flatMap((s) => s.content)
    .filter((p): p is { type: "tool-error"; error: unknown } => p.type === "tool-error");
}

interface Names {
  provider?: string;
  modelId?: string;
}

for (const sdk of SDKS) {
  const { generateText, stepCountIs, streamText, tool, wrapLanguageModel } = sdk.ai;
  // The fixtures on this SDK: its mock model (v3 or v4), its APICallError.
  const scriptedModel = (script: readonly (GenerateResult | Error)[], names: Names = {}) =>
    fixtures.scriptedModel(script, names, sdk);
  const scriptedStreamModel = (script: readonly (StreamPart[] | Error)[], names: Names = {}) =>
    fixtures.scriptedStreamModel(script, names, sdk);
  const rateLimited = (retryAfterSeconds: number) => fixtures.rateLimited(retryAfterSeconds, sdk);
  const unauthorized = () => fixtures.unauthorized(sdk);

  /**
   * The SDK's span `name` over `children` where the SDK opens its spans (AI SDK 6 with
   * `experimental_telemetry`); else the children alone, where the SDK's span would have been.
   */
  const sdkSpan = (name: string, ...children: unknown[]): unknown[] => {
    if (!sdk.sdkSpans) return children;
    return [children.length > 0 ? { [name]: children } : name];
  };

  const docsTool = (answer: (query: string) => unknown) =>
    tool({
      description: "Searches the docs",
      inputSchema: z.object({ query: z.string() }),
      execute: ({ query }) => answer(query),
    });

  const refundTool = (refunds: string[]) =>
    tool({
      description: "Refunds an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => {
        refunds.push(orderId);
        return `refunded ${orderId}`;
      },
    });

  describe(`${sdk.name}: healTools: each tool's execute is a selfheal call`, () => {
    it("with the SDK's telemetry on, agent.tool_call sits under ai.toolCall (AI SDK 7: at the root, no SDK spans), named and identified as the model called it", async () => {
      const { sh } = setup();
      const tools = healTools(
        sh,
        { search_docs: docsTool((q) => `3 articles about ${q}`) },
        {
          readOnly: ["search_docs"],
        },
      );
      const model = scriptedModel([
        toolTurn(["search_docs", { query: "refunds" }, "call-1"]),
        textTurn("Refunds take 5 days."),
      ]);
      const result = await generateText({
        model,
        prompt: "How long do refunds take?",
        tools,
        stopWhen: stepCountIs(3),
        experimental_telemetry: TELEMETRY,
      });
      expect(result.text).toBe("Refunds take 5 days.");
      expect(result.steps[0]?.toolResults[0]?.output).toBe("3 articles about refunds");
      expect(tree(otel.spans())).toEqual(
        sdkSpan(
          "ai.generateText",
          ...sdkSpan("ai.generateText.doGenerate"),
          ...sdkSpan("ai.toolCall", "agent.tool_call"),
          ...sdkSpan("ai.generateText.doGenerate"),
        ),
      );
      expect(attrs("agent.tool_call")).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "call-1",
        "selfheal.call.outcome": "success",
      });
    });

    it("with the telemetry off, agent.tool_call is a root span (the SDK opens none)", async () => {
      const { sh } = setup();
      const tools = healTools(
        sh,
        { search_docs: docsTool(() => "found") },
        { readOnly: () => true },
      );
      await generateText({
        model: scriptedModel([toolTurn(["search_docs", { query: "x" }, "c1"]), textTurn("ok")]),
        prompt: "?",
        tools,
        stopWhen: stepCountIs(3),
      });
      expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    });

    it("recovers a tool that is rate-limited once (429, Retry-After 2 s): the model gets the answer, the span says how", async () => {
      const { sh, clock, events } = setup();
      let calls = 0;
      const search = docsTool(async (q) => {
        if (++calls === 1) {
          const body = JSON.stringify({ error: { message: "slow down", type: "rate_limit" } });
          throw await HttpResponseError.from(
            new Response(body, { status: 429, headers: { "retry-after": "2" } }),
          );
        }
        return `answer to ${q}`;
      });
      const tools = healTools(sh, { search_docs: search }, { readOnly: ["search_docs"] });
      const run = generateText({
        model: scriptedModel([toolTurn(["search_docs", { query: "q" }, "c1"]), textTurn("done")]),
        prompt: "?",
        tools,
        stopWhen: stepCountIs(3),
        experimental_telemetry: TELEMETRY,
      });
      const result = await clock.run(run, { stepMs: 100 });
      expect(toolErrors(result)).toEqual([]);
      expect(result.steps[0]?.toolResults[0]?.output).toBe("answer to q");
      expect(calls).toBe(2);
      expect(attrs("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
      expect(attrs("agent.diagnosis")["selfheal.diagnosis.pattern"]).toBe("RATE_LIMIT");
      expect(attrs("agent.recovery")).toMatchObject({
        "selfheal.recovery.strategy": "retry_once",
        "selfheal.recovery.wait_ms": 2_000,
        "selfheal.recovery.outcome": "success",
      });
      expect(tree(otel.spans())).toEqual(
        sdkSpan(
          "ai.generateText",
          ...sdkSpan("ai.generateText.doGenerate"),
          ...sdkSpan("ai.toolCall", {
            "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"],
          }),
          ...sdkSpan("ai.generateText.doGenerate"),
        ),
      );
      expect(events.map((e) => [e.tool, e.pattern, e.outcome])).toEqual([
        ["search_docs", "RATE_LIMIT", "recovered"],
      ]);
    });

    it("refuses a write while the agent is critical: the tool-error part carries HealthCheckFailedError and the write never runs", async () => {
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
            throw new HttpResponseError(503, new Headers(), "upstream down", "https://orders.test");
          }),
          issue_refund: refundTool(refunds),
        },
        { readOnly: ["lookup_order"] }, // issue_refund is not declared: a write
      );
      const lookups = [1, 2, 3, 4].map(
        (i) => ["lookup_order", { query: `o-${i}` }, `l${i}`] as [string, unknown, string],
      );
      const first = await generateText({
        model: scriptedModel([toolTurn(...lookups), textTurn("orders are unreachable")]),
        prompt: "look up my orders",
        tools,
        stopWhen: stepCountIs(2),
      });
      expect(toolErrors(first)).toHaveLength(4);
      expect((await sh.status()).status).toBe("critical");

      const second = await generateText({
        model: scriptedModel([toolTurn(["issue_refund", { orderId: "A-42" }, "r1"]), textTurn("")]),
        prompt: "refund A-42",
        tools,
        stopWhen: stepCountIs(2),
      });
      const [refused] = toolErrors(second);
      expect(isHealthCheckFailedError(refused?.error)).toBe(true);
      expect(refunds).toEqual([]);
      const blocked = otel
        .named("agent.tool_call")
        .filter((s) => s.attributes["selfheal.call.outcome"] === "blocked");
      expect(blocked.map((s) => s.attributes["gen_ai.tool.name"])).toEqual(["issue_refund"]);
    });

    it("refuses a write with ReadOnlyModeError once recovery degraded the agent to read-only", async () => {
      const { sh } = recoveryInstance(otel.provider, {
        plans: { SERVICE_DOWN: ["degrade_to_readonly"] },
      });
      const refunds: string[] = [];
      const tools = healTools(
        sh,
        {
          lookup_order: docsTool(() => {
            throw new HttpResponseError(503, new Headers(), "upstream down", "https://orders.test");
          }),
          issue_refund: refundTool(refunds),
        },
        { readOnly: ["lookup_order"] },
      );
      const result = await generateText({
        model: scriptedModel([
          toolTurn(["lookup_order", { query: "A-42" }, "l1"]),
          toolTurn(["issue_refund", { orderId: "A-42" }, "r1"]),
          textTurn("could not refund"),
        ]),
        prompt: "refund A-42",
        tools,
        stopWhen: stepCountIs(3),
      });
      const errors = toolErrors(result);
      expect(errors).toHaveLength(2);
      expect(isReadOnlyModeError(errors[1]?.error)).toBe(true);
      expect(refunds).toEqual([]);
    });

    it("passes the SDK's abort signal and tool call id through; per-tool options apply, and the tool can read its call context", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
      const seen: unknown[] = [];
      const slow = tool({
        inputSchema: z.object({ orderId: z.string() }),
        execute: ({ orderId }, options) => {
          const ctx = callContextOf(options);
          seen.push({
            attempt: ctx?.attempt,
            idempotencyKey: ctx?.idempotencyKey,
            toolCallId: ctx?.toolCallId,
          });
          // Hangs until selfheal's timeout aborts it through the SDK's own option.
          return new Promise((_resolve, reject) => {
            options.abortSignal?.addEventListener("abort", () => {
              reject(new Error(`aborted ${orderId}`));
            });
          });
        },
      });
      const tools = healTools(
        sh,
        { ship_order: slow },
        {
          tools: {
            ship_order: {
              timeoutMs: 3_000,
              idempotencyKey: (input) => `ship-${(input as { orderId: string }).orderId}`,
            },
          },
        },
      );
      const run = generateText({
        model: scriptedModel([
          toolTurn(["ship_order", { orderId: "B-7" }, "s1"]),
          textTurn("late"),
        ]),
        prompt: "ship B-7",
        tools,
        stopWhen: stepCountIs(2),
      });
      const result = await clock.run(run, { stepMs: 500 });
      const [timedOut] = toolErrors(result);
      expect(isToolTimeoutError(timedOut?.error)).toBe(true);
      expect(seen).toEqual([{ attempt: 1, idempotencyKey: "ship-B-7", toolCallId: "s1" }]);
    });

    it("heals a tool set built per request once: one registration, each copy's own execute runs", async () => {
      const { sh } = setup();
      const perRequest = (user: string) =>
        healTools(sh, { whoami: docsTool(() => user) }, { readOnly: ["whoami"] });
      const answers: unknown[] = [];
      for (const user of ["ana", "bo"]) {
        const result = await generateText({
          model: scriptedModel([toolTurn(["whoami", { query: "" }, "w1"]), textTurn("hi")]),
          prompt: "who am I?",
          tools: perRequest(user),
          stopWhen: stepCountIs(2),
        });
        answers.push(result.steps[0]?.toolResults[0]?.output);
      }
      expect(answers).toEqual(["ana", "bo"]);
      // The same name healed as a write would be a second tool under one name.
      expect(configError(() => healTools(sh, { whoami: docsTool(() => "x") })).field).toBe(
        "healTools.options.readOnly",
      );
    });

    it("passes tools without execute through and rejects options that would pass silently", () => {
      const { sh } = setup();
      // Answered by the client (no execute); an output schema keeps it a ToolSet member under
      // exactOptionalPropertyTypes.
      const clientSide = tool({
        inputSchema: z.object({ q: z.string() }),
        outputSchema: z.string(),
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
      expect(configError(() => healTools(sh, tools, { spans: "both" as never })).field).toBe(
        "healTools.options.spans",
      );
      expect(configError(() => healTools(sh, tools, { retries: 2 } as never)).field).toBe(
        "healTools.options.retries",
      );
    });
  });

  describe(`${sdk.name}: healTools: healed once, streaming tools stopped`, () => {
    it("heals a tool once: healing a healed set again does not nest a second selfheal call", async () => {
      const { sh } = setup();
      let runs = 0;
      const once = healTools(
        sh,
        {
          search_docs: docsTool(() => {
            runs++;
            return "found";
          }),
        },
        { readOnly: ["search_docs"] },
      );
      // A request layer heals the set it was given, already healed at startup.
      const twice = healTools(sh, once, { readOnly: ["search_docs"] });
      await generateText({
        model: scriptedModel([toolTurn(["search_docs", { query: "q" }, "c1"]), textTurn("ok")]),
        prompt: "?",
        tools: twice,
        stopWhen: stepCountIs(2),
      });
      expect(runs).toBe(1);
      expect(otel.named("agent.tool_call")).toHaveLength(1);
      // A copy of a healed tool (spread, another description) is still the healed tool.
      expect(
        healTools(
          sh,
          { search_docs: { ...once.search_docs, description: "x" } },
          { readOnly: ["search_docs"] },
        ).search_docs.execute,
      ).toBe(once.search_docs.execute);
      // Healed again as a write: still one tool, declared two ways.
      expect(configError(() => healTools(sh, once)).field).toBe("healTools.options.readOnly");
    });

    it("stops reading a streaming tool (async generator) once its attempt timed out", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
      const pulled: number[] = [];
      const progress = tool({
        inputSchema: z.object({ query: z.string() }),
        // Ignores the signal: only the reader can stop it.
        async *execute() {
          for (let i = 1; i <= 10; i++) {
            await clock.sleep(1_000);
            pulled.push(i);
            yield `step ${i}`;
          }
        },
      });
      const tools = healTools(
        sh,
        { progress },
        { readOnly: ["progress"], tools: { progress: { timeoutMs: 2_500 } } },
      );
      const run = generateText({
        model: scriptedModel([toolTurn(["progress", { query: "q" }, "p1"]), textTurn("late")]),
        prompt: "?",
        tools,
        stopWhen: stepCountIs(2),
      });
      const result = await clock.run(run, { stepMs: 500 });
      expect(isToolTimeoutError(toolErrors(result)[0]?.error)).toBe(true);
      await clock.advance(20_000);
      // The step in flight at the timeout may finish; nothing is pulled after it.
      expect(pulled.length).toBeLessThanOrEqual(3);
    });
  });

  describe(`${sdk.name}: healTools with spans: "attach"`, () => {
    it("writes on the SDK's ai.toolCall span: no second span, error, diagnosis and recovery hang under it (AI SDK 7, no SDK span: as child)", async () => {
      const { sh, clock } = setup();
      let calls = 0;
      const search = docsTool(() => {
        if (++calls === 1)
          throw new HttpResponseError(503, new Headers(), "busy", "https://d.test");
        return "found";
      });
      const tools = healTools(
        sh,
        { search_docs: search },
        { readOnly: ["search_docs"], spans: "attach" },
      );
      const run = generateText({
        model: scriptedModel([toolTurn(["search_docs", { query: "q" }, "c9"]), textTurn("ok")]),
        prompt: "?",
        tools,
        stopWhen: stepCountIs(3),
        experimental_telemetry: TELEMETRY,
      });
      await clock.run(run, { stepMs: 100 });
      // Where the SDK opens no span, attach acts as child: selfheal's own span, never a wrong one.
      const callSpan = sdk.sdkSpans ? "ai.toolCall" : "agent.tool_call";
      expect(otel.named("agent.tool_call")).toHaveLength(sdk.sdkSpans ? 0 : 1);
      expect(attrs(callSpan)).toMatchObject({
        ...(sdk.sdkSpans && { "ai.toolCall.name": "search_docs" }),
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "c9",
        "selfheal.call.outcome": "recovered",
      });
      expect(tree(otel.spans())).toEqual(
        sdkSpan(
          "ai.generateText",
          ...sdkSpan("ai.generateText.doGenerate"),
          { [callSpan]: ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
          ...sdkSpan("ai.generateText.doGenerate"),
        ),
      );
    });

    it("with the telemetry off, never writes on the caller's span: the call opens its own under it", async () => {
      const { sh } = setup();
      const tools = healTools(
        sh,
        { search_docs: docsTool(() => "found") },
        { readOnly: ["search_docs"], spans: "attach" },
      );
      const request = otel.provider.getTracer("app").startSpan("POST /chat");
      await context.with(trace.setSpan(context.active(), request), () =>
        generateText({
          model: scriptedModel([toolTurn(["search_docs", { query: "q" }, "c1"]), textTurn("ok")]),
          prompt: "?",
          tools,
          stopWhen: stepCountIs(2),
        }),
      );
      request.end();
      expect(tree(otel.spans())).toEqual([{ "POST /chat": ["agent.tool_call"] }]);
      expect(attrs("POST /chat")).toEqual({});
    });
  });

  describe(`${sdk.name}: healModel: each model call is a selfheal llm call`, () => {
    const providers = { providers: [{ name: "acme" }, { name: "backup" }] };

    it("recovers an empty answer by failing over to the second model", async () => {
      const { sh, clock, events } = recoveryInstance(otel.provider, providers);
      otel.reset();
      const primary = scriptedModel([textTurn("")], { provider: "acme", modelId: "acme-large" });
      const backup = scriptedModel([textTurn("Paris.")], { provider: "backup", modelId: "b-1" });
      const model = healModel(sh, primary, { fallback: backup });
      const run = generateText({ model, prompt: "Capital of France?", maxRetries: 0 });
      const result = await clock.run(run, { stepMs: 500 });
      expect(result.text).toBe("Paris.");
      expect(result.response.modelId).toBe("b-1");
      const call = attrs("agent.tool_call");
      // The span ends with the request that answered: the fallback's route and model.
      expect(call).toMatchObject({
        "selfheal.tool.name": "acme-large",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "backup",
        "gen_ai.request.model": "b-1",
        "selfheal.call.outcome": "recovered",
      });
      expect(call).not.toHaveProperty("gen_ai.tool.name");
      const diagnoses = otel
        .named("agent.diagnosis")
        .map((s) => s.attributes["selfheal.diagnosis.pattern"]);
      expect(new Set(diagnoses)).toEqual(new Set(["EMPTY_LLM_RESPONSE"]));
      const last = otel.named("agent.recovery").at(-1);
      expect(last?.attributes).toMatchObject({
        "selfheal.recovery.strategy": "failover_to_secondary",
        "selfheal.recovery.provider": "backup",
        "selfheal.recovery.outcome": "success",
      });
      expect(events.map((e) => [e.pattern, e.outcome, e.provider])).toEqual([
        ["EMPTY_LLM_RESPONSE", "recovered", "backup"],
      ]);
      expect(backup.doGenerateCalls).toHaveLength(1);
    });

    it("recovers a 429 from the provider (the SDK's APICallError) on the same model, after its Retry-After", async () => {
      const { sh, clock } = recoveryInstance(otel.provider);
      otel.reset();
      const primary = scriptedModel([rateLimited(2), textTurn("Paris.")], {
        modelId: "acme-large",
      });
      const started = clock.now();
      const run = generateText({ model: healModel(sh, primary), prompt: "?", maxRetries: 0 });
      const result = await clock.run(run, { stepMs: 100 });
      expect(result.text).toBe("Paris.");
      expect(primary.doGenerateCalls).toHaveLength(2);
      expect(clock.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(attrs("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
      expect(attrs("agent.diagnosis")).toMatchObject({
        "selfheal.diagnosis.pattern": "RATE_LIMIT",
        "http.response.status_code": 429,
      });
      expect(attrs("agent.recovery")).toMatchObject({
        "selfheal.recovery.strategy": "retry_once",
        "selfheal.recovery.wait_ms": 2_000,
        "selfheal.recovery.outcome": "success",
      });
    });

    it("sends a 401 once: diagnosed AUTH, not retried, escalated to a human", async () => {
      const { sh, clock, events } = recoveryInstance(otel.provider);
      otel.reset();
      const primary = scriptedModel([unauthorized(), textTurn("never")], { modelId: "keyless" });
      const run = generateText({ model: healModel(sh, primary), prompt: "?", maxRetries: 0 });
      const error = await clock.run(run, { stepMs: 100 }).catch((e: unknown) => e);
      expect(isHumanEscalationRequiredError(error)).toBe(true);
      expect(primary.doGenerateCalls).toHaveLength(1);
      expect(attrs("agent.diagnosis")).toMatchObject({
        "selfheal.diagnosis.pattern": "AUTH",
        "http.response.status_code": 401,
      });
      expect(events.map((e) => [e.pattern, e.outcome])).toEqual([["AUTH", "escalated"]]);
    });

    it("honours the Retry-After of an APICallError (its responseHeaders)", async () => {
      const { sh } = recoveryInstance(otel.provider);
      const diagnosis = await sh.diagnose(rateLimited(7));
      expect(diagnosis.pattern).toBe("RATE_LIMIT");
      expect(diagnosis.retryAfterMs).toBe(7_000);
    });

    it("with the SDK's telemetry on, the call sits under ai.generateText.doGenerate; attach writes on it instead (AI SDK 7: a root span)", async () => {
      for (const spans of ["child", "attach"] as const) {
        const { sh } = setup();
        const model = healModel(sh, scriptedModel([textTurn("hi")], { modelId: `m-${spans}` }), {
          spans,
        });
        await generateText({ model, prompt: "?", experimental_telemetry: TELEMETRY });
        const attached = spans === "attach" && sdk.sdkSpans;
        expect(tree(otel.spans())).toEqual(
          sdkSpan(
            "ai.generateText",
            ...(attached
              ? sdkSpan("ai.generateText.doGenerate")
              : sdkSpan("ai.generateText.doGenerate", "agent.tool_call")),
          ),
        );
        const callSpan = attached ? "ai.generateText.doGenerate" : "agent.tool_call";
        expect(attrs(callSpan)).toMatchObject({
          "selfheal.call.outcome": "success",
          "selfheal.response.empty": false,
        });
        // A model call's span names its model; GenAI conventions name a tool on execute_tool only.
        expect(attrs(callSpan)).not.toHaveProperty("gen_ai.tool.name");
        expect(attrs(callSpan)).toMatchObject({
          "selfheal.tool.name": `m-${spans}`,
          "gen_ai.request.model": `m-${spans}`,
        });
      }
    });

    it("streams: a 429 and an error part before the first token are retried, then the whole answer streams through", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, {
        plans: { RATE_LIMIT: [{ strategy: "exponential_backoff_with_jitter", attempts: 3 }] },
      });
      otel.reset();
      const model = scriptedStreamModel(
        [
          rateLimited(1),
          [
            { type: "stream-start", warnings: [] },
            { type: "error", error: rateLimited(1) },
          ],
          textStream("Hello there"),
        ],
        { modelId: "streamer" },
      );
      const result = streamText({ model: healModel(sh, model), prompt: "hi", maxRetries: 0 });
      const text = await clock.run(Promise.resolve(result.text), { stepMs: 100 });
      expect(text).toBe("Hello there");
      expect(model.doStreamCalls).toHaveLength(3);
      expect(attrs("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
      expect(
        otel.named("agent.recovery").map((s) => s.attributes["selfheal.recovery.outcome"]),
      ).toEqual(["failure", "success"]);
    });

    it("streams: an empty stream fails over to the second model", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, {
        ...providers,
        plans: { EMPTY_LLM_RESPONSE: ["failover_to_secondary"] },
      });
      const primary = scriptedStreamModel([textStream("")], { provider: "acme" });
      const backup = scriptedStreamModel([textStream("from backup")], { provider: "backup" });
      const model = healModel(sh, primary, { fallback: { provider: "backup", model: backup } });
      const result = streamText({ model, prompt: "hi", maxRetries: 0 });
      expect(await clock.run(Promise.resolve(result.text), { stepMs: 100 })).toBe("from backup");
    });

    it("streams a tool call through a healed model to a healed tool, then the answer", async () => {
      const { sh } = setup();
      const tools = healTools(
        sh,
        { search_docs: docsTool((q) => `about ${q}`) },
        {
          readOnly: ["search_docs"],
        },
      );
      const model = scriptedStreamModel(
        [toolCallStream("search_docs", { query: "q" }, "c1"), textStream("All found.")],
        { modelId: "streamer" },
      );
      const result = streamText({
        model: healModel(sh, model),
        prompt: "find q",
        tools,
        stopWhen: stepCountIs(3),
        maxRetries: 0,
      });
      expect(await result.text).toBe("All found.");
      const [step] = await result.steps;
      expect(step?.toolResults[0]?.output).toBe("about q");
      const calls = otel
        .named("agent.tool_call")
        .map((s) => [
          s.attributes["gen_ai.tool.name"] ?? s.attributes["selfheal.tool.name"],
          s.attributes["selfheal.call.outcome"],
        ]);
      // Streamed model calls are a scope of their own, beside the model's generate calls.
      expect(calls).toEqual([
        ["streamer:stream", "success"],
        ["search_docs", "success"],
        ["streamer:stream", "success"],
      ]);
    });

    it("streams: a stream that comes after its attempt timed out is cancelled, not read", async () => {
      const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
      const pulled: string[] = [];
      let cancelled = false;
      // A provider that ignores the abort signal and answers late.
      const late = new sdk.MockLanguageModel({
        modelId: "late",
        doStream: async () => {
          await clock.sleep(2_000);
          const parts = textStream("too late");
          return {
            stream: new ReadableStream<StreamPart>({
              pull: (controller) => {
                const part = parts.shift();
                if (part === undefined) controller.close();
                else {
                  pulled.push(part.type);
                  controller.enqueue(part);
                }
              },
              cancel: () => {
                cancelled = true;
              },
            }),
          };
        },
      });
      const result = streamText({
        model: healModel(sh, late, { timeoutMs: 1_000 }),
        prompt: "hi",
        maxRetries: 0,
        onError: () => undefined,
      });
      await clock.run(
        Promise.resolve(result.text).catch(() => undefined),
        { stepMs: 500 },
      );
      await clock.advance(5_000);
      expect(cancelled).toBe(true);
      expect(pulled).not.toContain("text-delta"); // only what the stream queued itself
    });

    it("heals a model once: healing the healed model again returns it, no nested call", async () => {
      const { sh } = setup();
      const raw = scriptedModel([textTurn("hi")], { modelId: "once" });
      const healed = healModel(sh, raw);
      const again = healModel(sh, healed);
      expect((await generateText({ model: again, prompt: "?" })).text).toBe("hi");
      expect(otel.named("agent.tool_call")).toHaveLength(1);
      expect(again).toBe(healed);
    });

    it("works as a middleware among others in wrapLanguageModel (registered at its first call)", async () => {
      const { sh } = setup();
      const seen: string[] = [];
      const model = wrapLanguageModel({
        model: scriptedModel([textTurn("hi")]),
        middleware: [
          {
            specificationVersion: "v3",
            transformParams: ({ params }) => {
              seen.push("outer");
              return Promise.resolve(params);
            },
          },
          selfHealMiddleware(sh, { name: "chat" }),
        ],
      });
      expect((await generateText({ model, prompt: "?" })).text).toBe("hi");
      expect(seen).toEqual(["outer"]);
      expect(attrs("agent.tool_call")).toMatchObject({
        "selfheal.tool.name": "chat",
        "gen_ai.provider.name": "mock-provider",
        "selfheal.call.outcome": "success",
      });
    });

    it("fails at setup on a fallback that is not a declared provider, or the primary again", () => {
      const { sh } = recoveryInstance(otel.provider, { providers: [{ name: "acme" }] });
      const acme = scriptedModel([textTurn("x")], { provider: "acme", modelId: "a" });
      const other = scriptedModel([textTurn("x")], { provider: "other", modelId: "o" });
      expect(configError(() => healModel(sh, acme, { fallback: other })).field).toBe(
        'tool("a").options.providers',
      );
      expect(configError(() => healModel(sh, acme, { fallback: acme })).field).toBe(
        "healModel.options.fallback",
      );
      expect(configError(() => healModel(sh, "openai/gpt-4o" as never)).field).toBe(
        "healModel(model)",
      );
      expect(
        configError(() => healModel(sh, acme, { fallback: [{ model: other } as never] })).field,
      ).toBe("healModel.options.fallback[0].provider");
    });
  });

  describe(`${sdk.name}: models of specification v3 and v4`, () => {
    const providers = { providers: [{ name: "acme" }, { name: "backup" }] };

    it(`heals the SDK's own models (${sdk.spec}): the healed model is of their specification`, async () => {
      const { sh } = setup();
      const raw = scriptedModel([textTurn("hi")], { provider: "acme", modelId: "own" });
      const healed = healModel(sh, raw);
      expect(healed.specificationVersion).toBe(sdk.spec);
      expect([healed.provider, healed.modelId]).toEqual(["acme", "own"]);
      expect(await healed.supportedUrls).toEqual(await raw.supportedUrls);
      expect((await generateText({ model: healed, prompt: "?" })).text).toBe("hi");
    });

    it.runIf(sdk.major === 7)(
      "AI SDK 7 with v3 models (AI SDK 6 providers): healed as v3, failed over; routes of two specifications refused",
      async () => {
        const { sh, clock } = recoveryInstance(otel.provider, providers);
        const v3 = (provider: string, modelId: string, text: string) =>
          fixtures.scriptedModel(
            [textTurn(text)],
            { provider, modelId },
            sdk,
            sdk.MockLanguageModelV3,
          );
        const model = healModel(sh, v3("acme", "v3-empty", ""), {
          fallback: v3("backup", "v3-backup", "from v3"),
        });
        expect(model.specificationVersion).toBe("v3");
        const run = generateText({ model, prompt: "?", maxRetries: 0 });
        expect((await clock.run(run, { stepMs: 500 })).text).toBe("from v3");

        const v4 = scriptedModel([textTurn("from v4")], { provider: "backup", modelId: "v4" });
        const mixed = configError(() =>
          healModel(sh, v3("acme", "v3-primary", ""), { name: "mixed", fallback: v4 }),
        );
        expect(mixed.field).toBe("healModel.options.fallback");
        expect(mixed.message).toContain("wrapLanguageModel({ model, middleware: [] })");
        // The SDK's own wrapLanguageModel makes a v3 model a v4 one: then it fails over to v4.
        const lifted = wrapLanguageModel({ model: v3("acme", "v3-lifted", ""), middleware: [] });
        expect(lifted.specificationVersion).toBe("v4");
        const both = healModel(sh, lifted, { fallback: v4 });
        const answer = generateText({ model: both, prompt: "?", maxRetries: 0 });
        expect((await clock.run(answer, { stepMs: 500 })).text).toBe("from v4");
      },
    );

    it.runIf(sdk.major === 7)(
      "AI SDK 7: a stream that finishes `interrupted` is incomplete and fails over; `ping` parts pass through",
      async () => {
        const { sh, clock } = recoveryInstance(otel.provider, providers);
        otel.reset();
        // v4 parts, typed here as v3's: the finish reason `interrupted` and the `ping` part are new.
        const interrupted = textStream("Half an ans").map((part) =>
          part.type === "finish"
            ? { ...part, finishReason: { unified: "interrupted", raw: undefined } }
            : part,
        ) as unknown as StreamPart[];
        const pinged = textStream("The whole answer.");
        pinged.splice(3, 0, { type: "ping" } as unknown as StreamPart);
        const primary = scriptedStreamModel([interrupted], { provider: "acme", modelId: "cut" });
        const backup = scriptedStreamModel([pinged], { provider: "backup", modelId: "whole" });
        const model = healModel(sh, primary, { fallback: backup, afterFirstToken: "buffer" });
        const result = streamText({ model, prompt: "?", maxRetries: 0 });
        const text = await clock.run(Promise.resolve(result.text), { stepMs: 100 });
        expect(text).toBe("The whole answer.");
        expect(attrs("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
        expect(otel.named("agent.diagnosis")[0]?.attributes["selfheal.diagnosis.pattern"]).toBe(
          "STREAM_TRUNCATED",
        );
      },
    );
  });
}

for (const sdk of SDKS) {
  describe(`${sdk.name}: examples/ai-sdk.ts (as a user runs it, against the built package)`, () => {
    // Needs the `./ai-sdk` subpath export in package.json and `npm run build` (as `npm test` does).
    // On AI SDK 7, `ai` resolves to it (test/fixtures/adapters/ai-sdk7-alias.ts), and the SDK
    // opens no spans of its own (it needs the @ai-sdk/otel integration): selfheal's are the roots.
    it("prints the span tree, the recovered rate limit, the failover and the refused write", async () => {
      const alias =
        sdk.major === 7
          ? ["--import", pathToFileURL(builtJs("test/fixtures/adapters/ai-sdk7-alias.ts")).href]
          : [];
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [...alias, builtJs("examples/ai-sdk.ts")],
        { timeout: CHILD_HANG_MS },
      );
      expect(stdout).toContain(
        sdk.sdkSpans
          ? "span agent.tool_call under ai.toolCall  tool=search_docs outcome=recovered"
          : "\n  span agent.tool_call  tool=search_docs outcome=recovered",
      );
      expect(stdout).toContain("diagnosis search_docs: RATE_LIMIT");
      expect(stdout).toContain("recovery search_docs: retry_once => recovered");
      expect(stdout).toContain("model answered after failover: backup: Paris.");
      expect(stdout).toContain("tool-error issue_refund: ReadOnlyModeError");
      expect(stdout).toContain("status: warning, read-only true");
    }, 150_000);
  });
}
