import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createSelfHealing, isSelfHealConfigError, type StepReporter } from "../../src/index.js";
import { configError, NO_RECOVERY } from "../helpers/engine.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  ackFile,
  DEFAULT_LIMITS,
  evaluate,
  headAndTail,
  heartbeat,
  heartbeatFile,
  inboxFile,
  lastGeneration,
  readAck,
  sendToInbox,
  snapshotFile,
  SnapshotError,
  supervised,
  type Heartbeat,
  type InboxMessage,
} from "../../src/watchdog/index.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-agent-"));
let n = 0;
const freshDir = () => join(root, `d${n++}`);
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("the agent's side of supervision", () => {
  it("hears each nudge and context reset once, in order", async () => {
    const clock = new VirtualClock();
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "s1", clock, pollMs: 100 });
    const heard: string[] = [];
    run.onNudge((m) => {
      heard.push(`nudge:${m.text ?? ""}`);
    });
    run.onContextReset((m: InboxMessage) => {
      heard.push(`reset:${m.seq}`);
    });
    await sendToInbox(stateDir, "s1", { kind: "nudge", at: clock.now(), text: "go on" });
    await sendToInbox(stateDir, "s1", { kind: "context_reset", at: clock.now() });
    await run.poll();
    await run.poll(); // nothing new: nothing heard twice
    await sendToInbox(stateDir, "s1", { kind: "nudge", at: clock.now(), text: "again" });
    await clock.advance(100); // the poll timer reads it
    await run.poll();
    expect(heard).toEqual(["nudge:go on", "reset:2", "nudge:again"]);
    await run.close();
  });

  it("a handler that throws stops neither the others nor the polling", async () => {
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "s2", pollMs: 60_000 });
    const heard: number[] = [];
    run.onNudge(() => {
      throw new Error("boom");
    });
    run.onNudge((m) => {
      heard.push(m.seq);
    });
    await sendToInbox(stateDir, "s2", { kind: "nudge", at: 0 });
    await run.poll();
    await sendToInbox(stateDir, "s2", { kind: "nudge", at: 0 });
    await run.poll();
    expect(heard).toEqual([1, 2]);
    await run.close();
  });

  it("a snapshot survives the process: a rotated run restores it", async () => {
    const stateDir = freshDir();
    const first = supervised({ stateDir, sessionId: "s3", minIntervalMs: 0, pollMs: 60_000 });
    await first.beat({ stage: "tool_call", stepIdx: 41 });
    await first.snapshot({ stepIdx: 41, done: ["a", "b"] });
    await first.close();
    const second = supervised({ stateDir, sessionId: "s3", pollMs: 60_000 });
    expect(await second.restore()).toEqual({ stepIdx: 41, done: ["a", "b"] });
    await second.close();
  });

  it("no snapshot: undefined; a corrupt one: SnapshotError, never a silent fresh start", async () => {
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "s4", pollMs: 60_000 });
    expect(await run.restore()).toBeUndefined();
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(snapshotFile(stateDir, "s4"), '{"v":1,"state":{"step');
    await expect(run.restore()).rejects.toBeInstanceOf(SnapshotError);
    writeFileSync(snapshotFile(stateDir, "s4"), '{"v":7}');
    await expect(run.restore()).rejects.toThrow(/not a selfheal snapshot/);
    // No state is not a fresh start either; nor is a JSON null.
    writeFileSync(snapshotFile(stateDir, "s4"), '{"v":1,"stepIdx":3}');
    await expect(run.restore()).rejects.toThrow(/holds no state/);
    writeFileSync(snapshotFile(stateDir, "s4"), "null");
    await expect(run.restore()).rejects.toThrow(/not a JSON object/);
    await run.close();
  });

  it("a snapshot path that is a FIFO or a directory fails at once (never blocks)", async () => {
    const stateDir = freshDir();
    mkdirSync(stateDir, { recursive: true });
    execFileSync("mkfifo", [snapshotFile(stateDir, "f")]);
    mkdirSync(snapshotFile(stateDir, "d"));
    for (const sessionId of ["f", "d"]) {
      const run = supervised({ stateDir, sessionId, pollMs: 60_000 });
      await expect(run.restore()).rejects.toThrow(/cannot be read: not_a_file/);
      await run.close();
    }
  });

  it("a restored process goes on from the snapshot's step: advance() continues past it", async () => {
    const stateDir = freshDir();
    const first = supervised({ stateDir, sessionId: "r", pollMs: 60_000, minIntervalMs: 0 });
    for (let i = 0; i < 7; i++) await first.advance({ stage: "tool_call" });
    await first.snapshot({ notes: "seven done" });
    await first.close();
    const next = supervised({ stateDir, sessionId: "r", pollMs: 60_000, minIntervalMs: 0 });
    expect(await next.restore()).toEqual({ notes: "seven done" });
    await next.advance({ stage: "tool_call" });
    await next.close();
    const beat = JSON.parse(readFileSync(heartbeatFile(stateDir, "r"), "utf8")) as Heartbeat;
    expect(beat.stepIdx).toBe(8);
    expect(() => next.beat({ stage: "planning", stepIdx: 6 })).toThrow(/went back/);
  });

  it("without a state dir (not under `selfheal watch`): a config error naming the fix", () => {
    const saved = process.env.SELFHEAL_STATE_DIR;
    delete process.env.SELFHEAL_STATE_DIR;
    try {
      let error: unknown;
      try {
        supervised();
      } catch (e) {
        error = e;
      }
      expect(isSelfHealConfigError(error)).toBe(true);
      expect(String(error)).toMatch(/SELFHEAL_STATE_DIR/);
    } finally {
      if (saved !== undefined) process.env.SELFHEAL_STATE_DIR = saved;
    }
  });
});

