import { NEXT, type Strategy } from "../strategy.js";

/**
 * Retries the same route with twice the time, up to 3 times; each slow attempt is aborted
 * through its signal when its own deadline passes, so nothing keeps running behind.
 */
export const longerTimeout: Strategy = {
  name: "retry_with_longer_timeout",
  reexecutes: true,
  sameRoute: true,
  async run(run, attempts) {
    let timeoutMs = run.last.timeoutMs ?? run.settings.baseTimeoutMs;
    for (let i = 0; i < (attempts ?? run.settings.maxTimeoutDoublings); i++) {
      timeoutMs *= 2;
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
