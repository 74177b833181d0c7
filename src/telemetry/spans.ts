import { createHash } from "node:crypto";
import {
  SpanKind,
  SpanStatusCode,
  type AttributeValue,
  type Attributes,
  type Context,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from "@opentelemetry/api";
import {
  ATTR_ERROR_MESSAGE,
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_STACKTRACE,
  ATTR_EXCEPTION_TYPE,
  ATTR_RECOVERY_ATTEMPT,
  ERROR_TYPE_OTHER,
  EVENT_EXCEPTION,
  SPAN_TOOL_CALL_ERROR,
} from "./conventions.js";
import { isError, oneLine, redact } from "./redact.js";

/** Longest `error.type` written: a class name, not a place for text. */
const MAX_TYPE_LENGTH = 64;

/** A property read that a hostile getter or a Proxy trap cannot turn into a throw. */
function readString(value: object, key: string): string | undefined {
  try {
    const v = (value as Record<string, unknown>)[key];
    return typeof v === "string" && v !== "" ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Low-cardinality `error.type`: the error's class name, or `_OTHER` for non-Error throws. Never
 * throws (hostile getters, Proxies), and the name is cut and kept on one line.
 */
export function errorType(error: unknown): string {
  if (typeof error !== "object" || error === null) return ERROR_TYPE_OTHER;
  let name = readString(error, "name");
  if (name === undefined && isError(error)) {
    try {
      const ctor = (error as { constructor?: unknown }).constructor;
      if (typeof ctor === "function" && ctor.name !== "") name = ctor.name;
    } catch {
      // a hostile constructor getter: no name
    }
  }
  if (name === undefined) return ERROR_TYPE_OTHER;
  return oneLine(name.slice(0, MAX_TYPE_LENGTH));
}

/** An Error's stack, when it has a readable one. */
function stackOf(error: unknown): string | undefined {
  if (!isError(error)) return undefined;
  try {
    const stack = error.stack;
    return typeof stack === "string" && stack !== "" ? stack : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A time of the engine's clock (epoch ms, with a fraction) as a span timestamp. selfheal's spans
 * are timed by the clock the call is measured with, as the watchdog's are: a span lasts the
 * duration the health signals and metrics record, a virtual clock (tests, the simulator) dates
 * spans in its own time like every other record, and the SDK reads no clock of its own for the
 * start or the end (each read and conversion measured ~50-100 ns a call).
 */
export function spanTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  // Rounding may carry a whole second: keep nanoseconds below 1e9.
  const nanos = Math.round((ms - seconds * 1000) * 1e6);
  return nanos >= 1e9 ? [seconds + 1, nanos - 1e9] : [seconds, nanos];
}

/** A stable, non-reversible stand-in for an idempotency key on a span (it may embed user data). */
export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/** Marks `span` failed with a redacted message. */
export function setSpanError(span: Span, type: string, message: string): void {
  span.setAttribute(ATTR_ERROR_TYPE, type);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * One `agent.tool_call.error` child per failed attempt: status ERROR and an `exception` event
 * whose message and stack are redacted (never `recordException` on the raw error, which would
 * copy secrets from the message verbatim).
 */
export function recordAttemptError(
  tracer: Tracer,
  parent: Context,
  /** Engine clock time of the failure. */
  at: number,
  error: unknown,
  type: string,
  message: string,
  attempt: number,
  maxLength: number,
  /** The agent and tool the span is of (`ToolRuntime.identity`: selfheal's names, not GenAI's). */
  identity: Attributes,
): void {
  const time = spanTime(at);
  const span = tracer.startSpan(
    SPAN_TOOL_CALL_ERROR,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        ...identity,
        [ATTR_ERROR_TYPE]: type,
        [ATTR_ERROR_MESSAGE]: message,
        [ATTR_RECOVERY_ATTEMPT]: attempt,
      },
      startTime: time,
    },
    parent,
  );
  if (span.isRecording()) {
    const event: Attributes = { [ATTR_EXCEPTION_TYPE]: type, [ATTR_EXCEPTION_MESSAGE]: message };
    const stack = stackOf(error);
    if (stack !== undefined) event[ATTR_EXCEPTION_STACKTRACE] = redact(stack, maxLength * 4);
    span.addEvent(EVENT_EXCEPTION, event, time);
  }
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end(time);
}

/**
 * Another instrumentation's span that a call writes on (tool option `span: "attach"`): every
 * write passes through, but the span's name and its end stay with its owner.
 */
export class AttachedSpan implements Span {
  constructor(private readonly owner: Span) {}

  spanContext(): SpanContext {
    return this.owner.spanContext();
  }

  setAttribute(key: string, value: AttributeValue): this {
    this.owner.setAttribute(key, value);
    return this;
  }

  setAttributes(attributes: Attributes): this {
    this.owner.setAttributes(attributes);
    return this;
  }

  addEvent(name: string, attributes?: Attributes | TimeInput, time?: TimeInput): this {
    this.owner.addEvent(name, attributes, time);
    return this;
  }

  addLink(link: Link): this {
    this.owner.addLink(link);
    return this;
  }

  addLinks(links: Link[]): this {
    this.owner.addLinks(links);
    return this;
  }

  setStatus(status: SpanStatus): this {
    this.owner.setStatus(status);
    return this;
  }

  updateName(): this {
    return this;
  }

  end(): void {
    // The owner ends its span when its own work is done.
  }

  isRecording(): boolean {
    return this.owner.isRecording();
  }

  recordException(exception: Exception, time?: TimeInput): void {
    this.owner.recordException(exception, time);
  }
}
