/**
 * The `long-runs` scenario: forty overnight runs under real Supervisors on virtual time. Every
 * fault meets the tier meant for it, a crash loop is given up on with one page per kind, and the
 * event log it writes makes a `selfheal report`.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reviewText } from "../../src/report/analyze.js";
import { LONG_RUNS, runLongRuns, type LongRunsResult } from "../../src/sim/long-runs.js";
import { recordingMeters } from "../helpers/otel.js";

const dir = mkdtempSync(join(tmpdir(), "selfheal-long-runs-"));
const eventLog = join(dir, "watchdog.jsonl");
const meters = recordingMeters();
let night: LongRunsResult;

beforeAll(async () => {
  night = await runLongRuns(LONG_RUNS, { eventLog, telemetry: meters });
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const sessionsWith = (kind: string, text: RegExp) =>
  new Set(night.timeline.filter((e) => e.kind === kind && text.test(e.text)).map((e) => e.session));

describe("long-runs: a night of forty runs under the watchdog", () => {
  it("each fault is met by its tier: nudges for stalls, resets for hard freezes and bloat, rotations for deaths", () => {
    const { mix } = LONG_RUNS;
    expect(night.runs).toBe(40);
    expect(night.faulted).toBe(40 - mix.none);
    expect(night.recoveredByTier).toEqual({
      nudge: mix.stall,
      context_reset: mix.hard_stall + mix.bloat,
      rotation: mix.die,
    });
    // A hard freeze is nudged first, in vain; a crash loop's rotations all fail.
    expect(night.failedByTier).toEqual({ nudge: mix.hard_stall, context_reset: 0, rotation: 3 });
    expect(night.finished).toBe(40 - mix.crash_loop);
    expect(night.gaveUp).toBe(mix.crash_loop);
    expect(night.verdicts).toMatchObject({
      stalled: mix.stall + mix.hard_stall,
      context_bloat: mix.bloat,
      unreadable: 0,
    });
  });

  it("pages: one per rotated run, and for the crash loop one rotation page and one give-up, where paging every bad look would send far more", () => {
    expect(night.pages).toBe(LONG_RUNS.mix.die + 2);
    expect(sessionsWith("page", /gave up/).size).toBe(1);
    expect(night.pagesUnthrottled).toBeGreaterThan(20 * night.pages);
  });

  it("the runs that never faulted were left alone", () => {
    const touched = sessionsWith("tier", /./);
    expect(touched.size).toBe(night.faulted);
  });

  it("metrics and the event log agree with the figures", async () => {
    const points = await meters.read();
    const agent = "agent=sim-long-runs";
    expect(points.get(`selfheal_watchdog_recoveries{${agent},tier=nudge,outcome=recovered}`)).toBe(
      night.recoveredByTier.nudge,
    );
    expect(points.get(`selfheal_watchdog_recoveries{${agent},tier=rotation,outcome=gave_up}`)).toBe(
      1,
    );
    expect(points.get(`selfheal_watchdog_verdicts{${agent},state=context_bloat}`)).toBe(
      LONG_RUNS.mix.bloat,
    );
    const review = reviewText(readFileSync(eventLog, "utf8"));
    expect(review.malformed).toBe(0);
    expect(review.watchdog.sessions).toBe(40);
    expect(review.watchdog.gaveUp).toBe(1);
    expect(review.watchdog.tiers.map((t) => [t.tier, t.recovered])).toEqual([
      ["nudge", night.recoveredByTier.nudge],
      ["context_reset", night.recoveredByTier.context_reset],
      ["rotation", night.recoveredByTier.rotation],
    ]);
  });
});

describe("long-runs without the watchdog (the demo's second column)", () => {
  it("the same night unsupervised: every faulted run is left unfinished, nobody is paged", async () => {
    const minutes: number[] = [];
    const alone = await runLongRuns(LONG_RUNS, {
      supervise: false,
      onMinute: (ms) => void minutes.push(ms),
    });
    expect(alone).toMatchObject({
      supervised: false,
      runs: 40,
      faulted: night.faulted,
      // A bloated context past the model's limit stops a run as surely as a freeze.
      finished: LONG_RUNS.mix.none,
      pages: 0,
      gaveUp: 0,
      recoveredByTier: { nudge: 0, context_reset: 0, rotation: 0 },
    });
    expect(alone.timeline).toEqual([]);
    expect(alone.stepsPlanned).toBe(night.stepsPlanned);
    expect(alone.stepsDone).toBeLessThan(0.85 * alone.stepsPlanned);
    expect(night.stepsDone).toBeGreaterThan(0.95 * night.stepsPlanned);
    // The progress ends at the night's end: 12:00:00 / 12:00:00.
    expect(minutes.at(-1)).toBe(LONG_RUNS.durationMs);
  });
});
