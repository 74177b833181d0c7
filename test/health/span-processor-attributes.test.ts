import { SpanStatusCode, type Attributes } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { HealthSpanProcessor, type FinishedSpan } from "../../src/health/span-processor.js";
import type { CallRecord, SignalStore } from "../../src/health/store.js";
import {
  AI_SDK_MODEL_CALL_SPANS,
  AI_SDK_SPAN_TOOL_CALL,
  ATTR_AI_MODEL_ID,
  ATTR_AI_OPERATION_ID,
  ATTR_AI_TOOL_CALL_NAME,
  ATTR_AI_USAGE_COMPLETION_TOKENS,
  ATTR_AI_USAGE_OUTPUT_TOKENS,
  ATTR_CALL_OUTCOME,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_LLM_OPERATIONS,
  GEN_AI_OPERATION_CHAT,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  INSTRUMENTATION_SCOPE,
  SPAN_TOOL_CALL,
  genAiSpanName,
} from "../../src/telemetry/conventions.js";
import { VirtualClock } from "../../src/testing/index.js";

const T0 = Date.UTC(2026, 0, 1);
/** The parents of selfheal's call spans the processor remembers (and calls in flight). */
const REMEMBERED = 1024;

/** A processor over a store that keeps every record; `fail` makes recording throw. */
function setup(options: { onRecord?: boolean } = {}) {
  const records: (CallRecord & { at: number })[] = [];
  const warnings: string[] = [];
  const state = { fail: undefined as Error | undefined, told: 0 };
  const store: SignalStore = {
    recordCall: (record, now) => {
      if (state.fail) throw state.fail;
      records.push({ ...record, at: now });
    },
    recordTask: () => undefined,
    read: () => {
      throw new Error("not read here");
    },
  };
  const p = new HealthSpanProcessor({
    store,
    clock: new VirtualClock(T0),
    defaultAgent: "fallback-agent",
    logger: { warn: (m) => warnings.push(m) },
    ...(options.onRecord === false
      ? {}
      : {
          onRecord: () => {
            state.told++;
          },
        }),
  });
  return { p, records, warnings, state };
}

interface SpanSpec {
  name?: string;
  attributes?: Attributes;
  error?: boolean;
  duration?: [number, number];
  id?: string;
  parent?: string;
}

function span(spec: SpanSpec): FinishedSpan {
  const { id, parent } = spec;
  return {
    name: spec.name ?? "span",
    attributes: spec.attributes ?? {},
    status: { code: spec.error ? SpanStatusCode.ERROR : SpanStatusCode.UNSET },
    duration: spec.duration ?? [0, 5_000_000],
    ...(id !== undefined && { spanContext: () => ({ spanId: id }) }),
    ...(parent !== undefined && { parentSpanContext: { spanId: parent } }),
  };
}

