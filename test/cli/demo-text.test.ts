/**
 * The text of `selfheal demo`, from results (no process, no terminal): the progress line ends
 * where the run ends, times show hours in a long run, a long run's session is named once, and the
 * summary sets each figure beside the run without selfheal.
 */
import { describe, expect, it } from "vitest";
import {
  figuresOf,
  longRunText,
  longRunsSummary,
  longRunsVerdict,
  progressText,
  scenarioSummary,
  scenarioVerdict,
  timelineLine,
} from "../../src/cli/demo-text.js";
import { LONG_RUNS, type LongRunsResult } from "../../src/sim/long-runs.js";
import { NO_RECOVERY, runLengthMs, runScenario, type SimResult } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";

const scenario = (name: string) => SCENARIOS[name] ?? expect.unreachable();
const HOUR = 3_600_000;

describe("selfheal demo's text", () => {
  it("the progress line ends at the end of the run: 70:00 / 70:00, never past it", () => {
    const runMs = runLengthMs(scenario("provider-outage"));
    expect(progressText(runMs, runMs)).toBe("virtual time 70:00 / 70:00");
    expect(progressText(5 * 60_000, runMs)).toBe("virtual time 05:00 / 70:00");
    expect(progressText(runMs + 60_000, runMs)).toBe("virtual time 70:00 / 70:00");
    expect(progressText(LONG_RUNS.durationMs, LONG_RUNS.durationMs)).toBe(
      "virtual time 12:00:00 / 12:00:00",
    );
  });

  it("a long run's times show hours: [8:44:55], not [524:55]; an hour's scenario keeps mm:ss", () => {
    const at = 8 * HOUR + 44 * 60_000 + 55_000;
    expect(timelineLine(at, LONG_RUNS.durationMs, "result", "night-34 rotation recovered")).toBe(
      "  [8:44:55] result     night-34 rotation recovered",
    );
    expect(timelineLine(65 * 60_000 + 1_500, runLengthMs(scenario("blip")), "page", "x")).toBe(
      "  [65:01] page       x",
    );
    // Every kind lines up, the longest too.
    expect(timelineLine(0, HOUR, "escalation", "x")).toBe("  [00:00] escalation x");
  });

  it("a long run's page names its session once", () => {
    const page = { atMs: 0, session: "night-40", kind: "page" as const };
    expect(longRunText({ ...page, text: "night-40 was rotated" })).toBe("night-40 was rotated");
    expect(longRunText({ ...page, text: "supervision of night-40 gave up" })).toBe(
      "supervision of night-40 gave up",
    );
    expect(longRunText({ ...page, kind: "tier", text: "nudge: stalled" })).toBe(
      "night-40 nudge: stalled",
    );
  });

  it("the summary: each figure with selfheal beside the same run without it, then the difference", async () => {
    const s = scenario("provider-outage");
    const withSelfheal = await runScenario(s);
    const without = await runScenario(s, { policy: NO_RECOVERY });
    const lines = scenarioSummary(withSelfheal, without, { stream: false });
    const row = (label: string) => lines.find((l) => l.startsWith(`  ${label} `))?.trim();
    expect(lines[0]?.trim()).toMatch(/^with selfheal +without selfheal$/);
    expect(row("user-visible failures")).toMatch(/^user-visible failures +0 +170$/);
    expect(row("pages (failed calls, one per kind per 10 min)")).toMatch(/ 0 +5$/);
    expect(row("MTTR (first failed request to answer)")).toMatch(/ 1\.\d s +none recovered$/);
    expect(row("spend (every request)")).toMatch(/ \$1\.\d{4} +\$0\.8150$/);
    // Figures the run without selfheal has nothing of: not 0, none.
    expect(row("false breaker trips")).toMatch(/ 0 +-$/);
    expect(lines.at(-1)).toBe(scenarioVerdict(withSelfheal, without));
    expect(lines.at(-1)).toBe(
      "Without selfheal: 170 user-visible failures and 5 pages. With selfheal: 0 user-visible failures and 0 pages.",
    );
  });
});

/** A scenario's figures, with fields replaced. */
const sim = (over: Partial<SimResult> = {}): SimResult => ({
  scenario: "s",
  policy: "selfheal",
  virtualMinutes: 60,
  tasks: 360,
  incidents: 2,
  recovered: 2,
  autoRecoveryRate: 1,
  mttrSeconds: 1.25,
  mttrP95Seconds: 2,
  userVisibleFailures: 0,
  truncatedAnswers: 0,
  pages: 0,
  spendUsd: 1.5,
  recoveryCostUsd: 0.0123,
  wastedRetries: 1,
  doubleCharges: 0,
  falseTrips: 1,
  driftEvents: 2,
  diagnoses: { SERVICE_DOWN: 2 },
  callsPerProvider: { openai: 10, anthropic: 2 },
  timeline: [{ atMs: 0, kind: "incident", text: "x" }],
  ...over,
});

/** A long-runs night, with fields replaced. */
const night = (over: Partial<LongRunsResult> = {}): LongRunsResult => ({
  scenario: "long-runs",
  supervised: true,
  virtualMinutes: 720,
  runs: 40,
  faulted: 16,
  finished: 39,
  stepsDone: 2990,
  stepsPlanned: 3000,
  recoveredByTier: { nudge: 6, context_reset: 6, rotation: 3 },
  failedByTier: { nudge: 2, context_reset: 0, rotation: 1 },
  gaveUp: 1,
  pages: 5,
  pagesUnthrottled: 12,
  verdicts: {
    healthy: 1,
    starting: 0,
    stalled: 0,
    context_bloat: 0,
    session_dead: 0,
    unreadable: 0,
  },
  timeline: [],
  ...over,
});

