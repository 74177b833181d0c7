/**
 * Every restart counts: context resets' restarts and rotations share one restart intensity, and a
 * tier is recovered only when the run stays healthy to the end of its proof period. On virtual
 * time, over an in-memory run (test/helpers/supervisor.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { reviewText } from "../../src/report/analyze.js";
import { RestartIntensity, Supervisor } from "../../src/watchdog/index.js";
import { recordingMeters } from "../helpers/otel.js";
import { DEAD, POLL, STALL, harness } from "../helpers/supervisor.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-intensity-"));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

type Harness = ReturnType<typeof harness>;

/**
 * The agent of issue 42: each process restores its snapshot (its first beat), moves one step
 * past it (and snapshots that) `stepAfterMs` after its start (at its second beat at the soonest), then stalls there for good, beating by
 * keep-alive and deaf to nudges; it acknowledges a context reset unless `acks` is false. Call
 * before each look.
 */
function creeping(h: Harness, { stepAfterMs = 0, acks = true } = {}) {
  let gen = 0;
  let step = 0;
  let stepAt = 0;
  let startedAt = 0;
  let moved = false;
  return () => {
    const now = h.clock.now();
    const restored = h.sv.currentGeneration !== gen;
    if (restored) {
      gen = h.sv.currentGeneration;
      moved = false;
      stepAt = now;
      startedAt = now;
    }
    // Its first beat is at the step it restored; it moves on a later one.
    if (!restored && !moved && now - startedAt >= stepAfterMs) {
      moved = true;
      step++; // the snapshot's step, plus one
      stepAt = now;
    }
    if (acks && h.sent.at(-1)?.kind === "context_reset") h.state.ackedSeq = h.sent.length;
    h.state.beat = {
      v: 1,
      sessionId: "s",
      pid: 100 + gen,
      stage: "llm_response",
      stepIdx: step,
      at: now,
      stepAt,
      startedAt,
      gen,
    };
  };
}

/** Looks every POLL (the agent acting before each) until the supervisor gives up, or `max`. */
async function lookUntilGivenUp(h: Harness, agent: () => void, max = 1_000) {
  for (let i = 0; i < max; i++) {
    agent();
    await h.sv.tick();
    if (h.sv.givenUp) return;
    await h.clock.advance(POLL);
  }
}

