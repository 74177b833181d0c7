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
import { runOnce, type AttemptSpec, type ToolRuntime } from "./attempt.js";
import type { Engine } from "./tool.js";

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
  /** Always 0 for selfheal: it never retries a pattern that retrying cannot fix. */
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
  /** The context of the call's tool-call span. */
  callContext: Context;
  /** What every attempt of the call shares. */
  base: Omit<AttemptSpec, "provider" | "timeoutMs" | "attempt" | "parent">;
  firstErrorAt: number;
  fallback: (() => Promise<{ value: unknown }>) | undefined;
}

export interface RecoveryResult {
  chain: ChainResult;
  last: Failure;
  /** Failed recovery attempts. */
  failedAttempts: number;
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
  const budget = engine.budgets.for(input.base.taskId);
  const primary = tool.providers[0];
  const state = {
    last: input.first,
    attempts: 0,
    failed: 0,
    costUsd: 0,
    differentialUsd: 0,
    steps: [] as { strategy: StrategyName; skipped?: string }[],
    failedProviders: new Set<string | undefined>([input.first.provider]),
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

  const attempt = async (
    request: Parameters<RecoveryRun["attempt"]>[0],
  ): Promise<AttemptOutcome> => {
    // The one guard for every strategy: never the same route again after a pattern retrying cannot fix.
    if (request.provider === state.last.provider && !state.last.diagnosis.retryable)
      return { ok: false, rejected: true };
    const breaker = breakers.get(dependencyOf(tool.name, request.provider));
    const admission = breaker.admit(clock.now());
    if (admission === "rejected") return { ok: false, rejected: true };
    const config =
      request.provider === undefined ? undefined : settings.providers.get(request.provider);
    if (!budget.allows(attemptCost(config, undefined, undefined)))
      throw new BudgetStop(budget.spentUsd, budget.limitUsd);
    const number = 1 + ++state.attempts;
    const probe = admission === "probe";
    const timeoutMs = probe
      ? Math.min(
          request.timeoutMs ?? settings.breaker.probeTimeoutMs,
          settings.breaker.probeTimeoutMs,
        )
      : request.timeoutMs;
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
    const out = await runOnce(engine, tool, input.args, {
      ...input.base,
      provider: request.provider,
      timeoutMs,
      attempt: number,
      parent: trace.setSpan(input.callContext, span),
    });
    budget.spend(out.costUsd);
    state.costUsd += out.costUsd;
    if (request.provider !== primary && primary !== undefined && request.provider !== undefined) {
      const differential =
        out.costUsd - attemptCost(settings.providers.get(primary), undefined, undefined);
      state.differentialUsd += differential;
      span.setAttribute(ATTR_RECOVERY_COST_DIFFERENTIAL_USD, differential);
      if (differential !== 0)
        metrics.failoverDifferentialUsd(primary, request.provider, differential);
    }
    breaker.record(clock.now(), out.ok, probe, tool.providers.length > 1);
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
    state.failed++;
    state.failedProviders.add(request.provider);
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
    sleep: (ms) => clock.sleep(ms, input.base.callerSignal),
    random: settings.random,
    openCircuit: () => {
      breakers.get(dependencyOf(tool.name, state.last.provider)).open(clock.now());
    },
    fallback: async () => input.fallback?.(),
    degrade: () => {
      engine.degrade();
    },
    escalate: () =>
      engine.escalator.escalate({
        kind: `${options.agent}/${tool.name}/${state.last.diagnosis.pattern}`,
        title: `${options.agent}: ${tool.name} is failing (${state.last.diagnosis.pattern})`,
        text: `Recovery of "${tool.name}" ran out of options after ${state.attempts} attempts. Last error: ${input.firstMessage}`,
        agent: options.agent,
        tool: tool.name,
        at: clock.now(),
      }),
  };

  const chain = await runChain(run, input.plan, {
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

  const outcome: RecoveryOutcome =
    chain.outcome === "recovered"
      ? "recovered"
      : chain.outcome === "budget"
        ? "budget_exhausted"
        : chain.outcome === "stopped"
          ? "escalated"
          : "failed";
  if (chain.outcome === "budget") await run.escalate();
  const durationMs = clock.now() - input.firstErrorAt;
  metrics.recovery(tool.labels, outcome, durationMs);
  const ran = state.steps.filter((s) => s.skipped === undefined);
  engine.recordRecovery({
    at: clock.now(),
    agent: options.agent,
    tool: tool.name,
    taskId: input.base.taskId,
    error: input.firstMessage,
    pattern: input.first.diagnosis.pattern,
    confidence: input.first.diagnosis.confidence,
    strategy: ran.at(-1)?.strategy,
    steps: state.steps,
    attempts: state.attempts,
    durationMs,
    outcome,
    costUsd: state.costUsd,
    wastedRetries: 0,
    failoverCostDifferentialUsd: state.differentialUsd,
    provider: chain.outcome === "recovered" ? chain.provider : undefined,
  });
  return { chain, last: state.last, failedAttempts: state.failed };
}
