/**
 * The review's figures, from lines of a recovery event log: what is a valid line, how each
 * tally is counted and sorted, and the percentiles of the duration sketch.
 */
import { describe, expect, it } from "vitest";
import {
  DurationSketch,
  eventProblem,
  MTTR_BINS_SECONDS,
  ReviewBuilder,
  reviewText,
  valueProblem,
  watchdogProblem,
} from "../../src/report/analyze.js";
import { event, eventFields, watchdogLine } from "./events.js";
import { callsLine } from "./rollups.js";

/** Largest time a Date can hold, ms from the epoch. */
const MAX_TIME = 8.64e15;
const T0 = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;
/** The threshold proposals of a log with no rollup lines: none. */
const NO_THRESHOLDS = {
  signals: [],
  stages: [],
  health: {},
  watchdog: {},
  rollups: 0,
  untracked: 0,
};
const NO_WATCHDOG = { events: 0, sessions: 0, verdicts: [], tiers: [], gaveUp: 0, runs: [] };

/** A bar of the series; `patterns` in the order expected. */
const bar = (
  at: number,
  incidents: number,
  recovered: number,
  costUsd: number,
  patterns: Record<string, number> = {},
) => ({
  at,
  incidents,
  recovered,
  costUsd,
  patterns: Object.entries(patterns).map(([pattern, n]) => ({ pattern, incidents: n })),
});

/** A kind of unrecovered incident seen once, by agent a. */
const unrecovered = (
  at: number,
  tool: string,
  pattern: string,
  outcome: string,
  error: string,
  tried: string[],
) => ({ firstAt: at, lastAt: at, count: 1, agent: "a", tool, pattern, outcome, error, tried });

describe("eventProblem: what a recovery event is", () => {
  it("a valid event, with or without its optional fields, has no problem", () => {
    expect(eventProblem(eventFields())).toBeUndefined();
    expect(
      eventProblem(
        eventFields({
          taskId: "t1",
          strategy: "retry_once",
          provider: null,
          steps: [{ strategy: "retry_once" }, { strategy: "failover", skipped: "no secondary" }],
        }),
      ),
    ).toBeUndefined();
    expect(
      eventProblem(
        eventFields({
          confidence: undefined,
          attempts: undefined,
          wastedRetries: undefined,
          failoverCostDifferentialUsd: undefined,
          steps: [{ strategy: "retry_once", skipped: null }],
        }),
      ),
    ).toBeUndefined();
  });

  it.each([
    ["a number", 5],
    ["a string", "event"],
    ["null", null],
    ["a list", [eventFields()]],
  ])("%s is not a JSON object", (_, value) => {
    expect(eventProblem(value)).toBe("not a JSON object");
  });

  it("at is a time a Date can hold: up to 8.64e15 ms either side of the epoch", () => {
    for (const at of [0, MAX_TIME, -MAX_TIME])
      expect(eventProblem(eventFields({ at })), `at ${at}`).toBeUndefined();
    for (const at of [MAX_TIME + 1, -MAX_TIME - 1, Infinity, NaN, "2026-01-01", undefined])
      expect(eventProblem(eventFields({ at })), `at ${String(at)}`).toBe("at is not a time");
  });

  it.each(["agent", "tool", "error", "pattern", "outcome"])("%s is a required string", (key) => {
    expect(eventProblem(eventFields({ [key]: undefined }))).toBe(`${key} is not a string`);
    expect(eventProblem(eventFields({ [key]: 7 }))).toBe(`${key} is not a string`);
  });

  it.each(["taskId", "strategy", "provider"])("%s, when present, is a string", (key) => {
    expect(eventProblem(eventFields({ [key]: null }))).toBeUndefined();
    expect(eventProblem(eventFields({ [key]: "x" }))).toBeUndefined();
    expect(eventProblem(eventFields({ [key]: 7 }))).toBe(`${key} is not a string`);
  });

  it("steps is a list of steps, each with a strategy and maybe a skip reason", () => {
    for (const steps of [undefined, {}, "retry_once"])
      expect(eventProblem(eventFields({ steps }))).toBe("steps is not a list");
    for (const step of [null, 5, "retry_once", {}, { strategy: 5 }])
      expect(
        eventProblem(eventFields({ steps: [{ strategy: "retry_once" }, step] })),
        JSON.stringify(step),
      ).toBe("steps[1] is not a step");
    expect(eventProblem(eventFields({ steps: [{ strategy: "backoff", skipped: 5 }] }))).toBe(
      "steps[0].skipped is not a string",
    );
  });

  it.each(["durationMs", "costUsd"])("%s is a required number, zero or more", (key) => {
    expect(eventProblem(eventFields({ [key]: 0 }))).toBeUndefined();
    for (const v of [undefined, "lots", -1, NaN, Infinity])
      expect(eventProblem(eventFields({ [key]: v })), String(v)).toBe(`${key} is not a number`);
  });

  it.each(["confidence", "attempts", "wastedRetries", "failoverCostDifferentialUsd", "status"])(
    "%s, when present, is a finite number",
    (key) => {
      expect(eventProblem(eventFields({ [key]: undefined }))).toBeUndefined();
      expect(eventProblem(eventFields({ [key]: -2 }))).toBeUndefined();
      for (const v of ["1", NaN, Infinity])
        expect(eventProblem(eventFields({ [key]: v })), String(v)).toBe(`${key} is not a number`);
    },
  );

  it("code, when present, is a string (an HTTP status is the number status)", () => {
    expect(eventProblem(eventFields({ code: "quota_exceeded", status: 429 }))).toBeUndefined();
    for (const code of [429, null, {}])
      expect(eventProblem(eventFields({ code })), JSON.stringify(code)).toBe(
        "code is not a string",
      );
  });
});

