/**
 * The `long-runs` simulator on small nights: one or two runs for an hour or less, one fault each,
 * under real Supervisors on virtual time. Each test plays its own night and checks what a run
 * does (steps, beats, freezes, dies, bloats, answers a nudge, a reset, a restart or a rotation),
 * and how the night is told and counted: the exact timeline, the figures, the event log and the
 * metrics' labels.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  runLongRuns,
  type LongRunsOptions,
  type LongRunsScenario,
  type RunFault,
} from "../../src/sim/long-runs.js";
import { recordingMeters } from "../helpers/otel.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
/** Where the virtual clock starts by default (2026-01-01 UTC). */
const T0 = Date.UTC(2026, 0, 1);

/** A night of `mix` (every other fault 0): an hour, a step every 30 s, seed 7. */
function scenario(
  mix: Partial<Record<RunFault, number>>,
  more: Partial<LongRunsScenario> = {},
): LongRunsScenario {
  return {
    name: "unit",
    description: "a small night",
    durationMs: HOUR,
    seed: 7,
    stepMs: 30_000,
    tokenLimit: 200_000,
    mix: { none: 0, stall: 0, hard_stall: 0, die: 0, bloat: 0, crash_loop: 0, ...mix },
    ...more,
  };
}

const night = (
  mix: Partial<Record<RunFault, number>>,
  more: Partial<LongRunsScenario> = {},
  options: LongRunsOptions = {},
) => runLongRuns(scenario(mix, more), options);

/** The timeline as `m:ss session kind: text` lines, easier to read in a failure. */
const told = (timeline: { atMs: number; session: string; kind: string; text: string }[]) =>
  timeline.map(({ atMs, session, kind, text }) => {
    const s = atMs / 1000;
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")} ${session} ${kind}: ${text}`;
  });

const NO_TIERS = { nudge: 0, context_reset: 0, rotation: 0 };
const VERDICTS = {
  healthy: 0,
  starting: 0,
  stalled: 0,
  session_dead: 0,
  context_bloat: 0,
  unreadable: 0,
};

