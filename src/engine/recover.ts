import { SpanKind, trace, type Span } from "@opentelemetry/api";
import type { Clock } from "../clock.js";
import type { Diagnosis } from "../diagnosis/diagnoser.js";
import { readErrorFacts } from "../diagnosis/error-facts.js";
import { DEFAULT_CHAINS, normalizeStep, type PlanStep } from "../diagnosis/rules.js";
import { runChain, type ChainResult } from "../recovery/executor.js";
import { attemptCost } from "../recovery/providers.js";
import { STRATEGY_REGISTRY } from "../recovery/strategies/index.js";
import {
  BudgetStop,
  THIN_EVIDENCE,
  type AttemptOutcome,
  type Escalation,
  type AttemptRequest,
  type Failure,
  type RecoveryRun,
} from "../recovery/strategy.js";
import {
  ATTR_CIRCUIT_PROBE,
  ATTR_RECOVERY_ATTEMPT,
  ATTR_RECOVERY_COST_DIFFERENTIAL_USD,
  ATTR_RECOVERY_COST_USD,
  ATTR_RECOVERY_OUTCOME,
  ATTR_RECOVERY_PROVIDER,
  ATTR_RECOVERY_SKIPPED,
  ATTR_RECOVERY_STRATEGY,
  ATTR_RECOVERY_WAIT_MS,
  SPAN_RECOVERY,
  type RecoveryOutcome,
  type StrategyName,
} from "../telemetry/conventions.js";
import { redact } from "../telemetry/redact.js";
import { setSpanError, spanTime } from "../telemetry/spans.js";
import type { CircuitBreaker } from "../recovery/breaker.js";
import type { RecoveryBudget } from "../recovery/budget.js";
import {
  dependencyOf,
  MIN_ATTEMPT_MS,
  attemptBound,
  type CallState,
  type Engine,
  type RunOnce,
  type ToolRuntime,
} from "./engine.js";
import type { ResolvedRecovery } from "./options.js";
import { recordOnRoute } from "./route-outcome.js";

/** Failures of a route in its breaker's window that make it "down" for a quick retry. */
const REPEATED_FAILURES = 2;

export interface RecoveryInput<A, R> {
  tool: ToolRuntime<A, R>;
  call: CallState;
  /** Runs the tool once more (attempt.ts, bound to this call by tool.ts). */
  runOnce: RunOnce<R>;
  first: Failure;
  firstMessage: string;
  plan: readonly PlanStep[];
  /** Why steps that send the call again are skipped (undefined: they run). */
  noResend: string | undefined;
  /** The task's budget (or the call's own, outside a task). */
  budget: RecoveryBudget;
  /** What the first, failed attempt cost. */
  firstCostUsd: number;
  firstErrorAt: number;
  fallback: (() => Promise<{ value: unknown }>) | undefined;
}

export interface RecoveryResult {
  chain: ChainResult;
  last: Failure;
  /** Recovery attempts made (the first, failed attempt not included). */
  attempts: number;
  /** Those of them that failed. */
  failedAttempts: number;
  /** The route of every failed attempt, the first included. */
  failedRoutes: (string | undefined)[];
}

/**
 * The steps to run for a diagnosis: the tool's plan for the pattern, else the instance's, else
 * the rule's chain. Not actionable (UNKNOWN, or confidence < 0.5): the UNKNOWN plan (one retry,
 * then the next provider: nothing beyond this call) or, under `unknown: "none"`, no step at all.
 * Either way the incident gets its recovery event, so the log shows every failure for review.
 */