describe("selfheal demo's text, from figures", () => {
  it("a timeline line's kind is padded, then painted", () => {
    expect(timelineLine(0, HOUR, "page", "x", (k) => `<${k}>`)).toBe("  [00:00] <page      > x");
  });

  it("figuresOf: everything but the timeline, the result untouched", () => {
    const result = sim();
    const { timeline, ...rest } = result;
    expect(figuresOf(result)).toEqual(rest);
    expect(result.timeline).toBe(timeline);
  });

  it("the summary's table: the labels, the two columns lined up, the providers, the verdict", () => {
    const without = sim({
      policy: "no recovery",
      incidents: 0,
      recovered: 0,
      autoRecoveryRate: 0,
      mttrSeconds: null,
      userVisibleFailures: 1,
      pages: 1,
      spendUsd: 0.5,
      recoveryCostUsd: 0,
      wastedRetries: 0,
      diagnoses: {},
      callsPerProvider: { openai: 12 },
    });
    expect(scenarioSummary(sim(), without, { stream: false })).toEqual([
      "                                                   with selfheal   without selfheal",
      "  tasks                                            360             360",
      "  incidents (calls whose first request failed)     2               0",
      "  auto-recovery rate                               100.0%          0.0%",
      "  MTTR (first failed request to answer)            1.3 s           n/a",
      "  user-visible failures                            0               1",
      "  pages (failed calls, one per kind per 10 min)    0               1",
      "  spend (every request)                            $1.5000         $0.5000",
      "  recovery spend (requests after a call's first)   $0.0123         $0.0000",
      "  wasted retries                                   1               0",
      "  double charges                                   0               0",
      "  false breaker trips                              1               -",
      "  drift alerts                                     2               -",
      "  requests per provider",
      "    with selfheal                                  openai 10, anthropic 2",
      "    without selfheal                               openai 12",
      "",
      "Without selfheal: 1 user-visible failure and 1 page. With selfheal: 0 user-visible failures and 0 pages.",
    ]);
  });

  it("a streamed scenario adds the truncated answers and selfheal's diagnoses; a wider column widens the table", () => {
    const withSelfheal = sim({ mttrSeconds: null, truncatedAnswers: 1, diagnoses: {} });
    const without = sim({ truncatedAnswers: 30, incidents: 3 });
    const lines = scenarioSummary(withSelfheal, without, { stream: true });
    expect(lines.slice(0, 8)).toEqual([
      "                                                   with selfheal    without selfheal",
      "  tasks                                            360              360",
      "  incidents (calls whose first request failed)     2                3",
      "  auto-recovery rate                               100.0%           100.0%",
      "  MTTR (first failed request to answer)            none recovered   1.3 s",
      "  user-visible failures                            0                0",
      "  truncated answers delivered as whole             1                30",
      "  diagnoses (selfheal's)                           none",
    ]);
    expect(
      scenarioSummary(sim({ diagnoses: { A: 1, B: 2 } }), without, { stream: true }),
    ).toContain("  diagnoses (selfheal's)                           A 1, B 2");
  });

  it("the verdict: singular and plural, double charges only when there are any", () => {
    expect(scenarioVerdict(sim({ userVisibleFailures: 2, pages: 1 }), sim({ pages: 2 }))).toBe(
      "Without selfheal: 0 user-visible failures and 2 pages. With selfheal: 2 user-visible failures and 1 page.",
    );
    expect(scenarioVerdict(sim(), sim({ doubleCharges: 3 }))).toBe(
      "Without selfheal: 0 user-visible failures and 0 pages. With selfheal: 0 user-visible failures and 0 pages; double charges 3 without, 0 with.",
    );
    expect(scenarioVerdict(sim({ doubleCharges: 1 }), sim())).toMatch(
      /; double charges 0 without, 1 with\.$/,
    );
  });

  it("the long-runs summary: runs, work done, tiers, pages; then the night's verdict", () => {
    const without = night({
      supervised: false,
      finished: 24,
      stepsDone: 0,
      stepsPlanned: 0,
      recoveredByTier: { nudge: 0, context_reset: 0, rotation: 0 },
      gaveUp: 0,
      pages: 0,
    });
    expect(longRunsSummary(night(), without)).toEqual([
      "                                                   with selfheal   without selfheal",
      "  runs (with a fault)                              40 (16)         40 (16)",
      "  finished by morning                              39              24",
      "  work done by morning (steps)                     99.7%           0.0%",
      "  recovered, by tier                               nudge 6, context_reset 6, rotation 3",
      "  tier runs that did not help                      nudge 2, context_reset 0, rotation 1",
      "  given up (restart intensity)                     1",
      "  pages sent (throttled per run)                   5               0 (nobody looks)",
      "  pages if every bad look paged                    12",
      "",
      "Without selfheal: 16 of 40 runs unfinished by morning, nobody told. With selfheal: 1 of 40 runs unfinished, 5 pages.",
    ]);
    expect(longRunsVerdict(night({ finished: 40, pages: 1 }), night())).toBe(
      "Without selfheal: 1 of 40 runs unfinished by morning, nobody told. With selfheal: 0 of 40 runs unfinished, 1 page.",
    );
  });
});
