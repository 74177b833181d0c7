import type { BreakerSync } from "./recovery/breaker.js";
import type { AlertGate } from "./notify/throttle.js";

/**
 * State a fleet of workers shares beyond health signals (`selfheal/redis` provides it on its
 * store): breaker verdicts and the half-open probe lease, and the alert throttle. Each part is
 * optional; what is missing stays per process.
 */
export interface FleetSync {
  readonly breakers?: BreakerSync;
  readonly alerts?: AlertGate;
}
