import type { AsyncLocalStorage } from "node:async_hooks";
import {
  context,
  SpanKind,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import type { Diagnoser } from "../diagnosis/diagnoser.js";
import type { DriftDetector } from "../diagnosis/drift.js";
import { normalizeStep } from "../diagnosis/rules.js";
import { CircuitOpenError, RecoveryBudgetExhaustedError, SelfHealClosedError } from "../errors.js";
import type { HealthEvaluator, HealthReport } from "../health/evaluator.js";
import type { CallRecord } from "../health/store.js";
import type { Escalator } from "../notify/escalator.js";
import type { BreakerRegistry, CircuitBreaker } from "../recovery/breaker.js";
import { RecoveryBudget } from "../recovery/budget.js";
import type { IdempotencyLedger } from "../recovery/idempotency.js";
import { STRATEGY_REGISTRY } from "../recovery/strategies/index.js";
import type { Failure } from "../recovery/strategy.js";
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
  ATTR_IDEMPOTENCY_REPLAYED,
  ATTR_RESPONSE_EMPTY,
  ATTR_TASK_ID,
  ATTR_TOOL_READ_ONLY,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  SPAN_TOOL_CALL,
  type CallOutcome,
} from "../telemetry/conventions.js";
import type { SelfHealMetrics } from "../telemetry/metrics.js";
import { boundedJson, describeThrown, redact } from "../telemetry/redact.js";
import { errorType, hashKey, setSpanError } from "../telemetry/spans.js";
import { runOnce, type ToolRuntime } from "./attempt.js";
import type { CallMode } from "./call-context.js";
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
import { dependencyOf, recoverCall, type RecoveryEvent } from "./recovery-step.js";

/** The task a call runs in, carried through async calls. */
export interface TaskState {
  readonly id: string;
  readonly mode: CallMode;
  /** Every recovery attempt of the task draws on it. */
  readonly budget: RecoveryBudget;
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
  readonly breakers: BreakerRegistry;
  readonly ledger: IdempotencyLedger;
  /** Writes in flight by tool and idempotency key: a second call with the key shares the first. */
  readonly inflight: Map<string, Promise<{ value: unknown }>>;
  readonly escalator: Escalator;
  readonly closed: () => boolean;
  /** Whether recovery's degrade_to_readonly is in force for this report (lifted once healthy). */
  degraded(report: HealthReport): boolean;
  /** Recovery's degrade_to_readonly: writes refused until health is healthy again. */
  degrade(): void;
  /** Delivers a finished recovery to listeners and the event log. */
  recordRecovery(event: RecoveryEvent): void;
}

/** A tool wrapped by selfheal: same arguments, plus optional per-call options. */
export interface WrappedTool<A, R> {
  (args: A, options?: CallOptions): Promise<R>;
  /** The same call, reporting how it went: which provider answered, whether it recovered. */
  detailed(args: A, options?: CallOptions): Promise<CallResult<R>>;
}

/** A call's answer with how it was obtained. */
export interface CallResult<R> {
  value: R;
  outcome: "success" | "recovered";
  /** The provider that answered (undefined for a tool without providers or a fallback answer). */
  provider: string | undefined;
  /** Attempts made, the first included (0 when replayed from the idempotency ledger). */
  attempts: number;
  /** Served from the idempotency ledger: the tool was not called again. */
  replayed: boolean;
}

/** How a call ended, for the record written once at its end. */
interface Ending {
  outcome: CallOutcome;
  empty?: boolean | undefined;
  failedAttempts: number;
  /** False when the call says nothing about the dependency (fast fail, fallback, replay, abort). */
  signal?: boolean;
  failure?: { type: string; message: string };
}