const tool = (name: unknown, extra: Attributes = {}): Attributes => ({
  [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
  ...(name !== undefined && { [ATTR_GEN_AI_TOOL_NAME]: name as string }),
  ...extra,
});

const chat = (extra: Attributes = {}): Attributes => ({
  [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_CHAT,
  ...extra,
});

/** A selfheal call span's end: it carries the call's outcome. */
const ownCall = (spec: SpanSpec = {}) =>
  span({ name: SPAN_TOOL_CALL, attributes: { [ATTR_CALL_OUTCOME]: "success" }, ...spec });

describe("HealthSpanProcessor: what a foreign span records", () => {
  it("a GenAI tool span: counted under its tool name, else the span's name; never an LLM call", () => {
    const { p, records } = setup();
    p.onEnd(
      span({
        name: genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "a"),
        attributes: tool("weather"),
      }),
    );
    p.onEnd(
      span({
        name: genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "b"),
        attributes: tool(undefined),
      }),
    );
    p.onEnd(
      span({ name: genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "c"), attributes: tool("") }),
    );
    p.onEnd(
      span({ name: genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "d"), attributes: tool(42) }),
    );
    p.onEnd(
      span({
        name: genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "e"),
        attributes: tool("weather", { [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 0 }),
      }),
    );
    expect(records.map((r) => r.tool)).toEqual([
      "weather",
      genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "b"),
      genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "c"),
      genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "d"),
      "weather",
    ]);
    expect(records.map((r) => r.empty)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(records[0]).toStrictEqual({
      agent: "fallback-agent",
      tool: "weather",
      outcome: "success",
      durationMs: 5,
      empty: undefined,
      at: T0,
    });
  });

  it("a GenAI model span: counted under its request model, else the span's name", () => {
    const { p, records } = setup();
    for (const operation of GEN_AI_LLM_OPERATIONS) {
      p.onEnd(
        span({
          name: genAiSpanName(operation, "m"),
          attributes: {
            [ATTR_GEN_AI_OPERATION_NAME]: operation,
            [ATTR_GEN_AI_REQUEST_MODEL]: "m1",
          },
        }),
      );
    }
    p.onEnd(
      span({
        name: genAiSpanName(GEN_AI_OPERATION_CHAT, "x"),
        attributes: chat({ [ATTR_GEN_AI_REQUEST_MODEL]: "" }),
      }),
    );
    p.onEnd(span({ name: genAiSpanName(GEN_AI_OPERATION_CHAT, "y"), attributes: chat() }));
    expect(records.map((r) => r.tool)).toEqual([
      ...GEN_AI_LLM_OPERATIONS.map(() => "m1"),
      genAiSpanName(GEN_AI_OPERATION_CHAT, "x"),
      genAiSpanName(GEN_AI_OPERATION_CHAT, "y"),
    ]);
  });

  it("empty answers: zero output tokens of a model call that succeeded, and nothing else", () => {
    const { p, records } = setup();
    const tokens = (value: unknown) => ({ [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: value as number });
    p.onEnd(span({ attributes: chat(tokens(0)) }));
    p.onEnd(span({ attributes: chat(tokens(7)) }));
    p.onEnd(span({ attributes: chat() }));
    p.onEnd(span({ attributes: chat(tokens("0")) }));
    p.onEnd(span({ attributes: chat(tokens(0)), error: true }));
    p.onEnd(span({ attributes: chat({ ...tokens(0), [ATTR_ERROR_TYPE]: "TimeoutError" }) }));
    expect(records.map((r) => [r.outcome, r.empty])).toEqual([
      ["success", true],
      ["success", false],
      ["success", undefined],
      ["success", undefined],
      ["error", undefined],
      ["error", undefined],
    ]);
  });

  it("failed: an ERROR status or a non-empty error.type; an empty error.type is not a failure", () => {
    const { p, records } = setup();
    p.onEnd(span({ attributes: tool("t"), error: true }));
    p.onEnd(span({ attributes: tool("t", { [ATTR_ERROR_TYPE]: "Boom" }) }));
    p.onEnd(span({ attributes: tool("t", { [ATTR_ERROR_TYPE]: "" }) }));
    p.onEnd(span({ attributes: tool("t") }));
    expect(records.map((r) => r.outcome)).toEqual(["error", "error", "success", "success"]);
  });

  it("the agent: gen_ai.agent.name when a non-empty string, else the default", () => {
    const { p, records } = setup();
    p.onEnd(span({ attributes: tool("t", { [ATTR_GEN_AI_AGENT_NAME]: "planner" }) }));
    p.onEnd(span({ attributes: tool("t", { [ATTR_GEN_AI_AGENT_NAME]: "" }) }));
    p.onEnd(span({ attributes: tool("t", { [ATTR_GEN_AI_AGENT_NAME]: 7 }) }));
    p.onEnd(span({ attributes: tool("t") }));
    expect(records.map((r) => r.agent)).toEqual([
      "planner",
      "fallback-agent",
      "fallback-agent",
      "fallback-agent",
    ]);
  });

  it("the duration in ms, from the span's seconds and nanoseconds", () => {
    const { p, records } = setup();
    p.onEnd(span({ attributes: tool("t"), duration: [2, 250_000_000] }));
    p.onEnd(span({ attributes: tool("t"), duration: [0, 1_500_000] }));
    p.onEnd(span({ attributes: tool("t"), duration: [3, 0] }));
    expect(records.map((r) => r.durationMs)).toEqual([2_250, 1.5, 3_000]);
  });

  it("spans that are not calls are ignored: other operations, other spans, selfheal's own", () => {
    const { p, records, state } = setup();
    p.onEnd(span({ name: "embed m", attributes: { [ATTR_GEN_AI_OPERATION_NAME]: "no-op" } }));
    p.onEnd(span({ name: "x", attributes: { [ATTR_GEN_AI_OPERATION_NAME]: 3 } }));
    p.onEnd(span({ name: "GET /health" }));
    p.onEnd(span({ name: "outer run", attributes: { [ATTR_AI_OPERATION_ID]: "outer" } }));
    p.onEnd(ownCall({ attributes: { ...tool("t"), [ATTR_CALL_OUTCOME]: "error" } }));
    expect(records).toEqual([]);
    expect(state.told).toBe(0);
  });
});