describe("watchdogProblem: what a watchdog line is", () => {
  const line = (over: Record<string, unknown>) =>
    JSON.parse(watchdogLine({ kind: "gave_up", reason: "3 restarts", ...over })) as Record<
      string,
      unknown
    >;

  it("each kind with its fields has no problem", () => {
    for (const over of [
      { kind: "verdict", verdict: "stalled", reason: "step unmoved" },
      { kind: "tier", tier: "nudge", reason: "step unmoved" },
      { kind: "tier_result", tier: "nudge", outcome: "recovered" },
      { kind: "gave_up", reason: "3 restarts" },
      { at: MAX_TIME },
      { at: -MAX_TIME },
    ])
      expect(watchdogProblem(line(over)), JSON.stringify(over)).toBeUndefined();
  });

  it("at is a time a Date can hold", () => {
    for (const at of [MAX_TIME + 1, -MAX_TIME - 1, Infinity, "now", undefined])
      expect(watchdogProblem({ ...line({}), at }), String(at)).toBe("at is not a time");
  });

  it.each(["agent", "session", "kind"])("%s is a required string", (key) => {
    expect(watchdogProblem({ ...line({}), [key]: undefined })).toBe(`${key} is not a string`);
    expect(watchdogProblem({ ...line({}), [key]: 1 })).toBe(`${key} is not a string`);
  });

  it("a kind that is not the watchdog's is named, an inherited name included", () => {
    for (const kind of ["launch", "toString", "__proto__", "constructor"])
      expect(watchdogProblem({ ...line({}), kind })).toBe(
        `kind ${JSON.stringify(kind)} is not a watchdog event`,
      );
  });

  it.each([
    ["verdict", "verdict"],
    ["verdict", "reason"],
    ["tier", "tier"],
    ["tier", "reason"],
    ["tier_result", "tier"],
    ["tier_result", "outcome"],
    ["gave_up", "reason"],
  ])("a %s line needs %s, a string", (kind, key) => {
    const full = line({ kind, verdict: "stalled", tier: "nudge", reason: "r", outcome: "failed" });
    expect(watchdogProblem(full)).toBeUndefined();
    expect(watchdogProblem({ ...full, [key]: undefined })).toBe(`${key} is not a string`);
    expect(watchdogProblem({ ...full, [key]: 3 })).toBe(`${key} is not a string`);
  });
});

