import { describe, expect, it } from "vitest";
import { MAX_TIME, ReviewBuilder, reviewText, valueProblem } from "../../src/report/analyze.js";
import { renderThresholdSuggestions } from "../../src/report/render-text.js";
import type { ThresholdSuggestions } from "../../src/report/suggest-thresholds.js";
import type { SignalAdvice } from "../../src/report/threshold-advice.js";
import { callsProblem, readCallsLine } from "../../src/report/threshold-lines.js";
import {
  callsLine,
  callsLines,
  DAY,
  HOUR,
  incidentLine,
  MINUTE,
  spread,
  stepsLine,
  WEEK_START,
} from "./rollups.js";

const WEEK_END = WEEK_START + 7 * DAY;
const STEADY = spread(30, 150, 250);
const DOUBLED = STEADY.map((ms) => ms * 2);
const SHIFT_AT = WEEK_START + 3.5 * DAY;

const suggest = (lines: string[]): ThresholdSuggestions => reviewText(lines.join("\n")).thresholds;
const signal = (s: ThresholdSuggestions, tool: string, name: SignalAdvice["signal"]) => {
  const found = s.signals.find((a) => a.tool === tool && a.signal === name);
  if (!found) throw new Error(`no ${name} advice for ${tool}`);
  return found;
};

/** A settings line as the engine writes it at start (only the fields that differ from defaults). */
const thresholdsLine = (agent: string, thresholds: object, tools: object = {}) =>
  JSON.stringify({ type: "thresholds", at: WEEK_START - HOUR, agent, thresholds, tools });

