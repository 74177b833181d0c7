import { answered, NEXT, retryLastRoute, type Strategy } from "../strategy.js";

/**
 * Retries the same route with twice the time (within the call's deadline), up to 3 times; each
 * slow attempt is aborted through its signal when its own timeout passes, so nothing keeps
 * running behind. Only for a tool with one route: another route beats a longer wait.
 */
export const longerTimeout: Strategy = {
  name: "retry_with_longer_timeout",
  reexecutes: true,
  sameRoute: true,
  shared: false,
  inapplicable: (run) =>
    run.providers.length > 1 ? "another route exists: failover comes first" : undefined,
  async run(run, attempts) {
    let timeoutMs = run.last.timeoutMs ?? run.settings.baseTimeoutMs;
    for (let i = 0; i < (attempts ?? run.settings.maxTimeoutDoublings); i++) {
      timeoutMs *= 2;
      const out = await retryLastRoute(run, this.name, 0, timeoutMs);
      if (!out) return NEXT;
      if (out.ok) return answered(out);
      if (out.rejected) return NEXT;
    }
    return NEXT;
  },
};
