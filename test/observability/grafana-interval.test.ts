/**
 * grafana-interval.ts against Grafana's own test cases (pkg/promlib/models/prometheus_interval_test.go,
 * gtime, rangeutil), then the intervals the dashboard gets from the provisioned data source: its
 * `timeInterval` is the SDK's push interval, so `$__rate_interval` holds four pushes at the
 * dashboard's ranges and any panel width.
 */
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/otel/config.js";
import { buildDashboard } from "./dashboard.js";
import {
  browserIntervalMs,
  DEFAULT_GRID_PX,
  formatInterval,
  goDuration,
  grafanaQueryIntervals,
  panelWidthPx,
  parseDuration,
  rateIntervalMs,
  roundIntervalBrowser,
  roundIntervalServer,
  serverStepMs,
  substituteIntervals,
} from "./grafana-interval.js";
import { provisionedTimeInterval } from "./grafana-provisioning.js";

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe("Grafana's interval arithmetic, ported", () => {
  it("computes the step as calculatePrometheusInterval does (Grafana's cases)", () => {
    // [range, min interval (the request's intervalMs or the data source's), maxDataPoints, step]
    const cases: [number, number, number, number][] = [
      [H, 30 * S, 1613, 30 * S], // "minStep is auto and ds scrape interval 30s and time range 1 hour"
      [5 * M, 15 * S, 1055, 15 * S], // "... 15s and time range 5 minutes"
      [H, 15 * S, 10, 5 * M], // "with very small MaxDataPoints"
      [H, 15 * S, 10_000, 15 * S], // "when safeInterval is larger than calculatedInterval"
      [H, 15 * S, 0, 15 * S], // "with MaxDataPoints zero" (1500)
      [48 * H, 2 * M, 761, 5 * M], // "use calculated value when min step value is smaller"
      [30 * 24 * H, 15 * S, 0, 30 * M], // "with very long time range"
    ];
    for (const [range, min, points, step] of cases)
      expect(serverStepMs(range, min, points), JSON.stringify([range, min, points])).toBe(step);
  });

  it("computes $__rate_interval as calculateRateInterval does", () => {
    expect(rateIntervalMs(100 * S, 30 * S)).toBe(130 * S); // max(130s, 120s)
    expect(rateIntervalMs(60 * S, 30 * S)).toBe(120 * S); // max(90s, 120s)
    expect(rateIntervalMs(20 * S, 15 * S)).toBe(60 * S);
  });

  it("rounds as the browser (rangeutil) and the server (gtime) do", () => {
    expect(roundIntervalBrowser(22_979)).toBe(20 * S);
    expect(roundIntervalBrowser(25_000)).toBe(30 * S); // browser: upper bound exclusive
    expect(roundIntervalServer(25_000)).toBe(20 * S); // server: inclusive
    expect(roundIntervalBrowser(3_830)).toBe(5 * S);
    expect(browserIntervalMs(6 * H, 940, 15 * S)).toBe(20 * S);
    expect(browserIntervalMs(H, 940, 15 * S)).toBe(15 * S);
  });

  it("writes durations as Go and Grafana do", () => {
    expect(goDuration(4 * M)).toBe("4m0s");
    expect(goDuration(M)).toBe("1m0s");
    expect(goDuration(130 * S)).toBe("2m10s");
    expect(goDuration(H)).toBe("1h0m0s");
    expect(goDuration(35 * S)).toBe("35s");
    expect(goDuration(500)).toBe("500ms");
    expect(formatInterval(M)).toBe("1m");
    expect(formatInterval(20 * S)).toBe("20s");
    expect(parseDuration("1h30m")).toBe(90 * M);
    expect(() => parseDuration("15 s")).toThrow();
  });

  it("substitutes the built-in variables, $__rate_interval before $__interval", () => {
    const i = grafanaQueryIntervals(6 * H, 940, "60s");
    expect(
      substituteIntervals("rate(x[$__rate_interval]) + y[$__interval] + z[${__interval}]", i),
    ).toBe("rate(x[4m0s]) + y[1m] + z[1m]");
  });

  it("was wrong at 15s: one 60 s push per $__rate_interval", () => {
    expect(grafanaQueryIntervals(6 * H, 940, "15s")).toMatchObject({
      interval: "20s",
      rateInterval: "1m0s",
    });
    expect(grafanaQueryIntervals(H, 940, "15s")).toMatchObject({
      interval: "15s",
      rateInterval: "1m0s",
    });
  });
});

describe("the dashboard's intervals with the provisioned Prometheus data source", () => {
  const timeInterval = provisionedTimeInterval();
  const pushMs = resolveConfig({}, {}).metrics.intervalMillis;

  it("sets timeInterval to the interval selfheal's SDK pushes metrics at", () => {
    expect(pushMs).toBe(60_000);
    expect(parseDuration(timeInterval ?? "15s")).toBe(pushMs);
  });

  it("gets $__interval 1m and $__rate_interval 4m0s at 6 h and 1 h, for every panel width", () => {
    const widths = new Set(
      (buildDashboard().panels ?? []).map((p) => p.gridPos?.w ?? 24).filter((w) => w > 0),
    );
    // A 1280 px window with Grafana's menu docked (about 300 px) up to a 2560 px one.
    for (const gridPx of [1280 - 300 - 32, DEFAULT_GRID_PX, 2560 - 32]) {
      for (const w of widths) {
        for (const range of [6 * H, H]) {
          const i = grafanaQueryIntervals(range, panelWidthPx(w, gridPx), timeInterval);
          expect(
            i,
            `${String(w)} columns of ${String(gridPx)} px, ${String(range / H)} h`,
          ).toMatchObject({
            interval: "1m",
            stepMs: M,
            rateInterval: "4m0s",
            rateIntervalMs: 4 * pushMs,
          });
        }
      }
    }
  });

  it("measures panels as Grafana's grid does", () => {
    expect(panelWidthPx(24, DEFAULT_GRID_PX)).toBe(DEFAULT_GRID_PX);
    expect(panelWidthPx(12, DEFAULT_GRID_PX)).toBe(940);
  });
});