describe("valueProblem: any parsed line, with or without a type", () => {
  const calls = JSON.parse(callsLine(T0, "a", "search", { ok: 3, latencies: [180] })) as Record<
    string,
    unknown
  >;
  const thresholds = { type: "thresholds", at: T0, agent: "a", thresholds: {} };

  it("an event, a watchdog line, a call rollup and settings have no problem", () => {
    for (const value of [
      eventFields(),
      JSON.parse(watchdogLine({ kind: "gave_up", reason: "r" })),
      calls,
      thresholds,
    ])
      expect(valueProblem(value), JSON.stringify(value)).toBeUndefined();
  });

  it("a line with no type is judged as an event", () => {
    expect(valueProblem(eventFields({ tool: 3 }))).toBe("tool is not a string");
    expect(valueProblem([1])).toBe("not a JSON object");
    expect(valueProblem(null)).toBe("not a JSON object");
    expect(valueProblem("text")).toBe("not a JSON object");
  });

  it("a typed line's problem is prefixed with what it is", () => {
    expect(valueProblem(JSON.parse(watchdogLine({ kind: "verdict" })))).toBe(
      "watchdog event: verdict is not a string",
    );
    expect(valueProblem({ ...calls, tool: 1 })).toBe("calls line: tool is not a string");
    expect(valueProblem({ ...thresholds, thresholds: 1 })).toBe(
      "thresholds line: thresholds is not an object",
    );
    for (const value of [calls, thresholds, JSON.parse(watchdogLine({ kind: "gave_up" }))])
      for (const at of [MAX_TIME + 1, "now", undefined])
        expect(valueProblem({ ...value, at })).toMatch(
          /^(calls line|thresholds line|watchdog event): at is not a time$/,
        );
  });

  it("a type this version does not read is named, cut to 64 characters", () => {
    expect(valueProblem({ type: "spans", at: T0 })).toBe(
      'type "spans" is not one this version reads',
    );
    expect(valueProblem({ type: 7 })).toBe("type 7 is not one this version reads");
    const long = valueProblem({ type: { nested: "x".repeat(10_000) } });
    expect(long).toBe(`type {"nested":"${"x".repeat(52)}… is not one this version reads`);
  });
});

describe("DurationSketch", () => {
  /** Where the sketch puts a value past the exact limit: the point of its log bucket. */
  const point = (v: number) => (2 * 1.01 ** Math.ceil(Math.log(v) / Math.log(1.01))) / 2.01;

  it("empty, every quantile is null", () => {
    const sketch = new DurationSketch();
    expect([sketch.quantile(0.5), sketch.quantile(1), sketch.count]).toEqual([null, null, 0]);
  });

  it("up to the exact limit, nearest-rank percentiles are exact, q clamped to the ranks", () => {
    const sketch = new DurationSketch();
    const n = DurationSketch.EXACT_LIMIT;
    for (let i = 0; i < n; i++) sketch.add(((i * 7919) % n) + 1); // 1..n, shuffled
    expect(sketch.quantile(0.5)).toBe(5_000);
    expect(sketch.quantile(0.9)).toBe(9_000);
    expect(sketch.quantile(0.12345)).toBe(1_235);
    expect(sketch.quantile(1)).toBe(n);
    expect(sketch.quantile(0)).toBe(1);
    expect(sketch.quantile(2)).toBe(n);
    expect(sketch.count).toBe(n);
  });

  it("past the exact limit, a value reads as the point of its bucket", () => {
    const sketch = new DurationSketch();
    for (let i = 0; i <= DurationSketch.EXACT_LIMIT; i++) sketch.add(3);
    expect(point(3)).not.toBe(3);
    expect(sketch.quantile(0.5)).toBe(point(3));
    expect(sketch.quantile(1)).toBe(point(3));
    sketch.add(3); // and after the fold, values go straight to their bucket
    expect(sketch.quantile(1)).toBe(point(3));
    expect(sketch.count).toBe(DurationSketch.EXACT_LIMIT + 2);
  });

  it("past the exact limit, zero and negative durations rank first and read as 0", () => {
    const sketch = new DurationSketch();
    const values = [
      ...Array<number>(1_000).fill(0),
      ...Array<number>(1_000).fill(-5),
      ...Array<number>(3_001).fill(2),
      ...Array<number>(5_000).fill(100),
    ];
    for (const v of values) sketch.add(v);
    const n = values.length; // EXACT_LIMIT + 1
    const atRank = (rank: number) => sketch.quantile((rank - 0.5) / n);
    expect(atRank(1)).toBe(0);
    expect(atRank(2_000)).toBe(0); // the last zero
    expect(atRank(2_001)).toBe(point(2));
    expect(atRank(5_001)).toBe(point(2)); // the last of its bucket
    expect(atRank(5_002)).toBe(point(100));
    expect(atRank(n)).toBe(point(100));
  });

  it("past the exact limit, only zeros read as 0", () => {
    const sketch = new DurationSketch();
    for (let i = 0; i <= DurationSketch.EXACT_LIMIT; i++) sketch.add(0);
    expect(sketch.quantile(0.5)).toBe(0);
    expect(sketch.quantile(1)).toBe(0);
  });
});

