import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { StructuredTool, tool, type ToolRunnableConfig } from "@langchain/core/tools";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  createAgent,
  createMiddleware,
  FakeToolCallingModel,
  MiddlewareError,
  toolRetryMiddleware,
  type AgentMiddleware,
} from "langchain";
import { beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { healTool, selfHealingMiddleware } from "../../src/adapters/langchain.js";
import {
  createSelfHealing,
  HttpResponseError,
  isHealthCheckFailedError,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealing,
  type SelfHealingOptions,
} from "../../src/index.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { thrownFault, VirtualClock } from "../../src/testing/index.js";
import { builtJs, CHILD_HANG_MS } from "../helpers/built-js.js";
import { NO_RECOVERY } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";

const otel = recordingProvider();
const tracer = otel.provider.getTracer("test");
const URL = "https://api.example.com/v1/lookup";

beforeEach(() => {
  otel.reset();
});

/** A selfheal instance on virtual time, spans recorded, no jitter; its recovery events and alerts. */
function setup(recovery: RecoveryOptions = {}, options: Partial<SelfHealingOptions> = {}) {
  const clock = new VirtualClock();
  const alerts: Alert[] = [];
  const notifier: Notifier = {
    channel: "memory",
    send: (alert) => {
      alerts.push(alert);
      return Promise.resolve();
    },
  };
  const sh = createSelfHealing({
    agent: "support-bot",
    clock,
    tracerProvider: otel.provider,
    logger: { warn: () => undefined },
    recovery: { random: () => 0, notifiers: [notifier], ...recovery },
    ...options,
  });
  const events: RecoveryEvent[] = [];
  sh.on("recovery", (e) => events.push(e));
  return { sh, clock, alerts, events };
}

/** A LangChain tool that runs `fn` and keeps the time of each call (the clock's, or real time). */
function countedTool(name: string, clock: { now(): number }, fn: (q: string, n: number) => string) {
  const calls: number[] = [];
  const t = tool(
    ({ q }: { q: string }) => {
      calls.push(clock.now());
      return fn(q, calls.length);
    },
    { name, description: `${name} tool`, schema: z.object({ q: z.string() }) },
  );
  return { tool: t, calls };
}

/** The framework's own fake: one turn calling `tools` (ids call_1, ...), then a final answer. */
function callingModel(...tools: string[]) {
  return new FakeToolCallingModel({
    toolCalls: [
      tools.map((name, i) => ({ name, args: { q: "refund policy" }, id: `call_${i + 1}` })),
      [],
    ],
  });
}

type Step = AIMessage | Error;

/** A chat model that plays a script: an answer, or an error to throw; the last step repeats. */
class ScriptedModel extends BaseChatModel {
  calls = 0;
  constructor(private readonly steps: (() => Step)[]) {
    super({});
  }
  _llmType(): string {
    return "scripted";
  }
  override bindTools(): this {
    return this;
  }
  _generate(_messages: BaseMessage[]): Promise<ChatResult> {
    const step = this.steps[Math.min(this.calls++, this.steps.length - 1)]?.();
    if (step instanceof Error) return Promise.reject(step);
    const message = step ?? new AIMessage("");
    return Promise.resolve({ generations: [{ text: message.text, message }] });
  }
}

/**
 * Drives the agent's health to critical: 12 failed calls of a read tool outweigh what else ran
 * (success rate under 0.5 over the default 10 samples), then time passes the 5 s status cache.
 */
async function makeCritical(sh: SelfHealing, clock: VirtualClock): Promise<void> {
  const failing = sh.tool("lookup", { readOnly: true }, () => Promise.reject(new Error("down")));
  for (let i = 0; i < 12; i++) await failing(undefined).catch(() => undefined);
  await clock.advance(5_000);
  expect((await sh.status()).status).toBe("critical");
}

const answer = (text: string) => () => new AIMessage(text);

/** Runs an agent to its end on the virtual clock, under a root span `agent.run`. */
async function run(
  clock: VirtualClock,
  agent: { invoke(input: { messages: { role: string; content: string }[] }): Promise<unknown> },
): Promise<BaseMessage[]> {
  const result = await tracer.startActiveSpan("agent.run", async (span) => {
    try {
      return await clock.run(
        agent.invoke({ messages: [{ role: "user", content: "What is the refund policy?" }] }),
        { stepMs: 100 },
      );
    } finally {
      span.end();
    }
  });
  return (result as { messages: BaseMessage[] }).messages;
}

const toolMessages = (messages: BaseMessage[]) => messages.filter((m) => ToolMessage.isInstance(m));
const last = (messages: BaseMessage[]) => messages[messages.length - 1];
const spans = (name: string) => otel.named(name);
const toolSpan = (toolName: string) =>
  spans("agent.tool_call").filter((s) => toolOf(s) === toolName);
/** What a call span names its tool: a tool's `gen_ai.tool.name`, a model call's selfheal name. */
const toolOf = (s: ReadableSpan) =>
  s.attributes["gen_ai.tool.name"] ?? s.attributes["selfheal.tool.name"];
const childrenOf = (parent: ReadableSpan | undefined) =>
  otel
    .spans()
    .filter((s) => s.parentSpanContext?.spanId === parent?.spanContext().spanId)
    .map((s) => s.name);

const http = (status: number, body: object, headers: Record<string, string> = {}) =>
  new HttpResponseError(status, new Headers(headers), JSON.stringify(body), URL);
const unauthorized = () =>
  http(401, {
    error: {
      message: "Incorrect API key provided",
      type: "invalid_request_error",
      code: "invalid_api_key",
    },
  });
const quotaSpent = () =>
  http(429, {
    error: {
      message: "You exceeded your current quota, please check your plan and billing details.",
      type: "insufficient_quota",
      code: "insufficient_quota",
    },
  });

/** An agent whose only middleware is selfheal's, `search_docs` declared read-only. */
function agentWith(sh: SelfHealing, model: BaseChatModel, tools: StructuredTool[]) {
  return createAgent({
    model,
    tools,
    middleware: [selfHealingMiddleware(sh, { readOnly: ["search_docs"] })],
  });
}

describe("selfHealingMiddleware in a createAgent loop", () => {
  it("makes every model call and tool call a selfheal span under the active span", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q) => `30 days for ${q}`);
    const messages = await run(clock, agentWith(sh, callingModel("search_docs"), [search.tool]));

    expect(tree(otel.spans())).toEqual([
      { "agent.run": ["agent.tool_call", "agent.tool_call", "agent.tool_call"] },
    ]);
    const names = spans("agent.tool_call").map(toolOf);
    expect(names).toEqual(["model", "search_docs", "model"]);
    // GenAI backends count one tool call (the execute_tool span), and two model calls.
    const toolNames = spans("agent.tool_call").map((s) => s.attributes["gen_ai.tool.name"]);
    expect(toolNames).toEqual([undefined, "search_docs", undefined]);
    expect(toolSpan("search_docs")[0]?.attributes).toMatchObject({
      "gen_ai.tool.call.id": "call_1",
      "selfheal.call.outcome": "success",
    });
    expect(toolSpan("model")[0]?.attributes).toMatchObject({
      "selfheal.response.empty": false,
      "selfheal.call.outcome": "success",
    });
    expect(toolMessages(messages)[0]?.content).toBe("30 days for refund policy");
  });

  it("recovers a tool's 429 after its Retry-After: the model gets the answer", async () => {
    const { sh, clock, events } = setup();
    const search = countedTool("search_docs", clock, (q, n) => {
      if (n === 1) throw http(429, { error: { message: "slow down" } }, { "retry-after": "2" });
      return `30 days for ${q}`;
    });
    const messages = await run(clock, agentWith(sh, callingModel("search_docs"), [search.tool]));

    expect(search.calls).toHaveLength(2);
    expect((search.calls[1] ?? 0) - (search.calls[0] ?? 0)).toBeGreaterThanOrEqual(2_000);
    const [message] = toolMessages(messages);
    expect(message?.content).toBe("30 days for refund policy");
    expect(message?.status).not.toBe("error");
    const [span] = toolSpan("search_docs");
    expect(span?.attributes["selfheal.call.outcome"]).toBe("recovered");
    expect(childrenOf(span)).toEqual([
      "agent.tool_call.error",
      "agent.diagnosis",
      "agent.recovery",
    ]);
    expect(spans("agent.diagnosis")[0]?.attributes["selfheal.diagnosis.pattern"]).toBe(
      "RATE_LIMIT",
    );
    expect(events[0]).toMatchObject({
      tool: "search_docs",
      strategy: "retry_once",
      outcome: "recovered",
    });
  });

  it("recovers a model call that was rate-limited, then one that answered nothing", async () => {
    const { sh, clock } = setup();
    const model = new ScriptedModel([
      () => thrownFault("rate_limit", { retryAfterSeconds: 1 }),
      () => new AIMessage(""),
      answer("Refunds take 30 days."),
    ]);
    const messages = await run(clock, agentWith(sh, model, []));

    expect(model.calls).toBe(3);
    expect(last(messages)?.content).toBe("Refunds take 30 days.");
    const [span] = toolSpan("model");
    expect(span?.attributes["selfheal.call.outcome"]).toBe("recovered");
    const patterns = spans("agent.diagnosis").map(
      (s) => s.attributes["selfheal.diagnosis.pattern"],
    );
    expect(patterns).toEqual(["RATE_LIMIT", "EMPTY_LLM_RESPONSE"]);
  });

  it("fails a model call over to the fallback model when its provider is down", async () => {
    const { sh, clock, events } = setup({ providers: [{ name: "openai" }, { name: "anthropic" }] });
    const primary = new ScriptedModel([() => thrownFault("http_503")]);
    const backup = new ScriptedModel([answer("From the backup: 30 days.")]);
    const agent = createAgent({
      model: primary,
      tools: [],
      middleware: [
        selfHealingMiddleware(sh, {
          model: { provider: "openai", fallbacks: [{ provider: "anthropic", model: backup }] },
        }),
      ],
    });
    const messages = await run(clock, agent);

    expect(last(messages)?.content).toBe("From the backup: 30 days.");
    expect(backup.calls).toBe(1);
    expect(events[0]).toMatchObject({
      tool: "model",
      pattern: "SERVICE_DOWN",
      outcome: "recovered",
      provider: "anthropic",
    });
    expect(toolSpan("model")[0]?.attributes["selfheal.call.outcome"]).toBe("recovered");
  });

  it("refuses a write while the agent is critical: an error ToolMessage, nothing sent, reads still run", async () => {
    const { sh, clock } = setup(NO_RECOVERY);
    await makeCritical(sh, clock);
    const search = countedTool("search_docs", clock, (q) => `30 days for ${q}`);
    const refund = countedTool("issue_refund", clock, () => "refunded");
    const agent = agentWith(sh, callingModel("search_docs", "issue_refund"), [
      search.tool,
      refund.tool,
    ]);
    const messages = await run(clock, agent);

    expect(refund.calls).toHaveLength(0);
    expect(search.calls).toHaveLength(1);
    const [read, write] = toolMessages(messages);
    expect(read?.status).not.toBe("error");
    expect(write?.status).toBe("error");
    expect(write?.content).toMatch(
      /write tool "issue_refund" refused: the agent's health is critical/,
    );
    expect(last(messages)?.text).toContain("refused"); // the model read it
    expect(toolSpan("issue_refund")[0]?.attributes["selfheal.call.outcome"]).toBe("blocked");
  });

  it("with onFailure: error the refusal fails the run, as LangChain's MiddlewareError with selfheal's cause", async () => {
    const { sh, clock } = setup(NO_RECOVERY);
    await makeCritical(sh, clock);
    const refund = countedTool("issue_refund", clock, () => "refunded");
    const agent = createAgent({
      model: callingModel("issue_refund"),
      tools: [refund.tool],
      middleware: [selfHealingMiddleware(sh, { onFailure: "error" })],
    });
    const error = await run(clock, agent).catch((e: unknown) => e);

    expect(MiddlewareError.isInstance(error)).toBe(true);
    expect(isHealthCheckFailedError((error as Error).cause)).toBe(true);
    expect(refund.calls).toHaveLength(0);
  });

  it("throws a model call it could not heal: MiddlewareError, selfheal's escalation as its cause", async () => {
    const { sh, clock } = setup();
    const model = new ScriptedModel([() => thrownFault("auth")]);
    const error = await run(clock, agentWith(sh, model, [])).catch((e: unknown) => e);

    expect(MiddlewareError.isInstance(error)).toBe(true);
    expect(isHumanEscalationRequiredError((error as Error).cause)).toBe(true);
    expect(model.calls).toBe(1); // a 401 is never sent again on the same route
  });

  it("leaves a tool name the model made up to LangChain: no selfheal tool registered for it", async () => {
    const { sh, clock } = setup();
    const messages = await run(clock, agentWith(sh, callingModel("no_such_tool"), []));

    expect(toolMessages(messages)[0]?.content).toMatch(/no_such_tool is not a valid tool/);
    expect(toolSpan("no_such_tool")).toHaveLength(0);
    expect((await sh.status()).tools.no_such_tool).toBeUndefined();
  });

  it("passes arguments the model got wrong back to LangChain, not retried", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, () => "never");
    const model = new FakeToolCallingModel({
      toolCalls: [[{ name: "search_docs", args: { query: 42 }, id: "call_1" }], []],
    });
    const messages = await run(clock, agentWith(sh, model, [search.tool]));

    expect(search.calls).toHaveLength(0);
    expect(toolMessages(messages)[0]?.status).toBe("error");
    expect(toolMessages(messages)[0]?.content).toMatch(/Error invoking tool 'search_docs'/);
    expect(spans("agent.recovery")).toHaveLength(0);
  });

  it("aborts a tool that outlives its timeoutMs through the config.signal it was given", async () => {
    const { sh, clock } = setup({ plans: { TIMEOUT: [] } });
    let aborted: unknown;
    const slow = tool(
      (_input: { q: string }, config: ToolRunnableConfig) =>
        new Promise<string>((_resolve, reject) => {
          config.signal?.addEventListener("abort", () => {
            aborted = config.signal?.reason;
            reject(new Error("stopped"));
          });
        }),
      { name: "slow_search", description: "slow", schema: z.object({ q: z.string() }) },
    );
    const agent = createAgent({
      model: callingModel("slow_search"),
      tools: [slow],
      middleware: [
        selfHealingMiddleware(sh, {
          readOnly: ["slow_search"],
          tools: { slow_search: { timeoutMs: 1_000 } },
        }),
      ],
    });
    const messages = await run(clock, agent);

    expect(aborted).toBeDefined();
    expect(toolMessages(messages)[0]).toMatchObject({
      status: "error",
      content: 'selfheal: tool "slow_search" timed out after 1000 ms',
    });
    expect(spans("agent.diagnosis")[0]?.attributes["selfheal.diagnosis.pattern"]).toBe("TIMEOUT");
  });

  it("shares one selfheal tool per name across agents built on one instance", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q) => q);
    await run(clock, agentWith(sh, callingModel("search_docs"), [search.tool]));
    await run(clock, agentWith(sh, callingModel("search_docs"), [search.tool]));

    expect(search.calls).toHaveLength(2);
    expect((await sh.status()).tools.search_docs?.signals).toBeDefined();
  });

  it('with spans: "attach" writes on the tool span an instrumentation opened: no second span', async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q, n) => {
      if (n === 1) throw http(503, { error: { message: "overloaded" } });
      return q;
    });
    // Stands in for an instrumentation that opens an active span per tool call.
    const instrumentation = createMiddleware({
      name: "instrumentation",
      wrapToolCall: (request, handler) =>
        tracer.startActiveSpan(`execute_tool ${request.toolCall.name}`, async (span) => {
          try {
            return await handler(request);
          } finally {
            span.end();
          }
        }),
    });
    const agent = createAgent({
      model: callingModel("search_docs"),
      tools: [search.tool],
      middleware: [
        instrumentation,
        selfHealingMiddleware(sh, { readOnly: ["search_docs"], spans: "attach", model: false }),
      ],
    });
    await run(clock, agent);

    expect(tree(otel.spans())).toEqual([
      {
        "agent.run": [
          {
            "execute_tool search_docs": [
              "agent.tool_call.error",
              "agent.diagnosis",
              "agent.recovery",
            ],
          },
        ],
      },
    ]);
    expect(spans("execute_tool search_docs")[0]?.attributes).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "selfheal.call.outcome": "recovered",
    });
  });
});

