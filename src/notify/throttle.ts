/**
 * At most one alert of a kind per period; the rest are counted, and the count goes out with the
 * next alert of that kind.
 */
export class AlertThrottle {
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