describe("ReviewBuilder", () => {
  it("an empty log gives an empty review", () => {
    expect(reviewText("")).toEqual({
      events: 0,
      malformed: 0,
      malformedSamples: [],
      from: undefined,
      to: undefined,
      patterns: [],
      tools: [],
      strategies: [],
      outcomes: [],
      mttrSeconds: { count: 0, p50: null, p90: null, p99: null },
      costUsd: 0,
      costPerIncidentUsd: 0,
      watchdog: NO_WATCHDOG,
      thresholds: NO_THRESHOLDS,
      rules: {
        file: { version: 1, source: "selfheal report", rules: [] },
        unclassified: [],
        texts: 0,
        leftOut: 0,
      },
      // One empty bar, of an hour, from the epoch: nothing to draw.
      series: { widthMs: HOUR, bars: [bar(0, 0, 0, 0)] },
      mttrHistogram: MTTR_BINS_SECONDS.map((fromSeconds) => ({ fromSeconds, count: 0 })),
      byAgent: [],
      byTool: [],
      unrecovered: { total: 0, groups: 0, latest: [] },
      period: {},
      outsidePeriod: 0,
      autoRecoveryRate: 0,
      unknownShare: 0,
    });
  });

  it("blank lines are skipped, not counted", () => {
    const r = reviewText(["", "  ", "\t", event(), " \r"].join("\n"));
    expect([r.events, r.malformed]).toEqual([1, 0]);
  });

  it("bad lines are counted, the first five named by line number", () => {
    const r = reviewText(
      [
        event(),
        "{oops",
        "null",
        "[]",
        "5",
        event({ tool: 5 }),
        watchdogLine({ kind: "launch" }),
        "",
        JSON.stringify({ type: "watchdog", agent: "a" }),
      ].join("\n"),
    );
    expect(r.events).toBe(1);
    expect(r.malformed).toBe(7);
    expect(r.malformedSamples).toEqual([
      "line 2: not JSON",
      "line 3: not a JSON object",
      "line 4: not a JSON object",
      "line 5: not a JSON object",
      "line 6: tool is not a string",
    ]);
    expect(r.watchdog.events).toBe(0);
  });

  it("reject counts a line the reader could not take, named as given", () => {
    const builder = new ReviewBuilder();
    builder.reject("b.jsonl line 3", "longer than 1048576 bytes");
    builder.addLine("{", "b.jsonl line 4");
    const r = builder.review();
    expect(r.malformed).toBe(2);
    expect(r.malformedSamples).toEqual([
      "b.jsonl line 3: longer than 1048576 bytes",
      "b.jsonl line 4: not JSON",
    ]);
  });

  it("tallies patterns, tools, strategies, outcomes, MTTR and spend, most frequent first", () => {
    // Each tally is first met in an order other than its sorted one.
    const log = [
      event({
        at: T0 + 5 * HOUR,
        tool: "search",
        pattern: "TIMEOUT",
        outcome: "failed",
        strategy: "failover",
        steps: [{ strategy: "failover" }],
        durationMs: 8_000,
        costUsd: 0.5,
      }),
      event({
        at: T0,
        pattern: "RATE_LIMIT",
        outcome: "recovered",
        strategy: "retry_once",
        steps: [{ strategy: "retry_once" }],
        durationMs: 1_000,
        costUsd: 0.25,
      }),
      event({
        at: T0 + HOUR,
        pattern: "RATE_LIMIT",
        outcome: "recovered",
        strategy: "backoff",
        steps: [
          { strategy: "failover", skipped: "no secondary" },
          { strategy: "retry_once" },
          { strategy: "backoff" },
        ],
        durationMs: 3_000,
        costUsd: 0.125,
      }),
      event({
        at: T0 + 6 * HOUR,
        tool: "fetch",
        error: "disk full",
        outcome: "fallback",
        strategy: "retry_once",
        steps: [{ strategy: "retry_once" }],
        durationMs: 2_000,
        costUsd: 0.0625,
      }),
      event({
        at: T0 + 2 * HOUR,
        tool: "fetch",
        error: "disk full",
        outcome: "fallback",
        strategy: "backoff",
        steps: [{ strategy: "backoff", skipped: null }],
        durationMs: 4_000,
        costUsd: 0.5,
      }),
      event({
        at: T0 + 3 * HOUR,
        pattern: "RATE_LIMIT",
        outcome: "recovered",
        durationMs: 2_000,
        costUsd: 0.0625,
      }),
    ].join("\n");
    expect(reviewText(log)).toEqual({
      events: 6,
      malformed: 0,
      malformedSamples: [],
      from: "2026-01-01T00:00:00.000Z",
      to: "2026-01-01T06:00:00.000Z",
      patterns: [
        { pattern: "RATE_LIMIT", incidents: 3, share: 0.5 },
        { pattern: "UNKNOWN", incidents: 2, share: 1 / 3 },
        { pattern: "TIMEOUT", incidents: 1, share: 1 / 6 },
      ],
      tools: [
        { tool: "lookup", incidents: 3, unknown: 0, unknownShare: 0, samples: [] },
        {
          tool: "fetch",
          incidents: 2,
          unknown: 2,
          unknownShare: 1,
          samples: [{ text: "disk full", count: 2 }],
        },
        { tool: "search", incidents: 1, unknown: 0, unknownShare: 0, samples: [] },
      ],
      // Skipped steps are not runs; a win is a recovered call's last strategy.
      strategies: [
        { strategy: "retry_once", runs: 3, recovered: 1, successRate: 1 / 3 },
        { strategy: "backoff", runs: 2, recovered: 1, successRate: 0.5 },
        { strategy: "failover", runs: 1, recovered: 0, successRate: 0 },
      ],
      outcomes: [
        { outcome: "recovered", incidents: 3, share: 0.5, p50Seconds: 2, p90Seconds: 3 },
        { outcome: "fallback", incidents: 2, share: 1 / 3, p50Seconds: 2, p90Seconds: 4 },
        { outcome: "failed", incidents: 1, share: 1 / 6, p50Seconds: 8, p90Seconds: 8 },
      ],
      mttrSeconds: { count: 3, p50: 2, p90: 3, p99: 3 },
      costUsd: 1.5,
      costPerIncidentUsd: 0.25,
      watchdog: NO_WATCHDOG,
      thresholds: NO_THRESHOLDS,
      rules: {
        file: {
          version: 1,
          source: "selfheal report: 2026-01-01T00:00:00.000Z to 2026-01-01T06:00:00.000Z",
          rules: [],
        },
        unclassified: [{ template: "disk full", samples: 2, examples: ["disk full"] }],
        texts: 2,
        leftOut: 0,
      },
      // Hours from the first event's to the last's, the quiet 04:00 one included.
      series: {
        widthMs: HOUR,
        bars: [
          bar(T0, 1, 1, 0.25, { RATE_LIMIT: 1 }),
          bar(T0 + HOUR, 1, 1, 0.125, { RATE_LIMIT: 1 }),
          bar(T0 + 2 * HOUR, 1, 0, 0.5, { UNKNOWN: 1 }),
          bar(T0 + 3 * HOUR, 1, 1, 0.0625, { RATE_LIMIT: 1 }),
          bar(T0 + 4 * HOUR, 0, 0, 0),
          bar(T0 + 5 * HOUR, 1, 0, 0.5, { TIMEOUT: 1 }),
          bar(T0 + 6 * HOUR, 1, 0, 0.0625, { UNKNOWN: 1 }),
        ],
      },
      // Recovered in 1, 3 and 2 s: bins [1, 2) and [2, 5).
      mttrHistogram: MTTR_BINS_SECONDS.map((fromSeconds) => ({
        fromSeconds,
        count: fromSeconds === 1 ? 1 : fromSeconds === 2 ? 2 : 0,
      })),
      byAgent: [
        {
          name: "a",
          incidents: 6,
          recovered: 3,
          autoRecoveryRate: 0.5,
          unknown: 2,
          unknownShare: 1 / 3,
          costUsd: 1.5,
          mttrP50Seconds: 2,
          mttrP90Seconds: 3,
        },
      ],
      byTool: [
        {
          name: "lookup",
          incidents: 3,
          recovered: 3,
          autoRecoveryRate: 1,
          unknown: 0,
          unknownShare: 0,
          costUsd: 0.4375,
          mttrP50Seconds: 2,
          mttrP90Seconds: 3,
        },
        {
          name: "fetch",
          incidents: 2,
          recovered: 0,
          autoRecoveryRate: 0,
          unknown: 2,
          unknownShare: 1,
          costUsd: 0.5625,
          mttrP50Seconds: null,
          mttrP90Seconds: null,
        },
        {
          name: "search",
          incidents: 1,
          recovered: 0,
          autoRecoveryRate: 0,
          unknown: 0,
          unknownShare: 0,
          costUsd: 0.5,
          mttrP50Seconds: null,
          mttrP90Seconds: null,
        },
      ],
      // The two fallbacks on fetch ran different strategies: two kinds. The latest first.
      unrecovered: {
        total: 3,
        groups: 3,
        latest: [
          unrecovered(T0 + 6 * HOUR, "fetch", "UNKNOWN", "fallback", "disk full", ["retry_once"]),
          unrecovered(T0 + 5 * HOUR, "search", "TIMEOUT", "failed", "boom", ["failover"]),
          unrecovered(T0 + 2 * HOUR, "fetch", "UNKNOWN", "fallback", "disk full", ["backoff"]),
        ],
      },
      period: {},
      outsidePeriod: 0,
      autoRecoveryRate: 0.5,
      unknownShare: 1 / 3,
    });
  });

  it("UNKNOWN texts: redacted, counted, in the order of their last appearance", () => {
    const r = reviewText(
      [
        event({ error: "a" }),
        event({ error: "token=hunter22" }),
        event({ error: "a" }),
        event({ error: "x".repeat(1_000) }),
        event({ error: "a", pattern: "TIMEOUT" }), // not UNKNOWN: no sample
        event({ error: "token=hunter22" }),
      ].join("\n"),
    );
    expect(r.tools).toEqual([
      {
        tool: "lookup",
        incidents: 6,
        unknown: 5,
        unknownShare: 5 / 6,
        samples: [
          { text: "a", count: 2 },
          { text: `${"x".repeat(511)}…`, count: 1 },
          { text: "token=[REDACTED]", count: 2 },
        ],
      },
    ]);
  });

  it("UNKNOWN texts: 50 are remembered per tool; an older one that comes back starts again", () => {
    const texts = (n: number) => Array.from({ length: n }, (_, i) => event({ error: `t${i}` }));
    const samples = (lines: string[]) =>
      reviewText(lines.join("\n")).tools[0]?.samples.map((s) => `${s.text} x${s.count}`);
    // 50 distinct texts: t0 is still remembered.
    expect(samples([...texts(50), event({ error: "t0" })])).toEqual([
      "t46 x1",
      "t47 x1",
      "t48 x1",
      "t49 x1",
      "t0 x2",
    ]);
    // 51: t0 was forgotten, its count starts again.
    expect(samples([...texts(51), event({ error: "t0" })])).toEqual([
      "t47 x1",
      "t48 x1",
      "t49 x1",
      "t50 x1",
      "t0 x1",
    ]);
  });

  it("reviewText names lines from 1", () => {
    expect(reviewText(["{", event(), "{"].join("\n")).malformedSamples).toEqual([
      "line 1: not JSON",
      "line 3: not JSON",
    ]);
  });
});

