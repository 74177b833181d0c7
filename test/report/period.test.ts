/** The period reviewed (`--since`, `--until`) and the one before it (`--compare-previous`). */
import { describe, expect, it } from "vitest";
import { ReviewBuilder } from "../../src/report/analyze.js";
import { parseTime, PeriodReviews, type Period } from "../../src/report/period.js";
import { event, watchdogLine } from "./events.js";
import { callsLine } from "./rollups.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const BASE = Date.UTC(2026, 10, 23, 8, 30);

describe("parseTime", () => {
  it.each([
    ["2026-11-23", Date.UTC(2026, 10, 23)],
    ["2026-11-23T08:00:00Z", Date.UTC(2026, 10, 23, 8)],
    ["2026-11-23T08:00Z", Date.UTC(2026, 10, 23, 8)],
    ["2026-11-23T08:00:00.250Z", Date.UTC(2026, 10, 23, 8, 0, 0, 250)],
    ["2026-11-23T08:00:00+01:00", Date.UTC(2026, 10, 23, 7)],
    ["2026-11-23T08:00:00-05:30", Date.UTC(2026, 10, 23, 13, 30)],
    [" 2026-11-23 ", Date.UTC(2026, 10, 23)],
  ])("an ISO date or time: %j", (value, ms) => {
    expect(parseTime(value, BASE)).toBe(ms);
  });

  it.each([
    ["7d", 7 * DAY],
    ["12h", 12 * HOUR],
    ["90m", 90 * 60_000],
    ["2w", 14 * DAY],
    ["0h", 0],
    [" 3d ", 3 * DAY],
    ["999999m", 999_999 * 60_000],
  ])("a span back from the base: %j", (value, back) => {
    expect(parseTime(value, BASE)).toBe(BASE - back);
    expect(parseTime(value, BASE + DAY)).toBe(BASE + DAY - back);
  });

  it.each([
    "",
    "yesterday",
    "7",
    "d",
    "7 d",
    "7D",
    "7y",
    "7s",
    "-7d",
    "1.5h",
    "1000000m", // seven digits: more than a span means
    "23/11/2026",
    "Nov 23 2026",
    "2026-13-45",
    "2026-11-23Tnonsense",
    "1700000000000",
    "7dx", // a span, then more
    "x7d",
    "2026-11-2", // a day of one digit: Date.parse would take it
    "x2026-11-23",
  ])("anything else is not a time: %j", (value) => {
    expect(parseTime(value, BASE)).toBeUndefined();
  });
});

describe("PeriodReviews", () => {
  const since = BASE;
  const until = BASE + DAY;
  /** The lines given one by one, then both reviews. */
  const run = (
    lines: string[],
    comparePrevious = true,
    period: Period = { sinceMs: since, untilMs: until },
  ) => {
    const reviews = new PeriodReviews(period, comparePrevious);
    lines.forEach((l, i) => {
      reviews.addLine(l, `line ${i + 1}`);
    });
    return { current: reviews.current.review(), previous: reviews.previous?.review() };
  };
  const at = (ms: number, over: Record<string, unknown> = {}) => event({ at: ms, ...over });

  it("the previous period is the same length, just before; each line goes to the one it is dated in", () => {
    const { current, previous } = run([
      at(since - DAY - 1), // before both
      at(since - DAY), // the previous period's first instant
      at(since - 1, { outcome: "recovered" }),
      at(since), // the current's first instant
      at(until - 1),
      at(until), // after both
      watchdogLine({ at: since - HOUR, kind: "gave_up", reason: "r" }),
      watchdogLine({ at: since + HOUR, kind: "gave_up", reason: "r" }),
    ]);
    expect(current.period).toEqual({
      since: new Date(since).toISOString(),
      until: new Date(until).toISOString(),
    });
    expect(previous?.period).toEqual({
      since: new Date(since - DAY).toISOString(),
      until: new Date(since).toISOString(),
    });
    expect([current.events, current.watchdog.events, current.outsidePeriod]).toEqual([2, 1, 5]);
    expect([previous?.events, previous?.watchdog.events, previous?.outsidePeriod]).toEqual([
      2, 1, 5,
    ]);
    expect(previous?.autoRecoveryRate).toBe(0.5);
    expect(current.autoRecoveryRate).toBe(0);
  });

  it("each line is parsed once: a bad line is counted once, in the current review only", () => {
    const parse = JSON.parse;
    let parsed = 0;
    JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
      parsed++;
      return parse(text, reviver) as unknown;
    }) as typeof JSON.parse;
    let result;
    try {
      result = run(["{oops", at(since), "", at(since - HOUR), "  ", '{"at":"x"}']);
    } finally {
      JSON.parse = parse;
    }
    expect(parsed).toBe(4); // blank lines are not parsed at all
    expect([result.current.malformed, result.current.malformedSamples]).toEqual([
      2,
      ["line 1: not JSON", "line 6: at is not a time"],
    ]);
    expect([result.previous?.malformed, result.previous?.malformedSamples]).toEqual([0, []]);
  });

  it("a line the reader could not take is named in the current review only", () => {
    const reviews = new PeriodReviews({ sinceMs: since, untilMs: until }, true);
    reviews.reject("line 9", "longer than 1048576 bytes");
    expect(reviews.current.review().malformedSamples).toEqual([
      "line 9: longer than 1048576 bytes",
    ]);
    expect(reviews.previous?.review().malformed).toBe(0);
  });

  it.each([
    ["not asked for", false, { sinceMs: since, untilMs: until }],
    ["with no start", true, { untilMs: until }],
    ["with no end", true, { sinceMs: since }],
  ])("no previous period when %s", (_, compare, period) => {
    const reviews = new PeriodReviews(period, compare);
    expect(reviews.previous).toBeUndefined();
    expect(reviews.current).toBeInstanceOf(ReviewBuilder);
  });

  it("a call rollup goes to the period it is dated in, read without a parse", () => {
    const calls = (ms: number) => callsLine(ms, "a", "search", { ok: 3, latencies: [180] });
    const { current, previous } = run([
      calls(since + HOUR),
      calls(since - HOUR),
      calls(since - HOUR),
    ]);
    expect(current.thresholds.rollups).toBe(1);
    expect(previous?.thresholds.rollups).toBe(2);
    expect(run([calls(since + HOUR)], false).current.thresholds.rollups).toBe(1);
  });

  it("no period: every valid line is reviewed, none outside", () => {
    const { current, previous } = run([at(0), at(BASE), at(8.64e15)], false, {});
    expect([current.events, current.outsidePeriod, previous]).toEqual([3, 0, undefined]);
  });
});
