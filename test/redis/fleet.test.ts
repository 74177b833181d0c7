import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { HealthEvaluator, type HealthReport } from "../../src/health/evaluator.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { failedAttempts, type SignalStore } from "../../src/health/store.js";
import { DEFAULT_THRESHOLDS } from "../../src/health/thresholds.js";
import { histogramQuantile, latencyBucket, latencyBucketValue } from "../../src/health/window.js";
import { redisStore } from "../../src/redis/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import {
  barrierKey,
  CALLS_PER_WORKER,
  FLEET_AGENT,
  FLEET_SPAN_MS,
  FLEET_START,
  LLM_TOOL,
  TASKS_PER_WORKER,
  workerRecords,
  type WorkerOutput,
} from "../fixtures/redis-worker.js";
import { builtJs } from "../helpers/built-js.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("Redis fleet of worker processes");

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** test/fixtures/redis-worker.ts as built JS on dist/ (no tsx at run time). */
const WORKER = builtJs("test/fixtures/redis-worker.ts");
const WORKERS = 3;
const SEED = 20260101;
const PREFIX = "fleet-test";
/** Read time: just after the last record, so every record is inside the 10 min call window. */
const NOW = FLEET_START + FLEET_SPAN_MS;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * One worker as its own Node.js process, killed (and failed) if it hangs: after a minute, far past
 * the seconds it takes even on a busy machine (it runs on virtual time; only its start is real).
 */
function runWorker(url: string, index: number): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [WORKER, url, PREFIX, String(index), String(SEED), String(WORKERS)],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A status evaluated once at NOW with the default thresholds (no cache, no learned baseline). */
function evaluate(store: SignalStore): Promise<HealthReport> | HealthReport {
  return new HealthEvaluator({
    agent: FLEET_AGENT,
    store,
    clock: new VirtualClock(NOW),
    cacheMs: 0,
    baselineTauMs: 60 * 60_000,
    thresholds: () => DEFAULT_THRESHOLDS,
    onChange: () => undefined,
    onStoreError: (error) => {
      throw error;
    },
  }).current(NOW);
}

const reading = (report: { signals: HealthReport["signals"] }, signal: string) =>
  report.signals.find((s) => s.signal === signal)?.value;

