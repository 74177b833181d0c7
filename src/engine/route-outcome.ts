import type { Diagnosis } from "../diagnosis/diagnoser.js";
import type { CircuitBreaker } from "../recovery/breaker.js";
import type { Pattern } from "../telemetry/conventions.js";

/**
 * Failures that say nothing about a route's health: the request was refused for what it is
 * (4xx), or the route asked to slow down (throttling is not an outage).
 */
const NOT_ROUTE_FAILURES: ReadonlySet<Pattern> = new Set([
  "RATE_LIMIT",
  "BAD_REQUEST",
  "CONTEXT_LENGTH",
  "CONTENT_POLICY",
]);

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
  const answered = NOT_ROUTE_FAILURES.has(diagnosis.pattern);
  if (structured && !answered) breaker.record(now, false, probe);
  else if (probe && answered) breaker.record(now, true, probe);
  else if (probe) breaker.record(now, false, probe); // a probe that learnt nothing: keep away
  const coolMs = diagnosis.retryAfterMs ?? diagnosis.cooldownMs;
  if (structured && coolMs > 0) breaker.coolDown(now, coolMs);
}
