/**
 * What Grafana 13 puts for `$__interval` and `$__rate_interval` in a dashboard panel's Prometheus
 * query, and the step it asks Prometheus for, ported from Grafana's code so a test can run the
 * dashboard's queries exactly as a browser would:
 *
 * 1. The browser (scenes `SceneQueryRunner.prepareRequests`): the panel's queries run with
 *    `maxDataPoints` = the panel's width in CSS pixels (`maxDataPointsFromWidth`, measured by
 *    `VizPanelRenderer` and rounded), and `intervalMs` = `rangeutil.calculateInterval(range,
 *    maxDataPoints, ds.interval)`: range / maxDataPoints rounded by `roundInterval`'s table, at
 *    least the data source's `timeInterval` (the Prometheus data source's `ds.interval`).
 * 2. The server (`pkg/promlib/models/query.go`, with `intervalv2` and the plugin SDK's `gtime`):
 *    the step, also `$__interval`, is max(`Calculate(range, intervalMs, maxDataPoints)`,
 *    `CalculateSafeInterval(range, 11000)`); `$__rate_interval` (`calculateRateInterval`) is
 *    max(intervalMs + scrape interval, 4 x scrape interval), the scrape interval being the data
 *    source's `timeInterval` (15s when unset), written with Go's `time.Duration.String()`
 *    (`4m0s`). Start and end are aligned down to a multiple of the step (`AlignTimeRange`).
 */

const SECOND = 1_000;
const MINUTE = 60 * SECOND;

/** Grafana's column grid: 24 columns, 8 px between panels (scenes `SceneGridLayout`). */
const GRID_COLUMNS = 24;
const GRID_MARGIN_PX = 8;

/**
 * A panel's width in pixels for a dashboard whose grid is `gridPx` wide (react-grid-layout:
 * columns of (gridPx - 23 margins) / 24, a panel of `w` columns spans w columns and w - 1 margins).
 */
export function panelWidthPx(w: number, gridPx: number): number {
  const column = (gridPx - GRID_MARGIN_PX * (GRID_COLUMNS - 1)) / GRID_COLUMNS;
  return Math.round(w * column + (w - 1) * GRID_MARGIN_PX);
}

/**
 * The grid's width in a 1920 px wide browser window with Grafana's menu closed: the page's 16 px
 * padding on each side. A narrower window (or the docked menu) makes panels narrower, which can
 * only make `$__interval` longer; tests also check a range of widths.
 */
export const DEFAULT_GRID_PX = 1920 - 2 * 16;

/** `rangeutil.roundInterval` (@grafana/data): the browser's table (upper bounds exclusive). */
export function roundIntervalBrowser(ms: number): number {
  const table: [below: number, value: number][] = [
    [10, 1],
    [15, 10],
    [35, 20],
    [75, 50],
    [150, 100],
    [350, 200],
    [750, 500],
    [1_500, 1_000],
    [3_500, 2_000],
    [7_500, 5_000],
    [12_500, 10_000],
    [17_500, 15_000],
    [25_000, 20_000],
    [45_000, 30_000],
    [90_000, 60_000],
    [210_000, 120_000],
    [450_000, 300_000],
    [750_000, 600_000],
    [1_050_000, 900_000],
    [1_500_000, 1_200_000],
    [2_700_000, 1_800_000],
    [5_400_000, 3_600_000],
    [9_000_000, 7_200_000],
    [16_200_000, 10_800_000],
    [32_400_000, 21_600_000],
    [86_400_000, 43_200_000],
    [604_800_000, 86_400_000],
    [1_814_400_000, 604_800_000],
    [3_628_800_000, 2_592_000_000],
  ];
  for (const [below, value] of table) if (ms < below) return value;
  return 31_536_000_000;
}

/** `gtime.RoundInterval` (grafana-plugin-sdk-go): the server's table (upper bounds inclusive). */
export function roundIntervalServer(ms: number): number {
  const table: [atMost: number, value: number][] = [
    [10, 1],
    [15, 10],
    [35, 20],
    [75, 50],
    [150, 100],
    [350, 200],
    [750, 500],
    [1_500, 1_000],
    [3_500, 2_000],
    [7_500, 5_000],
    [12_500, 10_000],
    [17_500, 15_000],
    [25_000, 20_000],
    [45_000, 30_000],
    [90_000, 60_000],
    [210_000, 120_000],
    [450_000, 300_000],
    [750_000, 600_000],
    [1_050_000, 900_000],
    [1_500_000, 1_200_000],
    [2_700_000, 1_800_000],
    [5_400_000, 3_600_000],
    [9_000_000, 7_200_000],
    [16_200_000, 10_800_000],
    [32_400_000, 21_600_000],
    [86_400_000, 43_200_000],
    [604_800_000, 86_400_000],
    [1_814_400_000, 604_800_000],
    [3_628_800_000, 2_592_000_000],
  ];
  for (const [atMost, value] of table) if (ms <= atMost) return value;
  return 31_536_000_000;
}

