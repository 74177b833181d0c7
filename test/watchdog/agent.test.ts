import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isSelfHealConfigError } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  headAndTail,
  sendToInbox,
  snapshotFile,
  SnapshotError,
  supervised,
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
    await run.close();
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