describe("--suggest-thresholds: latency", () => {
  const week = (latencies: (at: number) => number[]) =>
    callsLines("support", "search", WEEK_START, WEEK_END, (at) => ({
      ok: 30,
      latencies: latencies(at),
    }));

  it("flags a P95 that doubled mid-week, and proposes the baseline before it", () => {
    const s = suggest(week((at) => (at < SHIFT_AT ? STEADY : DOUBLED)));
    const latency = signal(s, "search", "latency_p95");
    expect(latency.shift?.at).toBe(SHIFT_AT);
    expect(latency.shift?.ratio).toBeCloseTo(2, 1);
    // The P95 of 150..250 ms is 246.6 ms: a bucket's point is within 4.5 % of it.
    expect(Math.abs((latency.shift?.beforeMs ?? 0) / 246.6 - 1)).toBeLessThan(0.045);
    // The learned baseline follows the doubling (2x < the 3x warning): health never warned.
    expect(latency.current).toEqual({
      setting: "learned baseline, warning at 3x",
      caught: 0,
      incidents: 504, // 3.5 days of 10-minute windows after the shift
      falseAlarms: 0,
      quiet: 504,
    });
    expect(latency.suggested).toMatchObject({ caught: 504, incidents: 504, falseAlarms: 0 });
    const pinned = Math.round(latency.shift?.beforeMs ?? 0);
    expect(latency.overrides).toEqual({ latency: { baselineMs: pinned, warningFactor: 1.2 } });
    expect(latency.reason).toMatch(/^P95 rose x2\.0\d and the learned baseline followed it/);
    expect(s.health).toEqual({
      support: { tools: { search: { latency: { baselineMs: pinned, warningFactor: 1.2 } } } },
    });
    // Success and empty rates: nothing to change.
    expect(signal(s, "search", "success_rate").suggested).toBeUndefined();
    expect(s.signals.some((a) => a.signal === "empty_responses")).toBe(false);

    const text = renderThresholdSuggestions(s);
    expect(text.split("\n")[0]).toBe(
      "Suggested thresholds: 1 tool signals and 0 stall limits to change, from 10080 rollup lines",
    );
    expect(text).toContain(`"baselineMs": ${pinned}`);
    expect(text).toContain('createSelfHealing({ agent: "support", health: {');
    // The whole text: a renderer is judged on what it prints.
    expect(text).toMatchInlineSnapshot(`
      "Suggested thresholds: 1 tool signals and 0 stall limits to change, from 10080 rollup lines

      Per tool (10-minute windows; incident: a recovery in it; quiet: none in it or next to it)
      agent    tool         signal        samples  evidence                                                          current                          it did                             suggested                         would do
      -------  -----------  ------------  -------  ----------------------------------------------------------------  -------------------------------  ---------------------------------  --------------------------------  -----------------------------------
      support  (all tools)  success rate  302400   lowest quiet success rate 1.000                                   warning below 0.80               caught 0/0, alarmed 0/1008 quiet   no change                         the current setting does as well
      support  search       success rate  302400   lowest quiet success rate 1.000                                   warning below 0.80               caught 0/0, alarmed 0/1008 quiet   no change                         the current setting does as well
      support  search       P95 latency   302400   P95 245 ms before 2026-11-26T12:00:00.000Z, 490 ms after (x2.00)  learned baseline, warning at 3x  caught 0/504, alarmed 0/504 quiet  baseline 245 ms, warning at 1.2x  caught 504/504, alarmed 0/504 quiet
        support/search P95 latency: P95 rose x2.00 and the learned baseline followed it: pin the baseline before it (if the new level is expected, keep the current setting)

      Paste:
      createSelfHealing({ agent: "support", health: {
          "tools": {
            "search": {
              "latency": {
                "baselineMs": 245,
                "warningFactor": 1.2
              }
            }
          }
        } });"
    `);
  });

  it("proposes no change on a steady week", () => {
    const s = suggest(week(() => STEADY));
    expect(s.health).toEqual({});
    expect(s.watchdog).toEqual({});
    expect(s.signals.map((a) => [a.tool, a.signal, a.suggested, a.overrides])).toEqual([
      ["(all tools)", "success_rate", undefined, undefined],
      ["search", "success_rate", undefined, undefined],
      ["search", "latency_p95", undefined, undefined],
    ]);
    expect(signal(s, "search", "latency_p95").reason).toBe("no false alarm on quiet windows");
    expect(renderThresholdSuggestions(s)).toContain(
      "No change proposed: the current settings fit the period.",
    );
  });

  it("ignores a spike of two hours (medians, not means): no shift", () => {
    const spike = (at: number) => at >= SHIFT_AT && at < SHIFT_AT + 2 * HOUR;
    const s = suggest(week((at) => (spike(at) ? DOUBLED.map((x) => x * 5) : STEADY)));
    expect(signal(s, "search", "latency_p95").shift).toBeUndefined();
  });

  it("with a pinned baseline, a P95 that halved makes the baseline stale", () => {
    const halved = STEADY.map((ms) => ms / 2);
    const s = suggest([
      thresholdsLine("support", { latency: { baselineMs: 247 } }),
      ...week((at) => (at < SHIFT_AT ? STEADY : halved)),
    ]);
    const latency = signal(s, "search", "latency_p95");
    expect(latency.shift?.ratio).toBeCloseTo(0.5, 1);
    expect(latency.overrides).toEqual({
      latency: { baselineMs: Math.round(latency.shift?.afterMs ?? 0) },
    });
    expect(latency.reason).toBe("P95 fell x0.50: the pinned baseline 247 ms is stale");
  });

  it("raises a warning factor that alarms on quiet windows", () => {
    // Every sixth hour is three times slower, with no incident: a 2x warning alarms on it.
    const slowHour = (at: number) => Math.floor(at / HOUR) % 6 === 0;
    const s = suggest([
      thresholdsLine("support", { latency: { warningFactor: 2, baselineMs: 250 } }),
      ...callsLines("support", "search", WEEK_START, WEEK_START + DAY, (at) => ({
        ok: 30,
        latencies: slowHour(at) ? STEADY.map((x) => x * 3) : STEADY,
      })),
    ]);
    const latency = signal(s, "search", "latency_p95");
    expect(latency.current.falseAlarms).toBe(24); // 4 slow hours x 6 windows
    expect(latency.overrides).toEqual({ latency: { warningFactor: 3.5 } });
    expect(latency.suggested?.falseAlarms).toBe(0);
  });
});

