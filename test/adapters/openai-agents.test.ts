import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  Agent,
  OpenAIChatCompletionsModel,
  RunContext,
  Usage,
  hostedMcpTool,
  run,
  setTraceProcessors,
  setTracingDisabled,
  tool,
  withGenerationSpan,
  withResponseSpan,
  withTrace,
  type AgentInputItem,
  type AgentOutputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type RunItem,
  type StreamEvent,
} from "@openai/agents";
import { assistantMessage, functionCall } from "@openai/agents/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  SDK_DEFAULT_TOOL_ERROR,
  healTool,
  healTools,
  healthTraceProcessor,
} from "../../src/adapters/openai-agents.js";
import { HttpResponseError, type SelfHealing } from "../../src/index.js";
import type { VirtualClock } from "../../src/testing/index.js";
import { builtJs, CHILD_HANG_MS } from "../helpers/built-js.js";
import { configError, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";

const otel = recordingProvider();

/** What the fake model does on one turn, from the request the runner sent it. */
type Turn = (request: ModelRequest) => AgentOutputItem[];

/**
 * A fake model behind the SDK's `Model` interface: one scripted turn per call, each inside a
 * generation span with usage, as the SDK's Chat Completions model traces a call.
 */
class FakeModel implements Model {
  calls = 0;
  constructor(private readonly turns: readonly Turn[]) {}

  getResponse(request: ModelRequest): Promise<ModelResponse> {
    const turn = this.turns[this.calls++];
    if (!turn) throw new Error(`unexpected model call ${this.calls}`);
    return withGenerationSpan(async (span) => {
      await Promise.resolve();
      const output = turn(request);
      span.spanData.model = "fake-model";
      span.spanData.usage = { input_tokens: 12, output_tokens: 7 };
      return { usage: new Usage({ requests: 1, inputTokens: 12, outputTokens: 7 }), output };
    });
  }

  getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error("these tests do not stream");
  }
}

/** The text of every tool result the runner sent the model, in order. */
function toolResults(request: ModelRequest): string[] {
  const items = typeof request.input === "string" ? [] : request.input;
  return items.flatMap((item: AgentInputItem) => {
    if (item.type !== "function_call_result") return [];
    const output = item.output as { type?: string; text?: string } | string;
    return [typeof output === "string" ? output : String(output.text)];
  });
}

/** A model that calls `name` with `args` once, then answers with what the tool returned. */
function callsThenAnswers(name: string, args: Record<string, unknown>, callId = "call_1") {
  return new FakeModel([
    () => [functionCall(name, args, { callId })],
    (request) => [assistantMessage(`answer: ${toolResults(request).join(" | ")}`)],
  ]);
}

/** A 429 as an OpenAI-compatible API sends it, with Retry-After in seconds. */
function rateLimited(retryAfterSeconds: number): HttpResponseError {
  return new HttpResponseError(
    429,
    new Headers({ "retry-after": String(retryAfterSeconds) }),
    JSON.stringify({ error: { message: "Rate limit reached", type: "requests", code: null } }),
    "https://docs.example/search",
  );
}

function searchTool(execute: (q: string) => string | Promise<string>) {
  return tool({
    name: "search_docs",
    description: "Searches the docs",
    parameters: z.object({ q: z.string() }),
    errorFunction: null, // errors reach selfheal (the default would turn them into text first)
    execute: ({ q }) => execute(q),
  });
}

function refundTool(onRefund: (orderId: string) => void) {
  return tool({
    name: "issue_refund",
    description: "Refunds an order",
    parameters: z.object({ orderId: z.string() }),
    errorFunction: null,
    execute: ({ orderId }) => {
      onRefund(orderId);
      return `refunded ${orderId}`;
    },
  });
}

/** Runs an agent to its end on virtual time (selfheal's backoff sleeps on the clock). */
async function runAgent(clock: VirtualClock, agent: Agent, input = "help") {
  const result = await clock.run(run(agent, input), { stepMs: 100 });
  return { result, output: String(result.finalOutput) };
}