describe("long-runs, one run at a time: each fault and the tier that meets it", () => {
  it("a run with no fault is left alone: healthy all night, nothing told, nobody paged", async () => {
    const result = await night({ none: 1 });
    expect(result).toEqual({
      scenario: "unit",
      supervised: true,
      virtualMinutes: 60,
      runs: 1,
      faulted: 0,
      finished: 1,
      // A step every 30 s for nine tenths of the hour.
      stepsDone: 108,
      stepsPlanned: 108,
      recoveredByTier: NO_TIERS,
      failedByTier: NO_TIERS,
      gaveUp: 0,
      pages: 0,
      pagesUnthrottled: 0,
      // Its one verdict, healthy from the first look, is no news.
      verdicts: { ...VERDICTS, healthy: 1 },
      timeline: [],
    });
  });

  it("a stall before an LLM call: stalled in stage llm_response, one nudge, and it steps again", async () => {
    const result = await night({ none: 1, stall: 1 });
    expect(told(result.timeline)).toEqual([
      "8:35 night-02 verdict: stalled: step 14 unmoved for 95 s in stage llm_response (limit 90 s)",
      "8:35 night-02 tier: nudge: step 14 unmoved for 95 s in stage llm_response (limit 90 s)",
      "8:40 night-02 verdict: healthy: step 15 in stage tool_call",
      "8:50 night-02 tier_result: nudge recovered",
    ]);
    expect(result).toMatchObject({
      runs: 2,
      faulted: 1,
      finished: 2,
      stepsDone: 216,
      recoveredByTier: { ...NO_TIERS, nudge: 1 },
      failedByTier: NO_TIERS,
      gaveUp: 0,
      pages: 0,
      // Every look while it was frozen, up to the one that nudged it.
      pagesUnthrottled: 13,
      verdicts: { ...VERDICTS, healthy: 3, stalled: 1 },
    });
  });

  it("a hard freeze: the nudge does not help, a context reset and a restart do", async () => {
    const result = await night({ none: 1, hard_stall: 1 });
    expect(told(result.timeline)).toEqual([
      "8:35 night-02 verdict: stalled: step 14 unmoved for 95 s in stage llm_response (limit 90 s)",
      "8:35 night-02 tier: nudge: step 14 unmoved for 95 s in stage llm_response (limit 90 s)",
      "8:50 night-02 tier_result: nudge failed",
      "8:50 night-02 tier: context_reset: nudge did not help",
      "8:55 night-02 verdict: healthy: generation 2 resumed from step 14",
      "9:50 night-02 tier_result: context_reset recovered",
    ]);
    expect(result).toMatchObject({
      faulted: 1,
      finished: 2,
      recoveredByTier: { ...NO_TIERS, context_reset: 1 },
      failedByTier: { ...NO_TIERS, nudge: 1 },
      pages: 0,
      pagesUnthrottled: 16,
      verdicts: { ...VERDICTS, healthy: 3, stalled: 1 },
    });
  });

  it("a run that dies: dead after 30 s without a beat, rotated (one page), resumed from its last step", async () => {
    const result = await night({ none: 1, die: 1 });
    expect(told(result.timeline)).toEqual([
      "8:05 night-02 verdict: session_dead: no heartbeat for 35 s (limit 30 s)",
      "8:05 night-02 tier: rotation: no heartbeat for 35 s (limit 30 s); its last step was 15",
      "8:10 night-02 page: night-02 was rotated",
      "8:15 night-02 verdict: healthy: generation 2 resumed from step 15",
      "9:10 night-02 tier_result: rotation recovered",
    ]);
    expect(result).toMatchObject({
      faulted: 1,
      finished: 2,
      recoveredByTier: { ...NO_TIERS, rotation: 1 },
      failedByTier: NO_TIERS,
      gaveUp: 0,
      pages: 1,
      pagesUnthrottled: 8,
      verdicts: { ...VERDICTS, healthy: 3, session_dead: 1 },
    });
  });

  it("a crash loop: every new process dies 20 s after its start; three rotations, then the supervisor gives up (two pages)", async () => {
    const result = await night({ none: 1, crash_loop: 1 });
    expect(told(result.timeline)).toEqual([
      "8:00 night-02 verdict: session_dead: no heartbeat for 35 s (limit 30 s)",
      "8:00 night-02 tier: rotation: no heartbeat for 35 s (limit 30 s); its last step was 14",
      "8:05 night-02 page: night-02 was rotated",
      "8:10 night-02 verdict: healthy: generation 2 resumed from step 14",
      // Started at 8:05, died at 8:25, its last beat at 8:20: dead 35 s later.
      "8:55 night-02 verdict: session_dead: no heartbeat for 35 s (limit 30 s)",
      "9:05 night-02 tier_result: rotation failed",
      "9:05 night-02 tier: rotation: rotation did not help; its last step was 14",
      "9:15 night-02 verdict: healthy: generation 3 resumed from step 14",
      "10:00 night-02 verdict: session_dead: no heartbeat for 35 s (limit 30 s)",
      "10:10 night-02 tier_result: rotation failed",
      "10:10 night-02 tier: rotation: rotation did not help; its last step was 14",
      "10:20 night-02 verdict: healthy: generation 4 resumed from step 14",
      "11:05 night-02 verdict: session_dead: no heartbeat for 35 s (limit 30 s)",
      "11:15 night-02 tier_result: rotation failed",
      "11:15 night-02 gave_up: 3 restarts in the last 600 s (limit 3): giving up",
      "11:15 night-02 page: supervision of night-02 gave up",
    ]);
    expect(result).toMatchObject({
      faulted: 1,
      finished: 1,
      // The healthy run's 108, and the 14 the crash-looping one made before it first died.
      stepsDone: 122,
      recoveredByTier: NO_TIERS,
      failedByTier: { ...NO_TIERS, rotation: 3 },
      gaveUp: 1,
      pages: 2,
      pagesUnthrottled: 34,
      verdicts: { ...VERDICTS, healthy: 5, session_dead: 4 },
    });
  });

  it("a bloating context: past 92 % of the limit, reset and restarted once, and it stops bloating", async () => {
    const result = await night({ none: 1, bloat: 1 });
    expect(told(result.timeline)).toEqual([
      "22:30 night-02 verdict: context_bloat: context at 94% of 200000 tokens (limit 92%)",
      "22:30 night-02 tier: context_reset: context at 94% of 200000 tokens (limit 92%)",
      "22:35 night-02 verdict: healthy: generation 2 resumed from step 45",
      "23:30 night-02 tier_result: context_reset recovered",
    ]);
    expect(result).toMatchObject({
      faulted: 1,
      finished: 2,
      recoveredByTier: { ...NO_TIERS, context_reset: 1 },
      failedByTier: NO_TIERS,
      pages: 0,
      // Reset in the look that saw it: never over 92 % between looks.
      pagesUnthrottled: 0,
      verdicts: { ...VERDICTS, healthy: 3, context_bloat: 1 },
    });
  });
});