describe("--suggest-thresholds: success and empty rates", () => {
  /** A day of 30 calls a minute; from 10:00 to 10:30 four of every 30 fail, with incidents. */
  const day = [
    ...callsLines("support", "pay", WEEK_START, WEEK_START + DAY, (at) => {
      const bad = at >= WEEK_START + 10 * HOUR && at < WEEK_START + 10.5 * HOUR;
      return { ok: bad ? 26 : 30, failed: bad ? 4 : 0, latencies: STEADY };
    }),
    ...[5, 15, 25].map((m) => incidentLine(WEEK_START + 10 * HOUR + m * MINUTE, "support", "pay")),
  ];

  it("proposes a warning that catches the incident windows the default 0.8 missed", () => {
    const s = suggest(day);
    const rate = signal(s, "pay", "success_rate");
    expect(rate.evidence).toBe("lowest quiet success rate 1.000");
    // 144 windows; 3 incident windows; quiet: all but those 3 and their 2 neighbours.
    expect(rate.current).toEqual({
      setting: "warning below 0.80",
      caught: 0,
      incidents: 3,
      falseAlarms: 0,
      quiet: 139,
    });
    expect(rate.suggested).toEqual({
      setting: "warning below 0.98",
      caught: 3,
      incidents: 3,
      falseAlarms: 0,
      quiet: 139,
    });
    expect(rate.overrides).toEqual({ successRate: { warning: 0.98 } });
    expect(rate.reason).toBe("the current warning missed 3 incident windows");
  });

  it("lowers a warning that alarms on a tool's normal failures, and keeps critical below it", () => {
    const s = suggest([
      thresholdsLine("support", {}, { flaky: { successRate: { warning: 0.97, critical: 0.95 } } }),
      ...callsLines("support", "flaky", WEEK_START, WEEK_START + DAY, () => ({
        ok: 93,
        failed: 7,
        latencies: STEADY,
      })),
    ]);
    const rate = signal(s, "flaky", "success_rate");
    expect(rate.current.falseAlarms).toBe(144);
    expect(rate.overrides).toEqual({ successRate: { warning: 0.91, critical: 0.81 } });
    expect(rate.suggested?.falseAlarms).toBe(0);
    expect(rate.reason).toBe("the current warning alarmed on 144 quiet windows");
  });

  it("judges the agent's own rate over all its tools, and places its change at the agent's level", () => {
    const day = (tool: string) =>
      callsLines("support", tool, WEEK_START, WEEK_START + DAY, () => ({
        ok: 98,
        failed: 2,
        latencies: STEADY,
      }));
    const s = suggest([
      // Each tool has its own warning below its 0.98; the agent's 0.99 alarms all day.
      thresholdsLine(
        "support",
        { successRate: { warning: 0.99 } },
        { a: { successRate: { warning: 0.9 } }, b: { successRate: { warning: 0.9 } } },
      ),
      ...day("a"),
      ...day("b"),
    ]);
    const agent = s.signals.find((x) => x.scope === "agent" && x.signal === "success_rate");
    expect(agent).toMatchObject({ tool: "(all tools)", samples: 2 * 1440 * 100, windows: 144 });
    expect(agent?.current.falseAlarms).toBe(144);
    expect(agent?.overrides).toEqual({ successRate: { warning: 0.96 } });
    expect(s.health).toEqual({ support: { successRate: { warning: 0.96 } } });
    expect(renderThresholdSuggestions(s)).toContain(
      'createSelfHealing({ agent: "support", health: {\n    "successRate": {',
    );
  });

  it("judges empty responses of LLM calls, and needs an hour of quiet windows", () => {
    const llm = (empty: number) => ({ ok: 50, llm: 50, empty, latencies: STEADY });
    const s = suggest([
      thresholdsLine("support", { emptyResponses: { warning: 0.02, critical: 0.03 } }),
      ...callsLines("support", "model", WEEK_START, WEEK_START + DAY, () => llm(1)),
      ...callsLines("support", "brief", WEEK_START, WEEK_START + 50 * MINUTE, () => llm(0)),
    ]);
    const empty = signal(s, "model", "empty_responses");
    expect(empty.evidence).toBe("highest quiet empty rate 0.020");
    expect(empty.current.falseAlarms).toBe(0);
    expect(empty.suggested).toBeUndefined();
    // Five windows are too few to set a threshold on.
    expect(signal(s, "brief", "empty_responses").reason).toBe("too few quiet windows to judge");
  });

  it("judges no P95 on windows with fewer calls than the evaluator needs for one", () => {
    // One call a minute: 10 a window, under the default latency minSamples (20).
    const s = suggest(
      callsLines("a", "sparse", WEEK_START, WEEK_START + DAY, (at) =>
        at % MINUTE === 0 ? { ok: 1, latencies: [900] } : undefined,
      ),
    );
    const p95 = signal(s, "sparse", "latency_p95");
    expect(p95.samples).toBeGreaterThan(1000);
    expect(p95.windows).toBe(0);
    expect(p95.evidence).toBe("0 quiet windows of 20+ calls");
    expect(p95.reason).toBe("too few quiet windows to judge");
    expect(p95.suggested).toBeUndefined();
  });

  it("proposes an empty-rate warning above the quiet windows' highest rate", () => {
    const s = suggest([
      thresholdsLine("support", { emptyResponses: { warning: 0.01, critical: 0.03 } }),
      ...callsLines("support", "model", WEEK_START, WEEK_START + DAY, () => ({
        ok: 50,
        llm: 50,
        empty: 1,
        latencies: STEADY,
      })),
    ]);
    const empty = signal(s, "model", "empty_responses");
    expect(empty.current.falseAlarms).toBe(144);
    expect(empty.overrides).toEqual({ emptyResponses: { warning: 0.04, critical: 0.14 } });
  });
});

