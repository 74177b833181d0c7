import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isSelfHealConfigError } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  DEFAULT_LIMITS,
  evaluate,
  heartbeat,
  HeartbeatError,
  heartbeatFile,
  HeartbeatWatcher,
  readHeartbeat,
  type Heartbeat,
} from "../../src/watchdog/index.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-heartbeat-"));
let n = 0;
const freshDir = () => join(root, `d${n++}`);
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

const read = (file: string) => JSON.parse(readFileSync(file, "utf8")) as Heartbeat;

describe("heartbeat writer", () => {
  it("writes a whole heartbeat a reader accepts, leaving no temporary file", async () => {
    const clock = new VirtualClock();
    const dir = freshDir();
    const writer = heartbeat({ stateDir: dir, sessionId: "run-1", clock, minIntervalMs: 0 });
    await writer.beat({ stage: "tool_call", stepIdx: 3, contextTokens: 1200, lastTool: "search" });
    const file = heartbeatFile(dir, "run-1");
    expect(read(file)).toEqual({
      v: 1,
      sessionId: "run-1",
      pid: process.pid,
      stage: "tool_call",
      stepIdx: 3,
      contextTokens: 1200,
      lastTool: "search",
      at: clock.now(),
      stepAt: clock.now(),
      startedAt: clock.now(),
    });
    const back = await readHeartbeat(file, clock.now());
    expect(back.ok).toBe(true);
    expect(readdirSync(dir)).toEqual(["run-1.heartbeat.json"]);
  });

  it("refuses a step that goes back, and bad fields, writing nothing", async () => {
    const dir = freshDir();
    const writer = heartbeat({ stateDir: dir, sessionId: "s", minIntervalMs: 0 });
    await writer.beat({ stage: "planning", stepIdx: 5 });
    const before = readFileSync(heartbeatFile(dir, "s"), "utf8");
    expect(() => writer.beat({ stage: "planning", stepIdx: 4 })).toThrow(HeartbeatError);
    expect(() => writer.beat({ stage: "planning", stepIdx: 4 })).toThrow(/went back from 5 to 4/);
    for (const bad of [
      { stage: "Planning!", stepIdx: 6 },
      { stage: "planning", stepIdx: 6.5 },
      { stage: "planning", stepIdx: -1 },
      { stage: "planning", stepIdx: 6, contextTokens: -3 },
      { stage: "planning", stepIdx: 6, contextTokens: Number.NaN },
      { stage: "planning", stepIdx: 6, lastTool: 7 },
      null,
    ]) {
      expect(() => writer.beat(bad as never)).toThrow(HeartbeatError);
    }
    expect(readFileSync(heartbeatFile(dir, "s"), "utf8")).toBe(before);
  });

  it("a session id or state dir that could escape its file is a config error", () => {
    for (const sessionId of ["../x", "a/b", "", "a b", "x".repeat(129)]) {
      let error: unknown;
      try {
        heartbeat({ stateDir: freshDir(), sessionId });
      } catch (e) {
        error = e;
      }
      expect(isSelfHealConfigError(error), sessionId).toBe(true);
    }
    expect(() => heartbeat({ stateDir: "", sessionId: "s" })).toThrow(/stateDir/);
  });

  it("throttles to one write per interval; the latest beat waiting wins; flush writes it now", async () => {
    const clock = new VirtualClock();
    const dir = freshDir();
    const file = heartbeatFile(dir, "t");
    const writer = heartbeat({ stateDir: dir, sessionId: "t", clock, minIntervalMs: 1_000 });
    await writer.beat({ stage: "planning", stepIdx: 1 });
    void writer.beat({ stage: "tool_call", stepIdx: 2 });
    await clock.advance(100);
    void writer.beat({ stage: "llm_response", stepIdx: 3 });
    expect(read(file).stepIdx).toBe(1); // held for the interval
    await clock.advance(900);
    await writer.flush();
    expect(read(file)).toMatchObject({ stepIdx: 3, stage: "llm_response" });
    // Before an error: flush() writes what waits, at once.
    void writer.beat({ stage: "post_process", stepIdx: 4 });
    await writer.flush();
    expect(read(file).stepIdx).toBe(4);
  });

  it("stepAt moves with the step, not with every beat", async () => {
    const clock = new VirtualClock();
    const dir = freshDir();
    const writer = heartbeat({ stateDir: dir, sessionId: "u", clock, minIntervalMs: 0 });
    await writer.beat({ stage: "tool_call", stepIdx: 1 });
    const movedAt = clock.now();
    await clock.advance(5_000);
    await writer.beat({ stage: "tool_call", stepIdx: 1 });
    expect(read(heartbeatFile(dir, "u"))).toMatchObject({ stepAt: movedAt, at: movedAt + 5_000 });
  });
});

