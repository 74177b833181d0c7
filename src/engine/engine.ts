import type { AsyncLocalStorage } from "node:async_hooks";
import type { Attributes, Context, Span, Tracer } from "@opentelemetry/api";
import type { DeadlineQueue } from "../deadline.js";
import type { Diagnoser } from "../diagnosis/diagnoser.js";
import type { DriftDetector } from "../diagnosis/drift.js";
import type { HealthEvaluator, HealthReport } from "../health/evaluator.js";
import type { Escalator } from "../notify/escalator.js";
import type { BreakerRegistry, CircuitBreaker } from "../recovery/breaker.js";
import type { RecoveryBudget } from "../recovery/budget.js";
import type { IdempotencyLedger } from "../recovery/idempotency.js";
import type { Failure } from "../recovery/strategy.js";
import type { HealthStatus } from "../telemetry/conventions.js";
import type { SelfHealMetrics, ToolMetricLabels } from "../telemetry/metrics.js";
import type { AttemptContext, CallMode } from "./call-context.js";
import type { CallRollup } from "./call-rollup.js";
import type { Emitter, RecoveryEvent, SelfHealEvents } from "./events.js";
import type { CallOptions, ResolvedOptions, ToolFunction, ToolOptions } from "./options.js";

/**
 * The bottom of the call pipeline: the state every stage shares, and the shapes that pass
 * between stages. The stages call only downward:
 *
 *   tool.ts (entry, built once per tool)
 *     -> admit.ts (guard, span, deadline, route)
 *     -> attempt.ts (one run of the tool: context, deadline, empty check)
 *        -> diagnose.ts (diagnosis span, counters, drift, event)
 *     -> recover.ts (the plan's strategies; runs attempts through a function it is handed)
 *     -> finish.ts (span end, store, metrics, ledger, event)
 *   engine.ts, events.ts, guard.ts, route-outcome.ts, call-context.ts: shared, at the bottom.
 */

/** The task a call runs in, carried through async calls. */
export interface TaskState {
  readonly id: string;
  readonly mode: CallMode;
  /** Every recovery attempt of the task draws on it. */
  readonly budget: RecoveryBudget;
}

/** The parts of an instance a tool call uses (built once by createSelfHealing). */
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
  /** Every attempt's deadline, on one timer. */
  readonly deadlines: DeadlineQueue;
  /** Per-minute call counts for the event log; undefined (nothing to do) without one. */
  readonly callRollup: CallRollup | undefined;
  closed(): boolean;
  /** Whether recovery's degrade_to_readonly is in force for this report (lifted once healthy). */
  degraded(report: HealthReport): boolean;
  /** Recovery's degrade_to_readonly: writes refused until health is healthy again. */
  degrade(): void;
  /** Delivers a finished recovery to listeners and the event log. */
  recordRecovery(event: RecoveryEvent): void;
  /**
   * Logs `message` the first time `key` is seen (a tool's name: how to make its writes
   * recoverable; a key of its own for each other once-only warning).
   */
  warnOnce(key: string, message: string): void;
}

/** A route of a tool: a provider (undefined for a tool without one) and its breaker. */
export interface Route {
  readonly provider: string | undefined;
  readonly breaker: CircuitBreaker;
  /** The route as a call is sent to it, plainly or as its breaker's half-open probe (made once). */
  readonly asCall: Routed;
  readonly asProbe: Routed;
}

/** The route a call goes to, and whether it goes as its breaker's half-open probe. */
export interface Routed {
  readonly route: Route;
  readonly probe: boolean;
}

