/**
 * RedisSignalStore, in the test process, against a real redis-server: the option checks, what
 * each record writes (fields, TTLs, the LLM ring's trim), the per-agent tool cap, what waits is
 * pruned by the callers' time, and how it degrades and comes back (events, log lines, the
 * records held back and sent on reconnect). Time is virtual where the store takes a clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { MAX_TOOLS_PER_AGENT, MemorySignalStore } from "../../src/health/memory-store.js";
import { DEFAULT_WINDOWS, type CallRecord, type StoreState } from "../../src/health/store.js";
import { redisStore } from "../../src/redis/index.js";
import { RedisSignalStore, type RedisStoreOptions } from "../../src/redis/store.js";
import { VirtualClock } from "../../src/testing/index.js";
import { freePort } from "../helpers/binaries.js";
import {
  haveRedis,
  redisForSuite,
  startRedis,
  type RunningRedis,
} from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const available = haveRedis("RedisSignalStore, direct");

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;

function recorder(): { warn(m: string): void; lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (m: string) => lines.push(m) };
}

function configError(make: () => unknown): SelfHealConfigError {
  try {
    make();
  } catch (error) {
    if (error instanceof SelfHealConfigError) return error;
    throw error;
  }
  throw new Error("no error thrown");
}

describe.skipIf(!available)("RedisSignalStore on a real redis-server", () => {
  const suite = redisForSuite();
  const open: RedisSignalStore[] = [];
  const servers: RunningRedis[] = [];

  const make = (options: RedisStoreOptions): RedisSignalStore => {
    const store = new RedisSignalStore({
      url: suite.redis.url,
      clock: new VirtualClock(),
      flushMs: 3_600_000,
      logger: recorder(),
      ...options,
    });
    open.push(store);
    return store;
  };

  afterEach(async () => {
    for (const server of servers) {
      if (server.pid !== undefined) process.kill(server.pid, "SIGCONT");
    }
    await Promise.all(open.splice(0).map((s) => s.close()));
    for (const server of servers.splice(0)) await server.stop();
  });

  describe("options", () => {
    it("each bad number names its option in a SelfHealConfigError", () => {
      const fields = ["flushMs", "flushRecords", "commandTimeoutMs", "logIntervalMs"] as const;
      for (const field of fields) {
        for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "5" as unknown as number]) {
          const error = configError(() => redisStore({ url: suite.redis.url, [field]: bad }));
          expect(error.field).toBe(`redisStore.${field}`);
          expect(error.message).toContain(`expected a positive number, got ${String(bad)}`);
        }
      }
    });

    it("small positive numbers are taken", async () => {
      const store = make({ flushMs: 0.5, flushRecords: 1, commandTimeoutMs: 1, logIntervalMs: 1 });
      expect(store.isDegraded).toBe(false);
      await store.close();
    });

    it("needs exactly one of client and url, and says so", () => {
      for (const options of [{}, { url: suite.redis.url, client: suite.admin }]) {
        const error = configError(() => new RedisSignalStore(options));
        expect(error.field).toBe("redisStore");
        expect(error.message).toContain("pass either `client` (an ioredis client) or `url`");
      }
    });

    it("flushRecords sends a batch as soon as that many records wait", async () => {
      const store = make({ prefix: "d-fr", flushRecords: 2 });
      const call: CallRecord = { agent: "a", tool: "t", outcome: "success", durationMs: 5 };
      store.recordCall(call, T0);
      expect(store.stats.batches).toBe(0);
      store.recordCall(call, T0);
      await waitFor(() => store.backlog.records === 0);
      expect(store.stats.batches).toBe(1);
      expect(await suite.admin.hget("d-fr:{a}:c:" + String(T0 / 10_000), "t|ok")).toBe("2");
    });

    it("by default 500 records wait for the timer", async () => {
      const store = make({ prefix: "d-def" });
      const call: CallRecord = { agent: "a", tool: "t", outcome: "success", durationMs: 5 };
      for (let i = 0; i < 499; i++) store.recordCall(call, T0);
      await store.read("other", T0); // a round trip: nothing else was on the wire
      expect(store.stats.batches).toBe(1);
      expect(store.backlog).toEqual({ records: 0, batches: 0 });
    });
  });

  describe("what a record writes", () => {
    it("counts, latency and task fields in buckets that expire with their window", async () => {
      const store = make({ prefix: "d-w" });
      const memory = new MemorySignalStore();
      const records: CallRecord[] = [
        { agent: "a", tool: "ok", outcome: "success", durationMs: 5 },
        { agent: "a", tool: "bad", outcome: "error", durationMs: 50_000 },
        { agent: "a", tool: "rec", outcome: "recovered", durationMs: 5, failedAttempts: 2 },
        // Nothing reached: nothing written, as in memory.
        { agent: "a", tool: "blocked", outcome: "blocked", durationMs: 0 },
      ];
      for (const r of records) {
        store.recordCall(r, T0);
        memory.recordCall(r, T0);
      }
      store.recordTask({ agent: "a", outcome: "completed" }, T0);
      store.recordTask({ agent: "a", outcome: "failed" }, T0);
      memory.recordTask({ agent: "a", outcome: "completed" }, T0);
      memory.recordTask({ agent: "a", outcome: "failed" }, T0);
      await store.flush();
      const calls = `d-w:{a}:c:${String(T0 / 10_000)}`;
      const tasks = `d-w:{a}:t:${String(T0 / MIN)}`;
      const fields = await suite.admin.hgetall(calls);
      expect(Object.keys(fields).sort()).toEqual(
        [
          "bad|f",
          `bad|h${String(
            Object.keys(fields)
              .find((f) => f.startsWith("bad|h"))
              ?.slice(5),
          )}`,
          "ok|ok",
          `ok|h${String(
            Object.keys(fields)
              .find((f) => f.startsWith("ok|h"))
              ?.slice(4),
          )}`,
          "rec|ok",
          "rec|f",
          `rec|h${String(
            Object.keys(fields)
              .find((f) => f.startsWith("rec|h"))
              ?.slice(5),
          )}`,
        ].sort(),
      );
      expect(fields["rec|f"]).toBe("2");
      expect(await suite.admin.hgetall(tasks)).toEqual({ ok: "1", f: "1" });
      const callTtl = await suite.admin.pttl(calls);
      expect(callTtl).toBeGreaterThan(10 * MIN);
      expect(callTtl).toBeLessThanOrEqual(10 * MIN + 10_000);
      const taskTtl = await suite.admin.pttl(tasks);
      expect(taskTtl).toBeGreaterThan(60 * MIN);
      expect(taskTtl).toBeLessThanOrEqual(61 * MIN);
      const read = await store.read("a", T0 + 1_000);
      expect(read).toEqual(memory.read("a", T0 + 1_000));
      expect(read.tools.has("blocked")).toBe(false);
      expect(read.agent.calls.latency.reduce((s, n) => s + n, 0)).toBe(3);
    });

    it("a call that reached nothing sends no batch", async () => {
      const store = make({ prefix: "d-none" });
      store.recordCall({ agent: "a", tool: "x", outcome: "blocked", durationMs: 0 }, T0);
      expect(store.backlog.records).toBe(0);
      await store.flush();
      expect(store.stats.batches).toBe(0);
      expect(await suite.admin.keys("d-none:*")).toEqual([]);
    });

    it("the LLM ring keeps what waits trimmed to the last 4 × N, and reads as memory", async () => {
      const windows = { llmSampleSize: 2 };
      const store = make({ prefix: "d-ring", windows });
      const memory = new MemorySignalStore({ ...DEFAULT_WINDOWS, ...windows });
      for (let i = 0; i < 6; i++) {
        const r: CallRecord = {
          agent: "a",
          tool: "llm",
          outcome: "success",
          durationMs: 5,
          empty: i % 2 === 1,
        };
        store.recordCall(r, T0);
        memory.recordCall(r, T0);
      }
      await store.flush();
      const ring = await suite.admin.hgetall("d-ring:{a}:llm");
      // Waiting, 6 records were trimmed to the last 2 × 2 at the fifth: 3 pushes reach Redis.
      expect(ring["a|n"]).toBe("3");
      expect(ring["t:llm|n"]).toBe("3");
      for (const [field, value] of Object.entries(ring)) {
        if (!field.endsWith("|n")) expect(["0", "1"]).toContain(value);
      }
      expect(await store.read("a", T0)).toEqual(memory.read("a", T0));
    });

    it("tools past the per-agent cap share one name, and a known tool keeps its own", async () => {
      const store = make({ prefix: "d-cap" });
      const memory = new MemorySignalStore();
      const names = [
        ...Array.from({ length: MAX_TOOLS_PER_AGENT + 2 }, (_, i) => `t${String(i)}`),
        "t0",
        `t${String(MAX_TOOLS_PER_AGENT - 1)}`,
      ];
      for (const tool of names) {
        const r: CallRecord = { agent: "a", tool, outcome: "success", durationMs: 5 };
        store.recordCall(r, T0);
        memory.recordCall(r, T0);
      }
      const read = await store.read("a", T0);
      expect(read.tools.size).toBe(MAX_TOOLS_PER_AGENT + 1);
      expect(read.tools.get("t0")?.calls.ok).toBe(2);
      expect(read).toEqual(memory.read("a", T0));
    });
  });

  describe("pruning by the callers' time", () => {
    it("buckets already out of every window never go out; the oldest still in does", async () => {
      const store = make({ prefix: "d-prune" });
      const call = (agent: string, at: number) => {
        store.recordCall({ agent, tool: "t", outcome: "success", durationMs: 5 }, at);
      };
      call("old", T0);
      call("new", T0 + 30 * MIN); // the latest time: the call window starts at T0 + 20 min
      call("edge", T0 + 20 * MIN); // the oldest call bucket still read
      call("gone", T0 + 20 * MIN - 1); // the bucket before it
      store.recordTask({ agent: "tasks", outcome: "completed" }, T0 - 30 * MIN); // oldest task
      store.recordTask({ agent: "tasks", outcome: "failed" }, T0 - 30 * MIN - 1);
      call("old", T0); // an older time later does not move the window back
      await store.flush();
      const keys = (await suite.admin.keys("d-prune:*")).sort();
      expect(keys.filter((k) => !k.includes("}:b:"))).toEqual(
        [
          "d-prune:agents",
          `d-prune:{edge}:c:${String((T0 + 20 * MIN) / 10_000)}`,
          `d-prune:{new}:c:${String((T0 + 30 * MIN) / 10_000)}`,
          `d-prune:{tasks}:t:${String((T0 - 30 * MIN) / MIN)}`,
        ].sort(),
      );
      expect((await suite.admin.smembers("d-prune:agents")).sort()).toEqual([
        "edge",
        "new",
        "tasks",
      ]);
      expect(
        await suite.admin.hgetall(`d-prune:{tasks}:t:${String((T0 - 30 * MIN) / MIN)}`),
      ).toEqual({ ok: "1" });
    });
  });

  describe("Redis away and back", () => {
    it("a server that is not there: reads come from memory, one warning, one event", async () => {
      const logger = recorder();
      const url = `redis://127.0.0.1:${String(await freePort())}`;
      const store = make({ url, prefix: "d-gone", logger });
      const states: StoreState[] = [];
      store.onStateChange((s) => states.push(s));
      const memory = new MemorySignalStore();
      const r: CallRecord = { agent: "a", tool: "t", outcome: "error", durationMs: 5 };
      store.recordCall(r, T0);
      memory.recordCall(r, T0);
      expect(await store.read("a", T0)).toEqual(memory.read("a", T0));
      expect(store.isDegraded).toBe(true);
      expect(states).toHaveLength(1);
      expect(states[0]?.degraded).toBe(true);
      expect(await store.read("a", T0)).toEqual(memory.read("a", T0));
      expect(states).toHaveLength(1);
      expect(logger.lines.filter((l) => l.includes("Redis unavailable"))).toHaveLength(1);
      expect(logger.lines.some((l) => l.includes("Redis is back"))).toBe(false);
      await store.close();
      expect(logger.lines.at(-1)).toBe("selfheal: closing with 1 records Redis did not confirm");
    });

    it("killed and restarted: told once each way, held records sent on reconnect", async () => {
      const server = await startRedis();
      servers.push(server);
      const logger = recorder();
      const store = make({ url: server.url, prefix: "d-kill", logger });
      const states: boolean[] = [];
      store.onStateChange((s) => states.push(s.degraded));
      const unsubscribed: boolean[] = [];
      const off = store.onStateChange((s) => unsubscribed.push(s.degraded));
      off();
      const call: CallRecord = { agent: "a", tool: "t", outcome: "success", durationMs: 5 };
      store.recordCall(call, T0);
      await store.flush();
      expect(store.stats.batches).toBe(1);

      await server.kill();
      // The client's own error event tells it, with nothing asked of the store.
      await waitFor(() => logger.lines.some((l) => l.includes("Redis unavailable")));
      store.recordCall(call, T0);
      store.recordCall(call, T0);
      await store.flush();
      expect(store.isDegraded).toBe(true);
      expect(store.backlog).toEqual({ records: 2, batches: 0 });
      expect((await store.read("a", T0)).agent.calls.ok).toBe(3);
      expect(logger.lines.some((l) => l.includes("Redis is back"))).toBe(false);

      await server.restart();
      // Nobody flushes: the client's ready event sends what waited.
      await waitFor(() => !store.isDegraded && store.backlog.records === 0);
      expect(states).toEqual([true, false]);
      expect(unsubscribed).toEqual([]);
      expect(logger.lines.filter((l) => l.includes("Redis is back"))).toHaveLength(1);
      expect(logger.lines.filter((l) => l.includes("Redis unavailable"))).toHaveLength(1);
      // The restarted server is empty: what it holds is the two records made while it was down.
      expect((await store.read("a", T0)).agent.calls.ok).toBe(2);
      await store.close();
      expect(logger.lines.some((l) => l.includes("closing with"))).toBe(false);
    });
  });
});