describe("selfHealingMiddleware: tool identity, ids and routes", () => {
  it("asks the readOnly test once per tool name, as documented", async () => {
    const { sh, clock } = setup();
    const asked: string[] = [];
    const search = countedTool("search_docs", clock, (q) => q);
    const model = new FakeToolCallingModel({
      toolCalls: [
        [{ name: "search_docs", args: { q: "a" }, id: "call_1" }],
        [{ name: "search_docs", args: { q: "b" }, id: "call_2" }],
        [],
      ],
    });
    const agent = createAgent({
      model,
      tools: [search.tool],
      middleware: [
        selfHealingMiddleware(sh, {
          readOnly: (name) => {
            asked.push(name);
            return name === "search_docs";
          },
          model: false,
        }),
      ],
    });
    await run(clock, agent);

    expect(search.calls).toHaveLength(2);
    expect(asked).toEqual(["search_docs"]);
  });

  it("runs a tool call whose id is blank (a provider that sends none): the id is left out", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q) => `30 days for ${q}`);
    const model = new FakeToolCallingModel({
      toolCalls: [[{ name: "search_docs", args: { q: "refunds" }, id: "" }], []],
    });
    const messages = await run(clock, agentWith(sh, model, [search.tool]));

    expect(search.calls).toHaveLength(1);
    const [message] = toolMessages(messages);
    expect(message?.status).not.toBe("error");
    expect(message?.content).toBe("30 days for refunds");
    expect(toolSpan("search_docs")[0]?.attributes["gen_ai.tool.call.id"]).toBeUndefined();
  });

  it("healTool runs a tool call whose id is blank", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q) => q);
    const healed = healTool(sh, search.tool, { readOnly: true });
    const message: unknown = await healed.invoke({
      type: "tool_call",
      id: "",
      name: "search_docs",
      args: { q: "returns" },
    });
    expect(message).toBe("returns"); // LangChain's own answer to a call without an id
    expect(search.calls).toHaveLength(1);
  });

  it("sees createAgent's own signal: an abort there is not a tool failure, not retried", async () => {
    const { sh, clock } = setup();
    const controller = new AbortController();
    let started = 0;
    const slow = tool(
      (_input: { q: string }, config: ToolRunnableConfig) =>
        new Promise<string>((_resolve, reject) => {
          started++;
          if (started === 1) {
            setTimeout(() => {
              controller.abort(new Error("user stopped"));
            }, 0);
          }
          config.signal?.addEventListener("abort", () => {
            reject(new Error("stopped"));
          });
        }),
      { name: "search_docs", description: "slow", schema: z.object({ q: z.string() }) },
    );
    const agent = createAgent({
      model: callingModel("search_docs"),
      tools: [slow],
      signal: controller.signal,
      middleware: [selfHealingMiddleware(sh, { readOnly: ["search_docs"], model: false })],
    });
    await run(clock, agent).catch(() => undefined);

    expect(started).toBe(1);
    expect(spans("agent.diagnosis")).toHaveLength(0);
    expect(spans("agent.recovery")).toHaveLength(0);
  });

  it("refuses a second middleware whose model routes differ from the first's on the instance", () => {
    const { sh } = setup({ providers: [{ name: "openai" }, { name: "anthropic" }] });
    const backup = new ScriptedModel([answer("From the backup.")]);
    const withBackup = {
      provider: "openai",
      fallbacks: [{ provider: "anthropic", model: backup }],
    };
    selfHealingMiddleware(sh, { model: withBackup });
    selfHealingMiddleware(sh, { model: withBackup }); // an agent built per request: the same routes
    // Without the fallback, the shared "model" tool would still fail over to "anthropic", run
    // this agent's own model again under that name, and count its failures on that route.
    expect(() => selfHealingMiddleware(sh, { model: { provider: "openai" } })).toThrow(
      /model calls .* already healed with routes openai, anthropic/,
    );
    expect(() => selfHealingMiddleware(sh)).toThrow(/already healed with routes/);
    // Under their own name they are their own tool.
    expect(() => selfHealingMiddleware(sh, { model: { name: "triage-model" } })).not.toThrow();
  });
});

