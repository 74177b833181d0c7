import { SpanKind, SpanStatusCode, trace, type Context } from "@opentelemetry/api";
import type { PlanStep } from "../diagnosis/rules.js";
import { runChain, type ChainResult } from "../recovery/executor.js";
import { attemptCost } from "../recovery/providers.js";
import { STRATEGY_REGISTRY } from "../recovery/strategies/index.js";
import {
  BudgetStop,
  type AttemptOutcome,
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
import type { RecoveryBudget } from "../recovery/budget.js";
import { runOnce, type CallBase, type ToolRuntime } from "./attempt.js";
import { recordOnRoute } from "./route-outcome.js";
import type { ResolvedOptions } from "./options.js";
import type { Engine } from "./tool.js";

/** An attempt is not started with less time than this left before the call's deadline, ms. */
export const MIN_ATTEMPT_MS = 100;
/** Failures of a route in its breaker's window that make it "down" for a quick retry. */
const REPEATED_FAILURES = 2;

/** A finished recovery, as listeners and the JSONL log get it. */
export interface RecoveryEvent {
  at: number;
  agent: string;
  tool: string;
  taskId: string | undefined;
  /** The first error, redacted and cut. */
  error: string;
  pattern: string;
  confidence: number;
  /** The strategy that ended the recovery (the last one run). */
  strategy: StrategyName | undefined;
  /** Every step, in order, with `skipped: reason` for those not run. */
  steps: { strategy: StrategyName; skipped?: string }[];
  /** Recovery attempts (the first, failed attempt not included). */
  attempts: number;
  /** From the first error to the end of recovery, ms. */
  durationMs: number;
  outcome: RecoveryOutcome;
  /** Spend of the recovery attempts, USD. */
  costUsd: number;
  /**
   * Recovery attempts that could not help: all of them when the call got no real answer (it
   * failed, or only the fallback answered). Same-route retries of a non-retryable pattern would
   * count too; the attempt guard never makes them.
   */
  wastedRetries: number;
  /** Extra spend of attempts on secondaries over the primary's price, USD. */
  failoverCostDifferentialUsd: number;
  /** The provider that answered, when the call recovered. */
  provider: string | undefined;
}

export interface RecoveryInput<A, R> {
  tool: ToolRuntime<A, R>;
  args: A;
  first: Failure;
  firstMessage: string;
  plan: readonly PlanStep[];
  /** A write without an idempotency key: steps that send it again are skipped. */
  mayReexecute: boolean;
  /** The task's budget (or the call's own, outside a task). */
  budget: RecoveryBudget;
  /** What the first, failed attempt cost. */
  firstCostUsd: number;
  /** The context of the call's tool-call span. */
  callContext: Context;
  /** What every attempt of the call shares. */
  base: CallBase;
  firstErrorAt: number;
  /** When the whole call must be over (clock time). */
  deadlineAt: number;
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

/** The breaker key of a route: the provider, or the tool when it has none. */
export const dependencyOf = (tool: string, provider: string | undefined): string =>
  provider ?? tool;

/**
 * Runs a failed call's recovery chain and records it: one recovery span per attempt and
 * per step that sends nothing, the recovery metrics, spend against the task's budget, breaker
 * outcomes, and one recovery event (listeners, and the JSONL log when configured).
 */
export async function recoverCall<A, R>(
  engine: Engine,
  input: RecoveryInput<A, R>,
): Promise<RecoveryResult> {
  const { options, tracer, metrics, breakers } = engine;
  const { clock } = options;
  const { tool } = input;
  const settings = options.recovery;
  const { budget } = input;
  const primary = tool.providers[0];
  /** What an attempt on a provider is expected to cost: its price, else what one last cost. */
  const lastCost = new Map<string | undefined, number>([
    [input.first.provider, input.firstCostUsd],
  ]);
  const expectedCost = (provider: string | undefined) =>
    Math.max(
      attemptCost(
        provider === undefined ? undefined : settings.providers.get(provider),
        undefined,
        undefined,
      ),
      lastCost.get(provider) ?? 0,
    );
  const state = {
    last: input.first,
    attempts: 0,
    costUsd: 0,
    differentialUsd: 0,
    steps: [] as { strategy: StrategyName; skipped?: string }[],
    failedProviders: new Set<string | undefined>([input.first.provider]),
    failedRoutes: [input.first.provider] as (string | undefined)[],
  };

  const stepSpan = (
    strategy: StrategyName,
    outcome: string,
    extra: Record<string, string> = {},
  ) => {
    tracer
      .startSpan(
        SPAN_RECOVERY,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            [ATTR_RECOVERY_STRATEGY]: strategy,
            [ATTR_RECOVERY_OUTCOME]: outcome,
            ...extra,
          },
        },
        input.callContext,
      )
      .end();
  };

  const timeLeft = () => input.deadlineAt - clock.now();
  const breakerOf = (provider: string | undefined) =>
    breakers.get(dependencyOf(tool.name, provider));
  const canAttempt = (provider: string | undefined, waitMs: number): boolean => {
    if (!budget.allows(expectedCost(provider)))
      throw new BudgetStop(budget.spentUsd, budget.limitUsd);
    return (
      waitMs + MIN_ATTEMPT_MS <= timeLeft() &&
      breakerOf(provider).retryAfterMs(clock.now()) <= waitMs
    );
  };

  const attempt = async (
    request: Parameters<RecoveryRun["attempt"]>[0],
  ): Promise<AttemptOutcome> => {
    // The one guard for every strategy: never the same route again after a pattern retrying cannot fix.
    if (request.provider === state.last.provider && !state.last.diagnosis.retryable)
      return { ok: false, rejected: true };
    const left = timeLeft();
    if (left < MIN_ATTEMPT_MS) return { ok: false, rejected: true };
    // Reserve the expected cost first, so concurrent calls of a task cannot overspend it together;
    // and before the breaker, so a refused attempt never holds a half-open probe.
    const expected = expectedCost(request.provider);
    if (!budget.allows(expected)) throw new BudgetStop(budget.spentUsd, budget.limitUsd);
    const breaker = breakerOf(request.provider);
    const admission = breaker.admit(clock.now());
    if (admission === "rejected") return { ok: false, rejected: true };
    budget.spend(expected);
    const number = 1 + ++state.attempts;
    const probe = admission === "probe";
    const timeoutMs = Math.min(
      probe ? probeTimeout(request.timeoutMs, options) : (request.timeoutMs ?? Infinity),
      left,
    );
    const span = tracer.startSpan(
      SPAN_RECOVERY,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [ATTR_RECOVERY_STRATEGY]: request.strategy,
          [ATTR_RECOVERY_ATTEMPT]: number,
          [ATTR_RECOVERY_WAIT_MS]: request.waitMs,
          [ATTR_CIRCUIT_PROBE]: probe,
        },
      },
      input.callContext,
    );
    if (request.provider !== undefined) span.setAttribute(ATTR_RECOVERY_PROVIDER, request.provider);
    const out = await runOnce(engine, tool, input.args, input.base, {
      provider: request.provider,
      timeoutMs,
      attempt: number,
      parent: trace.setSpan(input.callContext, span),
    });
    budget.spend(out.costUsd - expected);
    lastCost.set(request.provider, out.costUsd);
    state.costUsd += out.costUsd;
    if ("aborted" in out) {
      span.setAttribute(ATTR_RECOVERY_OUTCOME, "aborted");
      span.end();
      throw out.error; // the caller gave up: recovery ends with the caller's reason
    }
    if (request.provider !== primary && primary !== undefined && request.provider !== undefined) {
      const differential =
        out.costUsd - attemptCost(settings.providers.get(primary), undefined, undefined);
      state.differentialUsd += differential;
      span.setAttribute(ATTR_RECOVERY_COST_DIFFERENTIAL_USD, differential);
      if (differential !== 0)
        metrics.failoverDifferentialUsd(primary, request.provider, differential);
    }
    recordOnRoute(breaker, clock.now(), out.ok ? undefined : out.failure.diagnosis, probe);
    span.setAttribute(ATTR_RECOVERY_OUTCOME, out.ok ? "success" : "failure");
    span.setAttribute(ATTR_RECOVERY_COST_USD, out.costUsd);
    if (!out.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: out.message });
    span.end();
    metrics.recoveryStep(
      tool.labels,
      request.strategy,
      out.ok ? "success" : "failure",
      out.costUsd,
    );
    if (out.ok) return { ok: true, value: out.value, provider: request.provider };
    state.last = out.failure;
    state.failedProviders.add(request.provider);
    state.failedRoutes.push(request.provider);
    return { ok: false, rejected: false };
  };

  const run: RecoveryRun = {
    tool: tool.name,
    get last() {
      return state.last;
    },
    providers: tool.providers.filter((p): p is string => p !== undefined),
    failedProviders: state.failedProviders,
    settings,
    clock,
    attempt,
    canAttempt,
    routeReadyInMs: (provider) => breakerOf(provider).retryAfterMs(clock.now()),
    routeDown: (provider) =>
      (provider === state.last.provider && state.last.diagnosis.statusPage === "degraded") ||
      breakerOf(provider).state(clock.now()) !== "closed" ||
      breakerOf(provider).recentFailures(clock.now()) >= REPEATED_FAILURES,
    sleep: (ms) => clock.sleep(ms, input.base.callerSignal),
    random: settings.random,
    openCircuit: () => {
      breakerOf(state.last.provider).open(clock.now(), state.last.diagnosis.retryAfterMs);
    },
    fallback: async () => input.fallback?.(),
    degrade: () => {
      engine.degrade();
    },
    escalate: async () => {
      const sending = engine.escalator.escalate({
        kind: `${options.agent}/${tool.name}/${state.last.diagnosis.pattern}`,
        title: `${options.agent}: ${tool.name} is failing (${state.last.diagnosis.pattern})`,
        text: `Recovery of "${tool.name}" ran out of options after ${state.attempts} attempts. Last error: ${input.firstMessage}`,
        agent: options.agent,
        tool: tool.name,
        at: clock.now(),
      });
      // The alert goes out whatever happens; the call waits for it only within its deadline.
      const controller = new AbortController();
      const deadline = clock.sleep(Math.max(0, timeLeft()), controller.signal).then(
        () => false,
        () => false,
      );
      try {
        return await Promise.race([sending, deadline]);
      } finally {
        controller.abort();
      }
    },
  };

  const report = (outcome: RecoveryOutcome, provider: string | undefined, answered: boolean) => {
    const durationMs = clock.now() - input.firstErrorAt;
    const wastedRetries = answered ? 0 : state.attempts;
    metrics.recovery(tool.labels, outcome, durationMs, wastedRetries);
    engine.recordRecovery({
      at: clock.now(),
      agent: options.agent,
      tool: tool.name,
      taskId: input.base.taskId,
      error: input.firstMessage,
      pattern: input.first.diagnosis.pattern,
      confidence: input.first.diagnosis.confidence,
      strategy: state.steps.filter((s) => s.skipped === undefined).at(-1)?.strategy,
      steps: state.steps,
      attempts: state.attempts,
      durationMs,
      outcome,
      costUsd: state.costUsd,
      wastedRetries,
      failoverCostDifferentialUsd: state.differentialUsd,
      provider,
    });
  };

  let chain: ChainResult;
  try {
    chain = await runChain(run, input.plan, {
      mayReexecute: input.mayReexecute,
      onStep: (strategy, skipped) => {
        state.steps.push(skipped === undefined ? { strategy } : { strategy, skipped });
        if (skipped !== undefined) {
          metrics.recoveryStep(tool.labels, strategy, "skipped", 0);
          stepSpan(strategy, "skipped", { [ATTR_RECOVERY_SKIPPED]: skipped });
        } else if (!STRATEGY_REGISTRY[strategy].reexecutes) {
          metrics.recoveryStep(tool.labels, strategy, "applied", 0);
          stepSpan(strategy, "applied");
        }
      },
    });
  } catch (error) {
    report("failed", undefined, false); // the caller aborted mid-recovery, or a fallback threw
    throw error;
  }
  if (chain.outcome === "budget") await run.escalate();
  const outcomes = {
    recovered: "recovered",
    budget: "budget_exhausted",
    stopped: "escalated",
    exhausted: "failed",
  } as const;
  const answered = chain.outcome === "recovered" && !chain.fallback;
  report(
    outcomes[chain.outcome],
    chain.outcome === "recovered" ? chain.provider : undefined,
    answered,
  );
  return {
    chain,
    last: state.last,
    attempts: state.attempts,
    failedAttempts: state.attempts - (answered ? 1 : 0),
    failedRoutes: state.failedRoutes,
  };
}

/** The timeout of a half-open probe: the attempt's, bounded by the breaker's probe timeout. */
export function probeTimeout(timeoutMs: number | undefined, options: ResolvedOptions): number {
  const bound = options.recovery.breaker.probeTimeoutMs;
  return Math.min(timeoutMs ?? bound, bound);
}
