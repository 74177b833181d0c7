import { isRouteFault, ROUTE_ANSWERED, type Diagnosis } from "../diagnosis/diagnoser.js";
import type { CircuitBreaker } from "../recovery/breaker.js";

/**
 * Tells a route's breaker how an attempt went. Only a failure with structured evidence that the
 * route is unwell counts against it: wording alone never switches shared state. A failure the
 * route answered for (4xx, 429) shows it is up, so a probe that gets one closes the breaker. A
 * Retry-After, or the rule's cooldown, keeps other calls away from the route for that long.
 */
export function recordOnRoute(
  breaker: CircuitBreaker,
  now: number,
  diagnosis: Diagnosis | undefined,
  probe: boolean,
): void {
  if (diagnosis === undefined) {
    breaker.record(now, true, probe);
    return;
  }
  const structured = diagnosis.evidence === "structured";
  const answered = ROUTE_ANSWERED.has(diagnosis.pattern);
  if (isRouteFault(diagnosis)) breaker.record(now, false, probe);
  else if (probe && answered) breaker.record(now, true, probe);
  else if (probe) breaker.record(now, false, probe); // a probe that learnt nothing: keep away
  const coolMs = diagnosis.retryAfterMs ?? diagnosis.cooldownMs;
  if (structured && coolMs > 0) breaker.coolDown(now, coolMs);
}
