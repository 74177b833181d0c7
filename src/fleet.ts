import type { BreakerSync } from "./recovery/breaker.js";
import type { DriftSync } from "./diagnosis/drift.js";
import type { AlertGate } from "./notify/throttle.js";
import type { BudgetSync } from "./recovery/budget.js";
import type { LedgerSync } from "./recovery/idempotency.js";

/**
 * State a fleet of workers shares beyond health signals (`selfheal/redis` provides it on its
 * store): breaker verdicts and the half-open probe lease, the alert throttle, the idempotency
 * ledger, each task's recovery budget, the UNKNOWN share. Each part is
 * optional; what is missing stays per process.
 */
export interface FleetSync {
  readonly breakers?: BreakerSync;
  readonly alerts?: AlertGate;
  readonly ledger?: LedgerSync;
  readonly budgets?: BudgetSync;
  /** The UNKNOWN share of one agent's diagnoses, over its last `window` (per tool and overall). */
  drift?(agent: string, window: number): DriftSync;
}
