import type { AsyncLocalStorage } from "node:async_hooks";
import {
  context,
  SpanKind,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import type { Diagnoser } from "../diagnosis/diagnoser.js";
import type { DriftDetector } from "../diagnosis/drift.js";
import { DEFAULT_CHAINS, normalizeStep } from "../diagnosis/rules.js";
import { CircuitOpenError, RecoveryBudgetExhaustedError, SelfHealClosedError } from "../errors.js";
import type { HealthEvaluator, HealthReport } from "../health/evaluator.js";
import type { CallRecord } from "../health/store.js";
import type { Escalator } from "../notify/escalator.js";
import type { BreakerRegistry, CircuitBreaker } from "../recovery/breaker.js";
import { spreadWait } from "../recovery/backoff.js";
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
import {
  attemptAnswered,
  attemptFailed,
  startAttempt,
  type CallBase,
  type OnceResult,
  type ToolRuntime,
} from "./attempt.js";
import type { CallMode } from "./call-context.js";
import { isEmptyResponse } from "./empty-response.js";
import type { Emitter, SelfHealEvents } from "./events.js";
import { modeOf, refuseWrite } from "./guard.js";
import {
  deadlineOf,
  validateCallOptions,
  type CallOptions,
  type ResolvedOptions,
  type ToolFunction,
  type ToolOptions,
} from "./options.js";
import {
  dependencyOf,
  MIN_ATTEMPT_MS,
  probeTimeout,
  recoverCall,
  type RecoveryEvent,
} from "./recovery-step.js";
import { recordOnRoute } from "./route-outcome.js";

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
  /** Each tool's routes (breaker dependencies), primary first. */
  readonly routesByTool: Map<string, readonly string[]>;
  readonly ledger: IdempotencyLedger;
  readonly escalator: Escalator;
  readonly closed: () => boolean;
  /** Whether recovery's degrade_to_readonly is in force for this report (lifted once healthy). */
  degraded(report: HealthReport): boolean;
  /** Recovery's degrade_to_readonly: writes refused until health is healthy again. */
  degrade(): void;
  /** Delivers a finished recovery to listeners and the event log. */
  recordRecovery(event: RecoveryEvent): void;
}

/** How often a call waiting for a closed route looks again, ms. */
const ROUTE_POLL_MS = 1_000;

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

/** A first attempt that failed. */
type FailedAttempt = Extract<OnceResult<unknown>, { ok: false }>;

/** One call in flight. */
interface CallState {
  span: Span;
  started: number;
  taskId: string | undefined;
  /** The context of the call's span. */
  context: Context;
  mode: CallMode;
  timeoutMs: number | undefined;
  /** When the whole call must be over, recovery included (clock time). */
  deadlineAt: number;
  key: string | undefined;
  ended: boolean;
}

/** How an answer was obtained. */
interface Answer {
  provider: string | undefined;
  attempts: number;
  failedAttempts: number;
  empty?: boolean;
  /** The tool's fallback, not the tool, answered. */
  fallback?: boolean;
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
  const listed = toolOptions.providers ?? [toolOptions.provider];
  // A provider listed twice (primary = fallback) is one route: tried once, one breaker.
  const providers: readonly (string | undefined)[] = [...new Set(listed)];
  if (providers.length < listed.length) {
    options.logger.warn(
      `selfheal: tool "${name}" lists a provider more than once (${listed.join(", ")}); each is used once, in first-listed order`,
    );
  }
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

  /** Ends the call once: one record to the span, the store, the metrics and the listeners. */
  function end(c: CallState, ending: Ending): void {
    c.ended = true;
    const now = clock.now();
    const record: CallRecord = {
      agent,
      tool: name,
      outcome: ending.outcome,
      durationMs: now - c.started,
      empty: ending.empty,
      failedAttempts: ending.failedAttempts,
    };
    c.span.setAttribute(ATTR_CALL_OUTCOME, ending.outcome);
    if (ending.empty !== undefined) c.span.setAttribute(ATTR_RESPONSE_EMPTY, ending.empty);
    if (ending.failure) setSpanError(c.span, ending.failure.type, ending.failure.message);
    c.span.end();
    try {
      if (ending.signal !== false) store.recordCall(record, now);
    } catch (error) {
      options.logger.warn(
        `selfheal: signal store failed to record a call: ${redact(describeThrown(error))}`,
      );
    }
    engine.metrics.toolCall(runtime.labels, ending.outcome, record.durationMs, ending.empty);
    if (events.has("tool-call")) {
      events.emit("tool-call", {
        ...record,
        at: now,
        taskId: c.taskId,
        ...(ending.failure && { errorType: ending.failure.type, error: ending.failure.message }),
      });
    }
  }

