/**
 * The review's figures over time: incidents by pattern, recoveries and spend per hour, in
 * bounded memory (one entry per hour that had an incident), re-cut into at most MAX_BARS bars of
 * whole hours for the page.
 */

const HOUR = 3_600_000;
const WEEK = 168 * HOUR;
/** Bars drawn at most: wider bars (whole hours, then days) past that. */
export const MAX_BARS = 84;
/** Bar widths tried in turn, ms: the first that fits the period in MAX_BARS. */
const WIDTHS = [1, 2, 3, 6, 12, 24, 48, 168].map((h) => h * HOUR);
/** Hours remembered: past that (a log spanning years), incidents of new hours are counted, not drawn. */
const MAX_HOURS = 50_000;

export interface SeriesBar {
  /** Start of the bar, epoch ms. */
  at: number;
  incidents: number;
  recovered: number;
  costUsd: number;
  /** Incidents by pattern, the most frequent first. */
  patterns: { pattern: string; incidents: number }[];
}

export interface Series {
  /** Width of each bar, ms. */
  widthMs: number;
  bars: SeriesBar[];
}

interface Hour {
  incidents: number;
  recovered: number;
  costUsd: number;
  patterns: Map<string, number>;
}

export class SeriesTally {
  private readonly hours = new Map<number, Hour>();
  /** Incidents not drawn: their hour came past MAX_HOURS. */
  dropped = 0;

  add(at: number, pattern: string, recovered: boolean, costUsd: number): void {
    const key = Math.floor(at / HOUR);
    let h = this.hours.get(key);
    if (!h) {
      if (this.hours.size >= MAX_HOURS) {
        this.dropped++;
        return;
      }
      this.hours.set(key, (h = { incidents: 0, recovered: 0, costUsd: 0, patterns: new Map() }));
    }
    h.incidents++;
    if (recovered) h.recovered++;
    h.costUsd += costUsd;
    h.patterns.set(pattern, (h.patterns.get(pattern) ?? 0) + 1);
  }

  /**
   * Bars covering [fromMs, toMs) (the period, or the log's first and last hour), every bar present
   * (empty ones too: a quiet stretch shows as quiet).
   */
  series(fromMs: number, toMs: number): Series {
    const first = Math.floor(fromMs / HOUR) * HOUR;
    const span = Math.max(HOUR, toMs - first);
    const widthMs =
      WIDTHS.find((w) => span / w <= MAX_BARS) ?? Math.ceil(span / MAX_BARS / WEEK) * WEEK;
    const count = Math.max(1, Math.ceil(span / widthMs));
    const bars = Array.from({ length: count }, (_, i) => ({
      at: first + i * widthMs,
      incidents: 0,
      recovered: 0,
      costUsd: 0,
      patterns: new Map<string, number>(),
    }));
    for (const [key, h] of this.hours) {
      const bar = bars[Math.floor((key * HOUR - first) / widthMs)];
      if (!bar) continue;
      bar.incidents += h.incidents;
      bar.recovered += h.recovered;
      bar.costUsd += h.costUsd;
      for (const [p, n] of h.patterns) bar.patterns.set(p, (bar.patterns.get(p) ?? 0) + n);
    }
    return {
      widthMs,
      bars: bars.map((b) => ({
        ...b,
        patterns: [...b.patterns]
          .map(([pattern, incidents]) => ({ pattern, incidents }))
          .sort((x, y) => y.incidents - x.incidents || x.pattern.localeCompare(y.pattern)),
      })),
    };
  }
}