describe("--suggest-thresholds: watchdog stall limits", () => {
  const minutes = (n: number, f: (i: number) => string) =>
    Array.from({ length: n }, (_, i) => f(i));

  it("raises a limit slow steps passed, tightens a loose one, and leaves a thin stage alone", () => {
    const s = suggest([
      JSON.stringify({
        type: "watchdog",
        kind: "limits",
        at: WEEK_START - HOUR,
        agent: "night",
        session: "s1",
        stallMs: 90_000,
        stageStallMs: { think: 120_000 },
        graceMs: 60_000,
        deadMs: 30_000,
      }),
      // tool_call: steps of 60 to 150 s; the 90 s limit calls the slowest stalled.
      ...minutes(40, (i) =>
        stepsLine(WEEK_START + i * MINUTE, "night", "tool_call", spread(5, 60_000, 150_000)),
      ),
      // think: 2 s steps under a 120 s limit.
      ...minutes(40, (i) =>
        stepsLine(WEEK_START + i * MINUTE, "night", "think", spread(5, 1_500, 2_500)),
      ),
      ...minutes(2, (i) => stepsLine(WEEK_START + i * MINUTE, "night", "rare", [5_000])),
    ]);
    const [rare, think, toolCall] = s.stages;
    expect(toolCall).toMatchObject({ stage: "tool_call", steps: 200, currentMs: 90_000 });
    expect(toolCall?.currentOver).toBeGreaterThan(100);
    // p99 of up to 150 s, 1.5x, rounded up to 5 s.
    expect(toolCall?.suggestedMs).toBe(225_000);
    expect(toolCall?.suggestedOver).toBe(0);
    expect(think).toMatchObject({ stage: "think", currentMs: 120_000, suggestedMs: 10_000 });
    expect(think?.reason).toBe("the current limit is 12x the slowest steps: stalls found sooner");
    expect(rare).toMatchObject({ stage: "rare", steps: 2 });
    expect(rare?.suggestedMs).toBeUndefined();
    expect(rare?.reason).toBe("too few steps to judge (2 of 20)");
    expect(s.watchdog).toEqual({ night: { stageStallMs: { think: 10_000, tool_call: 225_000 } } });
    const text = renderThresholdSuggestions(s);
    expect(text).toContain(
      "selfheal watch --stage-stall-ms think=10000 --stage-stall-ms tool_call=225000 ...",
    );
    expect(text).toMatchInlineSnapshot(`
      "Suggested thresholds: 0 tool signals and 2 stall limits to change, from 82 rollup lines

      Watchdog stall limits per stage (from the durations of completed steps)
      agent  stage      steps  p99      longest  current  slower than it  suggested  slower than it  why
      -----  ---------  -----  -------  -------  -------  --------------  ---------  --------------  ---------------------------------------------------------------
      night  rare       2      5.1 s    5.1 s    90.0 s   0               no change                  too few steps to judge (2 of 20)
      night  think      200    2.5 s    2.5 s    120.0 s  0               10.0 s     0               the current limit is 12x the slowest steps: stalls found sooner
      night  tool_call  200    149.3 s  149.3 s  90.0 s   120             225.0 s    0               120 steps took longer than the current limit: slow, not stuck

      Paste:
      new Supervisor({ agent: "night", limits: {"stageStallMs":{"think":10000,"tool_call":225000}}, ... });
      selfheal watch --stage-stall-ms think=10000 --stage-stall-ms tool_call=225000 ..."
    `);
  });
});

describe("--suggest-thresholds as text", () => {
  it("a log without rollup lines says where they come from", () => {
    expect(renderThresholdSuggestions(suggest([]))).toMatchInlineSnapshot(`
      "Suggested thresholds: 0 tool signals and 0 stall limits to change, from 0 rollup lines
        The log has no call rollups ("type":"calls" lines): the engine writes them to recovery.eventLog once a minute; an older version did not.

      No change proposed: the current settings fit the period."
    `);
  });
});

