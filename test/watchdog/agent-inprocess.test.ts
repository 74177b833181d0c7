import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  ackFile,
  heartbeatFile,
  inboxFile,
  keepAliveFor,
  lastGeneration,
  readAck,
  sendToInbox,
  snapshotFile,
  SnapshotError,
  supervised,
  WATCH_ENV,
} from "../../src/watchdog/index.js";
import { freshDirs } from "../helpers/temp.js";

/** A fresh state dir, made. */
const freshDir = freshDirs("agent-inproc");
afterEach(() => {
  vi.unstubAllEnvs();
});

/** Gives a poll started in the background (fire and forget) time to read and handle. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 60));

const writeInbox = (dir: string, session: string, body: unknown) => {
  writeFileSync(inboxFile(dir, session), JSON.stringify(body));
};

/** A run with no generation that records the seqs of the nudges and resets it hears. */
function listening(stateDir: string, sessionId: string, extra: { generation?: number } = {}) {
  const clock = new VirtualClock();
  const run = supervised({ stateDir, sessionId, clock, pollMs: 60 * 60_000, ...extra });
  const heard: string[] = [];
  run.onNudge((m) => {
    heard.push(`nudge:${m.seq}`);
  });
  run.onContextReset((m) => {
    heard.push(`reset:${m.seq}`);
  });
  return { run, heard, clock };
}

describe("the inbox keeps only well-formed messages", () => {
  const valid = { seq: 1, kind: "nudge", at: 5 };
  it.each([
    ["seq a string", { ...valid, seq: "1" }],
    ["seq a fraction", { ...valid, seq: 1.5 }],
    ["seq 0", { ...valid, seq: 0 }],
    ["seq negative", { ...valid, seq: -1 }],
    ["no seq", { kind: "nudge", at: 5 }],
    ["seq past safe integers", { ...valid, seq: 2 ** 60 }],
    ["an unknown kind", { ...valid, kind: "reboot" }],
    ["at a string", { ...valid, at: "5" }],
    ["no at", { seq: 1, kind: "nudge" }],
    ["text a number", { ...valid, text: 5 }],
    ["gen 0", { ...valid, gen: 0 }],
    ["gen a fraction", { ...valid, gen: 1.5 }],
    ["gen a string", { ...valid, gen: "2" }],
    ["gen negative", { ...valid, gen: -3 }],
  ])("%s: neither handled, acknowledged nor counted", async (_name, message) => {
    const stateDir = freshDir();
    writeInbox(stateDir, "s", { v: 1, messages: [{ gen: 7, ...message }] });
    expect(await lastGeneration(stateDir, "s")).toBe(0);
    const { run, heard } = listening(stateDir, "s");
    await run.poll();
    expect(heard).toEqual([]);
    expect(await readAck(stateDir, "s")).toBe(0);
    // The next message is numbered past none of it.
    expect((await sendToInbox(stateDir, "s", { kind: "nudge", at: 6 })).seq).toBe(1);
    await run.close();
  });

  it("a well-formed message with every field is handled and counted", async () => {
    const stateDir = freshDir();
    writeInbox(stateDir, "s", {
      v: 1,
      messages: [{ seq: 1, kind: "nudge", at: 5, text: "go on", gen: 7 }],
    });
    expect(await lastGeneration(stateDir, "s")).toBe(7);
    const { run, heard } = listening(stateDir, "s");
    await run.poll();
    expect(heard).toEqual(["nudge:1"]);
    await run.close();
  });

  it.each([
    ["version 2", { v: 2 }, []],
    ["version a string", { v: "1" }, []],
    ["no version (written before it was added)", {}, ["nudge:1"]],
    ["version 1", { v: 1 }, ["nudge:1"]],
  ])("an inbox of %s", async (_name, head, expected) => {
    const stateDir = freshDir();
    writeInbox(stateDir, "s", { ...head, messages: [{ seq: 1, kind: "nudge", at: 1, gen: 4 }] });
    expect(await lastGeneration(stateDir, "s")).toBe(expected.length ? 4 : 0);
    const { run, heard } = listening(stateDir, "s");
    await run.poll();
    expect(heard).toEqual(expected);
    await run.close();
  });

  it("messages are taken in seq order, whatever their order in the file", async () => {
    const stateDir = freshDir();
    const at = 1;
    writeInbox(stateDir, "s", {
      v: 1,
      messages: [
        { seq: 3, kind: "nudge", at },
        { seq: 1, kind: "context_reset", at },
        { seq: 4, kind: "context_reset", at },
        { seq: 2, kind: "nudge", at },
      ],
    });
    const { run, heard } = listening(stateDir, "s");
    await run.poll();
    expect(heard).toEqual(["reset:1", "nudge:2", "nudge:3", "reset:4"]);
    expect(await readAck(stateDir, "s")).toBe(4);
    expect((await sendToInbox(stateDir, "s", { kind: "nudge", at })).seq).toBe(5);
    await run.close();
  });
});