describe("a run that stalls again after every restart is given up on", () => {
  it("one step past its snapshot, then a stall: the nudge fails, the reset and the rotations do not hold, and the 4th restart gives up", async () => {
    const meters = recordingMeters();
    const eventLog = join(root, "creep.jsonl");
    const h = harness({
      acked: true,
      numbered: true,
      supervisor: { agent: "creep", meterProvider: meters.meterProvider, eventLog },
    });
    await lookUntilGivenUp(h, creeping(h));
    expect(h.sv.givenUp).toBe(true);
    // One reset's restart and two rotations: 3 restarts, the limit; the 4th is refused.
    expect(h.actions).toEqual(["restart:2", "rotate:3", "rotate:4"]);
    expect(h.news().filter((e) => !e.startsWith("verdict:"))).toEqual([
      "tier:nudge",
      "nudge:failed",
      "tier:context_reset",
      "context_reset:failed",
      "tier:rotation",
      "rotation:failed",
      "tier:rotation",
      "rotation:failed",
      "gave_up",
    ]);
    const tiers = h.events.flatMap((e) => (e.kind === "tier" ? [e.reason] : []));
    expect(tiers[2]).toMatch(
      /^context_reset did not hold: step 2 unmoved for 11 s in stage llm_response \(limit 10 s\); its last step was 2$/,
    );
    expect(h.events.at(-1)).toEqual({
      kind: "gave_up",
      at: h.t0 + 73_000,
      reason: "3 restarts in the last 600 s (limit 3): giving up",
      tier: "rotation",
    });
    // On virtual time: the first stall (step 1 at 1 s, stalled at 12 s), the nudge's 15 s, the
    // reset acknowledged at the next look (28 s); then each process beats at its snapshot's step,
    // moves one step a look later and stalls again 11 s after it (41 s, 56 s, 73 s), rotations
    // waiting 2 s and 4 s before.
    const ats = h.events.flatMap((e) => (e.kind === "tier" ? [(e.at - h.t0) / 1000] : []));
    expect(ats).toEqual([12, 27, 41, 56]);

    // The recoveries metric and the report count no recovery, one give-up.
    const points = await meters.read();
    const count = (tier: string, outcome: string) =>
      points.get(`selfheal_watchdog_recoveries{agent=creep,tier=${tier},outcome=${outcome}}`);
    expect(count("context_reset", "recovered")).toBe(0);
    expect(count("context_reset", "failed")).toBe(1);
    expect(count("rotation", "recovered")).toBe(0);
    expect(count("rotation", "failed")).toBe(2);
    expect(count("rotation", "gave_up")).toBe(1);
    await h.sv.flush();
    const review = reviewText(readFileSync(eventLog, "utf8")).watchdog;
    expect(review.tiers).toEqual([
      { tier: "nudge", runs: 1, recovered: 0, failed: 1, successRate: 0 },
      { tier: "context_reset", runs: 1, recovered: 0, failed: 1, successRate: 0 },
      { tier: "rotation", runs: 2, recovered: 0, failed: 2, successRate: 0 },
    ]);
    expect(review.gaveUp).toBe(1);
    // The log's last line is the verdict: the step durations held were written before it.
    const kinds = readFileSync(eventLog, "utf8")
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { kind: string }).kind);
    expect(kinds).toContain("steps");
    expect(kinds.at(-1)).toBe("gave_up");
    await meters.shutdown();
  });

  /** The creeping run under the default limits, looked at every 5 s until given up on. */
  async function underDefaults(options: Parameters<typeof creeping>[1] = {}) {
    const h = harness({
      acked: true,
      numbered: true,
      supervisor: { limits: {}, intensity: {}, pollMs: 5_000 },
    });
    const agent = creeping(h, options);
    for (let i = 0; i < 1_000 && !h.sv.givenUp; i++) {
      agent();
      await h.sv.tick();
      await h.clock.advance(5_000);
    }
    const firstStall = h.events.find((e) => e.kind === "verdict" && e.verdict === "stalled");
    const gaveUp = h.events.at(-1);
    return { h, gaveUp, afterFirstStallMs: (gaveUp?.at ?? 0) - (firstStall?.at ?? 0) };
  }

  it("with the default limits (the bound docs/watchdog.md states): each restart's stall is seen within its proof, and the ladder gives up at the 4th restart, 5 min 45 s after the first stall", async () => {
    const { h, gaveUp, afterFirstStallMs } = await underDefaults();
    expect(h.sv.givenUp).toBe(true);
    // Not one restart counted recovered: the 60 s proof lasts until a stall on the new step is
    // seen (its 90 s stall limit after it, plus a poll), past the 60 s start-up grace.
    expect(h.actions).toEqual(["restart:2", "rotate:3", "rotate:4"]);
    expect(h.news().filter((e) => !e.startsWith("verdict:"))).toEqual([
      "tier:nudge",
      "nudge:failed",
      "tier:context_reset",
      "context_reset:failed",
      "tier:rotation",
      "rotation:failed",
      "tier:rotation",
      "rotation:failed",
      "gave_up",
    ]);
    // Step 1 at 5 s, stalled at 100 s; nudge 100-115 s; reset acknowledged, restart at 120 s,
    // step 2 at 130 s, stalled at 225 s; rotated after 2 s (230 s), stalled at 335 s; after 4 s
    // (340 s), stalled at 445 s: the 4th restart is refused.
    const ats = h.events.flatMap((e) => (e.kind === "tier" ? [(e.at - h.t0) / 1000] : []));
    expect(ats).toEqual([100, 115, 225, 335]);
    expect(gaveUp).toMatchObject({
      kind: "gave_up",
      at: h.t0 + 445_000,
      reason: "3 restarts in the last 600 s (limit 3): giving up",
      tier: "rotation",
    });
    expect(afterFirstStallMs).toBe(345_000);
  });

  it.each([
    [30_000, true, 420_000],
    [30_000, false, 475_000],
    [50_000, true, 480_000],
    [50_000, false, 535_000],
    // The slowest: it moves just before its proof would fail it, and Tier 2 waits out its 60 s.
    [55_000, false, 550_000],
    // Too late to show progress within its 60 s: each restart fails at the end of its proof.
    [59_000, false, 265_000],
  ])(
    "with the default limits, a process that moves %i ms after its start (acknowledging its reset: %s) is given up on within 10 min of the first stall (%i ms)",
    async (stepAfterMs, acks, expected) => {
      const { h, gaveUp, afterFirstStallMs } = await underDefaults({ stepAfterMs, acks });
      expect(gaveUp).toMatchObject({ kind: "gave_up", tier: "rotation" });
      expect(h.actions).toEqual(["restart:2", "rotate:3", "rotate:4"]);
      expect(h.events.some((e) => e.kind === "tier_result" && e.outcome === "recovered")).toBe(
        false,
      );
      expect(afterFirstStallMs).toBe(expected);
      expect(afterFirstStallMs).toBeLessThanOrEqual(10 * 60_000);
    },
  );

  it("a proof period shorter than a stall takes to show (1 s) still sees the stall: nothing recovered, given up on", async () => {
    const h = harness({
      acked: true,
      numbered: true,
      supervisor: { proveMs: { nudge: 1_000, context_reset: 1_000, rotation: 1_000 } },
    });
    await lookUntilGivenUp(h, creeping(h));
    expect(h.actions).toEqual(["restart:2", "rotate:3", "rotate:4"]);
    expect(h.news().filter((e) => e.endsWith(":recovered"))).toEqual([]);
  });

  it("slower than the restart period allows for (each cycle over 10 min / 3): still given up on at the 4th restart in a row", async () => {
    const h = harness({
      acked: true,
      numbered: true,
      supervisor: {
        limits: { graceMs: 0, deadMs: DEAD, stallMs: 400_000 },
        intensity: { maxRestarts: 3, periodMs: 600_000, baseBackoffMs: 0, maxBackoffMs: 0 },
        pollMs: 5_000,
      },
    });
    const agent = creeping(h);
    for (let i = 0; i < 2_000 && !h.sv.givenUp; i++) {
      agent();
      await h.sv.tick();
      await h.clock.advance(5_000);
    }
    expect(h.actions).toEqual(["restart:2", "rotate:3", "rotate:4"]);
    const restarts = h.events.flatMap((e) =>
      e.kind === "tier" && e.tier !== "nudge" ? [e.at] : [],
    );
    // No three restarts within any 10 min: the period alone would never end this loop.
    expect((restarts[2] ?? 0) - (restarts[0] ?? 0)).toBeGreaterThan(600_000);
    expect(h.events.at(-1)).toMatchObject({
      kind: "gave_up",
      reason: "3 restarts in a row did not hold (limit 3): giving up",
    });
  });

  it("a restarted run that moves on (more than the one step) recovers at the end of its proof period; the streak starts over", async () => {
    const h = harness({ supervisor: { proveMs: { rotation: 20_000 } } });
    await h.sv.processDied("a");
    for (let step = 1; step <= 23; step++) {
      h.beat(step);
      await h.sv.tick();
      await h.clock.advance(POLL);
    }
    expect(h.news()).toEqual([
      "verdict:session_dead",
      "tier:rotation",
      "verdict:healthy",
      "rotation:recovered",
    ]);
    // Rotated after its 1 s backoff, proved 20 s from then.
    expect(h.events.at(-1)?.at).toBe(h.t0 + 21_000);
  });

  it("a context reset's restart counts: one restart allowed, a rotation, then a bloat gives up at Tier 2", async () => {
    const meters = recordingMeters();
    const h = harness({
      supervisor: {
        limits: { graceMs: 0, deadMs: DEAD, stallMs: STALL, tokenLimit: 100 },
        intensity: { maxRestarts: 1, periodMs: 600_000, baseBackoffMs: 0, maxBackoffMs: 0 },
        meterProvider: meters.meterProvider,
      },
    });
    h.beat(5);
    await h.sv.tick();
    await h.sv.processDied("exit code 1");
    h.beat(6); // resumed
    await h.sv.tick();
    await h.clock.advance(POLL);
    h.beat(7); // progress
    await h.sv.tick();
    await h.clock.advance(60_000); // the rotation's proof period
    h.beat(8);
    await h.sv.tick();
    expect(h.news().at(-1)).toBe("rotation:recovered");
    if (h.state.beat) h.state.beat.contextTokens = 99;
    await h.clock.advance(POLL);
    await h.sv.tick();
    expect(h.actions).toEqual(["rotate:2"]);
    expect(h.sv.givenUp).toBe(true);
    expect(h.events.at(-1)).toEqual({
      kind: "gave_up",
      at: h.t0 + 60_000 + 2 * POLL,
      reason: "1 restarts in the last 600 s (limit 1): giving up",
      tier: "context_reset",
    });
    expect(h.sent).toEqual([]); // no reset sent when its restart is refused
    const points = await meters.read();
    const key = (tier: string) =>
      `selfheal_watchdog_recoveries{agent=agent,tier=${tier},outcome=gave_up}`;
    expect(points.get(key("context_reset"))).toBe(1);
    expect(points.get(key("rotation"))).toBe(0);
    await meters.shutdown();
  });

  it("a restart older than the period is forgotten: a run that fails again only now and then is not given up on", async () => {
    const h = harness({
      supervisor: {
        intensity: { maxRestarts: 1, periodMs: 60_000, baseBackoffMs: 0, maxBackoffMs: 0 },
      },
    });
    await h.sv.processDied("a");
    h.beat(1); // resumed
    await h.sv.tick();
    await h.clock.advance(POLL);
    h.beat(2);
    await h.sv.tick();
    await h.clock.advance(60_000); // its proof period: it moves on, recovered
    h.beat(3);
    await h.sv.tick();
    await h.sv.processDied("b");
    expect(h.actions).toEqual(["rotate:2", "rotate:3"]);
    expect(h.sv.givenUp).toBe(false);
  });
});

