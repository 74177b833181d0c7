/**
 * The supervisor's log-only lines, read back from its event log: the limits in effect (once, when
 * supervision starts) and the step durations per stage and minute (what `selfheal report
 * --suggest-thresholds` proposes stall limits from).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { JsonlLog } from "../../src/recovery/event-log.js";
import { bucketOf } from "../../src/telemetry/log-buckets.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  Supervisor,
  type Heartbeat,
  type Limits,
  type RunChannel,
  type SupervisorEvent,
  type SupervisorOptions,
} from "../../src/watchdog/index.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";
import { freshDirs } from "../helpers/temp.js";

const dirs = freshDirs("wd-steps");

afterEach(() => {
  vi.restoreAllMocks();
});

/** 2025-12-01T00:00:00Z: the start of a minute. */
const T0 = 1_764_547_200_000;
const MINUTE = 60_000;

type Line = Record<string, unknown>;

/**
 * A supervisor over an in-memory channel on virtual time, logging to a fresh file: `show` sets
 * the beat the next look reads (undefined: none), `look` reads it at `T0 + atMs`.
 */
function harness(
  options: {
    limits?: Partial<Limits>;
    supervisor?: Partial<SupervisorOptions>;
    /** Whether it has an event log (default true). */
    log?: boolean;
  } = {},
) {
  const clock = new VirtualClock(T0);
  const file = join(dirs(), "events.jsonl");
  let current: Heartbeat | undefined;
  const channel: RunChannel = {
    read: () =>
      Promise.resolve(
        current
          ? { ok: true, heartbeat: current }
          : { ok: false, problem: "missing", detail: "ENOENT" },
      ),
    send: () => Promise.resolve(),
  };
  const events: SupervisorEvent[] = [];
  const sv = new Supervisor({
    sessionId: "s1",
    agent: "night",
    channel,
    clock,
    pollMs: 1_000,
    limits: { graceMs: 0, stallMs: 600_000, deadMs: 600_000, ...options.limits },
    intensity: { maxRestarts: 3, periodMs: 600_000, baseBackoffMs: 0 },
    control: { restart: () => Promise.resolve(), rotate: () => Promise.resolve() },
    onEvent: (e) => events.push(e),
    ...(options.log !== false && { eventLog: file }),
    ...options.supervisor,
  });
  /** The beat of the supervisor's current process: `stepAtMs` after T0, started at T0. */
  const show = (
    stage: string,
    stepIdx: number,
    stepAtMs: number,
    more: Partial<Heartbeat> = {},
  ) => {
    current = {
      v: 1,
      sessionId: "s1",
      pid: 42,
      stage,
      stepIdx,
      at: clock.now(),
      stepAt: T0 + stepAtMs,
      startedAt: T0,
      gen: sv.currentGeneration,
      ...more,
    };
  };
  const hide = () => {
    current = undefined;
  };
  /** One look at `T0 + atMs` (the clock moved there first). */
  const look = async (atMs: number) => {
    await clock.advance(T0 + atMs - clock.now());
    if (current) current = { ...current, at: clock.now() };
    await sv.tick();
  };
  /** Every line of the log so far, parsed, once what was appended is written. */
  const lines = async (): Promise<Line[]> => {
    await sv.flush();
    if (!existsSync(file)) return [];
    return readFileSync(file, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Line);
  };
  const ofKind = async (kind: string) => (await lines()).filter((l) => l.kind === kind);
  return { clock, file, sv, events, show, hide, look, lines, ofKind };
}

/** A steps line as the supervisor writes it. */
const stepsLine = (atMs: number, stage: string, durationsMs: Record<string, number>): Line => ({
  type: "watchdog",
  kind: "steps",
  at: T0 + atMs,
  agent: "night",
  session: "s1",
  stage,
  steps: Object.values(durationsMs).reduce((a, b) => a + b, 0),
  durationsMs,
});

/** `{ "<bucket of ms>": n }` for each [ms, n], as a line encodes them. */
const buckets = (...pairs: [number, number][]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const [ms, n] of pairs) out[String(bucketOf(ms))] = (out[String(bucketOf(ms))] ?? 0) + n;
  return out;
};