describe("long-runs: the context a run carries", () => {
  it("a nudge leaves the context as it was: the stalled run reaches 92 % of a small limit when its steps say", async () => {
    // 2,000 tokens, 50 more a step: past 92 % of 6,800 (6,256) at step 86. Nudged at 6:35, the
    // run made step 11 at 6:40, so step 86 at 6:40 + 75 x 30 s.
    const result = await night({ stall: 1 }, { tokenLimit: 6_800 });
    expect(told(result.timeline)[2]).toBe(
      "6:40 night-01 verdict: healthy: step 11 in stage tool_call",
    );
    expect(told(result.timeline).slice(4)).toEqual([
      "44:10 night-01 verdict: context_bloat: context at 93% of 6800 tokens (limit 92%)",
      "44:10 night-01 tier: context_reset: context at 93% of 6800 tokens (limit 92%)",
      "44:15 night-01 verdict: healthy: generation 2 resumed from step 86",
      "45:10 night-01 tier_result: context_reset recovered",
    ]);
  });

  it("a context already past 92 % of the limit at the start: nothing helps, every look counts as a page unthrottled", async () => {
    const result = await night({ none: 1 }, { tokenLimit: 2_100, durationMs: 10 * MIN });
    expect(told(result.timeline)).toEqual([
      "0:05 night-01 verdict: context_bloat: context at 95% of 2100 tokens (limit 92%)",
      "0:05 night-01 tier: context_reset: context at 95% of 2100 tokens (limit 92%)",
      "1:05 night-01 tier_result: context_reset failed",
      "1:05 night-01 tier: rotation: context_reset did not help; its last step was 2",
      "1:10 night-01 page: night-01 was rotated",
      "2:10 night-01 tier_result: rotation failed",
      "2:10 night-01 tier: rotation: rotation did not help; its last step was 3",
      "3:15 night-01 tier_result: rotation failed",
      // The reset's restart and two rotations: 3 restarts, the limit.
      "3:15 night-01 gave_up: 3 restarts in the last 600 s (limit 3): giving up",
      "3:15 night-01 page: supervision of night-01 gave up",
    ]);
    expect(result).toMatchObject({
      faulted: 0,
      finished: 0,
      // Past the limit (2,150 of 2,100 tokens) every LLM call fails: no step after the third.
      stepsDone: 3,
      gaveUp: 1,
      pages: 2,
      // Every look until the supervisor gave up (3:15, a look every 5 s).
      pagesUnthrottled: 39,
      verdicts: { ...VERDICTS, context_bloat: 1 },
    });
  });

  it("a freeze that strikes while a context reset is proving outlasts the rotations that follow: a rotation unfreezes nothing", async () => {
    // The context is past 92 % from the start, as above; the freeze strikes at 0:55.
    for (const fault of ["stall", "hard_stall"] as const) {
      const result = await night({ [fault]: 1 }, { tokenLimit: 2_100, durationMs: 10 * MIN });
      // One step after the restart at 0:05, none after the freeze: thawed, it would step again.
      expect(result, fault).toMatchObject({ faulted: 1, stepsDone: 1, gaveUp: 1 });
    }
  });

  it("a stall is ended by a nudge only: neither the context reset nor the restart that follows thaws it", async () => {
    // Steps of 5 s; the stall strikes at 0:05, just before the look that finds the context bloated.
    const result = await night(
      { stall: 1 },
      { tokenLimit: 2_100, durationMs: 50_000, stepMs: 5_000 },
    );
    expect(told(result.timeline)).toEqual([
      "0:05 night-01 verdict: context_bloat: context at 95% of 2100 tokens (limit 92%)",
      "0:05 night-01 tier: context_reset: context at 95% of 2100 tokens (limit 92%)",
    ]);
    expect(result).toMatchObject({ faulted: 1, stepsDone: 0, pagesUnthrottled: 10 });
  });

  it("a context at exactly 92 % of the limit is not bloated, nor counted as a page", async () => {
    // 2,300 tokens (step 6) of 2,500: at the share, not over it; step 7 is over.
    const result = await night({ none: 1 }, { tokenLimit: 2_500, durationMs: 10 * MIN });
    expect(told(result.timeline).slice(0, 3)).toEqual([
      "3:30 night-01 verdict: context_bloat: context at 94% of 2500 tokens (limit 92%)",
      "3:30 night-01 tier: context_reset: context at 94% of 2500 tokens (limit 92%)",
      "3:35 night-01 verdict: healthy: generation 2 resumed from step 7",
    ]);
    expect(result.pagesUnthrottled).toBe(0);
    expect(result.recoveredByTier).toEqual({ ...NO_TIERS, context_reset: 2 });
  });

  it("unsupervised, a context at the limit still steps; one step past it, the run steps no more", async () => {
    const result = await night(
      { none: 1 },
      { tokenLimit: 2_100, durationMs: 10 * MIN },
      { supervise: false },
    );
    // 2,000, 2,050, 2,100 (at the limit: a step more), 2,150 (past it).
    expect(result).toMatchObject({ stepsDone: 3, finished: 0, timeline: [] });
  });
});