export function recoveryPlan<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  diagnosis: Diagnosis,
): { plan: readonly PlanStep[]; noResend: string | undefined } {
  const { recovery } = engine.options;
  const planOf = (pattern: Diagnosis["pattern"]) =>
    tool.options.plans?.[pattern] ?? recovery.plans[pattern];
  const plan = diagnosis.actionable
    ? (planOf(diagnosis.pattern) ?? diagnosis.strategies)
    : recovery.unknown === "none"
      ? []
      : (planOf("UNKNOWN") ?? DEFAULT_CHAINS.UNKNOWN);
  // The caller holds part of the answer and chose to be told (a stream's `fail`): the steps that
  // would resend show as skipped, and nothing acts beyond the call for a failure never retried.
  if (c.committed) {
    const resending = plan.filter(
      (step) => STRATEGY_REGISTRY[normalizeStep(step).strategy].reexecutes,
    );
    return { plan: resending, noResend: "part of the answer already reached the caller" };
  }
  if (tool.readOnly || c.key !== undefined) return { plan, noResend: undefined };
  if (plan.some((step) => STRATEGY_REGISTRY[normalizeStep(step).strategy].reexecutes)) {
    engine.warnOnce(
      tool.name,
      `selfheal: write tool "${tool.name}" failed and was not retried or failed over: it has no idempotency key. ` +
        `Add idempotencyKey: (args) => args.orderId (a key unique per logical write) to its options, ` +
        `or pass { idempotencyKey } per call, so a retry can never write twice.`,
    );
  }
  return { plan, noResend: "a write without an idempotency key is never sent twice" };
}

/**
 * Runs a failed call's recovery chain and records it: one recovery span per attempt and per
 * step that sends nothing, the recovery metrics, spend against the task's budget, breaker
 * outcomes, and one recovery event (listeners, and the JSONL log when configured).
 */
export function recoverCall<A, R>(
  engine: Engine,
  input: RecoveryInput<A, R>,
): Promise<RecoveryResult> {
  return new Recovery(engine, input).run();
}

/** The outcome a chain result is reported as. */
const OUTCOMES = {
  recovered: "recovered",
  budget: "budget_exhausted",
  stopped: "escalated",
  exhausted: "failed",
} as const;

/** One recovery of one failed call: what strategies see (RecoveryRun), and its running tally. */
class Recovery<A, R> implements RecoveryRun {
  readonly tool: string;
  readonly providers: readonly string[];
  readonly failedProviders: Set<string | undefined>;
  readonly settings: ResolvedRecovery;
  readonly clock: Clock;
  readonly random: () => number;
  readonly retryWaitLimitMs: number;
  last: Failure;
  retriesLeft: number;
  private attempts = 0;
  private costUsd = 0;
  private differentialUsd = 0;
  private readonly steps: { strategy: StrategyName; skipped?: string }[] = [];
  /** The route of every failed attempt, the first included. */
  private readonly failedRoutes: (string | undefined)[];
  /** What an attempt on a provider last cost. */
  private readonly lastCost: Map<string | undefined, number>;

  constructor(
    private readonly engine: Engine,
    private readonly input: RecoveryInput<A, R>,
  ) {
    const { options } = engine;
    this.tool = input.tool.name;
    this.providers = input.tool.providers.filter((p): p is string => p !== undefined);
    this.failedProviders = new Set([input.first.provider]);
    this.failedRoutes = [input.first.provider];
    this.lastCost = new Map([[input.first.provider, input.firstCostUsd]]);
    this.settings = options.recovery;
    this.clock = options.clock;
    this.random = options.recovery.random;
    this.last = input.first;
    // The plan rests on the first failure's diagnosis: its evidence sets what retrying may cost.
    const thin = input.first.diagnosis.evidence !== "structured";
    this.retriesLeft = thin ? THIN_EVIDENCE.retries : Number.POSITIVE_INFINITY;
    this.retryWaitLimitMs = thin ? THIN_EVIDENCE.maxWaitMs : Number.POSITIVE_INFINITY;
  }

