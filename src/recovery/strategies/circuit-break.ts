import { NEXT, type Strategy } from "../strategy.js";

/**
 * Opens the breaker of the failing route (15 min by default): later calls fail fast with
 * CircuitOpenError or go to the fallback until a single half-open probe succeeds. This call
 * gets the tool's fallback answer when it has one.
 */
export const circuitBreak: Strategy = {
  name: "circuit_break",
  reexecutes: false,
  sameRoute: false,
  async run(run) {
    run.openCircuit();
    const fallback = await run.fallback();
    return fallback
      ? { kind: "recovered", value: fallback.value, provider: undefined, fallback: true }
      : NEXT;
  },
};
