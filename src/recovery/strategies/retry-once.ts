import { NEXT, type Strategy } from "../strategy.js";

/** The quick retry's wait: 250-500 ms (jittered), or the server's Retry-After. */
const QUICK_RETRY_MS = 250;

/**
 * One quick, jittered retry on the same route: a one-off 5xx or an unknown error often passes
 * on the second try. Skipped when the route is known to be down (its status page, or repeated
 * failures), and when the attempt could not be sent in time.
 */
export const retryOnce: Strategy = {
  name: "retry_once",
  reexecutes: true,
  sameRoute: true,
  shared: false,
  inapplicable: (run) =>
    run.routeDown(run.last.provider)
      ? "the route is down (status page or repeated failures)"
      : undefined,
  async run(run) {
    const provider = run.last.provider;
    const { maxRetryAfterMs } = run.settings.backoff;
    const retryAfter = run.last.diagnosis.retryAfterMs;
    if (retryAfter !== undefined && retryAfter > maxRetryAfterMs) return NEXT;
    const wait = Math.max(
      retryAfter ?? QUICK_RETRY_MS * (1 + run.random()),
      run.routeReadyInMs(provider),
    );
    if (!run.canAttempt(provider, wait)) return NEXT;
    await run.sleep(wait);
    const out = await run.attempt({
      strategy: this.name,
      provider,
      timeoutMs: run.last.timeoutMs,
      waitMs: wait,
    });
    return out.ok
      ? { kind: "recovered", value: out.value, provider: out.provider, fallback: false }
      : NEXT;
  },
};