/** The tool outputs of a run, as the model read them. */
function outputsOf(result: { readonly newItems: readonly RunItem[] }): string[] {
  return result.newItems.flatMap((item) =>
    item.type === "tool_call_output_item" ? [String(item.output)] : [],
  );
}

/** The success-rate reading of one tool, or of the agent. */
async function successRate(sh: SelfHealing, toolName?: string) {
  const report = await sh.status();
  const signals = toolName === undefined ? report.signals : report.tools[toolName]?.signals;
  return signals?.find((s) => s.signal === "success_rate");
}

beforeEach(() => {
  otel.reset();
});

afterEach(() => {
  // The SDK's tracing is process-wide: leave it off and without processors for the next test.
  setTraceProcessors([]);
  setTracingDisabled(true);
});

describe("selfheal/openai-agents: healTools", () => {
  it("a healed tool call in a real run is one agent.tool_call span with the SDK's call id", async () => {
    const { sh, clock } = virtualInstance({ tracerProvider: otel.provider });
    const search = searchTool((q) => `3 articles about ${q}`);
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("search_docs", { q: "refunds" }, "call_42"),
      tools: healTools(sh, [search], { readOnly: ["search_docs"] }),
    });

    const { output } = await runAgent(clock, agent);

    expect(output).toBe("answer: 3 articles about refunds");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search_docs",
      "gen_ai.tool.call.id": "call_42",
      "gen_ai.tool.type": "function",
      "selfheal.call.outcome": "success",
    });
  });

  it("recovers a tool's 429 by waiting its Retry-After: the model reads the answer, never the error", async () => {
    const { sh, clock, events } = recoveryInstance(otel.provider);
    let calls = 0;
    const search = searchTool((q) => {
      if (++calls === 1) throw rateLimited(2);
      return `3 articles about ${q}`;
    });
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("search_docs", { q: "refunds" }),
      tools: healTools(sh, [search], { readOnly: ["search_docs"] }),
    });
    const started = clock.now();

    const { output } = await runAgent(clock, agent);

    expect(output).toBe("answer: 3 articles about refunds");
    expect(calls).toBe(2);
    expect(clock.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    const [call] = otel.named("agent.tool_call");
    expect(call?.attributes["selfheal.call.outcome"]).toBe("recovered");
    expect(call?.attributes["gen_ai.tool.call.id"]).toBe("call_1");
    const [diagnosis] = otel.named("agent.diagnosis");
    expect(diagnosis?.attributes["selfheal.diagnosis.pattern"]).toBe("RATE_LIMIT");
    expect(diagnosis?.attributes["selfheal.diagnosis.retry_after_ms"]).toBe(2_000);
    const [recovery] = otel.named("agent.recovery");
    expect(recovery?.attributes).toMatchObject({
      "selfheal.recovery.strategy": "retry_once",
      "selfheal.recovery.wait_ms": 2_000,
      "selfheal.recovery.outcome": "success",
    });
    expect(events.map((e) => [e.tool, e.pattern, e.outcome])).toEqual([
      ["search_docs", "RATE_LIMIT", "recovered"],
    ]);
  });

  it("refuses a write tool while the agent is critical: the tool never runs, the model reads why", async () => {
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { successRate: { minSamples: 3 }, cacheMs: 0 },
    });
    const refunded: string[] = [];
    const [search, refund] = healTools(
      sh,
      [
        searchTool(() => {
          throw new HttpResponseError(503, new Headers(), "overloaded", "https://docs.example");
        }),
        refundTool((id) => refunded.push(id)),
      ],
      { readOnly: (name) => name.startsWith("search") },
    );
    const failing = new Agent({
      name: "support",
      model: new FakeModel([
        () =>
          [1, 2, 3].map((i) => functionCall("search_docs", { q: `q${i}` }, { callId: `s${i}` })),
        (request) => [assistantMessage(toolResults(request).join(" | "))],
      ]),
      tools: [search, refund].filter((t) => t !== undefined),
    });
    const first = await runAgent(clock, failing);
    expect(outputsOf(first.result)).toEqual(
      Array(3).fill(
        'Tool "search_docs" failed (HTTP 503) and could not be recovered now. Continue without it or try again later.',
      ),
    );
    expect((await sh.status()).status).toBe("critical");
    otel.reset();

    const refunding = new Agent({
      name: "support",
      model: callsThenAnswers("issue_refund", { orderId: "A-42" }),
      tools: [search, refund].filter((t) => t !== undefined),
    });
    const { result } = await runAgent(clock, refunding);

    expect(refunded).toEqual([]);
    const [refusal] = outputsOf(result);
    expect(refusal).toMatch(
      /^selfheal: write tool "issue_refund" refused: the agent's health is critical/,
    );
    expect(refusal).toContain("nothing was sent");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.tool.name": "issue_refund",
      "selfheal.tool.read_only": false,
      "selfheal.call.outcome": "blocked",
      "selfheal.health.status": "critical",
      "error.type": "HealthCheckFailedError",
    });
  });

  it("enforces the tool's own timeoutMs per attempt, so a hung attempt is diagnosed and retried", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    let calls = 0;
    const slow = tool({
      name: "search_docs",
      description: "Searches the docs",
      parameters: z.object({ q: z.string() }),
      errorFunction: null,
      timeoutMs: 1_000,
      execute: async ({ q }, _ctx, details) => {
        if (++calls === 1) {
          // Hangs until selfheal aborts the attempt, as a fetch given the signal would.
          await new Promise((_resolve, reject) =>
            details?.signal?.addEventListener("abort", () => {
              reject(new Error("aborted"));
            }),
          );
        }
        return `found ${q}`;
      },
    });
    const [healed] = healTools(sh, [slow], { readOnly: ["search_docs"] });
    expect(healed?.timeoutMs).toBeUndefined(); // the SDK no longer times the whole healed call
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("search_docs", { q: "x" }),
      tools: healed ? [healed] : [],
    });

    const { output } = await runAgent(clock, agent);

    expect(output).toBe("answer: found x");
    const [diagnosis] = otel.named("agent.diagnosis");
    expect(diagnosis?.attributes["selfheal.diagnosis.pattern"]).toBe("TIMEOUT");
    expect(otel.named("agent.tool_call")[0]?.attributes).toMatchObject({
      "selfheal.call.timeout_ms": 1_000,
      "selfheal.call.outcome": "recovered",
    });
  });

  it("the SDK's own timer no longer races selfheal's: a longer selfheal timeout wins over the tool's", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const slow = tool({
      name: "search_docs",
      description: "Searches the docs",
      parameters: z.object({ q: z.string() }),
      errorFunction: null,
      timeoutMs: 20, // the SDK alone would answer "timed out" after 20 ms (real time)
      execute: async ({ q }) => {
        await new Promise((resolve) => setTimeout(resolve, 80));
        return `found ${q}`;
      },
    });
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("search_docs", { q: "x" }),
      tools: healTools(sh, [slow], { readOnly: ["search_docs"], timeoutMs: 60_000 }),
    });

    // The virtual clock stands still: selfheal's 60 s never pass, only the tool's 80 ms do.
    const result = await run(agent, "help");

    expect(result.finalOutput).toBe("answer: found x");
  });

  it("a tool that keeps the SDK's default errorFunction: the failure is counted, a warning says why selfheal cannot heal it, the model reads the SDK's text", async () => {
    const warnings: string[] = [];
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { cacheMs: 0 },
    });
    const lookup = tool({
      name: "lookup",
      description: "Looks up an order",
      parameters: z.object({ id: z.string() }),
      execute: () => {
        throw rateLimited(1);
      },
    });
    const agent = new Agent({
      name: "support",
      model: new FakeModel([
        () => [functionCall("lookup", { id: "1" }, { callId: "a" })],
        () => [functionCall("lookup", { id: "2" }, { callId: "b" })],
        () => [assistantMessage("done")],
      ]),
      tools: healTools(sh, [lookup], {
        readOnly: ["lookup"],
        logger: { warn: (m) => warnings.push(m) },
      }),
    });

    const { result } = await runAgent(clock, agent);

    // Pins the SDK's default text this adapter recognises to the installed SDK.
    expect(outputsOf(result)).toEqual([SDK_DEFAULT_TOOL_ERROR, SDK_DEFAULT_TOOL_ERROR]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("create the tool with errorFunction: null");
    const calls = otel.named("agent.tool_call");
    expect(calls.map((s) => s.attributes["selfheal.call.outcome"])).toEqual(["error", "error"]);
    expect(calls[0]?.attributes["error.type"]).toBe("HiddenToolError");
    expect((await successRate(sh, "lookup"))?.samples).toBe(2);
  });

  it("arguments that fail the tool's schema are BAD_REQUEST, never retried; the model reads the SDK's parse message", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    let executed = 0;
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("search_docs", { q: 42 }),
      tools: healTools(sh, [searchTool(() => String(++executed))], { readOnly: ["search_docs"] }),
    });

    const { result } = await runAgent(clock, agent);

    expect(executed).toBe(0);
    expect(outputsOf(result)).toEqual([
      "An error occurred while parsing tool arguments. Please try again with valid JSON.",
    ]);
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis"] },
    ]);
    expect(otel.named("agent.diagnosis")[0]?.attributes["selfheal.diagnosis.pattern"]).toBe(
      "BAD_REQUEST",
    );
    expect(otel.named("agent.tool_call")[0]?.attributes["error.type"]).toBe(
      "ToolInputRejectedError",
    );
  });

  it("retries a write whose idempotency key comes from the model's arguments", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const keys: string[] = [];
    let calls = 0;
    const refund = tool({
      name: "issue_refund",
      description: "Refunds an order",
      parameters: z.object({ orderId: z.string() }),
      errorFunction: null,
      execute: ({ orderId }) => {
        keys.push(`refund-${orderId}`); // the tool sends the same key to the payments API
        if (++calls === 1) throw new HttpResponseError(503, new Headers(), "", "https://pay");
        return `refunded ${orderId}`;
      },
    });
    const agent = new Agent({
      name: "support",
      model: callsThenAnswers("issue_refund", { orderId: "A-42" }),
      tools: healTools(sh, [refund], {
        idempotencyKey: (input) => `refund-${(input as { orderId: string }).orderId}`,
      }),
    });

    const { output } = await runAgent(clock, agent);

    expect(output).toBe("answer: refunded A-42");
    expect(keys).toEqual(["refund-A-42", "refund-A-42"]);
    expect(otel.named("agent.tool_call")[0]?.attributes).toMatchObject({
      "selfheal.tool.read_only": false,
      "selfheal.call.outcome": "recovered",
      "selfheal.idempotency_key": expect.stringMatching(/^[0-9a-f]{16}$/) as unknown,
    });
  });

  it("spans: attach writes on the active span (an OpenTelemetry bridge's tool span) instead of a child", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const search = healTool(
      sh,
      searchTool((q) => `found ${q}`),
      {
        readOnly: true,
        spans: "attach",
      },
    );
    const bridge = otel.provider.getTracer("bridge");

    const output = await bridge.startActiveSpan("execute_tool search_docs", async (span) => {
      try {
        return await search.invoke(new RunContext({}), JSON.stringify({ q: "cats" }));
      } finally {
        span.end();
      }
    });

    expect(output).toBe("found cats");
    expect(tree(otel.spans())).toEqual(["execute_tool search_docs"]);
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "selfheal.call.outcome": "success",
    });
  });

  it("heals each function tool once per instance, passes other tools through, and names a bad option", () => {
    const { sh } = virtualInstance();
    const search = searchTool(() => "x");
    const hosted = hostedMcpTool({ serverLabel: "docs", serverUrl: "https://mcp.example" });
    const [healed, passed] = healTools(sh, [search, hosted], { readOnly: ["search_docs"] });

    expect(passed).toBe(hosted);
    expect(healed).not.toBe(search);
    expect(healed).toMatchObject({
      name: search.name,
      parameters: search.parameters,
      strict: search.strict,
    });
    expect(healTools(sh, [search])[0]).toBe(healed);
    expect(healTool(sh, search)).toBe(healed);
    expect(healTool(sh, healTool(sh, search))).toBe(healed);

    expect(configError(() => healTools(sh, [search], { readOnly: ["serach_docs"] })).field).toBe(
      "healTools(options).readOnly",
    );
    expect(
      configError(() =>
        healTool(
          sh,
          searchTool(() => "y"),
          { spans: "sideways" as "child" },
        ),
      ).field,
    ).toBe('healTool("search_docs").options.spans');
    expect(configError(() => healTools(sh, [search], { readonly: true } as never)).field).toBe(
      "healTools(options).readonly",
    );
    expect(configError(() => healTool(sh, hosted as never)).field).toBe("healTool(tool)");
    expect(configError(() => healthTraceProcessor(sh, { models: "yes" as never })).field).toBe(
      "healthTraceProcessor(options).models",
    );
  });
});