describe("--suggest-thresholds: the lines", () => {
  /** The review of `lines` read as text (the fast path for `calls` lines) and as parsed values. */
  const bothWays = (lines: string[]) => {
    const parsed = new ReviewBuilder();
    lines.forEach((l, i) => {
      const value = JSON.parse(l) as unknown;
      expect(valueProblem(value), `line ${i + 1}`).toBeUndefined();
      parsed.addChecked(value);
    });
    return { read: reviewText(lines.join("\n")), parsed: parsed.review() };
  };

  it("reads the engine's own calls lines without parsing, to the same review", () => {
    const base = JSON.parse(
      callsLine(WEEK_START, "a", "t", {
        ok: 3,
        failed: 1,
        llm: 2,
        empty: 1,
        latencies: [5, 90, 2000],
      }),
    ) as Record<string, unknown>;
    const lines = [
      JSON.stringify(base),
      JSON.stringify({ ...base, agent: 'quo"te\\slash\u00e9', tool: "\u2028line" }),
      JSON.stringify({ ...base, at: WEEK_START + 60_000, latencyMs: {} }),
      JSON.stringify({ ...base, at: 0, ok: 0, failed: 0, llm: 0, empty: 0 }),
    ];
    expect(lines.map((l) => readCallsLine(l, MAX_TIME) !== undefined)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    const { read, parsed } = bothWays(lines);
    expect(read.thresholds).toEqual(parsed.thresholds);
    expect(read.thresholds.rollups).toBe(4);
    expect(read.thresholds.signals.map((a) => a.agent + "/" + a.tool)).toContain(
      'quo"te\\slash\u00e9/\u2028line',
    );
  });

  it("takes a bucket key on the fast path exactly when the parser takes it: 0 to 400", () => {
    const good = callsLine(WEEK_START, "a", "t", { ok: 1, latencies: [100] });
    const keys = Array.from({ length: 1000 }, (_, i) => [String(i), String(i).padStart(3, "0")]);
    for (const key of new Set(keys.flat())) {
      const line = good.replace(/"latencyMs":\{[^}]*\}/, `"latencyMs":{"${key}":1}`);
      const parsed = callsProblem(JSON.parse(line) as Record<string, unknown>) === undefined;
      expect(readCallsLine(line, MAX_TIME) !== undefined, key).toBe(parsed);
      expect(parsed, key).toBe(Number(key) <= 400);
    }
  });

  it("leaves every other form to the parser, which names what is wrong", () => {
    const good = callsLine(WEEK_START, "a", "t", { ok: 1, latencies: [100] });
    const other = [
      good.replace('"ok":1', '"ok": 1'), // a space: valid JSON, not the engine's form
      good.replace('"ok":1', '"ok":01'), // a leading zero: not JSON
      good.replace(`"at":${WEEK_START}`, '"at":9000000000000000'), // past Date's range
      good.replace('"llm":0,"empty":0', '"llm":1,"empty":2'),
      good.replace(/"latencyMs":\{[^}]*\}/, '"latencyMs":{"401":1}'), // past the last bucket
      good.replace('"agent":"a"', '"agent":"\\x"'), // a bad escape
      good.replace('"tool":"t"', '"tool":7'),
    ];
    expect(other.map((l) => readCallsLine(l, MAX_TIME))).toEqual(other.map(() => undefined));
    const r = reviewText(other.join("\n"));
    expect(r.thresholds.rollups).toBe(1); // the one with a space
    expect(r.malformedSamples).toEqual([
      "line 2: not JSON",
      "line 3: calls line: at is not a time",
      "line 4: calls line: empty is more than llm",
      'line 5: calls line: latencyMs: bucket "401" is not one',
      "line 6: not JSON",
    ]);
  });

  it("names each malformed rollup or settings line, and keeps the rest", () => {
    const good = callsLine(WEEK_START, "a", "t", { ok: 1, latencies: [100] });
    const r = reviewText(
      [
        good,
        JSON.stringify({ ...JSON.parse(good), latencyMs: { x: 1 } }),
        JSON.stringify({ ...JSON.parse(good), ok: -1 }),
        JSON.stringify({ ...JSON.parse(good), llm: 1, empty: 2 }),
        JSON.stringify({ type: "thresholds", at: WEEK_START, agent: "a" }),
        JSON.stringify({
          type: "watchdog",
          kind: "limits",
          at: 1,
          agent: "a",
          session: "s",
          stallMs: "90",
        }),
        JSON.stringify({ type: "mystery", at: 1 }),
        JSON.stringify({ type: "calls", at: "noon" }),
      ].join("\n"),
    );
    expect(r.thresholds.rollups).toBe(1);
    expect(r.malformed).toBe(7);
    expect(r.malformedSamples).toEqual([
      'line 2: calls line: latencyMs: bucket "x" is not one',
      "line 3: calls line: ok is not a count",
      "line 4: calls line: empty is more than llm",
      "line 5: thresholds line: thresholds is not an object",
      "line 6: watchdog event: stallMs is not a duration",
    ]);
  });

  it("judges only the period's calls, with the settings made before it", () => {
    const b = new ReviewBuilder({ sinceMs: WEEK_START + DAY, untilMs: WEEK_START + 2 * DAY });
    const lines = [
      thresholdsLine("a", { successRate: { warning: 0.99 } }),
      JSON.stringify({
        type: "thresholds",
        at: WEEK_START + 3 * DAY, // after the period: not in effect in it
        agent: "a",
        thresholds: { successRate: { warning: 0.5 } },
      }),
      ...callsLines("a", "t", WEEK_START, WEEK_START + 3 * DAY, () => ({
        ok: 95,
        failed: 5,
        latencies: STEADY,
      })),
    ];
    lines.forEach((l, i) => {
      b.addLine(l, `line ${i + 1}`);
    });
    const r = b.review();
    expect(r.outsidePeriod).toBe(2 * 1440 + 1);
    const rate = signal(r.thresholds, "t", "success_rate");
    expect(rate.samples).toBe(1440 * 100);
    expect(rate.current.setting).toBe("warning below 0.99");
    expect(rate.current.falseAlarms).toBe(144);
  });

  it("merges a window read again after it closed (another process's file): counts summed", () => {
    const day = (ok: number, failed: number) =>
      callsLines("a", "t", WEEK_START, WEEK_START + DAY, () => ({ ok, failed, latencies: STEADY }));
    const s = suggest([
      thresholdsLine("a", { successRate: { warning: 0.9 } }),
      ...day(30, 0),
      ...day(20, 10), // rate 50/60 in every window once merged
    ]);
    const rate = signal(s, "t", "success_rate");
    expect(rate.samples).toBe(1440 * 60);
    expect(rate.windows).toBe(144);
    expect(rate.current.falseAlarms).toBe(144);
    expect(rate.evidence).toBe("lowest quiet success rate 0.833");
  });

  it("an incident in a window with no call still makes its neighbours not quiet", () => {
    const gap = (at: number) =>
      at >= WEEK_START + 10 * HOUR && at < WEEK_START + 10 * HOUR + 10 * MINUTE;
    const s = suggest([
      ...callsLines("a", "t", WEEK_START, WEEK_START + DAY, (at) =>
        gap(at) ? undefined : { ok: 30, latencies: STEADY },
      ),
      incidentLine(WEEK_START + 10 * HOUR + 5 * MINUTE, "a", "t"),
    ]);
    const rate = signal(s, "t", "success_rate");
    expect(rate.windows).toBe(143);
    expect(rate.current).toMatchObject({ incidents: 0, quiet: 141 });
  });

  it("judges the latest 4 weeks of a tool: a longer log costs no more", () => {
    const weeks = 9; // past the windows kept: the oldest are dropped
    const s = suggest(
      callsLines("a", "t", WEEK_START, WEEK_START + weeks * 7 * DAY, (at) =>
        at % (10 * MINUTE) === 0 ? { ok: 20, latencies: STEADY } : undefined,
      ),
    );
    const rate = signal(s, "t", "success_rate");
    expect(rate.samples).toBeLessThan(weeks * 7 * 144 * 20);
    expect(rate.windows).toBe(28 * 144);
    expect(rate.samples).toBe(28 * 144 * 20);
  });

  it("counts the tools past its bound without judging them", () => {
    const lines = Array.from({ length: 505 }, (_, i) =>
      callsLine(WEEK_START, "a", `tool-${i}`, { ok: 1, latencies: [10] }),
    );
    const s = suggest(lines);
    expect(s.rollups).toBe(505);
    expect(s.untracked).toBe(5);
    expect(new Set(s.signals.filter((a) => a.scope === "tool").map((a) => a.tool)).size).toBe(500);
  });
});
