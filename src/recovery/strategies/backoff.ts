import { retryDelay } from "../backoff.js";
import { NEXT, type Strategy } from "../strategy.js";

/** Retries the same route after 1, 2, 4, 8, 16 s (+ up to 30% jitter); Retry-After wins. */
export const exponentialBackoff: Strategy = {
  name: "exponential_backoff_with_jitter",
  reexecutes: true,
  sameRoute: true,
  async run(run, attempts) {
    const { backoff } = run.settings;
    for (let retry = 1; retry <= (attempts ?? backoff.maxAttempts); retry++) {
      const wait = retryDelay(retry, run.last.diagnosis.retryAfterMs, backoff, () => run.random());
      if (wait === undefined) return NEXT;
      await run.sleep(wait);
      const out = await run.attempt({
        strategy: this.name,
        provider: run.last.provider,
        timeoutMs: run.last.timeoutMs,
        waitMs: wait,
      });
      if (out.ok)
        return { kind: "recovered", value: out.value, provider: out.provider, fallback: false };
      if (out.rejected) return NEXT;
    }
    return NEXT;
  },
};