describe("HealthSpanProcessor: the AI SDK's own spans", () => {
  it("a tool call is read from ai.operationId, or from the span's name without it", () => {
    const { p, records } = setup();
    p.onEnd(
      span({
        name: "custom name",
        attributes: {
          [ATTR_AI_OPERATION_ID]: AI_SDK_SPAN_TOOL_CALL,
          [ATTR_AI_TOOL_CALL_NAME]: "a",
        },
      }),
    );
    p.onEnd(span({ name: AI_SDK_SPAN_TOOL_CALL, attributes: { [ATTR_AI_TOOL_CALL_NAME]: "b" } }));
    p.onEnd(span({ name: AI_SDK_SPAN_TOOL_CALL, attributes: { [ATTR_AI_OPERATION_ID]: "" } }));
    // The attribute wins over the span's name.
    p.onEnd(
      span({
        name: AI_SDK_SPAN_TOOL_CALL,
        attributes: { [ATTR_AI_OPERATION_ID]: "something else", [ATTR_AI_TOOL_CALL_NAME]: "c" },
      }),
    );
    expect(records.map((r) => [r.tool, r.empty])).toEqual([
      ["a", undefined],
      ["b", undefined],
      [AI_SDK_SPAN_TOOL_CALL, undefined],
    ]);
  });

  it("a model call: under ai.model.id, else the span's name; output tokens by precedence", () => {
    const { p, records } = setup();
    const [doGenerate = "", doStream = ""] = AI_SDK_MODEL_CALL_SPANS;
    p.onEnd(
      span({
        name: doGenerate,
        attributes: {
          [ATTR_AI_MODEL_ID]: "gpt-x",
          [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 3,
          [ATTR_AI_USAGE_OUTPUT_TOKENS]: 0,
        },
      }),
    );
    p.onEnd(
      span({
        name: doStream,
        attributes: { [ATTR_AI_USAGE_OUTPUT_TOKENS]: 0, [ATTR_AI_USAGE_COMPLETION_TOKENS]: 4 },
      }),
    );
    p.onEnd(
      span({
        name: "other",
        attributes: {
          [ATTR_AI_OPERATION_ID]: doGenerate,
          [ATTR_AI_MODEL_ID]: "",
          [ATTR_AI_USAGE_COMPLETION_TOKENS]: 0,
        },
      }),
    );
    expect(records.map((r) => [r.tool, r.empty])).toEqual([
      ["gpt-x", false],
      [doStream, true],
      ["other", true],
    ]);
  });
});

describe("HealthSpanProcessor: onRecord, a failing store, flush", () => {
  it("tells onRecord once per record, and works without one", () => {
    const told = setup();
    told.p.onEnd(span({ attributes: tool("t") }));
    told.p.onEnd(span({ name: "GET /" }));
    told.p.onEnd(span({ attributes: chat() }));
    expect(told.state.told).toBe(2);

    const silent = setup({ onRecord: false });
    silent.p.onEnd(span({ attributes: tool("t") }));
    expect(silent.records).toHaveLength(1);
    expect(silent.warnings).toEqual([]);
  });

  it("a store that throws: a warning naming the failure, nothing told, no throw", () => {
    const { p, warnings, state } = setup();
    state.fail = new Error("disk full");
    expect(() => {
      p.onEnd(span({ attributes: tool("t") }));
    }).not.toThrow();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^selfheal: signal store failed to record a span: .*disk full/);
    expect(state.told).toBe(0);
  });

  it("forceFlush and shutdown resolve", async () => {
    const { p } = setup();
    const flushed = p.forceFlush();
    const shut = p.shutdown();
    expect(flushed).toBeInstanceOf(Promise);
    expect(shut).toBeInstanceOf(Promise);
    await expect(flushed).resolves.toBeUndefined();
    await expect(shut).resolves.toBeUndefined();
  });
});