describe("recovered only when the run stays healthy for its proof period", () => {
  it("progress, then a stall again within the nudge's period: the nudge did not hold, Tier 2 follows", async () => {
    const h = harness();
    h.beat(5, { stale: true });
    await h.sv.tick();
    await h.clock.advance(POLL);
    h.beat(6);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:stalled", "tier:nudge", "verdict:healthy"]);
    // Step 6 unmoved past the stall limit, 12 s into the nudge's 15 s.
    await h.clock.advance(STALL + POLL);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:stalled", "nudge:failed", "tier:context_reset"]);
    expect(h.events.at(-1)).toMatchObject({
      reason: "nudge did not hold: step 6 unmoved for 11 s in stage tool_call (limit 10 s)",
    });
  });

  it("a verdict worse than the next tier's goes to its own tier: dead during a nudge's period is rotated", async () => {
    const h = harness({ supervisor: { limits: { graceMs: 0, deadMs: 5_000, stallMs: STALL } } });
    h.beat(5, { stale: true });
    await h.sv.tick();
    await h.clock.advance(POLL);
    h.beat(6);
    await h.sv.tick();
    await h.clock.advance(6_000);
    await h.sv.tick();
    expect(h.news()).toEqual([
      "verdict:stalled",
      "tier:nudge",
      "verdict:healthy",
      "verdict:session_dead",
      "nudge:failed",
      "tier:rotation",
    ]);
  });

  it("a run that finishes (exits 0) within a tier's period recovered it; supervision stops", async () => {
    const h = harness();
    h.beat(5, { stale: true });
    await h.sv.tick();
    await h.clock.advance(POLL);
    h.beat(6);
    await h.sv.tick();
    await h.sv.processFinished();
    expect(h.news()).toEqual([
      "verdict:stalled",
      "tier:nudge",
      "verdict:healthy",
      "nudge:recovered",
    ]);
    await h.clock.advance(POLL);
    await h.sv.tick();
    expect(h.news()).toEqual([]);
    expect(h.state.reads).toBe(2);
  });

  it("a run that finishes with no tier at work: nothing to say", async () => {
    const h = harness();
    h.beat(5);
    await h.sv.tick();
    await h.sv.processFinished();
    expect(h.news()).toEqual(["verdict:healthy"]);
  });
});