describe("readAck", () => {
  it.each([
    [{ v: 1, seq: 4 }, 4],
    [{ v: 1, seq: 1 }, 1],
    [{ v: 1, seq: 0 }, 0],
    [{ v: 1, seq: -2 }, 0],
    [{ v: 1, seq: 2.5 }, 0],
    [{ v: 1, seq: "3" }, 0],
    [{ v: 1, seq: 2 ** 60 }, 0],
    [{ v: 1 }, 0],
    [{ v: 2, seq: 4 }, 0],
    [{ seq: 4 }, 0],
    ["not json {", 0],
  ])("%j reads as %d", async (body, expected) => {
    const stateDir = freshDir();
    writeFileSync(ackFile(stateDir, "s"), typeof body === "string" ? body : JSON.stringify(body));
    expect(await readAck(stateDir, "s")).toBe(expected);
  });

  it("a garbage acknowledgement and inbox: seq starts at 1, generation 0", async () => {
    const stateDir = freshDir();
    writeFileSync(ackFile(stateDir, "s"), "{");
    writeFileSync(inboxFile(stateDir, "s"), "[[[");
    writeFileSync(heartbeatFile(stateDir, "s"), "");
    expect(await lastGeneration(stateDir, "s")).toBe(0);
    expect((await sendToInbox(stateDir, "s", { kind: "nudge", at: 1 })).seq).toBe(1);
  });
});

describe("keepAliveFor", () => {
  it.each([
    [undefined, 10_000],
    ["", 10_000],
    ["   ", 10_000],
    ["abc", 10_000],
    ["0", 10_000],
    [0, 10_000],
    ["-300", 10_000],
    [-300, 10_000],
    [Number.NaN, 10_000],
    [Number.POSITIVE_INFINITY, 10_000],
    ["600", 200],
    [" 900 ", 300],
    [600, 200],
    [3_000, 1_000],
    ["1", 100],
    [150, 100],
    [0.5, 100],
    ["30000", 10_000],
    [90_000, 10_000],
  ])("a dead limit of %j keeps alive every %d ms", (dead, expected) => {
    expect(keepAliveFor(dead)).toBe(expected);
  });
});