describe("HealthSpanProcessor: spans a selfheal call counts already", () => {
  const own = { name: SPAN_TOOL_CALL, instrumentationScope: { name: INSTRUMENTATION_SCOPE } };
  const child = (parent: string) => span({ attributes: chat(), parent });

  it("a span under a selfheal call in flight is skipped; once that call ended, counted", () => {
    const { p, records } = setup();
    p.onStart({ ...own, spanContext: () => ({ spanId: "c1" }) });
    p.onEnd(child("c1"));
    expect(records).toHaveLength(0);
    p.onEnd(child("other"));
    expect(records).toHaveLength(1);
    p.onEnd(ownCall({ id: "c1" }));
    p.onEnd(child("c1"));
    expect(records).toHaveLength(2);
  });

  it("only selfheal's call spans are remembered at start: not another scope's, nor another name", () => {
    const { p, records } = setup();
    p.onStart({ name: SPAN_TOOL_CALL, spanContext: () => ({ spanId: "no-scope" }) });
    p.onStart({
      name: SPAN_TOOL_CALL,
      instrumentationScope: { name: "ai" },
      spanContext: () => ({ spanId: "other-scope" }),
    });
    p.onStart({
      name: "model call",
      instrumentationScope: { name: INSTRUMENTATION_SCOPE },
      spanContext: () => ({ spanId: "other-name" }),
    });
    p.onStart({});
    p.onStart(own); // no span context: nothing to remember
    for (const parent of ["no-scope", "other-scope", "other-name"]) p.onEnd(child(parent));
    expect(records).toHaveLength(3);
  });

  it("a selfheal call span without a span context ends quietly, its parent remembered", () => {
    const { p, records } = setup();
    expect(() => {
      p.onEnd(ownCall({ parent: "framework-span" }));
    }).not.toThrow();
    expect(() => {
      p.onEnd(ownCall());
    }).not.toThrow();
    // The framework's span around the call is counted through it: skipped once.
    p.onEnd(span({ attributes: tool("t"), id: "framework-span" }));
    expect(records).toHaveLength(0);
    p.onEnd(span({ attributes: tool("t"), id: "framework-span" }));
    expect(records).toHaveLength(1);
  });

  it(`calls in flight: ${REMEMBERED} are remembered; one more starts the set afresh`, () => {
    const { p, records } = setup();
    p.onStart(own); // no span context: takes no place
    for (let i = 0; i < REMEMBERED; i++) {
      p.onStart({ ...own, spanContext: () => ({ spanId: `c${i}` }) });
    }
    p.onEnd(child("c0"));
    p.onEnd(child(`c${REMEMBERED - 1}`));
    expect(records).toHaveLength(0);
    p.onStart({ ...own, spanContext: () => ({ spanId: `c${REMEMBERED}` }) });
    p.onEnd(child(`c${REMEMBERED}`));
    expect(records).toHaveLength(0);
    // The ends of the older ones were missed, as far as the processor can tell.
    p.onEnd(child("c0"));
    p.onEnd(child(`c${REMEMBERED - 1}`));
    expect(records).toHaveLength(2);
  });

  it(`parents of ended calls: the last ${REMEMBERED} are remembered, the oldest goes first`, () => {
    const { p, records } = setup();
    for (let i = 0; i <= REMEMBERED; i++) p.onEnd(ownCall({ id: `own${i}`, parent: `p${i}` }));
    const framework = (id: string) => span({ attributes: tool("t"), id });
    p.onEnd(framework("p0")); // forgotten: counted
    expect(records).toHaveLength(1);
    p.onEnd(framework("p1"));
    p.onEnd(framework(`p${REMEMBERED}`));
    expect(records).toHaveLength(1);
  });

  it("a call span without a parent takes no place among the remembered parents", () => {
    const { p, records } = setup();
    for (let i = 0; i < REMEMBERED; i++) p.onEnd(ownCall({ id: `own${i}`, parent: `p${i}` }));
    p.onEnd(ownCall({ id: "orphan" }));
    p.onEnd(span({ attributes: tool("t"), id: "p0" }));
    expect(records).toHaveLength(0);
  });

  it("two parents remembered: both skipped", () => {
    const { p, records } = setup();
    p.onEnd(ownCall({ id: "o1", parent: "a" }));
    p.onEnd(ownCall({ id: "o2", parent: "b" }));
    p.onEnd(span({ attributes: tool("t"), id: "a" }));
    p.onEnd(span({ attributes: tool("t"), id: "b" }));
    expect(records).toHaveLength(0);
  });
});
