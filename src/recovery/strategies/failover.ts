import { answered, NEXT, type Strategy } from "../strategy.js";

/**
 * Sends the call to the next provider that has not failed it and whose breaker admits it, in the
 * tool's order; the call context's `provider` tells the tool which one to use.
 */
export const failover: Strategy = {
  name: "failover_to_secondary",
  reexecutes: true,
  sameRoute: false,
  shared: false,
  inapplicable: (run) =>
    run.providers.length < 2 ? "the tool has no secondary provider" : undefined,
  async run(run) {
    for (const provider of run.providers) {
      if (run.failedProviders.has(provider) || !run.canAttempt(provider, 0)) continue;
      const out = await run.attempt({
        strategy: this.name,
        provider,
        timeoutMs: run.last.timeoutMs,
        waitMs: 0,
      });
      if (out.ok) return answered(out);
    }
    return NEXT;
  },
};