describe("steps lines: each completed step's duration, under the stage it was unmoved in", () => {
  it("the stage is the one of the beat before the step moved, not the one it moved to", async () => {
    const t = harness();
    t.show("planning", 0, 0);
    await t.look(0);
    t.show("tool_call", 0, 0); // the stage changed, the step did not move
    await t.look(5_000);
    t.show("llm_response", 1, 8_000); // step 1 done after 8 s, all of it shown as tool_call
    await t.look(10_000);
    t.show("llm_response", 2, 12_000); // step 2 done 4 s later, in llm_response
    await t.look(15_000);
    t.show("post_process", 2, 12_000); // nothing moved: nothing counted
    await t.look(20_000);
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([8_000, 1])),
      stepsLine(0, "llm_response", buckets([4_000, 1])),
    ]);
  });

  it("the exact line: field order, the minute's start, buckets keyed by index", async () => {
    const t = harness();
    t.show("tool_call", 0, 0);
    await t.look(1_000);
    t.show("tool_call", 1, 6_000);
    await t.look(7_000);
    t.sv.stop();
    await t.sv.flush();
    const raw = readFileSync(t.file, "utf8").trimEnd().split("\n");
    expect(raw.filter((l) => l.includes('"kind":"steps"'))).toEqual([
      '{"type":"watchdog","kind":"steps","at":1764547200000,"agent":"night","session":"s1","stage":"tool_call","steps":1,"durationsMs":{"101":1}}',
    ]);
    expect(bucketOf(6_000)).toBe(101);
  });

  it("several steps moved in one look share its duration evenly", async () => {
    const t = harness();
    t.show("tool_call", 2, 0);
    await t.look(1_000);
    t.show("tool_call", 6, 12_000); // four steps in 12 s: 3 s each
    await t.look(13_000);
    t.show("tool_call", 7, 13_000); // one in 1 s
    await t.look(14_000);
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([3_000, 4], [1_000, 1])),
    ]);
    expect((await t.ofKind("steps"))[0]?.steps).toBe(5);
  });

  it("a restart's new generation: no duration spans the two processes; the first beat of each counts nothing", async () => {
    const t = harness();
    t.show("tool_call", 4, 0);
    await t.look(1_000); // generation 1's first beat: nothing
    t.show("tool_call", 5, 5_000);
    await t.look(6_000); // 5 s
    await t.sv.processDied("the agent exited with code 1"); // rotated at once: generation 2
    expect(t.sv.currentGeneration).toBe(2);
    // Generation 2 resumes past generation 1's step: still not a step of 35 s.
    t.show("tool_call", 7, 40_000, { startedAt: T0 + 39_000 });
    await t.look(41_000);
    t.show("tool_call", 8, 42_000, { startedAt: T0 + 39_000 });
    await t.look(43_000); // 2 s
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([5_000, 1], [2_000, 1])),
    ]);
  });

  it("a beat of another process in the same generation (another pid, another start) counts nothing", async () => {
    const t = harness();
    t.show("tool_call", 1, 0);
    await t.look(1_000);
    t.show("tool_call", 3, 4_000, { pid: 43 });
    await t.look(5_000);
    t.show("tool_call", 5, 8_000, { pid: 43, startedAt: T0 + 2_000 });
    await t.look(9_000);
    t.show("tool_call", 6, 9_000, { pid: 43, startedAt: T0 + 2_000 });
    await t.look(10_000); // 1 s: the only step counted
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([stepsLine(0, "tool_call", buckets([1_000, 1]))]);
  });

  it("a stepAt that went back, or is not a number, counts nothing; a step of 0 ms counts in bucket 0", async () => {
    const t = harness();
    t.show("tool_call", 1, 10_000);
    await t.look(11_000);
    t.show("tool_call", 2, 9_000); // 1 s before the last: not a duration
    await t.look(12_000);
    t.show("tool_call", 3, Number.NaN);
    await t.look(13_000);
    t.show("tool_call", 4, 14_000);
    await t.look(15_000); // after a NaN: not a duration either
    t.show("tool_call", 5, 14_000); // the same stepAt: 0 ms
    await t.look(16_000);
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([stepsLine(0, "tool_call", { "0": 1 })]);
  });
});

describe("steps lines: one per stage per minute, written at the next minute's look and at stop", () => {
  it("a look in a later minute writes the earlier minute's lines (stages in first-seen order); stop writes the rest", async () => {
    const t = harness();
    t.show("tool_call", 0, 0);
    await t.look(40_000);
    t.show("llm_response", 1, 45_000);
    await t.look(50_000); // tool_call 45 s, minute 0
    t.show("tool_call", 2, 55_000);
    await t.look(59_999); // llm_response 10 s, minute 0
    expect(await t.ofKind("steps")).toEqual([]); // the minute is not over
    t.show("tool_call", 3, 60_000);
    await t.look(60_000); // minute 1 begins: minute 0 is written, then tool_call 5 s in minute 1
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([45_000, 1])),
      stepsLine(0, "llm_response", buckets([10_000, 1])),
    ]);
    await t.look(65_000);
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([45_000, 1])),
      stepsLine(0, "llm_response", buckets([10_000, 1])),
      stepsLine(MINUTE, "tool_call", buckets([5_000, 1])),
    ]);
  });

  it("a minute without a completed step has no line; a look without a beat still writes the minute before", async () => {
    const t = harness();
    t.show("tool_call", 0, 0);
    await t.look(1_000);
    t.show("tool_call", 1, 2_000);
    await t.look(3_000); // 2 s in minute 0
    await t.look(70_000); // minute 1: nothing moved
    await t.look(130_000); // minute 2
    t.hide();
    await t.look(200_000); // minute 3, the file missing: minute 0 was written at 70 s already
    t.show("tool_call", 2, 240_000);
    await t.look(245_000); // 238 s in minute 4
    expect(await t.ofKind("steps")).toEqual([stepsLine(0, "tool_call", buckets([2_000, 1]))]);
    t.hide();
    await t.look(310_000); // minute 5: minute 4 written by a look that read nothing
    expect(await t.ofKind("steps")).toEqual([
      stepsLine(0, "tool_call", buckets([2_000, 1])),
      stepsLine(4 * MINUTE, "tool_call", buckets([238_000, 1])),
    ]);
    t.sv.stop();
    expect(await t.ofKind("steps")).toHaveLength(2);
  });

  it("stop writes the minute at work, once however often it is called; looks after it count nothing", async () => {
    const t = harness();
    t.show("tool_call", 0, 0);
    await t.look(1_000);
    t.show("tool_call", 1, 2_000);
    await t.look(3_000);
    expect(await t.ofKind("steps")).toEqual([]);
    t.sv.stop();
    t.sv.stop();
    t.show("tool_call", 9, 4_000);
    await t.look(120_000);
    t.sv.stop();
    expect(await t.ofKind("steps")).toEqual([stepsLine(0, "tool_call", buckets([2_000, 1]))]);
  });

  it("giving up stops supervision: the minute at work is written, then the gave_up line, the log's last", async () => {
    const t = harness({ supervisor: { intensity: { maxRestarts: 0, periodMs: 600_000 } } });
    t.show("tool_call", 0, 0);
    await t.look(1_000);
    t.show("tool_call", 1, 2_000);
    await t.look(3_000);
    await t.sv.processDied("the agent exited with code 1");
    expect(t.sv.givenUp).toBe(true);
    expect((await t.lines()).map((l) => l.kind)).toEqual([
      "limits",
      "verdict",
      "verdict",
      "steps",
      "gave_up",
    ]);
  });
});