/** Wraps `fn` so each call is a span, a health signal, a guarded write and a recoverable failure. */
export function instrumentTool<A, R>(
  engine: Engine,
  name: string,
  toolOptions: ToolOptions<A, R>,
  fn: ToolFunction<A, R>,
): WrappedTool<A, R> {
  const { options, tracer, health, events, tasks, breakers } = engine;
  const { agent, clock, store, maxErrorLength } = options;
  const readOnly = toolOptions.readOnly;
  const isLlm = toolOptions.kind === "llm";
  const providers: readonly (string | undefined)[] =
    toolOptions.providers ??
    (toolOptions.provider === undefined ? [undefined] : [toolOptions.provider]);
  const primary = providers[0];
  const runtime: ToolRuntime<A, R> = {
    name,
    fn,
    isEmpty: isLlm ? (toolOptions.isEmpty ?? isEmptyResponse) : undefined,
    providers,
    canTrip: providers.length > 1,
    labels: engine.metrics.registerTool(name, isLlm ? (primary ?? "unknown") : undefined),
  };
  const staticAttributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
    [ATTR_GEN_AI_TOOL_NAME]: name,
    [ATTR_GEN_AI_AGENT_NAME]: agent,
    [ATTR_TOOL_READ_ONLY]: readOnly,
  };
  // Optional attributes only when known: each one costs a recording SDK about 40 ns a call.
  if (primary !== undefined) staticAttributes[ATTR_GEN_AI_PROVIDER_NAME] = primary;
  if (toolOptions.type !== undefined) staticAttributes[ATTR_GEN_AI_TOOL_TYPE] = toolOptions.type;

  /** Ends the call: one record to the span, the store, the metrics and the listeners. */
  function finish(span: Span, started: number, taskId: string | undefined, end: Ending): void {
    const now = clock.now();
    const record: CallRecord = {
      agent,
      tool: name,
      outcome: end.outcome,
      durationMs: now - started,
      empty: end.empty,
      failedAttempts: end.failedAttempts,
    };
    span.setAttribute(ATTR_CALL_OUTCOME, end.outcome);
    if (end.empty !== undefined) span.setAttribute(ATTR_RESPONSE_EMPTY, end.empty);
    if (end.failure) setSpanError(span, end.failure.type, end.failure.message);
    span.end();
    try {
      if (end.signal !== false) store.recordCall(record, now);
    } catch (error) {
      options.logger.warn(
        `selfheal: signal store failed to record a call: ${redact(describeThrown(error))}`,
      );
    }
    engine.metrics.toolCall(runtime.labels, end.outcome, record.durationMs, end.empty);
    if (events.has("tool-call")) {
      events.emit("tool-call", {
        ...record,
        at: now,
        taskId,
        ...(end.failure && { errorType: end.failure.type, error: end.failure.message }),
      });
    }
  }

  /** The first route whose breaker admits a call, primary first. */
  function route(
    now: number,
  ): { provider: string | undefined; probe: boolean; breaker: CircuitBreaker } | CircuitOpenError {
    let retryAfterMs = Number.POSITIVE_INFINITY;
    for (const provider of providers) {
      const breaker = breakers.get(dependencyOf(name, provider));
      const admission = breaker.admit(now);
      if (admission !== "rejected") return { provider, probe: admission === "probe", breaker };
      retryAfterMs = Math.min(retryAfterMs, breaker.retryAfterMs(now));
    }
    return new CircuitOpenError(dependencyOf(name, primary), retryAfterMs);
  }

  async function call(args: A, callOptions: CallOptions | undefined): Promise<CallResult<R>> {
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
    let ended = false;
    const end = (ending: Ending) => {
      ended = true;
      finish(span, started, taskId, ending);
    };
    if (taskId !== undefined) span.setAttribute(ATTR_TASK_ID, taskId);
    if (call.toolCallId !== undefined) span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ID, call.toolCallId);
    if (options.recordArguments) {
      span.setAttribute(
        ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
        redact(boundedJson(args) ?? "", maxErrorLength),
      );
    }
    const degraded = engine.degraded(report);
    const mode = modeOf(report, degraded);
    if (!readOnly) {
      const refusal = refuseWrite(report, name, degraded);
      if (refusal) {
        end({
          outcome: "blocked",
          failedAttempts: 0,
          failure: { type: refusal.name, message: refusal.message },
        });
        throw refusal;
      }
    }
    const timeoutMs = call.timeoutMs ?? toolOptions.timeoutMs;
    if (timeoutMs !== undefined) span.setAttribute(ATTR_CALL_TIMEOUT_MS, timeoutMs);
    const callContext = trace.setSpan(parent, span);
    const fail = (error: unknown, failedAttempts: number, signal = true): never => {
      end({
        outcome: "error",
        failedAttempts,
        signal,
        failure: { type: errorType(error), message: redact(describeThrown(error), maxErrorLength) },
      });
      throw error;
    };
    /** Ends a call that has an answer; only answers of the tool itself go to the ledger. */
    const succeed = (
      value: R,
      outcome: "success" | "recovered",
      how: {
        provider: string | undefined;
        attempts: number;
        failedAttempts: number;
        empty?: boolean;
        fallback?: boolean;
      },
    ): CallResult<R> => {
      if (options.recordResults) {
        span.setAttribute(
          ATTR_GEN_AI_TOOL_CALL_RESULT,
          redact(boundedJson(value) ?? "", maxErrorLength),
        );
      }
      if (key !== undefined && !readOnly && !how.empty && !how.fallback)
        engine.ledger.set(name, key, value, clock.now());
      end({
        outcome,
        empty: isLlm && !how.fallback ? (how.empty ?? false) : undefined,
        failedAttempts: how.failedAttempts,
        // A fallback answer says nothing about the dependency.
        signal: !how.fallback || how.failedAttempts > 0,
      });
      return { value, outcome, provider: how.provider, attempts: how.attempts, replayed: false };
    };

    let key: string | undefined;
    try {
      key = call.idempotencyKey ?? toolOptions.idempotencyKey?.(args);
    } catch (error) {
      return fail(error, 0, false); // the tool never ran
    }
    const ledgerId = key !== undefined && !readOnly ? `${name}\u0000${key}` : undefined;
    if (key !== undefined) span.setAttribute(ATTR_IDEMPOTENCY_KEY, hashKey(key));
    if (ledgerId !== undefined && key !== undefined) {
      const stored = engine.ledger.get(name, key, started);
      // The same write already in flight: share its outcome rather than send it twice.
      const shared = stored
        ? Promise.resolve({ value: stored.value })
        : engine.inflight.get(ledgerId);
      if (shared) {
        span.setAttribute(ATTR_IDEMPOTENCY_REPLAYED, true);
        let value: R;
        try {
          value = (await shared).value as R;
        } catch (error) {
          return fail(error, 0, false);
        }
        end({ outcome: "success", failedAttempts: 0, signal: false });
        return { value, outcome: "success", provider: undefined, attempts: 0, replayed: true };
      }
    }

    const execute = async (): Promise<CallResult<R>> => {
      const fallback = toolOptions.fallback;
      const routed = route(started);
      if (routed instanceof CircuitOpenError) {
        if (!fallback) return fail(routed, 0, false); // failing fast says nothing new about health
        return succeed(await fallback(args, routed), "recovered", {
          provider: undefined,
          attempts: 0,
          failedAttempts: 0,
          fallback: true,
        });
      }
      const base = {
        mode,
        idempotencyKey: key,
        toolCallId: call.toolCallId,
        taskId,
        callerSignal: call.signal,
      };
      const first = await runOnce(engine, runtime, args, {
        ...base,
        provider: routed.provider,
        timeoutMs: routed.probe ? probeTimeout(timeoutMs, options) : timeoutMs,
        attempt: 1,
        parent: callContext,
      });
      if ("aborted" in first) return fail(first.error, 0, false); // the caller gave up: no verdict on the route
      routed.breaker.record(clock.now(), first.ok, routed.probe, runtime.canTrip);
      if (first.ok)
        return succeed(first.value, "success", {
          provider: routed.provider,
          attempts: 1,
          failedAttempts: 0,
        });

      const diagnosis = first.failure.diagnosis;
      const plan =
        toolOptions.plans?.[diagnosis.pattern] ??
        options.recovery.plans[diagnosis.pattern] ??
        diagnosis.strategies;
      const giveUp = (failure: Failure, attempts: number): CallResult<R> =>
        // An empty answer that nothing improved on is still the answer.
        failure.empty
          ? succeed(failure.empty.value as R, "success", {
              provider: failure.provider,
              attempts,
              failedAttempts: attempts - 1,
              empty: true,
            })
          : fail(failure.error, attempts);
      if (!diagnosis.actionable || plan.length === 0) return giveUp(first.failure, 1);
      const mayReexecute = readOnly || key !== undefined;
      if (
        !mayReexecute &&
        plan.some((step) => STRATEGY_REGISTRY[normalizeStep(step).strategy].reexecutes)
      ) {
        warnOnce(engine, name);
      }
      const recovery = await recoverCall(engine, {
        tool: runtime,
        args,
        first: first.failure,
        firstMessage: first.message,
        plan,
        mayReexecute,
        callContext,
        base,
        budget: tasks.getStore()?.budget ?? new RecoveryBudget(options.recovery.budgetUsd),
        firstCostUsd: first.costUsd,
        firstErrorAt: clock.now(),
        fallback: fallback && (async () => ({ value: await fallback(args, first.failure.error) })),
      });
      const failedAttempts = 1 + recovery.failedAttempts;
      const chain = recovery.chain;
      switch (chain.outcome) {
        case "recovered":
          return succeed(chain.value as R, "recovered", {
            provider: chain.provider,
            attempts: 1 + recovery.attempts,
            failedAttempts,
            fallback: chain.fallback,
          });
        case "stopped":
          return fail(chain.error, failedAttempts);
        case "budget":
          return fail(
            new RecoveryBudgetExhaustedError(name, chain.spentUsd, chain.limitUsd, {
              cause: recovery.last.error,
            }),
            failedAttempts,
          );
        case "exhausted":
          return giveUp(recovery.last, 1 + recovery.attempts);
      }
    };

    // Whatever escapes (the caller aborting a wait, a fallback that throws) still ends the call.
    const run = execute().catch((error: unknown) => {
      if (ended) throw error;
      return fail(error, 0, false);
    });
    if (ledgerId === undefined) return run;
    engine.inflight.set(ledgerId, run);
    try {
      return await run;
    } finally {
      engine.inflight.delete(ledgerId);
    }
  }

  const wrapped = async (args: A, callOptions?: CallOptions): Promise<R> =>
    (await call(args, callOptions)).value;
  wrapped.detailed = call;
  return wrapped;
}

const warned = new WeakMap<Engine, Set<string>>();
/** Says once per tool how to make its writes recoverable. */
function warnOnce(engine: Engine, tool: string): void {
  const seen = warned.get(engine) ?? new Set<string>();
  warned.set(engine, seen);
  if (seen.has(tool)) return;
  seen.add(tool);
  engine.options.logger.warn(
    `selfheal: write tool "${tool}" failed and was not retried or failed over: it has no idempotency key. ` +
      `Add idempotencyKey: (args) => args.orderId (a key unique per logical write) to its options, ` +
      `or pass { idempotencyKey } per call, so a retry can never write twice.`,
  );
}

/** The timeout of a half-open probe: the attempt's, bounded by the breaker's probe timeout. */
export function probeTimeout(timeoutMs: number | undefined, options: ResolvedOptions): number {
  const bound = options.recovery.breaker.probeTimeoutMs;
  return Math.min(timeoutMs ?? bound, bound);
}