/** A Grafana/Prometheus duration (`15s`, `1m`, `1h30m`, `500ms`) in ms. */
export function parseDuration(text: string): number {
  const units: Record<string, number> = {
    ms: 1,
    s: SECOND,
    m: MINUTE,
    h: 60 * MINUTE,
    d: 24 * 60 * MINUTE,
    w: 7 * 24 * 60 * MINUTE,
    y: 365 * 24 * 60 * MINUTE,
  };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|[smhdwy])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text)
    throw new Error(`not a duration: ${text}`);
  return parts.reduce((ms, p) => ms + Number(p[1]) * (units[p[2] ?? ""] ?? NaN), 0);
}

/** Go's `time.Duration.String()` for whole milliseconds: `4m0s`, `1m30s`, `1h0m0s`, `500ms`. */
export function goDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < SECOND) return `${ms}ms`;
  const h = Math.floor(ms / (60 * MINUTE));
  const m = Math.floor((ms % (60 * MINUTE)) / MINUTE);
  const s = (ms % MINUTE) / SECOND;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** `gtime.FormatInterval`: the largest whole unit (`1m`, `20s`, `2h`). */
export function formatInterval(ms: number): string {
  const units: [string, number][] = [
    ["y", 365 * 24 * 60 * MINUTE],
    ["d", 24 * 60 * MINUTE],
    ["h", 60 * MINUTE],
    ["m", MINUTE],
    ["s", SECOND],
    ["ms", 1],
  ];
  for (const [unit, size] of units) if (ms >= size) return `${Math.floor(ms / size)}${unit}`;
  return "1ms";
}

export interface GrafanaQueryIntervals {
  /** `maxDataPoints` of the request (the panel's width in pixels). */
  maxDataPoints: number;
  /** The browser's `intervalMs` (query options' "interval" shown above the editor). */
  intervalMs: number;
  /** The step asked of Prometheus; `$__interval` is the same. */
  stepMs: number;
  /** `$__interval` as substituted (`gtime.FormatInterval`). */
  interval: string;
  rateIntervalMs: number;
  /** `$__rate_interval` as substituted (Go's Duration.String()). */
  rateInterval: string;
}

/** `rangeutil.calculateInterval`: the browser's `intervalMs` for a query, at least `lowLimitMs`. */
export function browserIntervalMs(
  rangeMs: number,
  maxDataPoints: number,
  lowLimitMs: number,
): number {
  return Math.max(roundIntervalBrowser(rangeMs / maxDataPoints), lowLimitMs);
}

/**
 * `calculatePrometheusInterval` for a query without a min step of its own: the step (and
 * `$__interval`) from the request's intervalMs (the minimum), maxDataPoints and the range.
 */
export function serverStepMs(
  rangeMs: number,
  minIntervalMs: number,
  maxDataPoints: number,
): number {
  // intervalv2.Calculate: resolution 1500 when the request has no maxDataPoints.
  const raw = Math.trunc(rangeMs / (maxDataPoints || 1_500));
  const calculated = raw < minIntervalMs ? minIntervalMs : roundIntervalServer(raw);
  const safe = roundIntervalServer(Math.trunc(rangeMs / 11_000));
  return Math.max(calculated, safe);
}

/** `calculateRateInterval`: max(intervalMs + scrape interval, 4 x scrape interval). */
export const rateIntervalMs = (intervalMs: number, scrapeMs: number): number =>
  Math.max(intervalMs + scrapeMs, 4 * scrapeMs);

/**
 * The intervals of a panel query over `rangeMs` for a panel `maxDataPoints` pixels wide, with the
 * data source's `timeInterval` (undefined: unset, 15s), for a query with no min interval of its own.
 */
export function grafanaQueryIntervals(
  rangeMs: number,
  maxDataPoints: number,
  timeInterval: string | undefined,
): GrafanaQueryIntervals {
  // The Prometheus data source's `interval` and scrape interval: jsonData.timeInterval || 15s.
  const scrapeMs = parseDuration(timeInterval || "15s");
  const intervalMs = browserIntervalMs(rangeMs, maxDataPoints, scrapeMs);
  const stepMs = serverStepMs(rangeMs, intervalMs, maxDataPoints);
  const rate = rateIntervalMs(intervalMs, scrapeMs);
  return {
    maxDataPoints,
    intervalMs,
    stepMs,
    interval: formatInterval(stepMs),
    rateIntervalMs: rate,
    rateInterval: goDuration(rate),
  };
}

/** `AlignTimeRange` (offset 0): down to a multiple of the step, Unix ms. */
export const alignToStep = (ms: number, stepMs: number): number => Math.floor(ms / stepMs) * stepMs;

/** A query with Grafana's built-in interval variables replaced (`$__rate_interval` first). */
export function substituteIntervals(expr: string, i: GrafanaQueryIntervals): string {
  return expr
    .replaceAll("${__rate_interval}", i.rateInterval)
    .replaceAll("$__rate_interval", i.rateInterval)
    .replaceAll("${__interval}", i.interval)
    .replaceAll("$__interval", i.interval);
}