describe("options from the environment", () => {
  it.each([
    ["1", 1],
    ["3", 3],
    [" 2 ", 2],
    ["0", undefined],
    ["-2", undefined],
    ["1.5", undefined],
    ["abc", undefined],
    ["", undefined],
    ["  ", undefined],
  ])("SELFHEAL_WATCH_GENERATION=%j: generation %j", (value, expected) => {
    vi.stubEnv(WATCH_ENV.generation, value);
    const run = supervised({ stateDir: freshDir(), sessionId: "s" });
    expect(run.generation).toBe(expected);
  });

  it("no SELFHEAL_WATCH_GENERATION, no session id: no generation, session `agent`", () => {
    vi.stubEnv(WATCH_ENV.generation, undefined);
    vi.stubEnv(WATCH_ENV.sessionId, undefined);
    const run = supervised({ stateDir: freshDir() });
    expect(run.generation).toBeUndefined();
    expect(run.sessionId).toBe("agent");
  });

  it("the session id and state dir come from the environment", () => {
    const stateDir = freshDir();
    vi.stubEnv(WATCH_ENV.stateDir, stateDir);
    vi.stubEnv(WATCH_ENV.sessionId, "from-env");
    const run = supervised();
    expect(run.stateDir).toBe(stateDir);
    expect(run.sessionId).toBe("from-env");
  });

  it("no state dir anywhere: a config error naming supervised.stateDir", () => {
    vi.stubEnv(WATCH_ENV.stateDir, undefined);
    let thrown: unknown;
    try {
      supervised({ sessionId: "s" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SelfHealConfigError);
    expect((thrown as Error).message).toContain("supervised.stateDir");
  });

  it("keep-alive from SELFHEAL_WATCH_DEAD_MS: the last beat is written again after a third of it", async () => {
    vi.stubEnv(WATCH_ENV.deadMs, "900");
    const clock = new VirtualClock();
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "k", clock, pollMs: 100, minIntervalMs: 0 });
    await run.beat({ stage: "tool_call", stepIdx: 2 });
    const first = JSON.parse(readFileSync(heartbeatFile(stateDir, "k"), "utf8")) as { at: number };
    await clock.advance(200); // two polls, 200 ms without a write: under 300
    await settle();
    const before = JSON.parse(readFileSync(heartbeatFile(stateDir, "k"), "utf8")) as {
      at: number;
    };
    expect(before.at).toBe(first.at);
    await clock.advance(100);
    await run.close(); // waits for the write in flight
    const after = JSON.parse(readFileSync(heartbeatFile(stateDir, "k"), "utf8")) as {
      at: number;
      stepIdx: number;
    };
    expect(after.at).toBe(first.at + 300);
    expect(after.stepIdx).toBe(2);
  });
});

