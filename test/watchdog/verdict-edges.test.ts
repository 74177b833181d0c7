import { describe, expect, it } from "vitest";
import {
  DEFAULT_LIMITS,
  evaluate,
  headAndTail,
  HeartbeatWatcher,
  type Heartbeat,
  type ReadResult,
} from "../../src/watchdog/index.js";
import { RestartIntensity } from "../../src/watchdog/intensity.js";

const T = 1_000_000;
const beat = (over: Partial<Heartbeat> = {}): Heartbeat => ({
  v: 1,
  sessionId: "s",
  pid: 1,
  stage: "tool_call",
  stepIdx: 3,
  at: T,
  stepAt: T,
  startedAt: T,
  ...over,
});

describe("evaluate's reasons", () => {
  it.each([
    [9_999, "no heartbeat for 10.0 s (limit 5.0 s)"],
    [10_000, "no heartbeat for 10 s (limit 5.0 s)"],
    [10_400, "no heartbeat for 10 s (limit 5.0 s)"],
  ])("silent %d ms: %s", (silent, reason) => {
    expect(evaluate(beat(), undefined, T + silent, { ...DEFAULT_LIMITS, deadMs: 5_000 })).toEqual({
      verdict: "session_dead",
      reason,
    });
  });

  it.each([
    ["the same session", {}, {}, "step 3 in stage tool_call"],
    ["the same generation", { gen: 2 }, { gen: 2 }, "step 3 in stage tool_call"],
    ["another generation, same start", { gen: 2 }, { gen: 3 }, "generation 2 resumed from step 3"],
    ["another start", {}, { startedAt: T - 1 }, "new session resumed from step 3"],
  ])("previous beat of %s: %s", (_name, current, previous, reason) => {
    expect(evaluate(beat(current), beat(previous), T, DEFAULT_LIMITS)).toEqual({
      verdict: "healthy",
      reason,
    });
  });
});

describe("a bloated context", () => {
  it("names its share of the limit, and the limit's share, in percent", () => {
    const limits = { ...DEFAULT_LIMITS, tokenLimit: 1_000, bloatShare: 0.9 };
    expect(evaluate(beat({ contextTokens: 954 }), undefined, T, limits)).toEqual({
      verdict: "context_bloat",
      reason: "context at 95% of 1000 tokens (limit 90%)",
    });
  });
});

describe("the watcher and the launched process", () => {
  const reading = (results: ReadResult[]) => {
    let i = 0;
    return (): Promise<ReadResult> =>
      Promise.resolve(results[Math.min(i++, results.length - 1)] as ReadResult);
  };
  const missing: ReadResult = { ok: false, problem: "missing", detail: "ENOENT" };
  const limits = { ...DEFAULT_LIMITS, deadMs: 30_000, graceMs: 0 };

  it("nothing read yet, no launch: healthy, 'no heartbeat read yet'", async () => {
    const watcher = new HeartbeatWatcher(reading([missing]), limits);
    expect(await watcher.look(T)).toEqual({
      verdict: "healthy",
      reason: "no heartbeat read yet",
      problem: "missing",
    });
  });

  it("a failed look exactly at the dead limit is no longer starting", async () => {
    const watcher = new HeartbeatWatcher(reading([missing]), limits);
    const seen = await watcher.look(T + 30_000, { generation: 2, at: T });
    expect(seen.verdict).toBe("healthy");
    expect(seen.reason).toBe("no heartbeat read yet");
  });

  it("starting: says how long ago, and when the first beat is due", async () => {
    const watcher = new HeartbeatWatcher(reading([missing]), limits);
    expect(await watcher.look(T + 1_500, { generation: 2, at: T })).toEqual({
      verdict: "starting",
      reason: "generation 2 started 1.5 s ago; its first heartbeat is due within 30 s",
      problem: "missing",
    });
  });

  it.each([
    ["at the launch", T, "healthy"],
    ["after it", T + 1, "healthy"],
    ["before it", T - 1, "starting"],
  ])("a beat without gen written %s: %s", async (_name, at, verdict) => {
    const watcher = new HeartbeatWatcher(
      reading([{ ok: true, heartbeat: beat({ at, stepAt: at }) }]),
      limits,
    );
    const seen = await watcher.look(T + 10, { generation: 2, at: T });
    expect(seen.verdict).toBe(verdict);
    if (verdict === "starting") expect(seen.problem).toBe("invalid");
  });

  it.each([
    [2, "healthy"],
    [1, "starting"],
    [3, "starting"],
  ])("a beat of generation %d, generation 2 launched: %s", async (gen, verdict) => {
    const watcher = new HeartbeatWatcher(
      reading([{ ok: true, heartbeat: beat({ gen, at: T - 100 }) }]),
      limits,
    );
    expect((await watcher.look(T + 10, { generation: 2, at: T })).verdict).toBe(verdict);
  });

  it.each([
    [{}, "?"],
    [{ gen: 1 }, "1"],
  ])(
    "an earlier beat (%j) past the dead limit: dead, naming whose the file is",
    async (over, gen) => {
      const watcher = new HeartbeatWatcher(
        reading([{ ok: true, heartbeat: beat({ ...over, at: T - 1 }) }]),
        limits,
      );
      expect(await watcher.look(T + 30_000, { generation: 2, at: T })).toEqual({
        verdict: "session_dead",
        reason: `generation 2 wrote no heartbeat within 30 s of its start (the file is generation ${gen}'s, step 3)`,
      });
    },
  );

  it("once the process has beaten, an earlier process's beat is an invalid read", async () => {
    const watcher = new HeartbeatWatcher(
      reading([
        { ok: true, heartbeat: beat({ gen: 2 }) },
        { ok: true, heartbeat: beat({ gen: 1 }) },
      ]),
      limits,
    );
    const launch = { generation: 2, at: T - 10 };
    expect((await watcher.look(T, launch)).verdict).toBe("healthy");
    let seen = await watcher.look(T + 1, launch);
    expect(seen).toMatchObject({ verdict: "healthy", problem: "invalid" });
    await watcher.look(T + 2, launch);
    seen = await watcher.look(T + 3, launch);
    expect(seen).toEqual({
      verdict: "unreadable",
      reason: "heartbeat invalid 3 times in a row (a beat of generation 1)",
      problem: "invalid",
    });
  });
});

describe("restart intensity and the summariser, at their edges", () => {
  it("the shortest period (1 ms; 0 is refused) forgets a restart a period later", () => {
    const intensity = new RestartIntensity({
      maxRestarts: 1,
      periodMs: 1,
      baseBackoffMs: 0,
      maxBackoffMs: 0,
    });
    expect(intensity.next(T)).toEqual({ restart: true, waitMs: 0, inPeriod: 1 });
    expect(intensity.next(T).restart).toBe(false);
    expect(intensity.next(T + 1)).toEqual({ restart: true, waitMs: 0, inPeriod: 1 });
  });

  it("an output exactly at the limit is kept whole", () => {
    expect(headAndTail(["0123456789"], { maxChars: 10, keep: 2 })).toEqual(["0123456789"]);
    expect(headAndTail(["0123456789a"], { maxChars: 10, keep: 2 })).toEqual([
      "01\n[... 7 characters cut by selfheal's context reset ...]\n9a",
    ]);
  });
});
