/**
 * The span helpers on a recording tracer provider: the attempt-error child (name, kind, parent,
 * attributes, times, status and its redacted exception event), `error.type` of every kind of
 * thrown value, the idempotency key's hash, the GenAI span name, and a span attached to another
 * instrumentation's (writes pass through, name and end stay with the owner).
 */
import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import {
  ATTR_ERROR_MESSAGE,
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_STACKTRACE,
  ATTR_EXCEPTION_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_RECOVERY_ATTEMPT,
  ERROR_TYPE_OTHER,
  EVENT_EXCEPTION,
  GEN_AI_OPERATION_CHAT,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  SPAN_TOOL_CALL,
  SPAN_TOOL_CALL_ERROR,
  genAiSpanName,
} from "../../src/telemetry/conventions.js";
import {
  AttachedSpan,
  errorType,
  hashKey,
  recordAttemptError,
  setSpanError,
  spanTime,
} from "../../src/telemetry/spans.js";
import { recordingProvider } from "../helpers/otel.js";

const T0 = Date.UTC(2026, 0, 1, 12);
const IDENTITY = { [ATTR_GEN_AI_AGENT_NAME]: "agent-a", [ATTR_GEN_AI_TOOL_NAME]: "search" };

/** A parent span on a recording provider, and a tracer for the child. */
function withParent() {
  const otel = recordingProvider();
  const tracer = otel.provider.getTracer("test");
  const parent = tracer.startSpan(SPAN_TOOL_CALL, { startTime: spanTime(T0) });
  const ctx = trace.setSpan(context.active(), parent);
  return { otel, tracer, parent, ctx };
}

/** An Error with a stack of our choosing. */
function errorWithStack(stack: unknown): Error {
  const e = new Error("boom");
  Object.defineProperty(e, "stack", { value: stack, configurable: true });
  return e;
}

