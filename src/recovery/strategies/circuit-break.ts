import { isRouteFault } from "../../diagnosis/diagnoser.js";
import { NEXT, type Strategy } from "../strategy.js";

/**
 * Opens the breaker of the failing route (5 s at first, doubled by each failed probe): later
 * calls go to another route, wait for the probe only when it is due within
 * `recovery.maxProbeWaitMs` (2 s), or fail fast with CircuitOpenError (its `retryAfterMs` says
 * when to come back) until a single half-open probe succeeds. This call gets the tool's
 * `cannedAnswer` when it has one.
 */
export const circuitBreak: Strategy = {
  name: "circuit_break",
  reexecutes: false,
  sameRoute: false,
  shared: true,
  // A route that refused the request (4xx) or throttled it is up: nothing to open.
  inapplicable: (run) =>
    isRouteFault(run.last.diagnosis)
      ? undefined
      : `${run.last.diagnosis.pattern} says the route is up`,
  async run(run) {
    run.openCircuit();
    const fallback = await run.fallback();
    return fallback
      ? { kind: "recovered", value: fallback.value, provider: undefined, fallback: true }
      : NEXT;
  },
};
