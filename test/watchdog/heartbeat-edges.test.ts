import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  cleanStaleTemps,
  heartbeat,
  HeartbeatError,
  writeAtomic,
  type HeartbeatOptions,
} from "../../src/watchdog/heartbeat.js";
import { freshDirs } from "../helpers/temp.js";

/** A fresh state dir, made. */
const freshDir = freshDirs("hb-edges");

const onFile = (file: string) => JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;

describe("the writer's options", () => {
  const good = { stateDir: "/tmp/x", sessionId: "s" };
  it.each([
    ["an empty state dir", { ...good, stateDir: "" }, "heartbeat.stateDir", /directory path/],
    ["a state dir not a string", { ...good, stateDir: 5 }, "heartbeat.stateDir", /directory/],
    ["a session id with a slash", { ...good, sessionId: "a/b" }, "heartbeat.sessionId", /1-128/],
    ["a session id not a string", { ...good, sessionId: 7 }, "heartbeat.sessionId", /names a file/],
    ["a session id `..`", { ...good, sessionId: ".." }, "heartbeat.sessionId", /letters/],
    ["a session id `.`", { ...good, sessionId: "." }, "heartbeat.sessionId", /letters/],
    ["a negative interval", { ...good, minIntervalMs: -1 }, "heartbeat.minIntervalMs", /got -1/],
    ["a NaN interval", { ...good, minIntervalMs: Number.NaN }, "heartbeat.minIntervalMs", /NaN/],
    [
      "an infinite interval",
      { ...good, minIntervalMs: Number.POSITIVE_INFINITY },
      "heartbeat.minIntervalMs",
      /expected a number >= 0, got Infinity/,
    ],
    [
      "generation 0",
      { ...good, generation: 0 },
      "heartbeat.generation",
      /whole number >= 1, got 0/,
    ],
    ["generation 1.5", { ...good, generation: 1.5 }, "heartbeat.generation", /got 1.5/],
  ])("%s is a config error", (_name, options, field, message) => {
    let thrown: unknown;
    try {
      heartbeat(options as unknown as HeartbeatOptions);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SelfHealConfigError);
    expect((thrown as Error).message).toContain(field);
    expect((thrown as Error).message).toMatch(message);
  });

  it.each([0, 0.5, 1_000])("an interval of %d is accepted", (minIntervalMs) => {
    expect(() => heartbeat({ ...good, stateDir: freshDir(), minIntervalMs })).not.toThrow();
  });
});

