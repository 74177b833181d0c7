import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { heartbeatFile, HeartbeatWatcher, readHeartbeat } from "../../src/watchdog/index.js";
import { builtJs } from "../helpers/built-js.js";

/**
 * Heartbeats the writer makes. Each is a write, an fsync and a rename: about 0.1 ms of CPU on an
 * idle machine, but 10 ms of waiting on a busy one (10,000 took 98 s there, issue 27). A torn
 * read of a non-atomic write shows within a few hundred overlapping reads; the test asks for
 * more than 100 reads while the writer runs.
 */
const WRITES = 2_000;
const dir = mkdtempSync(join(tmpdir(), "selfheal-race-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("a heartbeat written by one process, read by another", () => {
  it(`${WRITES} atomic writes against a reader reading all the while: never a torn read, never a phantom verdict`, async () => {
    const file = heartbeatFile(dir, "race");
    const writer = spawn(
      process.execPath,
      [builtJs("test/fixtures/heartbeat-writer.ts"), dir, "race", String(WRITES)],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    writer.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => writer.once("exit", resolve));
    const state = { running: true };
    void exited.then(() => (state.running = false));

    // The watch starts once the run has written its first heartbeat (as a supervisor's does,
    // after the start-up grace); from then on every read must be a whole heartbeat.
    while (state.running && !(await readHeartbeat(file, Date.now())).ok) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const watcher = new HeartbeatWatcher(file);
    const problems = new Map<string, number>();
    const verdicts = new Map<string, number>();
    let reads = 0;
    let lastStep = 0;
    let backwards = 0;
    while (state.running) {
      const now = Date.now();
      const read = await readHeartbeat(file, now);
      reads++;
      if (!read.ok) problems.set(read.problem, (problems.get(read.problem) ?? 0) + 1);
      else {
        if (read.heartbeat.stepIdx < lastStep) backwards++;
        lastStep = read.heartbeat.stepIdx;
      }
      const seen = await watcher.look(now);
      verdicts.set(seen.verdict, (verdicts.get(seen.verdict) ?? 0) + 1);
    }
    expect(await exited).toBe(0);
    expect(stderr).toBe("");
    expect(Object.fromEntries(problems)).toEqual({});
    expect(backwards).toBe(0);
    expect(reads).toBeGreaterThan(100);
    expect([...verdicts.keys()]).toEqual(["healthy"]);
    const final = await readHeartbeat(file, Date.now());
    expect(final.ok && final.heartbeat.stepIdx).toBe(WRITES);
    // No temporary file is left behind.
    expect(readdirSync(dir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  }, 300_000);
});
