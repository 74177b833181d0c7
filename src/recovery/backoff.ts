/** Exponential backoff with jitter; a server's Retry-After wins when present. */
export interface BackoffOptions {
  /** First delay, ms (default 1000): 1, 2, 4, 8, 16 s. */
  baseMs: number;
  /** Growth per retry (default 2). */
  factor: number;
  /** Retries before the strategy gives up (default 5). */
  maxAttempts: number;
  /** Up to this share of the delay is added at random (default 0.3). */
  jitter: number;
  /** A Retry-After longer than this gives up instead of waiting (default 60 s). */
  maxRetryAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  baseMs: 1_000,
  factor: 2,
  maxAttempts: 5,
  jitter: 0.3,
  maxRetryAfterMs: 60_000,
};

/** No retry ever follows sooner than this, whatever Retry-After says: never a tight loop. */
export const MIN_RETRY_DELAY_MS = 100;

/**
 * Up to this share is added to a wait the server set (Retry-After, a route's cooldown), so the
 * calls that waited together do not all come back in the same millisecond.
 */
export const SERVER_WAIT_JITTER = 0.1;

/** A wait the server set, spread a little: never sooner, at most 10% later (whole ms). */
export function spreadWait(ms: number, random: () => number): number {
  return Math.round(ms * (1 + SERVER_WAIT_JITTER * random()));
}

/**
 * Delay before retry number `retry` (1 for the first retry), or undefined when the server asks
 * for a longer wait than `maxRetryAfterMs` (better to fail over than to sit out a long limit).
 */
export function retryDelay(
  retry: number,
  retryAfterMs: number | undefined,
  options: BackoffOptions,
  random: () => number,
): number | undefined {
  if (retryAfterMs !== undefined) {
    return retryAfterMs > options.maxRetryAfterMs
      ? undefined
      : Math.max(MIN_RETRY_DELAY_MS, spreadWait(retryAfterMs, random));
  }
  const delay = options.baseMs * options.factor ** (retry - 1);
  return Math.max(MIN_RETRY_DELAY_MS, Math.round(delay * (1 + options.jitter * random())));
}