describe("what selfheal adds over LangChain's toolRetryMiddleware (same tool, same fault)", () => {
  /** The run with LangChain's retry middleware (no waiting between tries). */
  async function withToolRetry(fault: () => Error) {
    const lookup = countedTool("lookup", Date, () => {
      throw fault();
    });
    const agent = createAgent({
      model: callingModel("lookup"),
      tools: [lookup.tool],
      // LangChain's zod-v3 context schema fails our exactOptionalPropertyTypes; the value is fine.
      middleware: [
        toolRetryMiddleware({
          maxRetries: 2,
          initialDelayMs: 10,
          jitter: false,
        }) as AgentMiddleware,
      ],
    });
    const result = await agent.invoke({ messages: [{ role: "user", content: "look it up" }] });
    return { calls: lookup.calls.length, times: lookup.calls, messages: result.messages };
  }

  /** The same run with selfheal's middleware. */
  async function withSelfheal(fault: () => Error) {
    const vi = setup();
    const lookup = countedTool("lookup", vi.clock, () => {
      throw fault();
    });
    const agent = createAgent({
      model: callingModel("lookup"),
      tools: [lookup.tool],
      middleware: [selfHealingMiddleware(vi.sh, { readOnly: ["lookup"] })],
    });
    const messages = await run(vi.clock, agent);
    return { ...vi, calls: lookup.calls.length, messages };
  }

  it("a 401: the retry middleware sends it 3 times; selfheal once, diagnosed AUTH, escalated", async () => {
    const retried = await withToolRetry(unauthorized);
    expect(retried.calls).toBe(3);
    expect(toolMessages(retried.messages)[0]?.content).toBe(
      "Tool 'lookup' failed after 3 attempts with HttpResponseError",
    );

    const healed = await withSelfheal(unauthorized);
    expect(healed.calls).toBe(1);
    expect(spans("agent.diagnosis")[0]?.attributes["selfheal.diagnosis.pattern"]).toBe("AUTH");
    expect(healed.events[0]).toMatchObject({ pattern: "AUTH", outcome: "escalated" });
    const [message] = toolMessages(healed.messages);
    expect(message?.status).toBe("error");
    expect(message?.content).toMatch(
      /"lookup" failed with AUTH and could not be recovered; escalated to a human/,
    );
  });

  it("a spent quota (429 insufficient_quota): the retry middleware retries it; selfheal pages a human", async () => {
    const retried = await withToolRetry(quotaSpent);
    expect(retried.calls).toBe(3);

    const healed = await withSelfheal(quotaSpent);
    expect(healed.calls).toBe(1);
    expect(spans("agent.diagnosis")[0]?.attributes).toMatchObject({
      "selfheal.diagnosis.pattern": "AUTH",
      "selfheal.diagnosis.rule": "quota-exhausted",
    });
    expect(healed.alerts).toHaveLength(1);
    expect(healed.alerts[0]?.tool).toBe("lookup");
    expect(healed.alerts[0]?.kind).toContain("AUTH");
    expect(healed.events[0]?.outcome).toBe("escalated");
  });

  it("a 429 with Retry-After: 20: the retry middleware retries after its own 10 ms; selfheal waits the 20 s", async () => {
    const limited = () => http(429, { error: { message: "slow down" } }, { "retry-after": "20" });
    // On real time (LangChain's middleware takes no clock): its 10 ms, not the server's 20 s. The
    // pass mark is far from both, whatever the machine's load (issue 27).
    const retried = await withToolRetry(limited);
    expect((retried.times[1] ?? 0) - (retried.times[0] ?? 0)).toBeLessThan(10_000);

    const vi = setup();
    const lookup = countedTool("lookup", vi.clock, (q, n) => {
      if (n === 1) throw limited();
      return q;
    });
    await run(
      vi.clock,
      createAgent({
        model: callingModel("lookup"),
        tools: [lookup.tool],
        middleware: [selfHealingMiddleware(vi.sh, { readOnly: ["lookup"] })],
      }),
    );
    expect((lookup.calls[1] ?? 0) - (lookup.calls[0] ?? 0)).toBeGreaterThanOrEqual(20_000);
  });
});

