import type { Clock } from "../clock.js";
import type { Diagnosis } from "../diagnosis/diagnoser.js";
import type { StrategyName } from "../telemetry/conventions.js";
import type { BackoffOptions } from "./backoff.js";

/** A failed attempt: what was thrown, how it was diagnosed, and the route it took. */
export interface Failure {
  error: unknown;
  diagnosis: Diagnosis;
  provider: string | undefined;
  timeoutMs: number | undefined;
  /** For an empty LLM answer: the answer itself, returned if nothing better comes. */
  empty?: { value: unknown };
}

/** What one attempt came to. `rejected`: its route's breaker is open, nothing was sent. */
export type AttemptOutcome =
  { ok: true; value: unknown; provider: string | undefined } | { ok: false; rejected: boolean };

export interface AttemptRequest {
  strategy: StrategyName;
  provider: string | undefined;
  timeoutMs: number | undefined;
  /** How long the strategy waited before this attempt, ms. */
  waitMs: number;
}

/** Settings strategies read. */
export interface StrategySettings {
  backoff: BackoffOptions;
  /** retry_with_longer_timeout: doublings before giving up (default 3). */
  maxTimeoutDoublings: number;
  /** retry_with_longer_timeout: the timeout to double when the tool has none, ms (default 30 s). */
  baseTimeoutMs: number;
}

/**
 * What thin evidence buys. A plan that rests on wording alone (a message regex: user text echoed
 * into an error may say "rate limit exceeded") or on nothing at all (UNKNOWN) sends the call again
 * on a route it already failed on at most once, after at most 1 s; another route is not a retry
 * (failover still runs). Structured evidence (status, code, class, errno) keeps the plan's own
 * schedule. "Thin evidence buys one short retry, never a minute."
 */
export const THIN_EVIDENCE = { retries: 1, maxWaitMs: 1_000 } as const;

/** One recovery of one failed call, as strategies see it. */
export interface RecoveryRun {
  readonly tool: string;
  /** The latest failure (updated by every failed attempt). */
  readonly last: Failure;
  /** The tool's providers, primary first (empty for a tool without providers). */
  readonly providers: readonly string[];
  /** Providers this call already failed on. */
  readonly failedProviders: ReadonlySet<string | undefined>;
  readonly settings: StrategySettings;
  readonly clock: Clock;
  /**
   * Retries this call may still send on a route it already failed on: unlimited (Infinity) when
   * the plan rests on structured evidence, else what is left of THIN_EVIDENCE.retries.
   */
  readonly retriesLeft: number;
  /**
   * The longest such a retry may wait, ms: Infinity on structured evidence (the server's
   * Retry-After and the plan's backoff decide), else THIN_EVIDENCE.maxWaitMs. A strategy cuts
   * its own delay to it; a server's longer wait is never cut, the retry is skipped instead.
   */
  readonly retryWaitLimitMs: number;
  /**
   * Runs the tool once more, its timeout cut to the time left. Throws `BudgetStop` when the
   * task's budget cannot pay for it; `rejected` when the route's breaker or the deadline refuse it.
   */
  attempt(request: AttemptRequest): Promise<AttemptOutcome>;
  /**
   * Check before waiting: whether an attempt on `provider` could be sent after `waitMs` (the
   * call's deadline, the route's breaker and the evidence's retry allowance permit it). Throws
   * `BudgetStop` when the budget could not pay for it, so nobody sleeps for an attempt that will
   * never be sent.
   */
  canAttempt(provider: string | undefined, waitMs: number): boolean;
  /** Ms until the route admits a call (open breaker, probe out, cooling down after a 429). */
  routeReadyInMs(provider: string | undefined): number;
  /** Whether the route is known to be down: its status page says so, or attempts keep failing. */
  routeDown(provider: string | undefined): boolean;
  sleep(ms: number): Promise<void>;
  random(): number;
  /** Opens the breaker of the last failure's route. */
  openCircuit(): void;
  /** The tool's fallback answer, when it has one. */
  fallback(): Promise<{ value: unknown } | undefined>;
  /** Puts the agent in read-only mode until health recovers. */
  degrade(): void;
  /** Alerts humans (throttled): whether a notifier took it, and whether any is configured. */
  escalate(): Promise<Escalation>;
}

/** How an escalation went. */
export interface Escalation {
  /** A notifier took the alert. */
  notified: boolean;
  /** `recovery.notifiers` has any notifier (false: nobody could be told). */
  notifierConfigured: boolean;
}

/** Where a strategy left the call. */
export type StepResult =
  | { kind: "recovered"; value: unknown; provider: string | undefined; fallback: boolean }
  | { kind: "next" }
  | { kind: "stop"; error: unknown };

/** A recovery strategy: one small object per file, listed in the registry. */
export interface Strategy {
  readonly name: StrategyName;
  /** Sends the request again (needs an idempotency key for a write). */
  readonly reexecutes: boolean;
  /** Sends it again on the same route (never after a non-retryable pattern). */
  readonly sameRoute: boolean;
  /**
   * Acts beyond this call (opens a breaker, makes the agent read-only, pages a person): run only
   * on structured evidence, never on wording alone.
   */
  readonly shared: boolean;
  /** Why the strategy cannot help this call, if it cannot (it is then skipped). */
  inapplicable?(run: RecoveryRun): string | undefined;
  run(run: RecoveryRun, attempts: number | undefined): Promise<StepResult>;
}

/** Thrown by `attempt` when the task's recovery budget cannot pay for another attempt. */
export class BudgetStop extends Error {
  constructor(
    readonly spentUsd: number,
    readonly limitUsd: number,
  ) {
    super("recovery budget exhausted");
  }
}

export const NEXT: StepResult = { kind: "next" };

/** The step result of an attempt that answered. */
export function answered(out: Extract<AttemptOutcome, { ok: true }>): StepResult {
  return { kind: "recovered", value: out.value, provider: out.provider, fallback: false };
}

/**
 * Sends the call again on the last failure's route after `waitMs`, if the attempt could be sent
 * then (check before waiting); undefined, with no time spent, when it could not.
 */
export async function retryLastRoute(
  run: RecoveryRun,
  strategy: StrategyName,
  waitMs: number,
  timeoutMs = run.last.timeoutMs,
): Promise<AttemptOutcome | undefined> {
  const provider = run.last.provider;
  if (!run.canAttempt(provider, waitMs)) return undefined;
  if (waitMs > 0) await run.sleep(waitMs);
  return run.attempt({ strategy, provider, timeoutMs, waitMs });
}