describe("ReviewBuilder: watchdog lines", () => {
  it("verdicts, most entered first, then by name; tiers in the supervisor's order", () => {
    const verdicts = (...names: string[]) =>
      names.map((verdict) => watchdogLine({ kind: "verdict", verdict, reason: "r" }));
    const tiers = (...names: string[]) =>
      names.map((tier) => watchdogLine({ kind: "tier", tier, reason: "r" }));
    const r = reviewText(
      [
        ...verdicts("stalled", "looping", "looping", "dead"),
        // Unknown tiers (a newer version's) come after the known ones, by name.
        ...tiers("zeta", "rotation", "alpha", "nudge", "context_reset", "nudge"),
        watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "recovered" }),
        watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "failed" }),
        watchdogLine({ kind: "tier_result", tier: "rotation", outcome: "timed_out" }),
        watchdogLine({ kind: "gave_up", reason: "3 restarts in 10 min" }),
        watchdogLine({ kind: "gave_up", reason: "3 restarts in 10 min" }),
      ].join("\n"),
    );
    expect(r.events).toBe(0);
    expect(r.from).toBeUndefined();
    expect(r.watchdog).toEqual({
      events: 15,
      sessions: 1,
      verdicts: [
        { verdict: "looping", count: 2 },
        { verdict: "dead", count: 1 },
        { verdict: "stalled", count: 1 },
      ],
      tiers: [
        { tier: "nudge", runs: 2, recovered: 1, failed: 1, successRate: 0.5 },
        { tier: "context_reset", runs: 1, recovered: 0, failed: 0, successRate: 0 },
        { tier: "rotation", runs: 1, recovered: 0, failed: 1, successRate: 0 },
        { tier: "alpha", runs: 1, recovered: 0, failed: 0, successRate: 0 },
        { tier: "zeta", runs: 1, recovered: 0, failed: 0, successRate: 0 },
      ],
      gaveUp: 2,
      // One run (agent a, session s1): each verdict, result and give-up, in order; a tier
      // started is not a step (its result is).
      runs: [
        {
          agent: "a",
          session: "s1",
          lastAt: T0,
          steps: [
            "stalled",
            "looping",
            "looping",
            "dead",
            "nudge: recovered",
            "nudge: failed",
            "rotation: timed_out",
            "gave up",
            "gave up",
          ],
        },
      ],
    });
  });

  it("sessions are told apart by agent and session; names are cut to one line of 64", () => {
    const long = "v".repeat(70);
    const r = reviewText(
      [
        watchdogLine({ kind: "verdict", verdict: long, reason: "r" }),
        watchdogLine({ agent: "b", kind: "verdict", verdict: "a\nb", reason: "r" }),
        watchdogLine({ session: "s2", kind: "gave_up", reason: "r" }),
        watchdogLine({ kind: "gave_up", reason: "r" }),
      ].join("\n"),
    );
    expect(r.watchdog.sessions).toBe(3);
    expect(r.watchdog.verdicts).toEqual([
      { verdict: "a\\nb", count: 1 },
      { verdict: "v".repeat(64), count: 1 },
    ]);
  });

  it("a bad watchdog line is named and left out of the tallies", () => {
    const r = reviewText(
      [
        watchdogLine({ kind: "tier", tier: "nudge" }),
        watchdogLine({ kind: "tier", tier: "nudge", reason: "r", at: "now" }),
      ].join("\n"),
    );
    expect(r.malformedSamples).toEqual([
      "line 1: watchdog event: reason is not a string",
      "line 2: watchdog event: at is not a time",
    ]);
    expect(r.watchdog).toEqual(NO_WATCHDOG);
  });
});