describe("heartbeat reader", () => {
  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["garbage", '{"v":1,"sessionId":"x","sta'],
    ["garbage", "\u0000\u0001binary"],
    ["invalid", '{"v":2}'],
    ["invalid", "[1,2]"],
    [
      "invalid",
      '{"v":1,"sessionId":"x","stage":"a","stepIdx":-1,"at":1,"stepAt":1,"startedAt":1,"pid":1}',
    ],
  ])("%s: %j is a problem, not a heartbeat", async (problem, content) => {
    const dir = freshDir();
    const file = heartbeatFile(dir, "r");
    if (content !== undefined) {
      await heartbeat({ stateDir: dir, sessionId: "r", minIntervalMs: 0 }).beat({
        stage: "planning",
        stepIdx: 0,
      });
      writeFileSync(file, content);
    }
    const result = await readHeartbeat(file, Date.now());
    expect(result).toMatchObject({ ok: false, problem });
  });

  it("a heartbeat from the future is a problem (a clock far off, or a forged file)", async () => {
    const dir = freshDir();
    const clock = new VirtualClock(Date.now() + 60_000);
    await heartbeat({ stateDir: dir, sessionId: "f", clock, minIntervalMs: 0 }).beat({
      stage: "planning",
      stepIdx: 0,
    });
    expect(await readHeartbeat(heartbeatFile(dir, "f"), Date.now())).toMatchObject({
      ok: false,
      problem: "future",
    });
  });
});

describe("verdicts (pure)", () => {
  const start = Date.UTC(2026, 0, 1);
  const hb = (over: Partial<Heartbeat> = {}): Heartbeat => ({
    v: 1,
    sessionId: "s",
    pid: 1,
    stage: "tool_call",
    stepIdx: 10,
    at: start + 100_000,
    stepAt: start + 100_000,
    startedAt: start,
    ...over,
  });
  const limits = { ...DEFAULT_LIMITS, tokenLimit: 100_000, stageStallMs: { tool_call: 300_000 } };
  const at = (ms: number) => start + 100_000 + ms;

  it.each([
    ["beats and steps: healthy", hb(), at(1_000), "healthy"],
    ["silent exactly 30 s: not yet dead", hb(), at(30_000), "healthy"],
    ["silent over 30 s: dead", hb(), at(30_001), "session_dead"],
    ["dead wins over bloat", hb({ contextTokens: 99_000 }), at(31_000), "session_dead"],
    [
      "context at 93% of the limit: bloat",
      hb({ contextTokens: 93_000 }),
      at(1_000),
      "context_bloat",
    ],
    ["context at 92%: not yet", hb({ contextTokens: 92_000 }), at(1_000), "healthy"],
    [
      "step unmoved 91 s while beating, in planning: stalled",
      hb({ stage: "planning", at: at(91_000), stepAt: at(0) }),
      at(91_000),
      "stalled",
    ],
    [
      "the same 91 s in a tool call (limit 300 s): slow, not stalled",
      hb({ at: at(91_000), stepAt: at(0) }),
      at(91_000),
      "healthy",
    ],
    [
      "a tool call past its 300 s: stalled",
      hb({ at: at(301_000), stepAt: at(0) }),
      at(301_000),
      "stalled",
    ],
    [
      "in the start-up grace, no stall verdict",
      hb({ stage: "planning", startedAt: at(0), stepAt: at(0), at: at(59_000) }),
      at(59_000),
      "healthy",
    ],
  ])("%s", (_name, heartbeat, now, verdict) => {
    const result = evaluate(heartbeat, undefined, now, limits);
    expect(result.verdict).toBe(verdict);
    expect(result.reason.length).toBeGreaterThan(0);
  });

  it("names a new session (a rotation) and the step it resumed from", () => {
    const before = hb();
    const after = hb({ startedAt: at(5_000), at: at(6_000), stepAt: at(6_000), stepIdx: 10 });
    expect(evaluate(after, before, at(6_500), limits).reason).toBe(
      "new session resumed from step 10",
    );
    // With generations (under selfheal watch), the process is named by its generation.
    const gen2 = { ...after, gen: 2 };
    expect(evaluate(gen2, { ...before, gen: 1 }, at(6_500), limits).reason).toBe(
      "generation 2 resumed from step 10",
    );
  });

  it("says why, in a line", () => {
    expect(evaluate(hb(), undefined, at(45_000), limits).reason).toBe(
      "no heartbeat for 45 s (limit 30 s)",
    );
    expect(
      evaluate(
        hb({ stage: "planning", at: at(95_000), stepAt: at(0) }),
        undefined,
        at(95_000),
        limits,
      ).reason,
    ).toBe("step 10 unmoved for 95 s in stage planning (limit 90 s)");
  });
});

describe("the watcher reads again before it calls a file unreadable", () => {
  it("two bad reads keep the last verdict; the third in a row is unreadable; a good read clears it", async () => {
    const dir = freshDir();
    const file = heartbeatFile(dir, "w");
    const writer = heartbeat({ stateDir: dir, sessionId: "w", minIntervalMs: 0 });
    await writer.beat({ stage: "planning", stepIdx: 1 });
    const watcher = new HeartbeatWatcher(file);
    expect((await watcher.look(Date.now())).verdict).toBe("healthy");
    writeFileSync(file, '{"v":1,"sess');
    expect((await watcher.look(Date.now())).verdict).toBe("healthy");
    expect((await watcher.look(Date.now())).verdict).toBe("healthy");
    const third = await watcher.look(Date.now());
    expect(third).toMatchObject({ verdict: "unreadable", problem: "garbage" });
    expect(third.reason).toMatch(/garbage 3 times in a row/);
    await writer.beat({ stage: "planning", stepIdx: 2 });
    expect((await watcher.look(Date.now())).verdict).toBe("healthy");
  });
});
