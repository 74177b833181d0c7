/** How the review writes times, shares, money and changes. */
import { describe, expect, it } from "vitest";
import { reviewText, type Review } from "../../src/report/analyze.js";
import { change, formatTime, HEADLINE, pct, secs, usd } from "../../src/report/format.js";
import { event } from "./events.js";
import { sampleReview } from "./sample-review.js";

describe("formatTime", () => {
  it.each([
    [Date.UTC(2026, 10, 23, 8, 5), "UTC", "2026-11-23 08:05 UTC"],
    [Date.UTC(2026, 0, 1), "UTC", "2026-01-01 00:00 UTC"], // midnight is 00, not 24
    [Date.UTC(2026, 0, 1, 23, 59, 59), "UTC", "2026-01-01 23:59 UTC"], // minutes, not rounded
    [Date.UTC(2026, 0, 15, 12), "Europe/Paris", "2026-01-15 13:00 GMT+1"],
    [Date.UTC(2026, 6, 15, 12), "Europe/Paris", "2026-07-15 14:00 GMT+2"],
    [Date.UTC(2025, 11, 31, 23, 30), "Europe/Paris", "2026-01-01 00:30 GMT+1"], // the next day there
    // 2026-03-29: Paris springs forward at 01:00 UTC (02:00 local becomes 03:00).
    [Date.UTC(2026, 2, 29, 0, 59), "Europe/Paris", "2026-03-29 01:59 GMT+1"],
    [Date.UTC(2026, 2, 29, 1, 0), "Europe/Paris", "2026-03-29 03:00 GMT+2"],
    // 2026-10-25: back at 01:00 UTC; 02:xx local happens twice, told apart by the offset.
    [Date.UTC(2026, 9, 25, 0, 30), "Europe/Paris", "2026-10-25 02:30 GMT+2"],
    [Date.UTC(2026, 9, 25, 1, 30), "Europe/Paris", "2026-10-25 02:30 GMT+1"],
  ])("%i in %s: %s", (ms, zone, shown) => {
    expect(formatTime(ms, zone)).toBe(shown);
  });

  it("the same instant in two zones, one after the other (a formatter per zone)", () => {
    const ms = Date.UTC(2026, 6, 1, 22);
    expect([
      formatTime(ms, "Europe/Paris"),
      formatTime(ms, "UTC"),
      formatTime(ms, "Europe/Paris"),
    ]).toEqual(["2026-07-02 00:00 GMT+2", "2026-07-01 22:00 UTC", "2026-07-02 00:00 GMT+2"]);
  });
});

describe("pct, secs, usd", () => {
  it.each([
    [pct(1 / 3), "33.3%"],
    [pct(0), "0.0%"],
    [pct(1), "100.0%"],
    [secs(null), "n/a"],
    [secs(12.34), "12.3 s"],
    [secs(0), "0.0 s"],
    [usd(0.000049), "$0.0000"],
    [usd(1.5), "$1.5000"],
  ])("%s", (shown, expected) => {
    expect(shown).toBe(expected);
  });
});

describe("change", () => {
  it.each([
    // count: its unit and percent
    [12, 10, "lower-is-better", "count", "+2 (+20.0%)", "worse"],
    [8, 10, "lower-is-better", "count", "-2 (-20.0%)", "better"],
    [12, 10, "higher-is-better", "count", "+2 (+20.0%)", "better"],
    [3, 0, "lower-is-better", "count", "+3", "worse"], // from zero: no percent
    [0, 4, "lower-is-better", "count", "-4 (-100.0%)", "better"],
    // rate: points
    [0.75, 0.5, "higher-is-better", "rate", "+25.0 pt", "better"],
    [0.5, 0.75, "higher-is-better", "rate", "-25.0 pt", "worse"],
    [0.2, 0.1, "lower-is-better", "rate", "+10.0 pt", "worse"],
    // seconds: one decimal and percent
    [1.5, 2, "lower-is-better", "seconds", "-0.5 s (-25.0%)", "better"],
    [2.25, 2, "lower-is-better", "seconds", "+0.3 s (+12.5%)", "worse"],
    // usd: four decimals and percent
    [0.3, 0.2, "lower-is-better", "usd", "+$0.1000 (+50.0%)", "worse"],
    [0.1, 0.2, "lower-is-better", "usd", "-$0.1000 (-50.0%)", "better"],
    [1, 0, "lower-is-better", "usd", "+$1.0000", "worse"],
  ] as const)("%s from %s (%s, %s): %s, %s", (now, before, direction, kind, text, tone) => {
    expect(change(now, before, direction, kind)).toEqual({ text, tone });
  });

  it.each([
    [5, 5, "count"],
    [0.5, 0.5, "rate"],
    [0.1 + 0.2, 0.3, "usd"], // a float's rounding is no change
    [0, 0, "seconds"],
  ] as const)("%s from %s (%s): '=', same", (now, before, kind) => {
    for (const direction of ["higher-is-better", "lower-is-better"] as const)
      expect(change(now, before, direction, kind)).toEqual({ text: "=", tone: "same" });
  });

  it.each([
    [null, 2],
    [2, null],
    [null, null],
  ])("%s from %s: n/a, same", (now, before) => {
    expect(change(now, before, "lower-is-better", "seconds")).toEqual({
      text: "n/a",
      tone: "same",
    });
  });
});

describe("HEADLINE", () => {
  const figures = (r: Review) => HEADLINE.map((f) => [f.label, f.show(f.value(r))]);

  it("the figures of a review, in order", () => {
    expect(figures(sampleReview)).toEqual([
      ["incidents", "6"],
      ["auto-recovery rate", "50.0%"],
      ["MTTR p50", "2.0 s"],
      ["MTTR p90", "3.0 s"],
      ["unrecovered (failed, escalated, out of budget)", "3"],
      ["UNKNOWN share", "50.0%"],
      ["recovery spend", "$1.5000"],
      ["spend per incident", "$0.2500"],
    ]);
  });

  it("no incident: rates and per-incident figures have no value, counts are 0", () => {
    const empty = reviewText("");
    expect(HEADLINE.map((f) => f.value(empty))).toEqual([0, null, null, null, 0, null, 0, null]);
    expect(figures(empty).map(([, shown]) => shown)).toEqual([
      "0",
      "n/a",
      "n/a",
      "n/a",
      "0",
      "n/a",
      "$0.0000",
      "n/a",
    ]);
  });

  it("rising is good news for the recovery rate only", () => {
    expect(HEADLINE.filter((f) => f.direction === "higher-is-better").map((f) => f.label)).toEqual([
      "auto-recovery rate",
    ]);
  });

  it("from a log: the figures agree with the review's fields", () => {
    const r = reviewText(
      [
        event({ outcome: "recovered", durationMs: 2_000, costUsd: 0.5, pattern: "TIMEOUT" }),
        event({ costUsd: 0.5 }),
      ].join("\n"),
    );
    expect(HEADLINE.map((f) => f.value(r))).toEqual([2, 0.5, 2, 2, 1, 0.5, 1, 0.5]);
  });
});