describe("ReviewBuilder: the period", () => {
  const at = (h: number) => event({ at: T0 + h * HOUR });
  const review = (lines: string[], period: { sinceMs?: number; untilMs?: number }) => {
    const builder = new ReviewBuilder(period);
    lines.forEach((l, i) => {
      builder.addLine(l, `line ${i + 1}`);
    });
    return builder.review();
  };

  it("from since, included, to until, excluded; lines outside are counted, bad ones are bad", () => {
    const r = review(
      [
        at(-1),
        at(0),
        at(3),
        watchdogLine({ at: T0 + 4 * HOUR - 1, kind: "gave_up", reason: "r" }),
        at(4),
        watchdogLine({ at: T0 + 4 * HOUR, kind: "gave_up", reason: "r" }),
        event({ at: T0 + HOUR, tool: 5 }),
        "{",
      ],
      { sinceMs: T0, untilMs: T0 + 4 * HOUR },
    );
    expect([r.events, r.watchdog.events, r.outsidePeriod, r.malformed]).toEqual([2, 1, 3, 2]);
    expect([r.from, r.to]).toEqual(["2026-01-01T00:00:00.000Z", "2026-01-01T03:00:00.000Z"]);
    expect(r.period).toEqual({
      since: "2026-01-01T00:00:00.000Z",
      until: "2026-01-01T04:00:00.000Z",
    });
  });

  it("the series spans the period, not the events: quiet hours at both ends", () => {
    const r = review([at(2)], { sinceMs: T0, untilMs: T0 + 5 * HOUR });
    expect(r.series).toEqual({
      widthMs: HOUR,
      bars: [
        bar(T0, 0, 0, 0),
        bar(T0 + HOUR, 0, 0, 0),
        bar(T0 + 2 * HOUR, 1, 0, 0, { UNKNOWN: 1 }),
        bar(T0 + 3 * HOUR, 0, 0, 0),
        bar(T0 + 4 * HOUR, 0, 0, 0),
      ],
    });
  });

  it.each([
    ["since only", { sinceMs: T0 + HOUR }, { since: "2026-01-01T01:00:00.000Z" }, 2, 1],
    ["until only", { untilMs: T0 + HOUR }, { until: "2026-01-01T01:00:00.000Z" }, 1, 2],
    ["no period", {}, {}, 3, 0],
  ])("%s: the open end takes everything", (_, period, said, events, outside) => {
    const r = review([at(0), at(1), at(2)], period);
    expect([r.period, r.events, r.outsidePeriod]).toEqual([said, events, outside]);
  });
});