/** One tool, as every call of it sees it: set up once at registration. */
export interface ToolRuntime<A, R> {
  readonly name: string;
  readonly fn: ToolFunction<A, R>;
  readonly options: ToolOptions<A, R>;
  readonly readOnly: boolean;
  /** Undefined unless `kind: "llm"`. */
  readonly isEmpty: ((result: R) => boolean) | undefined;
  /** Primary first; `[undefined]` for a tool without providers. */
  readonly providers: readonly (string | undefined)[];
  /** The same, with their breakers (looked up once, not per call). */
  readonly routes: readonly Route[];
  readonly labels: ToolMetricLabels;
  /**
   * The agent and tool (ATTR_AGENT_NAME, ATTR_TOOL_NAME) on the call's child spans
   * (error, diagnosis, recovery), so a trace query or span metric by agent or tool finds them
   * too; the GenAI names stay on the call's own span.
   */
  readonly identity: Attributes;
  /** A call's deadline when the caller sets neither its own deadline nor its timeout, ms. */
  readonly deadlineMs: number;
  /**
   * The attributes a call's span starts with, by the health status it was admitted under: made
   * once, so a recording SDK checks one object per call rather than one more setAttribute.
   */
  readonly attributes: Readonly<Record<HealthStatus, Attributes>>;
  /** What an answer adds to the call's span (a stream's first token, chunks, finish reason). */
  readonly describe?: (value: R) => Attributes;
  /** What a failure adds to the call's span. */
  readonly describeError?: (error: unknown) => Attributes | undefined;
  /**
   * A streamed call: its attempts are bounded by the stream's own limits, so a half-open probe
   * is not cut to `probeTimeoutMs` (its first-token limit bounds a dead route).
   */
  readonly streamed?: boolean;
}

/** One call in flight: made by admit, ended once by finish. */
export interface CallState {
  readonly span: Span;
  readonly started: number;
  readonly taskId: string | undefined;
  /** The context the call's attempts run in (its span's, when the span carries one). */
  readonly context: Context;
  /** Whether `context` is not the caller's active one: the first attempt must enter it. */
  readonly enter: boolean;
  readonly mode: CallMode;
  /** The attempt timeout of this call (the caller's, else the tool's). */
  readonly timeoutMs: number | undefined;
  /** When the whole call must be over, recovery included (clock time). */
  readonly deadlineAt: number;
  readonly call: CallOptions;
  key: string | undefined;
  ended: boolean;
  /** Part of the answer reached the caller (a stream's first token): nothing may resend the call. */
  committed: boolean;
  /** The latest attempt (what a model call's span ends with); undefined before the first. */
  attempt: AttemptContext | undefined;
}

/**
 * One attempt's own parameters. Kept apart from CallState on purpose: merging them with an
 * object spread on the per-call path measured ~7 µs a call (V8's clone slow path).
 */
export interface AttemptSpec {
  provider: string | undefined;
  /** The attempt's timeout: the one asked for, cut to the call's deadline. */
  timeoutMs: number | undefined;
  /**
   * The timeout asked for (the tool's, the caller's or a strategy's), undefined when none was;
   * never a probe's bound, which is the attempt's alone.
   */
  requestedMs: number | undefined;
  attempt: number;
  /** Context the attempt's spans and the tool's own spans start in. */
  parent: Context;
  /** Whether `parent` is not the active context (entering one costs an AsyncLocalStorage run). */
  enter: boolean;
}

/** An attempt that failed, diagnosed. */
export interface FailedOnce {
  ok: false;
  failure: Failure;
  costUsd: number;
  errorType: string;
  message: string;
}

/** The caller aborted: no diagnosis, no verdict on the route. */
export interface AbortedOnce {
  aborted: true;
  error: unknown;
  costUsd: number;
}

export type OnceResult<R> = { ok: true; value: R; costUsd: number } | FailedOnce | AbortedOnce;

/** Runs the tool once more (recovery's attempts): what recover.ts is handed by tool.ts. */
export type RunOnce<R> = (spec: AttemptSpec) => Promise<OnceResult<R>>;

/** An attempt is not started with less time than this left before the call's deadline, ms. */
export const MIN_ATTEMPT_MS = 100;

/** The breaker key of a route: the provider, or the tool when it has none. */
export const dependencyOf = (tool: string, provider: string | undefined): string =>
  provider ?? tool;

/**
 * The timeout an attempt runs under (before the deadline cuts it): the one asked for, or for a
 * half-open probe that one bounded by the breaker's probe timeout. A stream's probe is bounded by
 * its first-token limit instead: a healthy stream may run longer than any probe bound.
 */
export function attemptBound(
  tool: { readonly streamed?: boolean },
  probe: boolean,
  timeoutMs: number | undefined,
  options: ResolvedOptions,
): number | undefined {
  if (!probe || tool.streamed) return timeoutMs;
  const bound = options.recovery.breaker.probeTimeoutMs;
  return Math.min(timeoutMs ?? bound, bound);
}
