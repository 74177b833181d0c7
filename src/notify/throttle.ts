/** Decides whether an alert of a kind goes out now, and how many were held back before it. */
export interface AlertGate {
  admit(
    kind: string,
    now: number,
    periodMs: number,
  ): { send: boolean; suppressed: number } | Promise<{ send: boolean; suppressed: number }>;
}

/**
 * At most one alert of a kind per period; the rest are counted, and the count goes out with the
 * next alert of that kind. Per process; a fleet shares one through `selfheal/redis`.
 */
export class AlertThrottle implements AlertGate {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(private readonly periodMs: number) {}

  /** Whether to send an alert of `kind` now, and how many were suppressed before it. */
  admit(kind: string, now: number): { send: boolean; suppressed: number } {
    const entry = this.last.get(kind);
    if (entry && now - entry.at < this.periodMs) {
      entry.suppressed++;
      return { send: false, suppressed: entry.suppressed };
    }
    const suppressed = entry?.suppressed ?? 0;
    this.last.set(kind, { at: now, suppressed: 0 });
    return { send: true, suppressed };
  }
}