describe("healTool (plain LangChain tools, no createAgent)", () => {
  it("keeps the tool's name, description and schema; invoke goes through selfheal and recovers", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q, n) => {
      if (n === 1) throw http(429, { error: { message: "slow down" } }, { "retry-after": "1" });
      return `30 days for ${q}`;
    });
    const healed = healTool(sh, search.tool, { readOnly: true });

    expect(healed).toBeInstanceOf(StructuredTool);
    expect([healed.name, healed.description, healed.schema]).toEqual([
      search.tool.name,
      search.tool.description,
      search.tool.schema,
    ]);
    await expect(clock.run(healed.invoke({ q: "refunds" }), { stepMs: 100 })).resolves.toBe(
      "30 days for refunds",
    );
    const message: unknown = await healed.invoke({
      type: "tool_call",
      id: "call_9",
      name: "search_docs",
      args: { q: "returns" },
    });
    expect(message).toBeInstanceOf(ToolMessage);
    expect(toolSpan("search_docs").map((s) => s.attributes["selfheal.call.outcome"])).toEqual([
      "recovered",
      "success",
    ]);
    expect(toolSpan("search_docs")[1]?.attributes["gen_ai.tool.call.id"]).toBe("call_9");
  });

  it("heals a tool once: healing a healed tool again returns it, no nested call", async () => {
    const { sh, clock } = setup();
    const search = countedTool("search_docs", clock, (q) => q);
    const once = healTool(sh, search.tool, { readOnly: true });
    const twice = healTool(sh, once, { readOnly: true });
    await twice.invoke({ q: "refunds" });

    expect(search.calls).toHaveLength(1);
    expect(toolSpan("search_docs")).toHaveLength(1);
    expect(twice).toBe(once);
    expect(() => healTool(sh, once, { readOnly: false })).toThrow(/already registered/);
  });

  it("throws a refused write as a tool throws; the middleware does not wrap a healed tool twice", async () => {
    const { sh, clock } = setup(NO_RECOVERY);
    const refund = countedTool("issue_refund", clock, () => "refunded");
    const healed = healTool(sh, refund.tool, { readOnly: false });
    const agent = createAgent({
      model: callingModel("issue_refund"),
      tools: [healed],
      middleware: [selfHealingMiddleware(sh)],
    });
    await run(clock, agent);
    expect(toolSpan("issue_refund")).toHaveLength(1);

    await makeCritical(sh, clock);
    const error = await healed.invoke({ q: "A-42" }).catch((e: unknown) => e);
    expect(isHealthCheckFailedError(error)).toBe(true);
    expect(refund.calls).toHaveLength(1);
  });
});

