import { SelfHealConfigError } from "../errors.js";

/**
 * How often a supervisor may restart a run, as Erlang's restart intensity (MaxR in MaxT) and
 * systemd's `StartLimitBurst` / `StartLimitIntervalSec` put it: at most `maxRestarts` in any
 * `periodMs`, whatever restarted the run (a context reset's restart or a rotation: each starts a
 * new process); past that it gives up (escalates and stops) rather than loop. Rotations also wait
 * a backoff.
 */
export interface IntensityOptions {
  /** Restarts allowed in any `periodMs` (default 3); the next one gives up. */
  maxRestarts: number;
  /** The sliding period, ms (default 10 min). */
  periodMs: number;
  /** Wait before a rotation, ms (default 1 s), doubled for each restart in the period... */
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

/**
 * The options, checked: a bad one is a `SelfHealConfigError` naming it as `<field>.<name>`
 * (`field`: where the caller passed them, e.g. `Supervisor.intensity`).
 */
export function intensityOptions(
  options: Partial<IntensityOptions> = {},
  field = "RestartIntensity",
): IntensityOptions {
  const checked = { ...DEFAULT_INTENSITY, ...options };
  const fail = (name: keyof IntensityOptions, expected: string) =>
    new SelfHealConfigError(
      `${field}.${name}`,
      `expected ${expected}, got ${String(checked[name])}`,
    );
  if (!(Number.isSafeInteger(checked.maxRestarts) && checked.maxRestarts >= 0))
    throw fail("maxRestarts", "a whole number >= 0");
  if (!(Number.isFinite(checked.periodMs) && checked.periodMs > 0))
    throw fail("periodMs", "a positive number of ms");
  for (const name of ["baseBackoffMs", "maxBackoffMs"] as const)
    if (!(Number.isFinite(checked[name]) && checked[name] >= 0))
      throw fail(name, "a number of ms >= 0");
  return checked;
}

export class RestartIntensity {
  /** When each restart in the period happened (or will, after its backoff). */
  private readonly restarts: number[] = [];
  private readonly options: IntensityOptions;

  constructor(options: Partial<IntensityOptions> = DEFAULT_INTENSITY, field?: string) {
    this.options = intensityOptions(options, field);
  }

  /** Why a restart at `now` would be refused (the period is full), or undefined; records nothing. */
  refusal(now: number): string | undefined {
    const { maxRestarts, periodMs } = this.options;
    while (this.restarts.length > 0 && now - (this.restarts[0] ?? now) >= periodMs)
      this.restarts.shift();
    if (this.restarts.length < maxRestarts) return undefined;
    return `${this.restarts.length} restarts in the last ${Math.round(periodMs / 1000)} s (limit ${maxRestarts}): giving up`;
  }

  /**
   * Whether another restart may happen at `now`, and after how long; records it if so. `backoff`
   * false: at once (a context reset's restart, which already waited for a stall, a nudge and the
   * reset), though it counts as any other.
   */
  next(now: number, backoff = true): RestartDecision {
    const reason = this.refusal(now);
    if (reason !== undefined) return { restart: false, reason };
    const { baseBackoffMs, maxBackoffMs } = this.options;
    const waitMs = backoff ? Math.min(maxBackoffMs, baseBackoffMs * 2 ** this.restarts.length) : 0;
    this.restarts.push(now + waitMs);
    return { restart: true, waitMs, inPeriod: this.restarts.length };
  }
}