describe("ReviewBuilder: incidents not recovered", () => {
  const failed = (over: Record<string, unknown>) =>
    event({ outcome: "escalated", steps: [{ strategy: "retry_once" }], ...over });

  it("alike ones are one kind: counted, first and last seen whatever the order", () => {
    const r = reviewText(
      [
        failed({ at: T0 + 2 * HOUR }),
        failed({ at: T0 }),
        event({ at: T0 + 9 * HOUR, outcome: "recovered" }), // not listed
        // A skipped step is not tried: the same kind.
        failed({
          at: T0 + HOUR,
          steps: [{ strategy: "failover", skipped: "no secondary" }, { strategy: "retry_once" }],
        }),
        failed({ at: T0 + 3 * HOUR, agent: "b" }),
        failed({ at: T0 + 3 * HOUR, outcome: "budget_exhausted" }),
        failed({ at: T0 + 3 * HOUR, steps: [] }),
        failed({ at: T0 + 3 * HOUR, error: "password=hunter22" }),
      ].join("\n"),
    );
    expect([r.unrecovered.total, r.unrecovered.groups]).toEqual([7, 5]);
    expect(r.unrecovered.latest[4]).toEqual({
      firstAt: T0,
      lastAt: T0 + 2 * HOUR,
      count: 3,
      agent: "a",
      tool: "lookup",
      pattern: "UNKNOWN",
      outcome: "escalated",
      error: "boom",
      tried: ["retry_once"],
    });
    expect(
      r.unrecovered.latest
        .slice(0, 4)
        .map((u) => [u.agent, u.outcome, u.error, u.tried.join(","), u.count]),
    ).toEqual([
      ["b", "escalated", "boom", "retry_once", 1],
      ["a", "budget_exhausted", "boom", "retry_once", 1],
      ["a", "escalated", "boom", "", 1],
      ["a", "escalated", "password=[REDACTED]", "retry_once", 1],
    ]);
  });

  it("the latest 50 kinds are listed, 200 kept: one forgotten comes back as a new kind", () => {
    const kinds = (n: number) =>
      Array.from({ length: n }, (_, i) => failed({ at: T0 + i * HOUR, error: `e${i}` }));
    const r = reviewText([...kinds(201), failed({ at: T0 + 999 * HOUR, error: "e0" })].join("\n"));
    expect([r.unrecovered.total, r.unrecovered.groups]).toEqual([202, 202]);
    expect(r.unrecovered.latest).toHaveLength(50);
    expect(r.unrecovered.latest.map((u) => `${u.error} x${u.count}`).slice(0, 3)).toEqual([
      "e0 x1",
      "e200 x1",
      "e199 x1",
    ]);
    expect(r.unrecovered.latest.at(-1)?.error).toBe("e152");
  });
});