describe("when the inbox is read", () => {
  it("the default poll is every 500 ms from the first beat", async () => {
    const stateDir = freshDir();
    const clock = new VirtualClock();
    const run = supervised({ stateDir, sessionId: "p", clock, keepAliveMs: 0 });
    const heard: number[] = [];
    run.onNudge((m) => {
      heard.push(m.seq);
    });
    await run.beat({ stage: "planning", stepIdx: 0 });
    await run.poll(); // after the first beat's read: the inbox is empty
    await sendToInbox(stateDir, "p", { kind: "nudge", at: clock.now() });
    await clock.advance(499);
    await settle();
    expect(heard).toEqual([]);
    await clock.advance(1);
    await vi.waitFor(() => {
      expect(heard).toEqual([1]);
    });
    await run.close();
  });

  it("only the first beat reads the inbox at once; later beats wait for the poll", async () => {
    const stateDir = freshDir();
    const { run, heard } = listening(stateDir, "b");
    await run.beat({ stage: "planning", stepIdx: 0 });
    await run.poll();
    await sendToInbox(stateDir, "b", { kind: "nudge", at: 1 });
    await run.beat({ stage: "planning", stepIdx: 1 });
    await run.advance({ stage: "planning" });
    await settle();
    expect(heard).toEqual([]);
    await run.poll();
    expect(heard).toEqual(["nudge:1"]);
    await run.close();
  });

  it("the first beat reads the inbox at once", async () => {
    const stateDir = freshDir();
    await sendToInbox(stateDir, "f", { kind: "context_reset", at: 1 });
    const { run, heard } = listening(stateDir, "f");
    await run.advance({ stage: "planning" });
    await vi.waitFor(() => {
      expect(heard).toEqual(["reset:1"]);
    });
    await run.close();
  });

  it("closed before its first beat: a beat never starts reading the inbox", async () => {
    const stateDir = freshDir();
    await sendToInbox(stateDir, "c", { kind: "nudge", at: 1 });
    const { run, heard, clock } = listening(stateDir, "c");
    await run.close();
    await run.beat({ stage: "planning", stepIdx: 0 });
    await clock.advance(2 * 60 * 60_000);
    await settle();
    expect(heard).toEqual([]);
  });

  it("closed by a handler during a poll: no poll after it", async () => {
    const stateDir = freshDir();
    const clock = new VirtualClock();
    const run = supervised({ stateDir, sessionId: "h", clock, pollMs: 100, keepAliveMs: 0 });
    const heard: number[] = [];
    run.onNudge(async (m) => {
      heard.push(m.seq);
      await run.close();
    });
    await run.beat({ stage: "planning", stepIdx: 0 });
    await run.poll();
    await sendToInbox(stateDir, "h", { kind: "nudge", at: 1 });
    await clock.advance(100);
    await vi.waitFor(() => {
      expect(heard).toEqual([1]);
    });
    await settle();
    await sendToInbox(stateDir, "h", { kind: "nudge", at: 2 });
    await clock.advance(100);
    await settle();
    await clock.advance(100);
    await settle();
    expect(heard).toEqual([1]);
  });

  it("the poll timer does not keep the process alive (unref)", async () => {
    const virtual = new VirtualClock();
    const options: unknown[] = [];
    const clock = {
      now: () => virtual.now(),
      sleep: (ms: number) => virtual.sleep(ms),
      setTimer: (ms: number, callback: () => void, opts?: { unref?: boolean }) => {
        options.push(opts);
        return virtual.setTimer(ms, callback);
      },
    };
    const run = supervised({ stateDir: freshDir(), sessionId: "u", clock, minIntervalMs: 0 });
    await run.beat({ stage: "planning", stepIdx: 0 });
    expect(options).toEqual([{ unref: true }]);
    await run.close();
  });

  it("a handler unsubscribed is not called; the others are", async () => {
    const stateDir = freshDir();
    const { run, heard } = listening(stateDir, "o");
    const offNudge = run.onNudge(() => {
      heard.push("removed nudge");
    });
    const offReset = run.onContextReset(() => {
      heard.push("removed reset");
    });
    offNudge();
    offReset();
    await sendToInbox(stateDir, "o", { kind: "nudge", at: 1 });
    await sendToInbox(stateDir, "o", { kind: "context_reset", at: 1 });
    await run.poll();
    expect(heard).toEqual(["nudge:1", "reset:2"]);
    await run.close();
  });
});

describe("generations in the inbox", () => {
  it.each([
    // [process generation, message generation, handled]
    [undefined, 5, true],
    [undefined, undefined, true],
    [3, undefined, true],
    [3, 3, true],
    [3, 2, false],
  ])(
    "process gen %j, message gen %j: handled %j, and acknowledged",
    async (gen, msgGen, handled) => {
      const stateDir = freshDir();
      await sendToInbox(stateDir, "g", {
        kind: "nudge",
        at: 1,
        ...(msgGen !== undefined && { gen: msgGen }),
      });
      const { run, heard } = listening(stateDir, "g", gen === undefined ? {} : { generation: gen });
      await run.poll();
      expect(heard).toEqual(handled ? ["nudge:1"] : []);
      expect(await readAck(stateDir, "g")).toBe(1);
      const ack = JSON.parse(readFileSync(ackFile(stateDir, "g"), "utf8")) as Record<
        string,
        unknown
      >;
      expect("gen" in ack).toBe(gen !== undefined);
      await run.close();
    },
  );

  it("a message for a later generation stops the read: it and those after it wait", async () => {
    const stateDir = freshDir();
    await sendToInbox(stateDir, "l", { kind: "nudge", at: 1, gen: 4 });
    await sendToInbox(stateDir, "l", { kind: "nudge", at: 1, gen: 3 });
    const { run, heard } = listening(stateDir, "l", { generation: 3 });
    await run.poll();
    expect(heard).toEqual([]);
    expect(await readAck(stateDir, "l")).toBe(0);
    await run.close();
  });
});