  /** Ends the call with an error and throws it. `signal: false`: it says nothing about the route. */
  function fail(c: CallState, error: unknown, failedAttempts: number, signal = true): never {
    end(c, {
      outcome: "error",
      failedAttempts,
      signal,
      failure: { type: errorType(error), message: redact(describeThrown(error), maxErrorLength) },
    });
    throw error;
  }

  /** Ends a call that has an answer; only answers of the tool itself go to the ledger. */
  function succeed(
    c: CallState,
    value: R,
    outcome: "success" | "recovered",
    how: Answer,
  ): CallResult<R> {
    if (options.recordResults) {
      c.span.setAttribute(
        ATTR_GEN_AI_TOOL_CALL_RESULT,
        redact(boundedJson(value) ?? "", maxErrorLength),
      );
    }
    if (c.key !== undefined && !readOnly && !how.empty && !how.fallback) {
      engine.ledger.set(name, c.key, value, clock.now());
    }
    end(c, {
      outcome,
      empty: isLlm && !how.fallback ? (how.empty ?? false) : undefined,
      failedAttempts: how.failedAttempts,
      // A fallback answer says nothing about the dependency.
      signal: !how.fallback || how.failedAttempts > 0,
    });
    return { value, outcome, provider: how.provider, attempts: how.attempts, replayed: false };
  }

  /** Gives up with the last failure; an empty answer nothing improved on is still the answer. */
  function giveUp(c: CallState, failure: Failure, attempts: number): CallResult<R> {
    if (!failure.empty) return fail(c, failure.error, attempts);
    return succeed(c, failure.empty.value as R, "success", {
      provider: failure.provider,
      attempts,
      failedAttempts: attempts - 1,
      empty: true,
    });
  }

  /** Each route with its breaker, primary first (looked up once, not per call). */
  const routes = providers.map((p) => [p, breakers.get(dependencyOf(name, p))] as const);
  if (runtime.canTrip) for (const [, breaker] of routes) breaker.allowTrip();
  engine.routesByTool.set(
    name,
    routes.map(([, breaker]) => breaker.dependency),
  );

  /** The first route whose breaker admits a call, primary first. */
  function route(
    now: number,
  ): { provider: string | undefined; probe: boolean; breaker: CircuitBreaker } | CircuitOpenError {
    let retryAfterMs = Number.POSITIVE_INFINITY;
    for (const [provider, breaker] of routes) {
      const admission = breaker.admit(now);
      if (admission !== "rejected") return { provider, probe: admission === "probe", breaker };
      retryAfterMs = Math.min(retryAfterMs, breaker.retryAfterMs(now));
    }
    return new CircuitOpenError(dependencyOf(name, primary), retryAfterMs);
  }