  async run(): Promise<RecoveryResult> {
    let chain: ChainResult;
    try {
      chain = await runChain(this, this.input.plan, {
        noResend: this.input.noResend,
        onStep: (strategy, skipped) => {
          this.onStep(strategy, skipped);
        },
      });
    } catch (error) {
      this.report("failed", undefined, false); // the caller aborted mid-recovery, or a fallback threw
      throw error;
    }
    if (chain.outcome === "budget") await this.escalate();
    const answered = chain.outcome === "recovered" && !chain.fallback;
    this.report(
      OUTCOMES[chain.outcome],
      chain.outcome === "recovered" ? chain.provider : undefined,
      answered,
    );
    return {
      chain,
      last: this.last,
      attempts: this.attempts,
      failedAttempts: this.attempts - (answered ? 1 : 0),
      failedRoutes: this.failedRoutes,
    };
  }

  async attempt(request: AttemptRequest): Promise<AttemptOutcome> {
    const { engine, input, clock } = this;
    if (this.sameRouteRefused(request.provider)) return { ok: false, rejected: true };
    const retry = this.failedProviders.has(request.provider);
    if (retry && this.retryRefused(request.waitMs)) return { ok: false, rejected: true };
    const left = this.timeLeft();
    if (left < MIN_ATTEMPT_MS) return { ok: false, rejected: true };
    // Reserve the expected cost first, so concurrent calls of a task cannot overspend it together;
    // and before the breaker, so a refused attempt never holds a half-open probe.
    const expected = this.expectedCost(request.provider);
    this.mustAfford(expected);
    const breaker = this.breakerOf(request.provider);
    const admittedAt = clock.now();
    const admission = breaker.admit(admittedAt);
    if (admission === "rejected") return { ok: false, rejected: true };
    input.budget.spend(expected);
    if (retry) this.retriesLeft--;
    const number = 1 + ++this.attempts;
    const probe = admission === "probe";
    // Later attempts start from the timeout asked for, never from a probe's bound.
    const requestedMs = request.timeoutMs;
    const boundMs = attemptBound(input.tool, probe, requestedMs, engine.options);
    const span = engine.tracer.startSpan(
      SPAN_RECOVERY,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          ...input.tool.identity,
          [ATTR_RECOVERY_STRATEGY]: request.strategy,
          [ATTR_RECOVERY_ATTEMPT]: number,
          [ATTR_RECOVERY_WAIT_MS]: request.waitMs,
          [ATTR_CIRCUIT_PROBE]: probe,
        },
        startTime: spanTime(admittedAt),
      },
      input.call.context,
    );
    if (request.provider !== undefined) span.setAttribute(ATTR_RECOVERY_PROVIDER, request.provider);
    const out = await input.runOnce({
      provider: request.provider,
      timeoutMs: Math.min(boundMs ?? Infinity, left),
      requestedMs,
      attempt: number,
      parent: trace.setSpan(input.call.context, span),
      enter: true,
    });
    input.budget.spend(out.costUsd - expected);
    this.lastCost.set(request.provider, out.costUsd);
    this.costUsd += out.costUsd;
    if ("aborted" in out) {
      span.setAttribute(ATTR_RECOVERY_OUTCOME, "aborted");
      span.end(spanTime(clock.now()));
      throw out.error; // the caller gave up: recovery ends with the caller's reason
    }
    this.countDifferential(request.provider, out.costUsd, span);
    const endedAt = clock.now();
    recordOnRoute(breaker, endedAt, out.ok ? undefined : out.failure.diagnosis, probe);
    span.setAttribute(ATTR_RECOVERY_OUTCOME, out.ok ? "success" : "failure");
    span.setAttribute(ATTR_RECOVERY_COST_USD, out.costUsd);
    if (!out.ok) setSpanError(span, out.errorType, out.message);
    span.end(spanTime(endedAt));
    const outcome = out.ok ? "success" : "failure";
    engine.metrics.recoveryStep(input.tool.labels, request.strategy, outcome, out.costUsd);
    if (out.ok) return { ok: true, value: out.value, provider: request.provider };
    this.last = out.failure;
    this.failedProviders.add(request.provider);
    this.failedRoutes.push(request.provider);
    return { ok: false, rejected: false };
  }

  canAttempt(provider: string | undefined, waitMs: number): boolean {
    // The attempt guard would refuse it: never wait for it (a retry loop would wait out the call).
    if (this.sameRouteRefused(provider)) return false;
    if (this.failedProviders.has(provider) && this.retryRefused(waitMs)) return false;
    this.mustAfford(this.expectedCost(provider));
    return (
      waitMs + MIN_ATTEMPT_MS <= this.timeLeft() &&
      this.breakerOf(provider).retryAfterMs(this.clock.now()) <= waitMs
    );
  }

  routeReadyInMs(provider: string | undefined): number {
    return this.breakerOf(provider).retryAfterMs(this.clock.now());
  }

  routeDown(provider: string | undefined): boolean {
    const breaker = this.breakerOf(provider);
    const now = this.clock.now();
    return (
      (provider === this.last.provider && this.last.diagnosis.statusPage === "degraded") ||
      breaker.state(now) !== "closed" ||
      breaker.recentFailures(now) >= REPEATED_FAILURES
    );
  }

  sleep(ms: number): Promise<void> {
    return this.clock.sleep(ms, this.input.call.call.signal);
  }

  openCircuit(): void {
    this.breakerOf(this.last.provider).open(this.clock.now(), this.last.diagnosis.retryAfterMs);
  }

  async fallback(): Promise<{ value: unknown } | undefined> {
    return this.input.fallback?.();
  }

  degrade(): void {
    this.engine.degrade();
  }

  async escalate(): Promise<Escalation> {
    const { engine, clock } = this;
    const { agent } = engine.options;
    const pattern = this.last.diagnosis.pattern;
    if (engine.options.recovery.notifiers.length === 0) {
      engine.warnOnce(
        "\0escalation without a notifier",
        `selfheal: "${this.tool}" failed with ${pattern} and needs a human, but no notifier is configured, so nobody was alerted. ` +
          `Set recovery.notifiers (slackNotifier, webhookNotifier or pushoverNotifier from selfheal/notify) to be paged. ` +
          `Said once: later escalations say so in their HumanEscalationRequiredError and recovery event only.`,
      );
      return { notified: false, notifierConfigured: false };
    }
    const sending = engine.escalator.escalate({
      kind: `${agent}/${this.tool}/${pattern}`,
      title: `${agent}: ${this.tool} is failing (${pattern})`,
      text: `Recovery of "${this.tool}" ran out of options after ${this.attempts} attempts. Last error: ${this.input.firstMessage}`,
      agent,
      tool: this.tool,
      at: clock.now(),
    });
    // The alert goes out whatever happens; the call waits for it only within its deadline.
    const controller = new AbortController();
    const deadline = clock.sleep(Math.max(0, this.timeLeft()), controller.signal).then(
      () => false,
      () => false,
    );
    try {
      return { notified: await Promise.race([sending, deadline]), notifierConfigured: true };
    } finally {
      controller.abort();
    }
  }

  /** The one guard for every strategy: never the same route again after a pattern retrying cannot fix. */
  private sameRouteRefused(provider: string | undefined): boolean {
    return provider === this.last.provider && !this.last.diagnosis.retryable;
  }

  /** A retry on a route this call failed on that the evidence does not pay for (THIN_EVIDENCE). */
  private retryRefused(waitMs: number): boolean {
    return this.retriesLeft <= 0 || waitMs > this.retryWaitLimitMs;
  }

  private timeLeft(): number {
    return this.input.call.deadlineAt - this.clock.now();
  }

  private breakerOf(provider: string | undefined): CircuitBreaker {
    return this.engine.breakers.get(dependencyOf(this.tool, provider));
  }

  /** What an attempt on a provider is expected to cost: its price, else what one last cost. */
  private expectedCost(provider: string | undefined): number {
    const config = provider === undefined ? undefined : this.settings.providers.get(provider);
    return Math.max(attemptCost(config, undefined, undefined), this.lastCost.get(provider) ?? 0);
  }

  /** Throws BudgetStop when the task's budget cannot pay for an attempt. */
  private mustAfford(usd: number): void {
    const { budget } = this.input;
    if (!budget.allows(usd)) throw new BudgetStop(budget.spentUsd, budget.limitUsd);
  }

  /** Extra spend of an attempt on a secondary over the primary's price. */
  private countDifferential(provider: string | undefined, costUsd: number, span: Span): void {
    const primary = this.input.tool.providers[0];
    if (provider === primary || primary === undefined || provider === undefined) return;
    const differential =
      costUsd - attemptCost(this.settings.providers.get(primary), undefined, undefined);
    this.differentialUsd += differential;
    span.setAttribute(ATTR_RECOVERY_COST_DIFFERENTIAL_USD, differential);
    if (differential !== 0)
      this.engine.metrics.failoverDifferentialUsd(primary, provider, differential);
  }

  private onStep(strategy: StrategyName, skipped: string | undefined): void {
    const { metrics } = this.engine;
    this.steps.push(skipped === undefined ? { strategy } : { strategy, skipped });
    if (skipped !== undefined) {
      metrics.recoveryStep(this.input.tool.labels, strategy, "skipped", 0);
      this.stepSpan(strategy, "skipped", { [ATTR_RECOVERY_SKIPPED]: skipped });
    } else if (!STRATEGY_REGISTRY[strategy].reexecutes) {
      metrics.recoveryStep(this.input.tool.labels, strategy, "applied", 0);
      this.stepSpan(strategy, "applied");
    }
  }

  /** A recovery span for a step that sends nothing. */
  private stepSpan(strategy: StrategyName, outcome: string, extra: Record<string, string> = {}) {
    const at = spanTime(this.clock.now());
    this.engine.tracer
      .startSpan(
        SPAN_RECOVERY,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            ...this.input.tool.identity,
            [ATTR_RECOVERY_STRATEGY]: strategy,
            [ATTR_RECOVERY_OUTCOME]: outcome,
            ...extra,
          },
          startTime: at,
        },
        this.input.call.context,
      )
      .end(at);
  }

  private report(outcome: RecoveryOutcome, provider: string | undefined, answered: boolean) {
    const { engine, input, clock } = this;
    const durationMs = clock.now() - input.firstErrorAt;
    const wastedRetries = answered ? 0 : this.attempts;
    engine.metrics.recovery(input.tool.labels, outcome, durationMs, wastedRetries);
    engine.recordRecovery({
      at: clock.now(),
      agent: engine.options.agent,
      tool: this.tool,
      taskId: input.call.taskId,
      error: input.firstMessage,
      pattern: input.first.diagnosis.pattern,
      confidence: input.first.diagnosis.confidence,
      strategy: this.steps.filter((s) => s.skipped === undefined).at(-1)?.strategy,
      steps: this.steps,
      attempts: this.attempts,
      durationMs,
      outcome,
      costUsd: this.costUsd,
      wastedRetries,
      failoverCostDifferentialUsd: this.differentialUsd,
      provider,
      ...firstErrorKeys(input.first, clock.now()),
    });
  }
}

/** Longest error code kept on an event: codes are identifiers, not texts. */
const MAX_CODE_LENGTH = 64;

/** The status and first code of the first error, for the event log (`--suggest-rules`). */
function firstErrorKeys(first: Failure, now: number): { status?: number; code?: string } {
  const { status } = first.diagnosis;
  const [code] = readErrorFacts(first.error, now).codes;
  return {
    ...(status !== undefined && { status }),
    ...(code !== undefined && { code: redact(code, MAX_CODE_LENGTH) }),
  };
}
