/**
 * The review over time: hourly tallies re-cut into at most MAX_BARS bars of whole hours (then
 * days, then weeks), every bar present, in bounded memory.
 */
import { describe, expect, it } from "vitest";
import { reviewText } from "../../src/report/analyze.js";
import { renderHtml } from "../../src/report/render-html.js";
import { MAX_BARS, SeriesTally } from "../../src/report/series.js";
import { event } from "./events.js";

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);
/** Largest time a Date can hold, ms from the epoch. */
const MAX_TIME = 8.64e15;

describe("SeriesTally: the width of the bars, by the span", () => {
  it.each([
    ["an instant", 0, 1, 1],
    ["an hour", 1, 1, 1],
    ["a day", 24, 1, 24],
    ["84 hours", 84, 1, 84],
    ["85 hours", 85, 2, 43],
    ["a week", 168, 2, 84],
    ["a week and an hour", 169, 3, 57],
    ["two weeks", 336, 6, 56],
    ["30 days", 720, 12, 60],
    ["8 weeks", 1_344, 24, 56],
    ["84 days", 2_016, 24, 84],
    ["a quarter", 2_184, 48, 46],
    ["a year", 8_760, 168, 53],
    // Past 84 weeks: whole weeks, still at most MAX_BARS bars.
    ["two years", 17_520, 336, 53],
  ])("%s (%i h): bars of %i h, %i of them", (_, hours, widthHours, count) => {
    const s = new SeriesTally().series(T0, T0 + hours * HOUR);
    expect([s.widthMs / HOUR, s.bars.length]).toEqual([widthHours, count]);
    expect(s.bars.length).toBeLessThanOrEqual(MAX_BARS);
    expect(s.bars.map((b) => b.at)).toEqual(
      Array.from({ length: count }, (_, i) => T0 + i * widthHours * HOUR),
    );
  });

  it("the bars start on the hour of the period's start", () => {
    const s = new SeriesTally().series(T0 + 90 * 60_000, T0 + 3 * HOUR);
    expect(s.bars.map((b) => (b.at - T0) / HOUR)).toEqual([1, 2]);
  });

  it("the log's whole span, from one end of time to the other: MAX_BARS bars of whole weeks", () => {
    const r = reviewText([event({ at: -MAX_TIME }), event({ at: MAX_TIME })].join("\n"));
    expect(r.series.bars).toHaveLength(MAX_BARS);
    expect(r.series.widthMs % (168 * HOUR)).toBe(0);
    expect(r.series.bars.reduce((n, b) => n + b.incidents, 0)).toBe(2);
    expect(renderHtml(r)).toContain('<section id="over-time">');
  });
});

describe("SeriesTally: the figures of each bar", () => {
  it("each hour's incidents, recoveries and spend summed into its bar; quiet bars present, empty", () => {
    const tally = new SeriesTally();
    tally.add(T0 + 10 * 60_000, "RATE_LIMIT", true, 0.25);
    tally.add(T0 + HOUR + 59 * 60_000, "RATE_LIMIT", false, 0.5);
    tally.add(T0 + HOUR, "TIMEOUT", true, 0.125);
    tally.add(T0 + 5 * HOUR, "UNKNOWN", false, 0);
    // 85 hours: bars of 2 h; hours 0 and 1 share the first.
    const s = tally.series(T0, T0 + 85 * HOUR);
    expect(s.bars).toHaveLength(43);
    expect(s.bars[0]).toEqual({
      at: T0,
      incidents: 3,
      recovered: 2,
      costUsd: 0.875,
      patterns: [
        { pattern: "RATE_LIMIT", incidents: 2 },
        { pattern: "TIMEOUT", incidents: 1 },
      ],
    });
    expect(s.bars[1]).toEqual({
      at: T0 + 2 * HOUR,
      incidents: 0,
      recovered: 0,
      costUsd: 0,
      patterns: [],
    });
    expect(s.bars[2]?.patterns).toEqual([{ pattern: "UNKNOWN", incidents: 1 }]);
    expect(s.bars.slice(3).every((b) => b.incidents === 0 && b.patterns.length === 0)).toBe(true);
  });

  it("patterns in a bar: the most frequent first, ties by name", () => {
    const tally = new SeriesTally();
    for (const p of ["b", "c", "a", "c", "__proto__", "constructor", "c", "b"])
      tally.add(T0, p, false, 0);
    expect(tally.series(T0, T0 + HOUR).bars[0]?.patterns).toEqual([
      { pattern: "c", incidents: 3 },
      { pattern: "b", incidents: 2 },
      { pattern: "__proto__", incidents: 1 },
      { pattern: "a", incidents: 1 },
      { pattern: "constructor", incidents: 1 },
    ]);
  });

  it("incidents outside the bars (before or after the period) are not drawn", () => {
    const tally = new SeriesTally();
    tally.add(T0 - HOUR, "X", false, 1);
    tally.add(T0, "X", false, 1);
    tally.add(T0 + 2 * HOUR, "X", false, 1);
    const s = tally.series(T0, T0 + 2 * HOUR);
    expect(s.bars.map((b) => b.incidents)).toEqual([1, 0]);
  });

  it("50,000 hours remembered: incidents of a new hour past that are counted as dropped", () => {
    const tally = new SeriesTally();
    for (let h = 0; h < 50_000; h++) tally.add(T0 + h * HOUR, "X", false, 0);
    expect(tally.dropped).toBe(0);
    tally.add(T0 + 50_000 * HOUR, "X", false, 0);
    tally.add(T0 + 50_001 * HOUR, "X", false, 0);
    tally.add(T0 + 49_999 * HOUR, "X", true, 0); // an hour already remembered: still drawn
    expect(tally.dropped).toBe(2);
    const s = tally.series(T0, T0 + 50_002 * HOUR);
    expect(s.bars.reduce((n, b) => n + b.incidents, 0)).toBe(50_001);
    expect(s.bars.reduce((n, b) => n + b.recovered, 0)).toBe(1);
  });
});
