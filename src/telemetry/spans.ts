import { createHash } from "node:crypto";
import {
  SpanKind,
  SpanStatusCode,
  type Attributes,
  type Context,
  type Span,
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
import { redact } from "./redact.js";

/** Low-cardinality `error.type`: the error's class name, or `_OTHER` for non-Error throws. */
export function errorType(error: unknown): string {
  if (error instanceof Error) return error.name || error.constructor.name || ERROR_TYPE_OTHER;
  if (typeof error === "object" && error !== null) {
    const name = (error as { name?: unknown }).name;
    if (typeof name === "string" && name !== "") return name.slice(0, 64);
  }
  return ERROR_TYPE_OTHER;
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
  error: unknown,
  type: string,
  message: string,
  attempt: number,
  maxLength: number,
): void {
  const span = tracer.startSpan(
    SPAN_TOOL_CALL_ERROR,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        [ATTR_ERROR_TYPE]: type,
        [ATTR_ERROR_MESSAGE]: message,
        [ATTR_RECOVERY_ATTEMPT]: attempt,
      },
    },
    parent,
  );
  if (span.isRecording()) {
    const event: Attributes = { [ATTR_EXCEPTION_TYPE]: type, [ATTR_EXCEPTION_MESSAGE]: message };
    const stack = error instanceof Error ? error.stack : undefined;
    if (stack) event[ATTR_EXCEPTION_STACKTRACE] = redact(stack, maxLength * 4);
    span.addEvent(EVENT_EXCEPTION, event);
  }
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}
