/**
 * How often a supervisor may restart a run, as systemd's `StartLimitBurst` / `StartLimitIntervalSec`
 * and Erlang's restart intensity put it: at most `maxRestarts` in any `periodMs`, with a backoff
 * between them; past that it gives up (escalates and stops) rather than loop.
 */
export interface IntensityOptions {
  /** Restarts allowed in any `periodMs` (default 3). */
  maxRestarts: number;
  /** The sliding period, ms (default 10 min). */
  periodMs: number;
  /** Wait before the first restart, ms (default 1 s), doubled for each one in the period... */
  baseBackoffMs: number;
  /** ...up to this, ms (default 60 s). */
  maxBackoffMs: number;
}

export const DEFAULT_INTENSITY: IntensityOptions = {
  maxRestarts: 3,
  periodMs: 10 * 60_000,
  baseBackoffMs: 1_000,
  maxBackoffMs: 60_000,
};

export type RestartDecision =
  { restart: true; waitMs: number; inPeriod: number } | { restart: false; reason: string };

export class RestartIntensity {
  private readonly restarts: number[] = [];

  constructor(private readonly options: IntensityOptions = DEFAULT_INTENSITY) {}

  /** Whether another restart may happen at `now`, and after how long; records it if so. */
  next(now: number): RestartDecision {
    const { maxRestarts, periodMs, baseBackoffMs, maxBackoffMs } = this.options;
    while (this.restarts.length > 0 && now - (this.restarts[0] ?? now) >= periodMs)
      this.restarts.shift();
    if (this.restarts.length >= maxRestarts) {
      return {
        restart: false,
        reason: `${this.restarts.length} restarts in the last ${Math.round(periodMs / 1000)} s (limit ${maxRestarts}): giving up`,
      };
    }
    const waitMs = Math.min(maxBackoffMs, baseBackoffMs * 2 ** this.restarts.length);
    this.restarts.push(now + waitMs);
    return { restart: true, waitMs, inPeriod: this.restarts.length };
  }
}