describe("options", () => {
  const field = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      if (isSelfHealConfigError(e)) return e.field;
      throw e;
    }
    throw new Error("expected a SelfHealConfigError");
  };

  it("name the bad field", () => {
    const { sh } = setup({ providers: [{ name: "openai" }] });
    expect(field(() => selfHealingMiddleware(sh, { readOnly: "search" as never }))).toBe(
      "selfHealingMiddleware.options.readOnly",
    );
    expect(field(() => selfHealingMiddleware(sh, { retries: 3 } as never))).toBe(
      "selfHealingMiddleware.options.retries",
    );
    expect(
      field(() =>
        selfHealingMiddleware(sh, {
          model: { fallbacks: [{ provider: "openai", model: "openai:gpt-4o" }] },
        }),
      ),
    ).toBe("selfHealingMiddleware.options.model.provider");
    expect(
      field(() =>
        selfHealingMiddleware(sh, {
          model: {
            name: "m2",
            provider: "openai",
            fallbacks: [{ provider: "mistral", model: "x:y" }],
          },
        }),
      ),
    ).toBe('tool("m2").options.providers');
    expect(field(() => selfHealingMiddleware(sh, { tools: { t: { timeoutMs: -1 } } }))).toBe(
      'tool("t").options.timeoutMs',
    );
    const search = tool(() => "", { name: "s", description: "s", schema: z.object({}) });
    expect(field(() => healTool(sh, search, {} as never))).toBe("healTool(s).options.readOnly");
    expect(field(() => selfHealingMiddleware({} as never))).toBe("selfHealingMiddleware(sh)");
  });

  it("refuse one tool declared read-only in one place and a write in another", () => {
    const { sh } = setup();
    selfHealingMiddleware(sh, { tools: { search: {} } }); // a write: not in readOnly
    expect(() =>
      selfHealingMiddleware(sh, { readOnly: ["search"], tools: { search: {} } }),
    ).toThrow(/already registered on this selfheal instance as a write/);
  });
});

describe("examples/langchain.ts (against the built package, as a user runs it)", () => {
  it("prints the spans, the recovered 429, the failover and the refused write", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [builtJs("examples/langchain.ts")],
      { timeout: CHILD_HANG_MS },
    );
    expect(stdout).toContain("span agent.tool_call  tool=search_docs outcome=recovered");
    expect(stdout).toContain("diagnosis search_docs: RATE_LIMIT (rule http-429)");
    expect(stdout).toContain(
      "recovery model: retry_once -> failover_to_secondary => recovered (anthropic)",
    );
    expect(stdout).toContain(
      "recovery lookup_order: retry_once -> failover_to_secondary (skipped) -> circuit_break -> degrade_to_readonly -> escalate_to_human => escalated",
    );
    expect(stdout).toMatch(/^alert: .*lookup_order/m);
    expect(stdout).toContain("span agent.tool_call  tool=issue_refund outcome=blocked");
    expect(stdout).toContain(
      'issue_refund: error ToolMessage "selfheal: write tool \\"issue_refund\\" refused',
    );
    expect(stdout).toContain("refunds sent: 0");
  }, 150_000);
});