describe("restoring a snapshot", () => {
  const restoreError = async (text: string) => {
    const stateDir = freshDir();
    writeFileSync(snapshotFile(stateDir, "r"), text);
    const run = supervised({ stateDir, sessionId: "r", pollMs: 60_000 });
    return run.restore().then(
      () => undefined,
      (error: unknown) => error as SnapshotError,
    );
  };

  it("a snapshot that is not JSON: SnapshotError with the parse error as its cause", async () => {
    const error = await restoreError('{"v":1,"state":');
    expect(error).toBeInstanceOf(SnapshotError);
    expect(error?.name).toBe("SnapshotError");
    expect(error?.code).toBe("SELFHEAL_SNAPSHOT");
    expect(error?.message).toBe("the snapshot is not valid JSON: restoring it would lose state");
    expect(error?.cause).toBeInstanceOf(SyntaxError);
  });

  it.each(["null", "[1,2]", "5", '"text"', "true"])(
    "%s: not a JSON object (a SnapshotError)",
    async (text) => {
      const error = await restoreError(text);
      expect(error).toBeInstanceOf(SnapshotError);
      expect(error?.message).toBe("the snapshot is not a JSON object");
    },
  );

  it("a directory in the snapshot's place: SnapshotError naming the problem", async () => {
    const stateDir = freshDir();
    mkdirSync(snapshotFile(stateDir, "r"));
    const run = supervised({ stateDir, sessionId: "r", pollMs: 60_000 });
    await expect(run.restore()).rejects.toThrow(
      "the snapshot cannot be read: not_a_file (a directory, not a regular file)",
    );
  });

  it.each([
    ["a string", '"3"'],
    ["a fraction", "2.5"],
    ["negative", "-4"],
    ["null", "null"],
  ])("a stepIdx that is %s is ignored: the process starts from step 1", async (_name, step) => {
    const stateDir = freshDir();
    writeFileSync(snapshotFile(stateDir, "r"), `{"v":1,"stepIdx":${step},"state":{"a":1}}`);
    const run = supervised({ stateDir, sessionId: "r", pollMs: 60_000, minIntervalMs: 0 });
    expect(await run.restore()).toEqual({ a: 1 });
    await run.advance({ stage: "planning" });
    const beat = JSON.parse(readFileSync(heartbeatFile(stateDir, "r"), "utf8")) as {
      stepIdx: number;
    };
    expect(beat.stepIdx).toBe(1);
    await run.close();
  });

  it("a stepIdx of 7: advance goes on at 8, a beat below 7 is refused", async () => {
    const stateDir = freshDir();
    writeFileSync(snapshotFile(stateDir, "r"), '{"v":1,"stepIdx":7,"state":null}');
    const run = supervised({ stateDir, sessionId: "r", pollMs: 60_000, minIntervalMs: 0 });
    expect(await run.restore()).toBeNull();
    expect(() => run.beat({ stage: "planning", stepIdx: 6 })).toThrow(/went back from 7 to 6/);
    await run.advance({ stage: "planning" });
    const beat = JSON.parse(readFileSync(heartbeatFile(stateDir, "r"), "utf8")) as {
      stepIdx: number;
    };
    expect(beat.stepIdx).toBe(8);
    await run.close();
  });

  it("a snapshot records the step of the last beat written", async () => {
    const stateDir = freshDir();
    const clock = new VirtualClock();
    const run = supervised({ stateDir, sessionId: "w", clock, pollMs: 60_000, minIntervalMs: 0 });
    await run.snapshot({ x: 1 });
    const before = JSON.parse(readFileSync(snapshotFile(stateDir, "w"), "utf8")) as unknown;
    expect(before).toEqual({ v: 1, at: clock.now(), stepIdx: null, state: { x: 1 } });
    await run.beat({ stage: "planning", stepIdx: 12 });
    await run.snapshot({ x: 2 });
    const after = JSON.parse(readFileSync(snapshotFile(stateDir, "w"), "utf8")) as unknown;
    expect(after).toEqual({ v: 1, at: clock.now(), stepIdx: 12, state: { x: 2 } });
    await run.close();
  });
});
