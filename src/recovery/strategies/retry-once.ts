import { MIN_RETRY_DELAY_MS, spreadWait } from "../backoff.js";
import { answered, NEXT, retryLastRoute, type Strategy } from "../strategy.js";

/** The quick retry's wait: 250-500 ms (jittered), or the server's Retry-After. */
const QUICK_RETRY_MS = 250;
/** Where another route exists, a retry that must wait longer than this gives way to failover. */
const QUICK_RETRY_MAX_MS = 1_000;

/**
 * One quick, jittered retry on the same route: a one-off 5xx, a throttle with a short
 * Retry-After or an unknown error often passes on the second try. Skipped when the route is
 * known to be down (its status page, or repeated failures), when the attempt could not be sent
 * in time, and, where another route exists or the evidence is thin (wording alone, UNKNOWN), when
 * it would have to wait more than a second: another route beats a longer wait, and thin evidence
 * buys one short retry.
 */
export const retryOnce: Strategy = {
  name: "retry_once",
  reexecutes: true,
  sameRoute: true,
  shared: false,
  inapplicable(run) {
    const provider = run.last.provider;
    if (run.routeDown(provider)) return "the route is down (status page or repeated failures)";
    const serverWait = Math.max(run.last.diagnosis.retryAfterMs ?? 0, run.routeReadyInMs(provider));
    if (serverWait > run.settings.backoff.maxRetryAfterMs) return "Retry-After beyond the cap";
    if (run.providers.length > 1 && serverWait > QUICK_RETRY_MAX_MS)
      return "another route beats a longer wait";
    if (serverWait > run.retryWaitLimitMs)
      return `without a status, code or error class, a retry waits at most ${run.retryWaitLimitMs} ms`;
    return undefined;
  },
  async run(run) {
    const random = () => run.random();
    const retryAfter = run.last.diagnosis.retryAfterMs;
    const wait = Math.max(
      MIN_RETRY_DELAY_MS,
      retryAfter === undefined ? QUICK_RETRY_MS * (1 + random()) : spreadWait(retryAfter, random),
      spreadWait(run.routeReadyInMs(run.last.provider), random),
    );
    const out = await retryLastRoute(run, this.name, wait);
    return out?.ok ? answered(out) : NEXT;
  },
};