describe("the bound's options are checked, naming the bad field", () => {
  const control = { restart: () => Promise.resolve(), rotate: () => Promise.resolve() };
  const make = (options: Partial<ConstructorParameters<typeof Supervisor>[0]>) =>
    new Supervisor({ sessionId: "s", stateDir: "/tmp/x", control, ...options });

  it.each([
    [
      { intensity: { maxRestarts: -1 } },
      "Supervisor.intensity.maxRestarts",
      "a whole number >= 0, got -1",
    ],
    [
      { intensity: { maxRestarts: 1.5 } },
      "Supervisor.intensity.maxRestarts",
      "a whole number >= 0, got 1.5",
    ],
    [
      { intensity: { periodMs: 0 } },
      "Supervisor.intensity.periodMs",
      "a positive number of ms, got 0",
    ],
    [
      { intensity: { periodMs: Infinity } },
      "Supervisor.intensity.periodMs",
      "a positive number of ms, got Infinity",
    ],
    [
      { intensity: { baseBackoffMs: -1 } },
      "Supervisor.intensity.baseBackoffMs",
      "a number of ms >= 0, got -1",
    ],
    [
      { intensity: { maxBackoffMs: NaN } },
      "Supervisor.intensity.maxBackoffMs",
      "a number of ms >= 0, got NaN",
    ],
    [{ proveMs: { rotation: -5 } }, "Supervisor.proveMs.rotation", "a number of ms >= 0, got -5"],
    [{ pollMs: 0 }, "Supervisor.pollMs", "a positive number of ms, got 0"],
  ])("%j: %s", (options, field, problem) => {
    expect(() => make(options)).toThrow(SelfHealConfigError);
    expect(() => make(options)).toThrow(`\`${field}\`: expected ${problem}`);
  });

  it("RestartIntensity on its own names its own fields", () => {
    expect(() => new RestartIntensity({ maxRestarts: -1 })).toThrow(
      "`RestartIntensity.maxRestarts`: expected a whole number >= 0",
    );
  });

  it("0 restarts allowed: the first restart gives up", async () => {
    const h = harness({ supervisor: { intensity: { maxRestarts: 0 } } });
    await h.sv.processDied("a");
    expect(h.actions).toEqual([]);
    expect(h.sv.givenUp).toBe(true);
  });
});
