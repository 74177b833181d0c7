import { withDeadline } from "../deadline.js";
import { LLM_TIMEOUT_MS, PAYMENT_TIMEOUT_MS, type Policy, type PolicyContext } from "./policy.js";
import type { Dependency } from "./scenarios.js";

/**
 * The fleet without selfheal: each call goes once to its primary route, with the same per-call
 * timeout as selfheal's, and what a careful app checks at least (an empty answer is an error);
 * no retry, no failover, no breaker, no idempotency key. The "without selfheal" figures of
 * `selfheal demo` and the "no recovery" row of the outcome benchmark.
 */
export function noRecoveryPolicy({ world }: PolicyContext): Policy {
  const attempt = async (dep: Dependency, timeoutMs: number, call: string) => {
    const controller = new AbortController();
    const value = await withDeadline(() => world.behave({ dep, call, signal: controller.signal }), {
      controller,
      timeoutMs,
      timeoutError: () => new Error("timed out"),
      clock: world.clock,
    });
    if (value === "") throw new Error("empty answer");
    return value;
  };
  const [primary] = world.scenario.llm;
  if (!primary) throw new Error("the scenario has no LLM provider");
  return {
    complete: (question) => attempt(primary, LLM_TIMEOUT_MS, question),
    charge: (order) => attempt(world.scenario.api, PAYMENT_TIMEOUT_MS, order),
    figures: () => ({ falseTrips: 0, driftEvents: 0 }),
    close: () => Promise.resolve(),
  };
}
