import { normalizeStep, type PlanStep } from "../diagnosis/rules.js";
import type { StrategyName } from "../telemetry/conventions.js";
import { BudgetStop, type RecoveryRun } from "./strategy.js";
import { STRATEGY_REGISTRY } from "./strategies/index.js";

/** Why a same-route step is skipped once thin evidence had its retry. */
export const THIN_RETRY_SPENT =
  "without a status, code or error class, a call gets one short retry, already made";

/** How a recovery chain ended. */
export type ChainResult =
  | { outcome: "recovered"; value: unknown; provider: string | undefined; fallback: boolean }
  /** Every step gave up: the last error stands. */
  | { outcome: "exhausted" }
  /** A step ended the call with its own error (escalation). */
  | { outcome: "stopped"; error: unknown }
  /** The task's budget could not pay for another attempt. */
  | { outcome: "budget"; spentUsd: number; limitUsd: number };

export interface ChainOptions {
  /**
   * Why the call may not be sent again (a write without an idempotency key, an answer already
   * partly delivered): steps that would resend it are skipped with this reason. Undefined: they run.
   */
  noResend: string | undefined;
  /** Called with each step as it starts, and with the steps skipped and why. */
  onStep(strategy: StrategyName, skipped?: string): void;
}

/**
 * Runs a recovery chain: each strategy in turn until one recovers the call or ends it; when a
 * strategy gives up, the next runs. Safety is enforced here, once for every strategy: a write
 * without an idempotency key is never sent again, no step retries the same route after a
 * pattern that retrying cannot fix, a diagnosis from wording alone never opens a breaker, makes
 * the agent read-only or pages a person, and once thin evidence has had its one short retry no
 * step retries the same route again (see THIN_EVIDENCE).
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
        strategy.reexecutes && options.noResend !== undefined
          ? options.noResend
          : strategy.sameRoute && !run.last.diagnosis.retryable
            ? `${run.last.diagnosis.pattern} is never retried on the same route`
            : strategy.shared && run.last.diagnosis.evidence !== "structured"
              ? "wording alone never acts beyond the call"
              : strategy.sameRoute && run.retriesLeft <= 0
                ? THIN_RETRY_SPENT
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
          fallback: result.fallback,
        };
      }
      if (result.kind === "stop") return { outcome: "stopped", error: result.error };
    }
    return { outcome: "exhausted" };
  } catch (e) {
    if (e instanceof BudgetStop)
      return { outcome: "budget", spentUsd: e.spentUsd, limitUsd: e.limitUsd };
    throw e;
  }
}
