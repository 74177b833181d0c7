import type { AsyncLocalStorage } from "node:async_hooks";
import {
  context,
  SpanKind,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { EmptyResponseError, SelfHealClosedError, ToolTimeoutError } from "../errors.js";
import type { Diagnoser } from "../diagnosis/diagnoser.js";
import type { DriftDetector } from "../diagnosis/drift.js";
import type { HealthEvaluator } from "../health/evaluator.js";
import type { CallRecord } from "../health/store.js";
import {
  ATTR_CALL_OUTCOME,
  ATTR_CALL_TIMEOUT_MS,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_HEALTH_STATUS,
  ATTR_IDEMPOTENCY_KEY,
  ATTR_RESPONSE_EMPTY,
  ATTR_TASK_ID,
  ATTR_TOOL_READ_ONLY,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  SPAN_TOOL_CALL,
  type CallOutcome,
} from "../telemetry/conventions.js";
import type { SelfHealMetrics } from "../telemetry/metrics.js";
import { boundedJson, describeThrown, redact } from "../telemetry/redact.js";
import { errorType, hashKey, recordAttemptError, setSpanError } from "../telemetry/spans.js";
import { AttemptContext, type CallMode } from "./call-context.js";
import { withDeadline } from "../deadline.js";
import { diagnoseFailure, type DiagnosedTool } from "./diagnosis-step.js";
import { isEmptyResponse } from "./empty-response.js";
import type { Emitter, SelfHealEvents } from "./events.js";
import { modeOf, refuseWrite } from "./guard.js";
import {
  validateCallOptions,
  type CallOptions,
  type ResolvedOptions,
  type ToolFunction,
  type ToolOptions,
} from "./options.js";

/** The task a call runs in, carried through async calls. */
export interface TaskState {
  readonly id: string;
  readonly mode: CallMode;
}

/** The parts of an instance a tool call uses. */
export interface Engine {
  readonly options: ResolvedOptions;
  readonly diagnoser: Diagnoser;
  readonly drift: DriftDetector;
  readonly tracer: Tracer;
  readonly metrics: SelfHealMetrics;
  readonly health: HealthEvaluator;
  readonly events: Emitter<SelfHealEvents>;
  readonly tasks: AsyncLocalStorage<TaskState>;
  readonly closed: () => boolean;
}

/** A tool wrapped by selfheal: same arguments, plus optional per-call options. */
export type WrappedTool<A, R> = (args: A, options?: CallOptions) => Promise<R>;

/** Wraps `fn` so each call is a span, a health signal and a guarded write. */
export function instrumentTool<A, R>(
  engine: Engine,
  name: string,
  toolOptions: ToolOptions<A, R>,
  fn: ToolFunction<A, R>,
): WrappedTool<A, R> {
  const { options, tracer, health, events, tasks } = engine;
  const { agent, clock, store, maxErrorLength } = options;
  const readOnly = toolOptions.readOnly;
  const isLlm = toolOptions.kind === "llm";
  const isEmpty = toolOptions.isEmpty ?? isEmptyResponse;
  const labels = engine.metrics.registerTool(
    name,
    isLlm ? (toolOptions.provider ?? "unknown") : undefined,
  );
  const diagnosed: DiagnosedTool = { name, provider: toolOptions.provider, labels };
  const staticAttributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
    [ATTR_GEN_AI_TOOL_NAME]: name,
    [ATTR_GEN_AI_AGENT_NAME]: agent,
    [ATTR_TOOL_READ_ONLY]: readOnly,
  };
  // Optional attributes only when known: each one costs a recording SDK about 40 ns a call.
  if (toolOptions.provider !== undefined) {
    staticAttributes[ATTR_GEN_AI_PROVIDER_NAME] = toolOptions.provider;
  }
  if (toolOptions.type !== undefined) staticAttributes[ATTR_GEN_AI_TOOL_TYPE] = toolOptions.type;

  /** Ends the call: one record to the span, the store, the metrics and the listeners. */
  function finish(
    span: Span,
    outcome: CallOutcome,
    started: number,
    empty: boolean | undefined,
    taskId: string | undefined,
    failure?: { type: string; message: string },
  ): void {
    const now = clock.now();
    const record: CallRecord = { agent, tool: name, outcome, durationMs: now - started, empty };
    span.setAttribute(ATTR_CALL_OUTCOME, outcome);
    if (empty !== undefined) span.setAttribute(ATTR_RESPONSE_EMPTY, empty);
    if (failure) setSpanError(span, failure.type, failure.message);
    span.end();
    try {
      store.recordCall(record, now);
    } catch (error) {
      options.logger.warn(
        `selfheal: signal store failed to record a call: ${redact(describeThrown(error))}`,
      );
    }
    engine.metrics.toolCall(labels, outcome, record.durationMs, empty);
    if (events.has("tool-call")) {
      events.emit("tool-call", {
        ...record,
        at: now,
        taskId,
        ...(failure && { errorType: failure.type, error: failure.message }),
      });
    }
  }

  return async function selfHealingTool(args: A, callOptions?: CallOptions): Promise<R> {
    if (engine.closed()) throw new SelfHealClosedError(`tool "${name}" was called`);
    const call = validateCallOptions(name, callOptions);
    const started = clock.now();
    const pending = health.current(started);
    const report = pending instanceof Promise ? await pending : pending;
    const taskId = tasks.getStore()?.id;
    const parent = context.active();
    const span = tracer.startSpan(
      SPAN_TOOL_CALL,
      { kind: SpanKind.INTERNAL, attributes: staticAttributes },
      parent,
    );
    span.setAttribute(ATTR_HEALTH_STATUS, report.status);
    if (taskId !== undefined) span.setAttribute(ATTR_TASK_ID, taskId);
    if (call.toolCallId !== undefined) span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ID, call.toolCallId);
    if (options.recordArguments) {
      span.setAttribute(
        ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
        redact(boundedJson(args) ?? "", maxErrorLength),
      );
    }

    if (!readOnly) {
      const refusal = refuseWrite(report, name);
      if (refusal) {
        finish(span, "blocked", started, undefined, taskId, {
          type: refusal.name,
          message: refusal.message,
        });
        throw refusal;
      }
    }

    const mode = modeOf(report);
    const timeoutMs = call.timeoutMs ?? toolOptions.timeoutMs;
    if (timeoutMs !== undefined) span.setAttribute(ATTR_CALL_TIMEOUT_MS, timeoutMs);
    const spanContext = trace.setSpan(parent, span);
    try {
      const key = call.idempotencyKey ?? toolOptions.idempotencyKey?.(args);
      if (key !== undefined) span.setAttribute(ATTR_IDEMPOTENCY_KEY, hashKey(key));
      const deadline = timeoutMs !== undefined || call.signal !== undefined;
      const controller = deadline ? new AbortController() : undefined;
      const ctx = new AttemptContext(
        timeoutMs,
        toolOptions.provider,
        mode,
        1,
        key,
        call.toolCallId,
        taskId,
        controller,
      );
      const result = controller
        ? await context.with(spanContext, () =>
            withDeadline(() => fn(args, ctx), {
              controller,
              timeoutMs,
              timeoutError: () => new ToolTimeoutError(name, timeoutMs ?? 0),
              callerSignal: call.signal,
              clock,
            }),
          )
        : await context.with(spanContext, fn, undefined, args, ctx);
      const empty = isLlm ? safeIsEmpty(isEmpty, result) : undefined;
      if (empty) {
        const error = new EmptyResponseError(name);
        await diagnoseFailure(engine, diagnosed, error, error.message, spanContext, taskId);
      }
      if (options.recordResults) {
        span.setAttribute(
          ATTR_GEN_AI_TOOL_CALL_RESULT,
          redact(boundedJson(result) ?? "", maxErrorLength),
        );
      }
      finish(span, "success", started, empty, taskId);
      return result;
    } catch (error) {
      const type = errorType(error);
      const message = redact(describeThrown(error), maxErrorLength);
      recordAttemptError(tracer, spanContext, error, type, message, 1, maxErrorLength);
      await diagnoseFailure(engine, diagnosed, error, message, spanContext, taskId);
      finish(span, "error", started, undefined, taskId, { type, message });
      throw error;
    }
  };
}

/** A user `isEmpty` that throws must not turn a good answer into a failure: count it as non-empty. */
function safeIsEmpty<R>(isEmpty: (result: R) => boolean, result: R): boolean {
  try {
    return isEmpty(result);
  } catch {
    return false;
  }
}