describe.skipIf(!available)("three worker processes sharing one redis-server", () => {
  const suite = redisForSuite();

  it("see one fleet's health: what one process computes from all their calls", async () => {
    const exits = await Promise.all(
      Array.from({ length: WORKERS }, (_, i) => runWorker(suite.redis.url, i)),
    );

    // Three processes, each exited 0 on its own, each through its own connection.
    const outputs = exits.map((exit, i) => {
      expect(exit, `worker ${i}: ${exit.stderr}`).toMatchObject({ code: 0, signal: null });
      expect(exit.stderr).toBe("");
      return JSON.parse(exit.stdout) as WorkerOutput;
    });
    expect(outputs.map((o) => o.index)).toEqual([0, 1, 2]);
    expect(new Set(outputs.map((o) => o.pid)).size).toBe(WORKERS);
    expect(outputs.map((o) => o.pid)).not.toContain(process.pid);
    expect(new Set(outputs.map((o) => o.clientId)).size).toBe(WORKERS);
    expect(Number(await suite.admin.get(barrierKey(PREFIX)))).toBe(WORKERS);
    for (const output of outputs) {
      expect(output.warnings).toEqual([]);
      // What each worker says it recorded is its deterministic list, and the lists differ.
      expect({ calls: output.calls, tasks: output.tasks }).toEqual(
        workerRecords(output.index, SEED),
      );
      expect(output.calls).toHaveLength(CALLS_PER_WORKER);
      expect(output.tasks).toHaveLength(TASKS_PER_WORKER);
    }
    expect(outputs[0]?.calls).not.toEqual(outputs[1]?.calls);

    const calls = outputs.flatMap((o) => o.calls);
    const tasks = outputs.flatMap((o) => o.tasks);
    const signalling = calls.filter(({ record }) => record.outcome !== "blocked");

    // The keys are in Redis under the prefix: a bucket hash for each 10 s bucket that got a call
    // or (1 min buckets) a task, the LLM rings, and the agent in the set of agents.
    const keys = await suite.admin.keys(`${PREFIX}:*`);
    const epochs = (kind: "c" | "t") =>
      keys
        .filter((k) => k.startsWith(`${PREFIX}:{${FLEET_AGENT}}:${kind}:`))
        .map((k) => Number(k.slice(k.lastIndexOf(":") + 1)))
        .sort((a, b) => a - b);
    const expected = (ats: number[], bucketMs: number) =>
      [...new Set(ats.map((at) => Math.floor(at / bucketMs)))].sort((a, b) => a - b);
    expect(epochs("c")).toEqual(
      expected(
        signalling.map((c) => c.at),
        10_000,
      ),
    );
    expect(epochs("t")).toEqual(
      expected(
        tasks.map((t) => t.at),
        60_000,
      ),
    );
    expect(keys).toContain(`${PREFIX}:{${FLEET_AGENT}}:llm`);
    expect(await suite.admin.smembers(`${PREFIX}:agents`)).toEqual([FLEET_AGENT]);

    // One process replays every worker's records into memory...
    const memory = new MemorySignalStore();
    for (const { record, at } of calls) memory.recordCall(record, at);
    for (const { record, at } of tasks) memory.recordTask(record, at);
    // ...and a fourth connection reads the fleet from Redis: the same signals, whole.
    const reader = redisStore({ url: suite.redis.url, prefix: PREFIX, commandTimeoutMs: 5_000 });
    try {
      const fromRedis = await reader.read(FLEET_AGENT, NOW);
      expect(reader.isDegraded).toBe(false);
      const fromMemory = memory.read(FLEET_AGENT, NOW);
      expect(fromRedis).toEqual(fromMemory);
      expect([...fromRedis.tools.keys()].sort()).toEqual(
        ["db:query", "fetch page", LLM_TOOL, "pay {card}", "search"].sort(),
      );

      // The fleet's numbers, from the raw records (no store): every worker's calls count.
      const ok = signalling.filter(
        ({ record }) => record.outcome === "success" || record.outcome === "recovered",
      ).length;
      const failed = signalling.reduce((n, { record }) => n + failedAttempts(record), 0);
      expect(fromRedis.agent.calls).toMatchObject({ ok, failed });
      const durations = signalling.map((c) => c.record.durationMs).sort((a, b) => a - b);
      const nearestRank = durations[Math.max(1, Math.ceil(0.95 * durations.length)) - 1] ?? NaN;
      const p95 = latencyBucketValue(latencyBucket(nearestRank));
      expect(histogramQuantile(fromRedis.agent.calls.latency, 0.95)).toBe(p95);
      const llm = signalling.filter((c) => c.record.empty !== undefined);
      expect(fromRedis.agent.llm).toEqual({
        total: llm.length,
        empty: llm.filter((c) => c.record.empty).length,
      });
      expect(fromRedis.agent.tasks).toEqual({
        completed: tasks.filter((t) => t.record.outcome === "completed").length,
        failed: tasks.filter((t) => t.record.outcome === "failed").length,
      });

      // The health computed from either read is the same report, with the same numbers.
      const fleetHealth = await evaluate(reader);
      const oneProcess = await evaluate(memory);
      expect(fleetHealth).toEqual(oneProcess);
      expect(reading(fleetHealth, "success_rate")).toBe(ok / (ok + failed));
      expect(reading(fleetHealth, "latency_p95")).toBe(p95);
      // Worker 1's failing payments show in the fleet's view of that tool.
      const pay = fleetHealth.tools["pay {card}"];
      expect(pay?.status).not.toBe("healthy");
      expect(pay?.status).toBe(oneProcess.tools["pay {card}"]?.status);

      // And it is the fleet, not one worker: no single worker's calls give these numbers.
      for (const output of outputs) {
        const own = new MemorySignalStore();
        for (const { record, at } of output.calls) own.recordCall(record, at);
        const alone = own.read(FLEET_AGENT, NOW).agent.calls;
        expect(alone.ok + alone.failed).toBeLessThan(ok + failed);
      }
      const withoutSlowWorker = new MemorySignalStore();
      for (const { record, at } of [...(outputs[0]?.calls ?? []), ...(outputs[1]?.calls ?? [])])
        withoutSlowWorker.recordCall(record, at);
      const fastP95 = histogramQuantile(
        withoutSlowWorker.read(FLEET_AGENT, NOW).agent.calls.latency,
        0.95,
      );
      expect(p95).toBeGreaterThan(fastP95 ?? Infinity);
    } finally {
      await reader.close();
    }
  }, 90_000);
});
