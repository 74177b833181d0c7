import { NEXT, type Strategy } from "../strategy.js";

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
      if (!run.canAttempt(run.last.provider, 0)) return NEXT;
      const out = await run.attempt({
        strategy: this.name,
        provider: run.last.provider,
        timeoutMs,
        waitMs: 0,
      });
      if (out.ok)
        return { kind: "recovered", value: out.value, provider: out.provider, fallback: false };
      if (out.rejected) return NEXT;
    }
    return NEXT;
  },
};
