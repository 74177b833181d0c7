import {
  INVALID_SPAN_CONTEXT,
  SpanKind,
  context,
  trace,
  type Context,
  type Span,
} from "@opentelemetry/api";
import { spreadWait } from "../recovery/backoff.js";
import { CircuitOpenError } from "../errors.js";
import type { HealthReport } from "../health/evaluator.js";
import {
  ATTR_CALL_TIMEOUT_MS,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_TASK_ID,
  SPAN_TOOL_CALL,
} from "../telemetry/conventions.js";
import { boundedJson, redact } from "../telemetry/redact.js";
import { AttachedSpan, spanTime } from "../telemetry/spans.js";
import {
  dependencyOf,
  MIN_ATTEMPT_MS,
  type CallState,
  type Engine,
  type Routed,
  type ToolRuntime,
} from "./engine.js";
import { endCall } from "./finish.js";
import { modeOf, refuseWrite } from "./guard.js";
import { deadlineOf, type CallOptions } from "./options.js";

/** How often a call waiting for a closed route looks again, ms. */
const ROUTE_POLL_MS = 1_000;

/**
 * Opens a call: its span (with the health it was admitted under), its mode and deadline. A write
 * the agent's health refuses is ended as `blocked` and its refusal thrown.
 */
export function openCall<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  call: CallOptions,
  started: number,
  report: HealthReport,
): CallState {
  const { options } = engine;
  const taskId = engine.tasks.getStore()?.id;
  const parent = context.active();
  const attached = tool.options.span === "attach" ? attachTo(parent) : undefined;
  let span: Span;
  if (attached) {
    span = attached;
    span.setAttributes(tool.attributes[report.status]);
  } else {
    span = engine.tracer.startSpan(
      SPAN_TOOL_CALL,
      {
        kind: SpanKind.INTERNAL,
        attributes: tool.attributes[report.status],
        startTime: spanTime(started),
      },
      parent,
    );
  }
  if (call.attributes !== undefined) span.setAttributes(call.attributes);
  if (taskId !== undefined) span.setAttribute(ATTR_TASK_ID, taskId);
  if (call.toolCallId !== undefined) span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ID, call.toolCallId);
  if (options.recordArguments) {
    span.setAttribute(
      ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
      redact(boundedJson(args) ?? "", options.maxErrorLength),
    );
  }
  const timeoutMs = call.timeoutMs ?? tool.options.timeoutMs;
  if (timeoutMs !== undefined) span.setAttribute(ATTR_CALL_TIMEOUT_MS, timeoutMs);
  const deadlineMs =
    call.deadlineMs === undefined && call.timeoutMs === undefined
      ? tool.deadlineMs
      : deadlineOf(
          call.deadlineMs,
          tool.options.deadlineMs,
          options.recovery.deadlineMs,
          timeoutMs,
        );
  const degraded = engine.degraded(report);
  // A span with no context of its own (nothing records, no parent) adds nothing to pass on:
  // building a context for it measured ~110 ns a call. An attached span is already active.
  const enter = !attached && span.spanContext() !== INVALID_SPAN_CONTEXT;
  const c: CallState = {
    span,
    started,
    taskId,
    context: enter ? trace.setSpan(parent, span) : parent,
    enter,
    mode: modeOf(report, degraded),
    timeoutMs,
    deadlineAt: started + deadlineMs,
    call,
    key: undefined,
    ended: false,
    committed: false,
    attempt: undefined,
  };
  if (!tool.readOnly) {
    const refusal = refuseWrite(report, tool.name, degraded);
    if (refusal) {
      endCall(engine, tool, c, engine.options.clock.now(), {
        outcome: "blocked",
        failedAttempts: 0,
        failure: { type: refusal.name, message: refusal.message },
      });
      throw refusal;
    }
  }
  return c;
}

/** The active span to write a call on, if one records; else the call opens its own. */
function attachTo(parent: Context): AttachedSpan | undefined {
  const active = trace.getSpan(parent);
  return active?.isRecording() ? new AttachedSpan(active) : undefined;
}

/** The first route whose breaker admits a call, primary first. */
export function route<A, R>(tool: ToolRuntime<A, R>, now: number): Routed | CircuitOpenError {
  let retryAfterMs = Number.POSITIVE_INFINITY;
  for (const r of tool.routes) {
    const admission = r.breaker.admit(now);
    if (admission !== "rejected") return admission === "probe" ? r.asProbe : r.asCall;
    retryAfterMs = Math.min(retryAfterMs, r.breaker.retryAfterMs(now));
  }
  return new CircuitOpenError(dependencyOf(tool.name, tool.providers[0]), retryAfterMs);
}

/**
 * Every route closed: waits for the first to admit a call, if that is worth it, else returns the
 * CircuitOpenError to fail fast with (its `retryAfterMs` says when to try again). A route whose
 * breaker is open is waited for only when its probe is due within `recovery.maxProbeWaitMs` (2 s
 * by default): a breaker exists so callers do not wait, and a dead dependency costs each call at
 * most that bound. A route that is only cooling down after a 429 is waited for within the
 * deadline: throttling is not an outage, its Retry-After is honoured and no probe is needed.
 */
export async function waitForRoute<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  closed: CircuitOpenError,
): Promise<Routed | CircuitOpenError> {
  const { clock, recovery } = engine.options;
  const lastStart = c.deadlineAt - MIN_ATTEMPT_MS;
  // The whole wait for a probe is bounded, however often the routes are looked at again.
  const probeBy = Math.min(clock.now() + recovery.maxProbeWaitMs, lastStart);
  let routed: Routed | CircuitOpenError = closed;
  while (routed instanceof CircuitOpenError) {
    const now = clock.now();
    const until = worthWaitingUntil(tool, now, probeBy, lastStart);
    if (until === undefined) break;
    // Look again at least every second: a probe may close the breaker before its lease ends.
    // Spread (callers that waited together do not all come back at once), never past the bound.
    const wait = Math.min(ROUTE_POLL_MS, routed.retryAfterMs);
    await clock.sleep(Math.min(spreadWait(wait, recovery.random), until - now), c.call.signal);
    routed = route(tool, clock.now());
  }
  return routed;
}

/**
 * The latest a call may wait until for the route that admits a call soonest, among those worth
 * waiting for (see waitForRoute); undefined when none is.
 */
function worthWaitingUntil<A, R>(
  tool: ToolRuntime<A, R>,
  now: number,
  probeBy: number,
  lastStart: number,
): number | undefined {
  let soonest: { at: number; until: number } | undefined;
  for (const r of tool.routes) {
    const at = now + r.breaker.retryAfterMs(now);
    const until = r.breaker.state(now) === "closed" ? lastStart : probeBy;
    if (at <= until && (!soonest || at < soonest.at)) soonest = { at, until };
  }
  return soonest?.until;
}
