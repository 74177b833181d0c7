import { normalizeStep, type PlanStep } from "../diagnosis/rules.js";
import type { StrategyName } from "../telemetry/conventions.js";
import { BudgetStop, type RecoveryRun } from "./strategy.js";
import { STRATEGY_REGISTRY } from "./strategies/index.js";

/** How a recovery chain ended. */
export type ChainResult =
  | { outcome: "recovered"; value: unknown; provider: string | undefined; strategy: StrategyName }
  /** Every step gave up: the last error stands. */
  | { outcome: "exhausted" }
  /** A step ended the call with its own error (escalation). */
  | { outcome: "stopped"; error: unknown; strategy: StrategyName }
  /** The task's budget could not pay for another attempt. */
  | { outcome: "budget"; spentUsd: number; limitUsd: number };

export interface ChainOptions {
  /** Called with each step as it starts, and with the steps skipped and why. */
  onStep(strategy: StrategyName, skipped?: string): void;
}

/**
 * Runs a recovery chain: each strategy in turn until one recovers the call or ends it; when a
 * strategy gives up, the next runs. A step that would retry the same route after a pattern
 * retrying cannot fix is skipped here, once for every strategy. (A write without an idempotency
 * key never reaches a chain.)
 */
export async function runChain(
  run: RecoveryRun,
  plan: readonly PlanStep[],
  options: ChainOptions,
): Promise<ChainResult> {
  try {
    for (const step of plan) {
      const { strategy: name, attempts } = normalizeStep(step);
      const strategy = STRATEGY_REGISTRY[name];
      const skip =
        strategy.sameRoute && !run.last.diagnosis.retryable
          ? `${run.last.diagnosis.pattern} is never retried on the same route`
          : strategy.inapplicable?.(run);
      if (skip !== undefined) {
        options.onStep(name, skip);
        continue;
      }
      options.onStep(name);
      const result = await strategy.run(run, attempts);
      if (result.kind === "recovered") {
        return {
          outcome: "recovered",
          value: result.value,
          provider: result.provider,
          strategy: name,
        };
      }
      if (result.kind === "stop")
        return { outcome: "stopped", error: result.error, strategy: name };
    }
    return { outcome: "exhausted" };
  } catch (e) {
    if (e instanceof BudgetStop)
      return { outcome: "budget", spentUsd: e.spentUsd, limitUsd: e.limitUsd };
    throw e;
  }
}