describe("recordAttemptError: one child span per failed attempt", () => {
  it("is a child of the call span, named, timed at the failure, with identity, error and attempt", () => {
    const { otel, tracer, parent, ctx } = withParent();
    const stack = "Error: boom\n    at call (/app/tool.js:1:1)";
    recordAttemptError(
      tracer,
      ctx,
      T0 + 1_250.5,
      errorWithStack(stack),
      "TypeError",
      "bad input",
      2,
      100,
      IDENTITY,
    );
    parent.end(spanTime(T0 + 2_000));
    const [span] = otel.named(SPAN_TOOL_CALL_ERROR);
    expect(otel.named(SPAN_TOOL_CALL_ERROR)).toHaveLength(1);
    if (!span) throw new Error("no span");
    expect(span.kind).toBe(SpanKind.INTERNAL);
    expect(span.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(span.spanContext().traceId).toBe(parent.spanContext().traceId);
    expect(span.attributes).toStrictEqual({
      ...IDENTITY,
      [ATTR_ERROR_TYPE]: "TypeError",
      [ATTR_ERROR_MESSAGE]: "bad input",
      [ATTR_RECOVERY_ATTEMPT]: 2,
    });
    expect(span.startTime).toEqual(spanTime(T0 + 1_250.5));
    expect(span.endTime).toEqual(spanTime(T0 + 1_250.5));
    expect(span.ended).toBe(true);
    expect(span.status).toStrictEqual({ code: SpanStatusCode.ERROR, message: "bad input" });
    expect(span.events).toHaveLength(1);
    const [event] = span.events;
    expect(event?.name).toBe(EVENT_EXCEPTION);
    expect(event?.time).toEqual(spanTime(T0 + 1_250.5));
    expect(event?.attributes).toStrictEqual({
      [ATTR_EXCEPTION_TYPE]: "TypeError",
      [ATTR_EXCEPTION_MESSAGE]: "bad input",
      [ATTR_EXCEPTION_STACKTRACE]: stack,
    });
  });

  it("redacts the stack and cuts it at four times the text limit", () => {
    const { otel, tracer, ctx } = withParent();
    const frames = Array.from({ length: 8 }, (_, i) => `    at f${i} (/app/f.js:${i}:1)`);
    const stack = ["Error: password=hunter22", ...frames].join("\n");
    expect(stack.length).toBeGreaterThan(100);
    expect(stack.length).toBeLessThan(400);
    recordAttemptError(tracer, ctx, T0, errorWithStack(stack), "Error", "m", 1, 100, IDENTITY);
    const long = `Error: x\n${"    at g (/app/g.js:1:1)\n".repeat(40)}`;
    recordAttemptError(tracer, ctx, T0, errorWithStack(long), "Error", "m", 2, 100, IDENTITY);
    const [first, second] = otel.named(SPAN_TOOL_CALL_ERROR);
    const traceOf = (s: typeof first) => s?.events[0]?.attributes?.[ATTR_EXCEPTION_STACKTRACE];
    // Under 4 x 100: whole, with the secret gone.
    expect(traceOf(first)).toBe(stack.replace("hunter22", "[REDACTED]"));
    // Over 4 x 100: cut to 400 characters, the ellipsis last.
    const cut = traceOf(second);
    expect(typeof cut).toBe("string");
    expect(String(cut)).toHaveLength(400);
    expect(String(cut).endsWith("…")).toBe(true);
    expect(String(cut).startsWith(long.slice(0, 300))).toBe(true);
  });

  it.each<[string, () => unknown]>([
    ["a string thrown", () => "plain failure"],
    ["a plain object with a stack", () => ({ stack: "Error: fake\n    at x (/a.js:1:1)" })],
    ["an Error whose stack is empty", () => errorWithStack("")],
    ["an Error whose stack is not a string", () => errorWithStack(42)],
    [
      "an Error whose stack getter throws",
      () => {
        const e = new Error("boom");
        Object.defineProperty(e, "stack", {
          get() {
            throw new Error("trap");
          },
        });
        return e;
      },
    ],
  ])("%s: the exception event carries no stack", (_name, make) => {
    const { otel, tracer, ctx } = withParent();
    expect(() => {
      recordAttemptError(tracer, ctx, T0, make(), ERROR_TYPE_OTHER, "m", 1, 100, IDENTITY);
    }).not.toThrow();
    const [span] = otel.named(SPAN_TOOL_CALL_ERROR);
    expect(span?.events.map((e) => e.attributes)).toStrictEqual([
      { [ATTR_EXCEPTION_TYPE]: ERROR_TYPE_OTHER, [ATTR_EXCEPTION_MESSAGE]: "m" },
    ]);
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("a span that does not record is spared the event, but still ended with an error status", () => {
    const calls: string[] = [];
    const span = {
      isRecording: () => false,
      addEvent: () => calls.push("addEvent"),
      setStatus: (s: { code: SpanStatusCode; message?: string }) =>
        calls.push(`status ${s.code} ${s.message ?? ""}`),
      end: () => calls.push("end"),
    } as unknown as Span;
    const tracer = { startSpan: () => span } as unknown as Tracer;
    const error = errorWithStack("Error: boom\n    at x (/a.js:1:1)");
    recordAttemptError(tracer, ROOT_CONTEXT, T0, error, "Error", "m", 1, 100, IDENTITY);
    expect(calls).toEqual([`status ${SpanStatusCode.ERROR} m`, "end"]);
  });
});

describe("setSpanError", () => {
  it("sets the error type and an error status with the message", () => {
    const otel = recordingProvider();
    const span = otel.provider.getTracer("test").startSpan(SPAN_TOOL_CALL);
    setSpanError(span, "TimeoutError", "took too long");
    span.end();
    const [done] = otel.spans();
    expect(done?.attributes).toStrictEqual({ [ATTR_ERROR_TYPE]: "TimeoutError" });
    expect(done?.status).toStrictEqual({ code: SpanStatusCode.ERROR, message: "took too long" });
  });
});

describe("errorType: a low-cardinality class name", () => {
  class QuotaError extends Error {}
  /** An Error with an empty name, its `constructor` property as `constructor` describes. */
  const nameless = (constructor: PropertyDescriptor) => {
    const e = new Error("x");
    Object.defineProperty(e, "name", { value: "" });
    return Object.defineProperty(e, "constructor", constructor);
  };

  it.each<[string, () => unknown, string]>([
    ["an Error's name", () => new TypeError("x"), "TypeError"],
    ["a subclass without its own name: Error's name", () => new QuotaError("x"), "Error"],
    [
      "a name set on the instance wins over the class",
      () => Object.assign(new QuotaError("x"), { name: "Custom" }),
      "Custom",
    ],
    [
      "an empty name: the constructor's name",
      () => Object.assign(new QuotaError("x"), { name: "" }),
      "QuotaError",
    ],
    [
      "a non-string name: the constructor's name",
      () => Object.assign(new QuotaError("x"), { name: 42 }),
      "QuotaError",
    ],
    ["a plain object's string name", () => ({ name: "HttpFailure" }), "HttpFailure"],
    ["a plain object's empty name", () => ({ name: "" }), ERROR_TYPE_OTHER],
    ["a plain object's non-string name", () => ({ name: 42 }), ERROR_TYPE_OTHER],
    ["a plain object without a name", () => ({ code: "E" }), ERROR_TYPE_OTHER],
    ["a string", () => "failure", ERROR_TYPE_OTHER],
    ["a number", () => 7, ERROR_TYPE_OTHER],
    ["null", () => null, ERROR_TYPE_OTHER],
    ["undefined", () => undefined, ERROR_TYPE_OTHER],
    ["a named function", () => function namedFailure() {}, ERROR_TYPE_OTHER],
    [
      "a class",
      () =>
        class FailureClass {
          readonly code = "E";
        },
      ERROR_TYPE_OTHER,
    ],
    [
      "an Error with no name whose constructor has an empty name",
      () => {
        const ctor = function () {};
        Object.defineProperty(ctor, "name", { value: "" });
        return nameless({ value: ctor });
      },
      ERROR_TYPE_OTHER,
    ],
    [
      "an Error with no name whose constructor is not a function",
      () => nameless({ value: { name: "Fake" } }),
      ERROR_TYPE_OTHER,
    ],
    [
      "an Error with no name whose constructor getter throws",
      () =>
        nameless({
          get() {
            throw new Error("trap");
          },
        }),
      ERROR_TYPE_OTHER,
    ],
    [
      "a name over 64 characters is cut, and kept on one line",
      () => Object.assign(new Error("x"), { name: `Bad\nName${"X".repeat(100)}` }),
      `Bad\\nName${"X".repeat(56)}`,
    ],
  ])("%s", (_name, make, expected) => {
    expect(errorType(make())).toBe(expected);
  });
});

describe("hashKey: a stable stand-in for an idempotency key", () => {
  it("is the first 16 hex digits of the key's SHA-256", () => {
    // SHA-256("abc"), the FIPS 180-2 test vector: ba7816bf8f01cfea414140de5dae2223...
    expect(hashKey("abc")).toBe("ba7816bf8f01cfea");
    expect(hashKey("order-42:user@example.com")).toMatch(/^[0-9a-f]{16}$/);
    expect(hashKey("order-42")).toBe(hashKey("order-42"));
    expect(hashKey("order-42")).not.toBe(hashKey("order-43"));
  });
});

describe("genAiSpanName", () => {
  it("is the operation, a space, and the target", () => {
    expect(genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, "search_docs")).toBe(
      `${GEN_AI_OPERATION_EXECUTE_TOOL} search_docs`,
    );
    expect(genAiSpanName(GEN_AI_OPERATION_CHAT, "gpt-4o").split(" ")).toEqual([
      GEN_AI_OPERATION_CHAT,
      "gpt-4o",
    ]);
  });
});

describe("AttachedSpan: writes on another instrumentation's span", () => {
  it("passes every write through, keeps the owner's name and leaves the end to it", () => {
    const otel = recordingProvider();
    const tracer = otel.provider.getTracer("test");
    const linked = tracer.startSpan("linked");
    linked.end();
    const owner = tracer.startSpan("owner", { startTime: spanTime(T0) });
    const attached = new AttachedSpan(owner);
    expect(attached.spanContext()).toStrictEqual(owner.spanContext());
    expect(attached.isRecording()).toBe(true);
    const link = { context: linked.spanContext(), attributes: { n: 1 } };
    expect(attached.setAttribute("a", 1)).toBe(attached);
    expect(attached.setAttributes({ b: "two", c: true })).toBe(attached);
    expect(attached.addEvent("first", { e: 1 }, spanTime(T0 + 1))).toBe(attached);
    expect(attached.addEvent("second", spanTime(T0 + 2))).toBe(attached);
    expect(attached.addLink(link)).toBe(attached);
    expect(attached.addLinks([link, link])).toBe(attached);
    expect(attached.setStatus({ code: SpanStatusCode.ERROR, message: "bad" })).toBe(attached);
    expect(attached.updateName()).toBe(attached);
    const err = new RangeError("out of range");
    attached.recordException(err, spanTime(T0 + 3));
    attached.end();
    // Not ended by the attached view.
    expect(otel.named("owner")).toEqual([]);
    expect(owner.isRecording()).toBe(true);
    owner.end(spanTime(T0 + 10));
    expect(attached.isRecording()).toBe(false);
    const [done] = otel.named("owner");
    if (!done) throw new Error("owner span not finished");
    expect(done.name).toBe("owner");
    expect(done.attributes).toStrictEqual({ a: 1, b: "two", c: true });
    expect(done.events.map((e) => [e.name, e.attributes, e.time])).toEqual([
      ["first", { e: 1 }, spanTime(T0 + 1)],
      ["second", {}, spanTime(T0 + 2)],
      [
        EVENT_EXCEPTION,
        expect.objectContaining({
          [ATTR_EXCEPTION_TYPE]: "RangeError",
          [ATTR_EXCEPTION_MESSAGE]: "out of range",
        }),
        spanTime(T0 + 3),
      ],
    ]);
    expect(done.links).toHaveLength(3);
    expect(done.links.every((l) => l.context.spanId === linked.spanContext().spanId)).toBe(true);
    expect(done.status).toStrictEqual({ code: SpanStatusCode.ERROR, message: "bad" });
    expect(done.endTime).toEqual(spanTime(T0 + 10));
  });
});