describe("a bad beat is a HeartbeatError, and nothing is written", () => {
  it.each([
    ["null", null, "a beat is an object"],
    ["a string", "beat", "a beat is an object"],
    ["no stage", { stepIdx: 1 }, "stage must be a short snake_case name, got undefined"],
    ["a stage with capitals first", { stage: "Tool_call", stepIdx: 1 }, 'got "Tool_call"'],
    ["a stage with a trailing mark", { stage: "tool_call!", stepIdx: 1 }, 'got "tool_call!"'],
    ["a stage too long", { stage: `a${"b".repeat(40)}`, stepIdx: 1 }, "short snake_case"],
    [
      "a step that is a string",
      { stage: "s", stepIdx: "3" },
      'stepIdx must be an integer >= 0, got "3"',
    ],
    ["a negative step", { stage: "s", stepIdx: -1 }, "stepIdx must be an integer >= 0, got -1"],
    ["a fractional step", { stage: "s", stepIdx: 1.5 }, "got 1.5"],
    [
      "negative tokens",
      { stage: "s", stepIdx: 1, contextTokens: -1 },
      "contextTokens must be a number >= 0, got -1",
    ],
    ["tokens a string", { stage: "s", stepIdx: 1, contextTokens: "9" }, 'got "9"'],
    [
      "infinite tokens",
      { stage: "s", stepIdx: 1, contextTokens: Number.POSITIVE_INFINITY },
      "got null",
    ],
    ["lastTool a number", { stage: "s", stepIdx: 1, lastTool: 3 }, "lastTool must be a string"],
  ])("%s", async (_name, beat, message) => {
    const stateDir = freshDir();
    const writer = heartbeat({ stateDir, sessionId: "b", minIntervalMs: 0 });
    let thrown: unknown;
    try {
      await writer.beat(beat as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(HeartbeatError);
    const error = thrown as HeartbeatError;
    expect(error.name).toBe("HeartbeatError");
    expect(error.code).toBe("SELFHEAL_HEARTBEAT");
    expect(error.message).toContain(message);
    expect(writer.current).toBeUndefined();
    expect(readdirSync(stateDir)).toEqual([]);
  });

  it("a whole beat at step 0 with tokens 0 is accepted", async () => {
    const writer = heartbeat({ stateDir: freshDir(), sessionId: "b", minIntervalMs: 0 });
    await writer.beat({ stage: "a", stepIdx: 0, contextTokens: 0, lastTool: "" });
    expect(writer.current?.stepIdx).toBe(0);
  });
});

describe("the throttle, on the injected clock", () => {
  const setup = () => {
    const clock = new VirtualClock();
    const stateDir = freshDir();
    const writer = heartbeat({ stateDir, sessionId: "t", clock, minIntervalMs: 1_000 });
    return { clock, writer, start: clock.now(), step: () => onFile(writer.file).stepIdx };
  };

  it("a beat within the interval waits for its end, not a moment less", async () => {
    const { clock, writer, start, step } = setup();
    await writer.beat({ stage: "s", stepIdx: 1 });
    await clock.advance(400);
    await writer.beat({ stage: "s", stepIdx: 2 });
    expect(step()).toBe(1);
    await clock.advance(599);
    await writer.refresh(Number.POSITIVE_INFINITY); // waits for the writes, writes nothing
    expect(step()).toBe(1);
    expect(writer.current?.at).toBe(start);
    await clock.advance(1);
    await writer.refresh(Number.POSITIVE_INFINITY);
    expect(step()).toBe(2);
    expect(writer.current?.at).toBe(start + 1_000);
  });

  it("a beat exactly one interval after the last write is written at once", async () => {
    const { clock, writer, start } = setup();
    await writer.beat({ stage: "s", stepIdx: 1 });
    await clock.advance(1_000);
    await writer.beat({ stage: "s", stepIdx: 2 });
    expect(writer.current?.stepIdx).toBe(2);
    expect(writer.current?.at).toBe(start + 1_000);
  });

  it("a beat within the interval is written by its timer, without a flush", async () => {
    const { clock, writer, start, step } = setup();
    await writer.beat({ stage: "s", stepIdx: 1 });
    await clock.advance(200);
    void writer.beat({ stage: "s", stepIdx: 2 });
    await clock.advance(800);
    await writer.refresh(Number.POSITIVE_INFINITY); // waits for the writes, writes nothing
    expect(step()).toBe(2);
    expect(writer.current?.at).toBe(start + 1_000);
  });

  it("a beat past a waiting one does not write at once: it joins the wait", async () => {
    const { clock, writer, start } = setup();
    await writer.beat({ stage: "s", stepIdx: 1 });
    await clock.advance(500);
    void writer.beat({ stage: "s", stepIdx: 2 });
    expect(clock.pendingTimers).toBe(1);
    void writer.beat({ stage: "s", stepIdx: 3 });
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(500);
    await writer.flush();
    expect(writer.current).toMatchObject({ stepIdx: 3, at: start + 1_000 });
  });
});

describe("refresh: the last beat again, when nothing was written for a while", () => {
  const setup = async (beat: Parameters<ReturnType<typeof heartbeat>["beat"]>[0]) => {
    const clock = new VirtualClock();
    const writer = heartbeat({
      stateDir: freshDir(),
      sessionId: "r",
      clock,
      minIntervalMs: 0,
      generation: 2,
    });
    const start = clock.now();
    await writer.beat(beat);
    return { clock, writer, start };
  };

  it("nothing written yet: nothing to refresh", async () => {
    const clock = new VirtualClock();
    const writer = heartbeat({ stateDir: freshDir(), sessionId: "r", clock });
    await clock.advance(5_000);
    await writer.refresh(100);
    expect(writer.current).toBeUndefined();
  });

  it.each([
    [999, false],
    [1_000, true],
    [1_500, true],
  ])("%d ms after the last write, refresh(1000) writes: %j", async (after, written) => {
    const { clock, writer, start } = await setup({ stage: "s", stepIdx: 4 });
    await clock.advance(after);
    await writer.refresh(1_000);
    expect(writer.current?.at).toBe(written ? start + after : start);
    expect(writer.current?.stepIdx).toBe(4);
  });

  it("keeps the tokens and tool of the last beat, its step and step time", async () => {
    const { clock, writer, start } = await setup({
      stage: "tool_call",
      stepIdx: 4,
      contextTokens: 123,
      lastTool: "search",
    });
    await clock.advance(2_000);
    await writer.refresh(1_000);
    const expected = {
      v: 1,
      sessionId: "r",
      pid: process.pid,
      stage: "tool_call",
      stepIdx: 4,
      contextTokens: 123,
      lastTool: "search",
      at: start + 2_000,
      stepAt: start,
      startedAt: start,
      gen: 2,
    };
    expect(writer.current).toStrictEqual(expected);
    expect(onFile(writer.file)).toStrictEqual(expected);
  });

  it("a beat without tokens or tool: none in the refresh, no keys at all", async () => {
    const { clock, writer, start } = await setup({ stage: "planning", stepIdx: 0 });
    expect(writer.current).toStrictEqual({
      v: 1,
      sessionId: "r",
      pid: process.pid,
      stage: "planning",
      stepIdx: 0,
      at: start,
      stepAt: start,
      startedAt: start,
      gen: 2,
    });
    await clock.advance(2_000);
    await writer.refresh(1_000);
    expect(Object.keys(writer.current ?? {})).toEqual([
      "v",
      "sessionId",
      "pid",
      "stage",
      "stepIdx",
      "at",
      "stepAt",
      "startedAt",
      "gen",
    ]);
  });

  it("a beat waiting for its interval is not refreshed over", async () => {
    const clock = new VirtualClock();
    const writer = heartbeat({ stateDir: freshDir(), sessionId: "r", clock, minIntervalMs: 5_000 });
    const start = clock.now();
    await writer.beat({ stage: "s", stepIdx: 1 });
    await clock.advance(2_000);
    void writer.beat({ stage: "s", stepIdx: 2 });
    await writer.refresh(1_000);
    expect(writer.current?.at).toBe(start);
    await writer.flush();
    expect(writer.current?.stepIdx).toBe(2);
  });

  it("without a generation, no gen key", async () => {
    const writer = heartbeat({ stateDir: freshDir(), sessionId: "r", minIntervalMs: 0 });
    await writer.beat({ stage: "s", stepIdx: 1 });
    expect("gen" in (writer.current ?? {})).toBe(false);
    expect("contextTokens" in (writer.current ?? {})).toBe(false);
    expect("lastTool" in (writer.current ?? {})).toBe(false);
  });
});

describe("writeAtomic", () => {
  it("a rename that cannot happen (a directory in the way): rejects, no temporary left", async () => {
    const dir = freshDir();
    const target = join(dir, "x.json");
    mkdirSync(join(target, "inside"), { recursive: true });
    await expect(writeAtomic(dir, target, "{}")).rejects.toMatchObject({ code: "EISDIR" });
    expect(readdirSync(dir)).toEqual(["x.json"]);
  });

  it("makes the directory and writes the whole text", async () => {
    const dir = join(freshDir(), "a", "b");
    await writeAtomic(dir, join(dir, "f.json"), "hello");
    expect(readFileSync(join(dir, "f.json"), "utf8")).toBe("hello");
    expect(readdirSync(dir)).toEqual(["f.json"]);
  });
});

describe("cleanStaleTemps", () => {
  /** A pid no process has (above Linux's largest). */
  const DEAD = 2_147_483_000;
  const temp = (file: string, pid: number | string) => `${file}.${pid}.0123abcd.tmp`;

  it("a missing directory: nothing removed", async () => {
    expect(await cleanStaleTemps(join(freshDir(), "nowhere"), "s")).toEqual([]);
  });

  it("an empty directory: nothing removed", async () => {
    expect(await cleanStaleTemps(freshDir(), "s")).toEqual([]);
  });

  it("removes exactly this session's temporaries whose writer is gone", async () => {
    const dir = freshDir();
    const names = {
      dead: temp("s.heartbeat.json", DEAD),
      deadInbox: temp("s.inbox.json", DEAD),
      pidZero: temp("s.ack.json", 0),
      hugePid: temp("s.snapshot.json", "99999999999999999999"),
      mine: temp("s.heartbeat.json", process.pid),
      init: temp("s.inbox.json", 1),
      otherSession: temp("t.heartbeat.json", DEAD),
      prefixSession: temp("s2.heartbeat.json", DEAD),
      nested: temp("s.a.b.json", DEAD),
      notTemp: "s.heartbeat.json",
      badHex: "s.heartbeat.json.123.zzzzzzzz.tmp",
    };
    for (const name of Object.values(names)) writeFileSync(join(dir, name), "x");
    const removed = await cleanStaleTemps(dir, "s");
    expect(removed.sort()).toEqual(
      [names.dead, names.deadInbox, names.pidZero, names.hugePid].sort(),
    );
    expect(readdirSync(dir).sort()).toEqual(
      [
        names.mine,
        names.init,
        names.otherSession,
        names.prefixSession,
        names.nested,
        names.notTemp,
        names.badHex,
      ].sort(),
    );
  });

  it("the writer cleans at its start, in the background", async () => {
    const dir = freshDir();
    const stale = temp("w.heartbeat.json", DEAD);
    writeFileSync(join(dir, stale), "x");
    heartbeat({ stateDir: dir, sessionId: "w" });
    await vi.waitFor(() => {
      expect(readdirSync(dir)).toEqual([]);
    });
  });
});
