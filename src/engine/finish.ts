import type { CallRecord } from "../health/store.js";
import {
  ATTR_CALL_OUTCOME,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_IDEMPOTENCY_REPLAYED,
  ATTR_RESPONSE_EMPTY,
  type CallOutcome,
} from "../telemetry/conventions.js";
import { modelCallAttributes, modelRequest } from "../telemetry/gen-ai.js";
import { boundedJson, describeThrown, redact } from "../telemetry/redact.js";
import { errorType, setSpanError, spanTime } from "../telemetry/spans.js";
import type { CallState, Engine, ToolRuntime } from "./engine.js";

/** How a call ended, for the record written once at its end. */
export interface Ending {
  readonly outcome: CallOutcome;
  readonly empty?: boolean | undefined;
  readonly failedAttempts: number;
  /** False when the call says nothing about the dependency (fast fail, fallback, replay, abort). */
  readonly signal?: boolean;
  readonly failure?: { type: string; message: string };
}

/** The endings of a first attempt that answered: shared, so the success path allocates none. */
const SUCCESS: Ending = { outcome: "success", failedAttempts: 0 };
const SUCCESS_NOT_EMPTY: Ending = { outcome: "success", empty: false, failedAttempts: 0 };

/** Ends the call once: one record to the span, the store, the metrics and the listeners. */
export function endCall<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  now: number,
  ending: Ending,
): void {
  const { options, events } = engine;
  c.ended = true;
  const record: CallRecord = {
    agent: options.agent,
    tool: tool.name,
    outcome: ending.outcome,
    durationMs: now - c.started,
    empty: ending.empty,
    failedAttempts: ending.failedAttempts,
  };
  c.span.setAttribute(ATTR_CALL_OUTCOME, ending.outcome);
  if (ending.empty !== undefined) c.span.setAttribute(ATTR_RESPONSE_EMPTY, ending.empty);
  // A model call's span describes the request of its last attempt (the one that answered).
  const last = c.attempt;
  if (tool.isEmpty !== undefined && last !== undefined && c.span.isRecording()) {
    const request = modelRequest(last.model, last.provider, last.providerConfig?.model);
    c.span.setAttributes(modelCallAttributes(last.model, request, last.usage));
  }
  if (ending.failure) setSpanError(c.span, ending.failure.type, ending.failure.message);
  // No timestamp to make for a span that records nothing (no SDK, or sampled out).
  if (c.span.isRecording()) c.span.end(spanTime(now));
  else c.span.end();
  try {
    if (ending.signal !== false) {
      // What the store counts, for the event log's minute lines (none without a log).
      engine.callRollup?.record(record, now);
      options.store.recordCall(record, now);
      engine.health.noteRecord();
    }
  } catch (error) {
    options.logger.warn(
      `selfheal: signal store failed to record a call: ${redact(describeThrown(error))}`,
    );
  }
  engine.metrics.toolCall(tool.labels, ending.outcome, record.durationMs, ending.empty);
  if (options.heartbeat) beat(engine, tool.name);
  if (events.has("tool-call")) {
    events.emit("tool-call", {
      ...record,
      at: now,
      taskId: c.taskId,
      ...(ending.failure && { errorType: ending.failure.type, error: ending.failure.message }),
    });
  }
}

/** The run moved one step: a heartbeat that fails is logged, never the call's failure. */
function beat(engine: Engine, tool: string): void {
  const { heartbeat, logger } = engine.options;
  const warn = (error: unknown) => {
    logger.warn(`selfheal: heartbeat failed after ${tool}: ${redact(describeThrown(error))}`);
  };
  try {
    const written = heartbeat?.advance({ stage: "tool_call", lastTool: tool });
    if (written instanceof Promise) written.catch(warn);
  } catch (error) {
    warn(error);
  }
}

/** Ends the call with an error and throws it. `signal: false`: it says nothing about the route. */
export function failCall<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  error: unknown,
  failedAttempts: number,
  signal = true,
): never {
  endWithError(engine, tool, c, error, failedAttempts, signal);
  throw error;
}

/** Ends the call with an error (the caller throws it). */
export function endWithError<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  error: unknown,
  failedAttempts: number,
  signal: boolean,
): void {
  const described = tool.describeError?.(error);
  if (described) c.span.setAttributes(described);
  endCall(engine, tool, c, engine.options.clock.now(), {
    outcome: "error",
    failedAttempts,
    signal,
    failure: {
      type: errorType(error),
      message: redact(describeThrown(error), engine.options.maxErrorLength),
    },
  });
}

/** How an answer was obtained, beyond the first attempt's plain success. */
export interface Answer {
  readonly outcome: "success" | "recovered";
  readonly failedAttempts: number;
  /** An LLM answer nothing better replaced, though it was empty. */
  readonly empty?: boolean;
  /** The tool's canned answer, not the tool, answered. */
  readonly fallback?: boolean;
}

/** The first attempt's plain success. */
export const FIRST_ANSWER: Answer = { outcome: "success", failedAttempts: 0 };

/** Ends a call that has an answer; only answers of the tool itself go to the ledger. */
export function succeedCall<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  value: R,
  how: Answer,
  now: number,
): void {
  const { options } = engine;
  if (tool.describe) c.span.setAttributes(tool.describe(value));
  if (options.recordResults) {
    c.span.setAttribute(
      ATTR_GEN_AI_TOOL_CALL_RESULT,
      redact(boundedJson(value) ?? "", options.maxErrorLength),
    );
  }
  if (c.key !== undefined && !tool.readOnly && !how.empty && !how.fallback) {
    engine.ledger.set(tool.name, c.key, value, now);
  }
  const llm = tool.isEmpty !== undefined;
  const ending: Ending =
    how === FIRST_ANSWER
      ? llm
        ? SUCCESS_NOT_EMPTY
        : SUCCESS
      : {
          outcome: how.outcome,
          empty: llm && !how.fallback ? (how.empty ?? false) : undefined,
          failedAttempts: how.failedAttempts,
          // A canned answer says nothing about the dependency.
          signal: !how.fallback || how.failedAttempts > 0,
        };
  endCall(engine, tool, c, now, ending);
}

/** Ends a call answered from the idempotency ledger: the tool was not called again. */
export function replayed<A, R>(engine: Engine, tool: ToolRuntime<A, R>, c: CallState): void {
  c.span.setAttribute(ATTR_IDEMPOTENCY_REPLAYED, true);
  endCall(engine, tool, c, engine.options.clock.now(), {
    outcome: "success",
    failedAttempts: 0,
    signal: false,
  });
}