describe("the limits line", () => {
  it("once, when supervision starts, with the stage limits; the first line of the log", async () => {
    const t = harness({
      limits: {
        stallMs: 90_000,
        stageStallMs: { tool_call: 240_000 },
        graceMs: 60_000,
        deadMs: 30_000,
      },
    });
    await t.clock.advance(1_500);
    t.sv.start();
    t.show("tool_call", 0, 0);
    for (let i = 0; i < 5; i++) await t.clock.advance(1_000); // the supervisor's own looks
    await t.look(10_000);
    t.sv.stop();
    const lines = await t.lines();
    expect(lines[0]).toEqual({
      type: "watchdog",
      kind: "limits",
      at: T0 + 1_500,
      agent: "night",
      session: "s1",
      stallMs: 90_000,
      stageStallMs: { tool_call: 240_000 },
      graceMs: 60_000,
      deadMs: 30_000,
    });
    expect(lines.filter((l) => l.kind === "limits")).toHaveLength(1);
    expect(readFileSync(t.file, "utf8").split("\n")[0]).toBe(
      '{"type":"watchdog","kind":"limits","at":1764547201500,"agent":"night","session":"s1","stallMs":90000,"stageStallMs":{"tool_call":240000},"graceMs":60000,"deadMs":30000}',
    );
  });

  it("without start(), at the first look; the defaults when no limit is given; no stage limits: {}", async () => {
    const t = harness({ supervisor: { limits: {} } });
    await t.look(2_000);
    await t.look(3_000);
    expect(await t.ofKind("limits")).toEqual([
      {
        type: "watchdog",
        kind: "limits",
        at: T0 + 2_000,
        agent: "night",
        session: "s1",
        stallMs: 90_000,
        stageStallMs: {},
        graceMs: 60_000,
        deadMs: 30_000,
      },
    ]);
  });
});

describe("log only", () => {
  it("no spans, no metrics, no events of their own: only the event log gets them", async () => {
    const traces = recordingProvider();
    const meters = recordingMeters();
    const t = harness({
      supervisor: { tracerProvider: traces.provider, meterProvider: meters.meterProvider },
    });
    for (let i = 0; i < 30; i++) {
      t.show(i % 2 ? "tool_call" : "planning", i, i * 5_000);
      await t.look(i * 5_000 + 1_000);
    }
    t.sv.stop();
    expect((await t.ofKind("steps")).length).toBeGreaterThan(2);
    expect(await t.ofKind("limits")).toHaveLength(1);
    expect(traces.spans().map((s) => s.name)).toEqual(["agent.watchdog.verdict"]);
    expect(t.events.map((e) => e.kind)).toEqual(["verdict"]);
    const points = await meters.read();
    expect(points.get("selfheal_watchdog_verdicts{agent=night,state=healthy}")).toBe(1);
    expect([...points.values()].reduce((a, b) => a + b, 0)).toBe(1);
  });

  it("without an event log, nothing is appended anywhere", async () => {
    const append = vi.spyOn(JsonlLog.prototype, "append");
    const t = harness({ log: false });
    t.sv.start();
    t.show("tool_call", 0, 0);
    await t.look(1_000);
    t.show("tool_call", 3, 9_000);
    await t.look(10_000);
    await t.look(70_000);
    t.sv.stop();
    expect(append).not.toHaveBeenCalled();
    expect(await t.lines()).toEqual([]);
  });
});