describe("selfheal/openai-agents: healthTraceProcessor", () => {
  it("counts the SDK's function spans of unhealed tools and its model calls, not the healed tools' again; enough failures refuse a healed write", async () => {
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { successRate: { minSamples: 3 }, cacheMs: 0 },
    });
    setTraceProcessors([healthTraceProcessor(sh)]);
    setTracingDisabled(false);
    const refunded: string[] = [];
    // A tool this agent never healed, failing the SDK's way (its error turned into text).
    const inventory = tool({
      name: "check_inventory",
      description: "Checks stock",
      parameters: z.object({ sku: z.string() }),
      execute: () => {
        throw new Error("warehouse API down");
      },
    });
    const healed = healTools(
      sh,
      [searchTool((q) => `found ${q}`), refundTool((id) => refunded.push(id))],
      {
        readOnly: ["search_docs"],
      },
    );
    const agent = new Agent({
      name: "support",
      model: new FakeModel([
        () => [
          functionCall("search_docs", { q: "stock" }, { callId: "s1" }),
          ...[1, 2, 3, 4].map((i) =>
            functionCall("check_inventory", { sku: `k${i}` }, { callId: `i${i}` }),
          ),
        ],
        () => [functionCall("issue_refund", { orderId: "A-42" }, { callId: "r1" })],
        () => [assistantMessage("sorry")],
      ]),
      tools: [...healed, inventory],
    });

    const { result } = await runAgent(clock, agent);

    expect(await successRate(sh, "check_inventory")).toMatchObject({ value: 0, samples: 4 });
    // Counted once, by the healed tool: its SDK function span was skipped.
    expect(await successRate(sh, "search_docs")).toMatchObject({ samples: 1 });
    // Each model call (a generation span with usage) is an LLM call.
    expect(await successRate(sh, "fake-model")).toMatchObject({ value: 1, samples: 3 });
    // Four failed calls of seven (two model calls and a search ended first): the agent went
    // critical on the trace processor's evidence.
    expect(refunded).toEqual([]);
    expect(outputsOf(result).at(-1)).toContain('write tool "issue_refund" refused');
    expect(otel.named("agent.tool_call").map((s) => s.attributes["selfheal.call.outcome"])).toEqual(
      ["success", "blocked"],
    );
  });

  it("counts a model span without usage as a call but not as an answer's size, and no model span with models: false", async () => {
    const { sh } = virtualInstance();
    const withoutModels = virtualInstance();
    const processors = [
      healthTraceProcessor(sh),
      healthTraceProcessor(withoutModels.sh, { models: false }),
    ];
    setTraceProcessors(processors);
    setTracingDisabled(false);

    await withTrace("model calls", async () => {
      await withGenerationSpan(async (span) => {
        span.spanData.model = "m";
        span.spanData.usage = { output_tokens: 0 };
        await Promise.resolve();
      });
      await withGenerationSpan(() => Promise.resolve()); // a call; its size unknown
      await withResponseSpan(async (span) => {
        span.spanData._response = { model: "m", usage: { output_tokens: 40 } };
        await Promise.resolve();
      });
      await withResponseSpan(() => Promise.reject(new Error("HTTP 500"))).catch(() => undefined);
    });

    const report = await sh.status();
    const m = report.tools.m?.signals;
    expect(m?.find((s) => s.signal === "success_rate")).toMatchObject({ samples: 2 });
    expect(m?.find((s) => s.signal === "empty_response_rate")).toMatchObject({ samples: 2 });
    expect(report.tools.response?.signals.find((s) => s.signal === "success_rate")).toMatchObject({
      samples: 1,
    });
    const generation = report.tools.generation?.signals;
    expect(generation?.find((s) => s.signal === "success_rate")).toMatchObject({ samples: 1 });
    expect(generation?.find((s) => s.signal === "empty_response_rate")).toMatchObject({
      samples: 0,
    });
    expect(Object.keys((await withoutModels.sh.status()).tools)).toEqual([]);
  });
});