/** A second of virtual time, then real time until the run's poll (file I/O) has armed again. */
async function second(clock: VirtualClock): Promise<void> {
  await clock.advance(1_000);
  while (clock.pendingTimers === 0) await new Promise((resolve) => setTimeout(resolve, 1));
}

describe("the acknowledged inbox: each message handled once, by the process it is for", () => {
  /** A process of session `s` in `stateDir`, recording what it handled. */
  const processOf = (stateDir: string, generation: number | undefined, heard: string[]) => {
    const run = supervised({
      stateDir,
      sessionId: "s",
      pollMs: 60 * 60_000,
      ...(generation !== undefined && { generation }),
    });
    run.onNudge((m) => {
      heard.push(`gen${generation ?? "?"}:nudge:${m.seq}`);
    });
    run.onContextReset((m) => {
      heard.push(`gen${generation ?? "?"}:reset:${m.seq}`);
    });
    return run;
  };

  it("a restarted process never replays what an earlier one acknowledged", async () => {
    const stateDir = freshDir();
    const heard: string[] = [];
    const first = processOf(stateDir, undefined, heard);
    await sendToInbox(stateDir, "s", { kind: "context_reset", at: 1 });
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 2 });
    await first.poll();
    await first.close();
    expect(JSON.parse(readFileSync(ackFile(stateDir, "s"), "utf8"))).toMatchObject({
      v: 1,
      seq: 2,
    });
    // Three later processes, as a crash loop starts them: none handles the old reset again.
    for (let i = 0; i < 3; i++) {
      const next = processOf(stateDir, undefined, heard);
      await next.poll();
      await next.close();
    }
    expect(heard).toEqual(["gen?:reset:1", "gen?:nudge:2"]);
    expect(await readAck(stateDir, "s")).toBe(2);
  });

  it("a message for an earlier generation is skipped (and acknowledged); one for a later generation is left for it", async () => {
    const stateDir = freshDir();
    const heard: string[] = [];
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 1, gen: 1 }); // gen 1 never read it
    await sendToInbox(stateDir, "s", { kind: "context_reset", at: 2, gen: 2 });
    await sendToInbox(stateDir, "s", { kind: "context_reset", at: 3, gen: 3 });
    const gen2 = processOf(stateDir, 2, heard);
    await gen2.poll();
    expect(heard).toEqual(["gen2:reset:2"]);
    expect(await readAck(stateDir, "s")).toBe(2); // stopped before gen 3's message
    await gen2.close();
    const gen3 = processOf(stateDir, 3, heard);
    await gen3.poll();
    await gen3.poll();
    expect(heard).toEqual(["gen2:reset:2", "gen3:reset:3"]);
    expect(JSON.parse(readFileSync(ackFile(stateDir, "s"), "utf8"))).toMatchObject({
      seq: 3,
      gen: 3,
    });
    await gen3.close();
  });

  it("polls never overlap: two at once handle a message once", async () => {
    const stateDir = freshDir();
    const heard: string[] = [];
    const run = processOf(stateDir, 1, heard);
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 1 });
    await Promise.all([run.poll(), run.poll(), run.poll()]);
    expect(heard).toEqual(["gen1:nudge:1"]);
    await run.close();
  });

  it("seq continues past the acknowledgement when the inbox is lost", async () => {
    const stateDir = freshDir();
    const heard: string[] = [];
    const run = processOf(stateDir, 1, heard);
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 1 });
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 2 });
    await run.poll();
    rmSync(inboxFile(stateDir, "s"));
    const sent = await sendToInbox(stateDir, "s", { kind: "nudge", at: 3 });
    expect(sent.seq).toBe(3); // not 1, which the run would take for done
    await run.poll();
    expect(heard).toEqual(["gen1:nudge:1", "gen1:nudge:2", "gen1:nudge:3"]);
    await run.close();
  });

  it("a garbage inbox or acknowledgement is read as none, and read again later", async () => {
    const stateDir = freshDir();
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(ackFile(stateDir, "s"), '{"v":1,"seq":');
    writeFileSync(inboxFile(stateDir, "s"), "\uFEFF[]");
    expect(await readAck(stateDir, "s")).toBe(0);
    const heard: string[] = [];
    const run = processOf(stateDir, 1, heard);
    await run.poll();
    expect(heard).toEqual([]);
    await sendToInbox(stateDir, "s", { kind: "nudge", at: 1 });
    await run.poll();
    expect(heard).toEqual(["gen1:nudge:1"]);
    await run.close();
  });

  it("the generation comes from SELFHEAL_WATCH_GENERATION and goes into every beat", async () => {
    const stateDir = freshDir();
    process.env.SELFHEAL_WATCH_GENERATION = "4";
    try {
      const run = supervised({ stateDir, sessionId: "s", pollMs: 60_000, minIntervalMs: 0 });
      expect(run.generation).toBe(4);
      await run.beat({ stage: "planning", stepIdx: 1 });
      await run.close();
      const beat = JSON.parse(readFileSync(heartbeatFile(stateDir, "s"), "utf8")) as Heartbeat;
      expect(beat.gen).toBe(4);
      process.env.SELFHEAL_WATCH_GENERATION = "zero";
      expect(supervised({ stateDir, sessionId: "t", pollMs: 60_000 }).generation).toBeUndefined();
    } finally {
      delete process.env.SELFHEAL_WATCH_GENERATION;
    }
    expect(() => heartbeat({ stateDir, sessionId: "s", generation: 0 })).toThrow(
      /heartbeat.generation/,
    );
  });

  it("lastGeneration: the highest generation the session's files name, 0 for none", async () => {
    const stateDir = freshDir();
    expect(await lastGeneration(stateDir, "s")).toBe(0);
    await heartbeat({ stateDir, sessionId: "s", generation: 2, minIntervalMs: 0 }).beat({
      stage: "planning",
      stepIdx: 0,
    });
    expect(await lastGeneration(stateDir, "s")).toBe(2);
    await sendToInbox(stateDir, "s", { kind: "context_reset", at: 1, gen: 3 });
    expect(await lastGeneration(stateDir, "s")).toBe(3);
  });
});