  /** Recovers a call whose first attempt failed: the plan of its diagnosis, then the verdict. */
  async function recover(
    c: CallState,
    args: A,
    base: CallBase,
    first: FailedAttempt,
  ): Promise<CallResult<R>> {
    const diagnosis = first.failure.diagnosis;
    const planOf = (pattern: typeof diagnosis.pattern) =>
      toolOptions.plans?.[pattern] ?? options.recovery.plans[pattern];
    // Not actionable (UNKNOWN, or confidence < 0.5): the UNKNOWN plan (one retry, then the next
    // provider: nothing beyond this call) or, under `unknown: "none"`, no step at all. Either way
    // the incident gets its recovery event, so the log shows every failure for the weekly review.
    const plan = diagnosis.actionable
      ? (planOf(diagnosis.pattern) ?? diagnosis.strategies)
      : options.recovery.unknown === "none"
        ? []
        : (planOf("UNKNOWN") ?? DEFAULT_CHAINS.UNKNOWN);
    const mayReexecute = readOnly || c.key !== undefined;
    if (
      !mayReexecute &&
      plan.some((step) => STRATEGY_REGISTRY[normalizeStep(step).strategy].reexecutes)
    ) {
      warnOnce(engine, name);
    }
    const fallback = toolOptions.cannedAnswer;
    const recovery = await recoverCall(engine, {
      tool: runtime,
      args,
      first: first.failure,
      firstMessage: first.message,
      plan,
      mayReexecute,
      callContext: c.context,
      base,
      budget: tasks.getStore()?.budget ?? new RecoveryBudget(options.recovery.budgetUsd),
      firstCostUsd: first.costUsd,
      firstErrorAt: clock.now(),
      deadlineAt: c.deadlineAt,
      fallback: fallback && (async () => ({ value: await fallback(args, first.failure.error) })),
    });
    const failedAttempts = 1 + recovery.failedAttempts;
    const chain = recovery.chain;
    switch (chain.outcome) {
      case "recovered": {
        // Health evidence: failures on other routes count in full (the primary is down), retries
        // that the answering route itself absorbed count once (throttling is not an outage).
        const elsewhere = recovery.failedRoutes.filter((route) => route !== chain.provider).length;
        return succeed(c, chain.value as R, "recovered", {
          provider: chain.provider,
          attempts: 1 + recovery.attempts,
          failedAttempts: Math.max(1, elsewhere),
          fallback: chain.fallback,
        });
      }
      case "stopped":
        return fail(c, chain.error, failedAttempts);
      case "budget":
        return fail(
          c,
          new RecoveryBudgetExhaustedError(name, chain.spentUsd, chain.limitUsd, {
            cause: recovery.last.error,
          }),
          failedAttempts,
        );
      case "exhausted":
        return giveUp(c, recovery.last, 1 + recovery.attempts);
    }
  }