describe("ReviewBuilder: the watchdog's runs", () => {
  const verdict = (session: string, v: string, at = T0) =>
    watchdogLine({ session, at, kind: "verdict", verdict: v, reason: "r" });

  it("a healthy or starting verdict is not a step; the most recently acted on first", () => {
    const r = reviewText(
      [
        verdict("s1", "starting"),
        verdict("s1", "stalled", T0 + 2),
        verdict("s2", "healthy", T0 + 9),
        verdict("s3", "looping", T0 + 1),
        watchdogLine({ session: "s1", at: T0, kind: "tier_result", tier: "nudge", outcome: "x" }),
      ].join("\n"),
    );
    expect(r.watchdog.sessions).toBe(3);
    // s1 was acted on last (its tier result), though dated before its verdict: lastAt is the max.
    expect(r.watchdog.runs).toEqual([
      { agent: "a", session: "s1", lastAt: T0 + 2, steps: ["stalled", "nudge: x"] },
      { agent: "a", session: "s3", lastAt: T0 + 1, steps: ["looping"] },
    ]);
  });

  it("the last 20 steps of a run, the latest 100 runs; names one line of 64", () => {
    const long = `${"s".repeat(70)}\n`;
    const r = reviewText(
      [
        ...Array.from({ length: 25 }, (_, i) => verdict("s0", `v${i}`)),
        ...Array.from({ length: 100 }, (_, i) => verdict(`r${i}`, "stalled")),
        verdict(long, "stalled"),
      ].join("\n"),
    );
    expect(r.watchdog.runs).toHaveLength(100);
    expect(r.watchdog.runs[0]?.session).toBe("s".repeat(64));
    expect(r.watchdog.runs.map((run) => run.session)).not.toContain("s0");
    const again = reviewText(
      Array.from({ length: 25 }, (_, i) => verdict("s0", `v${i}`)).join("\n"),
    );
    expect(again.watchdog.runs[0]?.steps).toEqual(
      Array.from({ length: 20 }, (_, i) => `v${i + 5}`),
    );
  });
});