describe("a run's heartbeat from its tool calls, and while it waits", () => {
  it("the engine moves the step once per call (stage tool_call, lastTool), whatever the outcome", async () => {
    const clock = new VirtualClock();
    const stateDir = freshDir();
    const run = supervised({
      stateDir,
      sessionId: "auto",
      clock,
      minIntervalMs: 0,
      pollMs: 60_000,
    });
    const sh = createSelfHealing({
      agent: "a",
      clock,
      heartbeat: run,
      logger: { warn: () => undefined },
      recovery: NO_RECOVERY,
    });
    const search = sh.tool("search", { readOnly: true }, () => "ok");
    const broken = sh.tool("broken", { readOnly: true }, () => {
      throw new Error("nope");
    });
    await search(undefined);
    await search(undefined);
    await expect(broken(undefined)).rejects.toThrow("nope");
    await run.close();
    const beat = JSON.parse(readFileSync(heartbeatFile(stateDir, "auto"), "utf8")) as Heartbeat;
    expect(beat).toMatchObject({ stage: "tool_call", stepIdx: 3, lastTool: "broken" });
    await sh.close();
  });

  it("a heartbeat that fails is logged; the call still answers", async () => {
    const warnings: string[] = [];
    const sh = createSelfHealing({
      agent: "a",
      clock: new VirtualClock(),
      heartbeat: {
        advance: () => Promise.reject(new Error("disk full, token=sk-live-123456789012345678")),
      },
      logger: { warn: (m) => warnings.push(m) },
    });
    await expect(sh.tool("t", { readOnly: true }, () => "ok")(undefined)).resolves.toBe("ok");
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings).toEqual([
      expect.stringMatching(/^selfheal: heartbeat failed after t: .*disk full/),
    ]);
    expect(warnings[0]).not.toContain("sk-live");
    const noMethod = configError(() =>
      createSelfHealing({ agent: "a", heartbeat: {} as unknown as StepReporter }),
    );
    expect(noMethod.field).toBe("heartbeat");
  });

  it("keep-alive: a run awaiting a hung call is stalled, not dead", async () => {
    const clock = new VirtualClock();
    const stateDir = freshDir();
    const run = supervised({ stateDir, sessionId: "wait", clock, minIntervalMs: 0, pollMs: 1_000 });
    await run.beat({ stage: "tool_call", stepIdx: 4 });
    for (let i = 0; i < 120; i++) await second(clock); // two minutes without a step
    const file = heartbeatFile(stateDir, "wait");
    const beat = JSON.parse(readFileSync(file, "utf8")) as Heartbeat;
    expect(clock.now() - beat.at).toBeLessThanOrEqual(11_000);
    expect(beat.stepIdx).toBe(4);
    const limits = { ...DEFAULT_LIMITS, graceMs: 0 };
    expect(evaluate(beat, undefined, clock.now(), limits).verdict).toBe("stalled");
    await run.close();

    const silent = supervised({
      stateDir,
      sessionId: "nokeep",
      clock,
      minIntervalMs: 0,
      pollMs: 1_000,
      keepAliveMs: 0,
    });
    await silent.beat({ stage: "tool_call", stepIdx: 4 });
    for (let i = 0; i < 40; i++) await second(clock);
    const still = JSON.parse(readFileSync(heartbeatFile(stateDir, "nokeep"), "utf8")) as Heartbeat;
    expect(evaluate(still, undefined, clock.now(), limits).verdict).toBe("session_dead");
    await silent.close();
  });
});

describe("the default summariser", () => {
  it("keeps short outputs, cuts long ones to head and tail, says how much went", () => {
    const long = "a".repeat(500) + "MIDDLE" + "z".repeat(500);
    const [short, cut] = headAndTail(["short output", long], { maxChars: 100, keep: 20 });
    expect(short).toBe("short output");
    expect(cut).toBe(
      `${"a".repeat(20)}\n[... ${long.length - 40} characters cut by selfheal's context reset ...]\n${"z".repeat(20)}`,
    );
    expect(headAndTail([long], { maxChars: 100, keep: 20 })).toEqual([cut]); // deterministic
  });
});