  /**
   * One logical call: guard, ledger, route, first attempt, recovery. The success path awaits
   * only the tool: every extra async layer costs a promise, and with an SDK's async context
   * each promise also runs its hooks.
   */
  async function run(
    args: A,
    callOptions: CallOptions | undefined,
    detailed: boolean,
  ): Promise<CallResult<R> | R> {
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
    const timeoutMs = call.timeoutMs ?? toolOptions.timeoutMs;
    if (timeoutMs !== undefined) span.setAttribute(ATTR_CALL_TIMEOUT_MS, timeoutMs);
    const deadlineMs = deadlineOf(
      call.deadlineMs,
      toolOptions.deadlineMs,
      options.recovery.deadlineMs,
      timeoutMs,
    );
    const degraded = engine.degraded(report);
    const c: CallState = {
      span,
      started,
      taskId,
      context: trace.setSpan(parent, span),
      mode: modeOf(report, degraded),
      timeoutMs,
      deadlineAt: started + deadlineMs,
      key: undefined,
      ended: false,
    };
    if (!readOnly) {
      const refusal = refuseWrite(report, name, degraded);
      if (refusal) {
        end(c, {
          outcome: "blocked",
          failedAttempts: 0,
          failure: { type: refusal.name, message: refusal.message },
        });
        throw refusal;
      }
    }
    try {
      c.key = call.idempotencyKey ?? toolOptions.idempotencyKey?.(args);
    } catch (error) {
      return fail(c, error, 0, false); // the tool never ran
    }
    let inflight:
      | { resolve: (r: CallResult<R>) => void; reject: (e: unknown) => void; forget: () => void }
      | undefined;
    try {
      if (c.key !== undefined) {
        span.setAttribute(ATTR_IDEMPOTENCY_KEY, hashKey(c.key));
        if (!readOnly) {
          // Already written, or in flight: share its outcome rather than send it twice.
          const shared = engine.ledger.find(name, c.key, started);
          if (shared) {
            const replayed = await replay(c, shared);
            return detailed ? replayed : replayed.value;
          }
          let resolve!: (r: CallResult<R>) => void;
          let reject!: (e: unknown) => void;
          const promise = new Promise<CallResult<R>>((yes, no) => {
            resolve = yes;
            reject = no;
          });
          promise.catch(() => undefined); // a rejection reaches the first caller; copies handle their own
          inflight = { resolve, reject, forget: engine.ledger.track(name, c.key, promise) };
        }
      }

      let routed = route(started);
      // Every route closed: wait for the first to admit a call if that fits in the deadline
      // (a real answer beats a fast failure), else fail fast or give the canned answer.
      while (
        routed instanceof CircuitOpenError &&
        routed.retryAfterMs + MIN_ATTEMPT_MS <= c.deadlineAt - clock.now()
      ) {
        // Look again at least every second: a probe may close the breaker before its lease ends.
        const wait = Math.min(ROUTE_POLL_MS, routed.retryAfterMs);
        await clock.sleep(spreadWait(wait, options.recovery.random), call.signal);
        routed = route(clock.now());
      }
      let result: CallResult<R>;
      if (routed instanceof CircuitOpenError) {
        const fallback = toolOptions.cannedAnswer;
        if (!fallback) return fail(c, routed, 0, false); // failing fast says nothing new about health
        const value = await fallback(args, routed);
        result = succeed(c, value, "recovered", {
          provider: undefined,
          attempts: 0,
          failedAttempts: 0,
          fallback: true,
        });
      } else {
        const base: CallBase = {
          mode: c.mode,
          idempotencyKey: c.key,
          toolCallId: call.toolCallId,
          taskId,
          callerSignal: call.signal,
        };
        // The attempt's own timeout, cut to the call's deadline.
        const left = c.deadlineAt - clock.now();
        const attemptMs = routed.probe ? probeTimeout(timeoutMs, options) : timeoutMs;
        const spec = {
          provider: routed.provider,
          timeoutMs: attemptMs === undefined || attemptMs > left ? left : attemptMs,
          attempt: 1,
          parent: c.context,
        };
        // runOnce's steps, inline: the success path awaits the tool and nothing else.
        const started = startAttempt(engine, runtime, args, base, spec);
        let first: OnceResult<R>;
        try {
          const answered = attemptAnswered(
            engine,
            runtime,
            base,
            spec,
            started,
            await started.result,
          );
          first = answered instanceof Promise ? await answered : answered;
        } catch (error) {
          first = await attemptFailed(engine, runtime, base, spec, started, error);
        }
        if ("aborted" in first) return fail(c, first.error, 0, false); // the caller gave up: no verdict
        // A success only matters to a breaker that may trip or is probing (kept off the hot path).
        if (!first.ok)
          recordOnRoute(routed.breaker, clock.now(), first.failure.diagnosis, routed.probe);
        else if (runtime.canTrip || routed.probe)
          routed.breaker.record(clock.now(), true, routed.probe);
        result = first.ok
          ? succeed(c, first.value, "success", {
              provider: routed.provider,
              attempts: 1,
              failedAttempts: 0,
            })
          : await recover(c, args, base, first);
      }
      inflight?.resolve(result);
      return detailed ? result : result.value;
    } catch (error) {
      inflight?.reject(error);
      // Whatever escaped (an abort mid-wait, a fallback that throws) still ends the call.
      if (c.ended) throw error;
      return fail(c, error, 0, false);
    } finally {
      inflight?.forget();
    }
  }

  /** The answer of a write with this key that already succeeded, or is in flight. */
  async function replay(
    c: CallState,
    shared: { value: unknown } | Promise<{ value: unknown }>,
  ): Promise<CallResult<R>> {
    c.span.setAttribute(ATTR_IDEMPOTENCY_REPLAYED, true);
    let value: R;
    try {
      value = (await shared).value as R;
    } catch (error) {
      return fail(c, error, 0, false);
    }
    end(c, { outcome: "success", failedAttempts: 0, signal: false });
    return { value, outcome: "success", provider: undefined, attempts: 0, replayed: true };
  }

  // The plain call skips building a second promise for `.value`: it is on every call's path.
  const wrapped = (args: A, callOptions?: CallOptions) =>
    run(args, callOptions, false) as Promise<R>;
  wrapped.detailed = (args: A, callOptions?: CallOptions) =>
    run(args, callOptions, true) as Promise<CallResult<R>>;
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
