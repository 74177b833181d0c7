import { MIN_RETRY_DELAY_MS, retryDelay, spreadWait } from "../backoff.js";
import { answered, NEXT, retryLastRoute, type Strategy } from "../strategy.js";

/**
 * Retries the same route after 1, 2, 4, 8, 16 s (+ up to 30% jitter); Retry-After wins, and so
 * does the route's own cooldown. Before each wait it checks that the attempt could be sent then
 * (deadline, breaker, budget, the evidence's retry allowance): if not, it moves on now instead of
 * sleeping for nothing. On thin evidence (wording alone, UNKNOWN) that is one retry within 1 s.
 */
export const exponentialBackoff: Strategy = {
  name: "exponential_backoff_with_jitter",
  reexecutes: true,
  sameRoute: true,
  shared: false,
  async run(run, attempts) {
    const { backoff } = run.settings;
    const provider = run.last.provider;
    const random = () => run.random();
    let refused = false;
    for (let retry = 1; retry <= (attempts ?? backoff.maxAttempts);) {
      const ready = spreadWait(run.routeReadyInMs(provider), random);
      let wait: number;
      if (refused) {
        // Refused while we waited (another call's 429 extended the route's cooldown): nothing
        // was sent, so the retry is not spent; wait for the route again, if that is in time.
        wait = Math.max(MIN_RETRY_DELAY_MS, ready);
      } else {
        const retryAfter = run.last.diagnosis.retryAfterMs;
        const delay = retryDelay(retry, retryAfter, backoff, random);
        if (delay === undefined) return NEXT;
        // Thin evidence: the schedule's own delay is cut to its short bound; a server's is not
        // (the retry is then skipped by the check before waiting).
        wait = Math.max(
          retryAfter === undefined ? Math.min(delay, run.retryWaitLimitMs) : delay,
          ready,
        );
      }
      const out = await retryLastRoute(run, this.name, wait);
      if (!out) return NEXT;
      if (out.ok) return answered(out);
      refused = out.rejected;
      if (!refused) retry++;
    }
    return NEXT;
  },
};