describe("long-runs: the night's end", () => {
  it("a run is finished at its last planned step, not one after", async () => {
    // 90 % of 30 s is one step of 20 s; the night has no time for a second.
    const result = await night({ none: 1 }, { durationMs: 30_000, stepMs: 20_000 });
    expect(result).toMatchObject({ finished: 1, stepsDone: 1, stepsPlanned: 1 });
  });

  it("without the watchdog a faulted run stays stuck, and a healthy one finishes", async () => {
    const result = await night({ none: 1, hard_stall: 1, die: 1 }, {}, { supervise: false });
    expect(result).toMatchObject({
      supervised: false,
      runs: 3,
      faulted: 2,
      finished: 1,
      // The healthy run's 108; the frozen one stopped at step 14 (as in the nights above, its
      // fault is the second draw), the dead one at step 88.
      stepsDone: 108 + 14 + 88,
      pages: 0,
      pagesUnthrottled: 0,
      timeline: [],
    });
  });

  it("the event log has every supervisor's events under the scenario's agent, down to the last minute's steps; the metrics carry the same label", async () => {
    const dir = mkdtempSync(join(tmpdir(), "selfheal-long-runs-units-"));
    try {
      const eventLog = join(dir, "watchdog.jsonl");
      const meters = recordingMeters();
      const result = await night(
        { stall: 1 },
        { durationMs: 10 * MIN },
        { eventLog, telemetry: meters },
      );
      const lines = readFileSync(eventLog, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { agent: string; session: string; kind: string; at: number });
      expect(new Set(lines.map((l) => `${l.agent} ${l.session}`))).toEqual(
        new Set(["sim-unit night-01"]),
      );
      expect(lines.filter((l) => l.kind === "verdict")).toHaveLength(3);
      expect(lines.filter((l) => l.kind === "tier_result")).toHaveLength(1);
      // The run finished at 9:00: the steps of its last minute are written when supervision stops.
      expect(lines.at(-1)).toMatchObject({ kind: "steps", at: T0 + 9 * MIN, steps: 2 });
      expect(result.recoveredByTier.nudge).toBe(1);
      const points = await meters.read();
      expect(points.get("selfheal_watchdog_verdicts{agent=sim-unit,state=stalled}")).toBe(1);
      await meters.shutdown();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