describe("selfheal/openai-agents: review findings", () => {
  it("tools built per run (a new tool object of the same name) share one selfheal tool instead of throwing", async () => {
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { cacheMs: 0 },
    });
    const runFor = async (user: string) => {
      const search = searchTool((q) => `${user} found ${q}`); // closes over the request
      const agent = new Agent({
        name: "support",
        model: callsThenAnswers("search_docs", { q: "x" }),
        tools: healTools(sh, [search], { readOnly: ["search_docs"] }),
      });
      return (await runAgent(clock, agent)).output;
    };

    expect(await runFor("ann")).toBe("answer: ann found x");
    expect(await runFor("bob")).toBe("answer: bob found x");
    expect((await successRate(sh, "search_docs"))?.samples).toBe(2);
    // The same name declared a write elsewhere is refused by name.
    expect(configError(() => healTools(sh, [searchTool(() => "z")])).field).toBe(
      "healTools(options).readOnly",
    );
  });

  it("the original tool's own timer is off however the healed copy is invoked, not only by the runner", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const slow = tool({
      name: "search_docs",
      description: "Searches the docs",
      parameters: z.object({ q: z.string() }),
      errorFunction: null,
      timeoutMs: 20, // alone, the SDK would answer "timed out" after 20 ms (real time)
      execute: async ({ q }) => {
        await new Promise((resolve) => setTimeout(resolve, 80));
        return `found ${q}`;
      },
    });
    const healed = healTool(sh, slow, { readOnly: true, timeoutMs: 60_000 });

    const output = await healed.invoke(new RunContext({}), JSON.stringify({ q: "x" }));

    expect(output).toBe("found x");
  });

  it("counts every model call, not only the failed ones: the Chat Completions model puts no usage on a successful call's span", async () => {
    const { sh } = virtualInstance({ health: { cacheMs: 0 } });
    setTraceProcessors([healthTraceProcessor(sh)]);
    setTracingDisabled(false);
    let calls = 0;
    const completion = {
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 0,
      model: "gpt-test",
      choices: [
        { index: 0, finish_reason: "stop", message: { role: "assistant", content: "hello" } },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    };
    // The OpenAI client as the model uses it: two answers, then a 500.
    const client = {
      baseURL: "https://api.example/v1",
      chat: {
        completions: {
          create: () =>
            ++calls === 3
              ? Promise.reject(new Error("500 Internal Server Error"))
              : Promise.resolve(completion),
        },
      },
    };
    const agent = new Agent({
      name: "support",
      model: new OpenAIChatCompletionsModel(client as never, "gpt-test"),
    });

    for (let i = 0; i < 3; i++) await run(agent, "hi").catch(() => undefined);

    expect(calls).toBe(3);
    expect(await successRate(sh, "gpt-test")).toMatchObject({ samples: 3 });
  });
});

describe("examples/openai-agents.ts (against the built package, as a user runs it)", () => {
  it("prints the run's spans, the recovered 429 and the refused write", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [builtJs("examples/openai-agents.ts")],
      { timeout: CHILD_HANG_MS },
    );
    expect(stdout).toContain("span agent.tool_call  tool=search_docs outcome=recovered");
    expect(stdout).toContain("diagnosis search_docs: RATE_LIMIT");
    expect(stdout).toContain("agent: 3 articles about refund policy");
    expect(stdout).toMatch(/tool=issue_refund outcome=blocked/);
    expect(stdout).toContain('selfheal: write tool "issue_refund" refused');
  }, 150_000);
});
