import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createSelfHealing, isSelfHealConfigError } from "../../src/index.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { CallRecord } from "../../src/health/store.js";
import { redisStore } from "../../src/redis/index.js";
import { METRIC_STORE_DEGRADED } from "../../src/telemetry/conventions.js";
import { VirtualClock } from "../../src/testing/index.js";
import { recordingMeters } from "../helpers/otel.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("Redis signal store");

/** Calls of a few tools over 10 virtual minutes, some failing, some slow, some empty. */
function calls(agent: string, count: number, start: number): [CallRecord, number][] {
  return Array.from({ length: count }, (_, i) => [
    {
      agent,
      tool: ["search", "pay:card", "ask {llm}"][i % 3] ?? "search",
      outcome: i % 7 === 0 ? "error" : i % 11 === 0 ? "recovered" : "success",
      durationMs: 20 + ((i * 37) % 900),
      ...(i % 3 === 2 && { empty: i % 5 === 0 }),
      ...(i % 11 === 0 && { failedAttempts: 2 }),
    },
    start + i * 1_000,
  ]);
}

describe.skipIf(!available)("redisStore on a real redis-server", () => {
  const suite = redisForSuite();

  it("reads back what a single process computes in memory, in one round trip", async () => {
    const memory = new MemorySignalStore();
    const store = redisStore({ url: suite.redis.url, prefix: "t1" });
    const start = Date.UTC(2026, 0, 1);
    for (const [record, at] of calls("agent-a", 500, start)) {
      memory.recordCall(record, at);
      store.recordCall(record, at);
    }
    store.recordTask({ agent: "agent-a", outcome: "completed" }, start + 400_000);
    memory.recordTask({ agent: "agent-a", outcome: "completed" }, start + 400_000);
    const now = start + 500_000;
    const fromRedis = await store.read("agent-a", now);
    expect(fromRedis).toEqual(memory.read("agent-a", now));
    expect(store.isDegraded).toBe(false);
    await store.close();
  });

  it("a tool whose calls left the window keeps its LLM ring, as in memory", async () => {
    const memory = new MemorySignalStore();
    const store = redisStore({ url: suite.redis.url, prefix: "t4" });
    const t0 = Date.UTC(2026, 0, 1);
    const old: CallRecord = {
      agent: "x",
      tool: "old",
      outcome: "success",
      durationMs: 5,
      empty: true,
    };
    const recent: CallRecord = { agent: "x", tool: "new", outcome: "success", durationMs: 5 };
    for (const s of [memory, store]) {
      s.recordCall(old, t0);
      s.recordCall(recent, t0 + 11 * 60_000);
    }
    const now = t0 + 11 * 60_000;
    expect(await store.read("x", now)).toEqual(memory.read("x", now));
    await store.close();
  });

  it("names with :, {, } and spaces stay inside the agent's own keys", async () => {
    const store = redisStore({ url: suite.redis.url, prefix: "t2" });
    const now = Date.UTC(2026, 0, 1);
    store.recordCall({ agent: "a:b {c}", tool: "x}:y z", outcome: "success", durationMs: 5 }, now);
    store.recordCall({ agent: "plain", tool: "t", outcome: "success", durationMs: 5 }, now);
    await store.flush();
    const keys = (await suite.admin.keys("t2:*")).sort();
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      // Buckets (`c:<epoch>`), rings (`llm`) and batch ids (`b:<worker>.<sequence>`); the
      // fleet's own state under its tag.
      expect(key).toMatch(
        /^t2:(agents|\{fleet\}:[a-z:]+|\{(a%3Ab%20%7Bc%7D|plain)\}:([a-z]+(:\d+)?|b:[0-9a-f]{16}\.[0-9a-z]+))$/,
      );
    }
    const read = await store.read("a:b {c}", now);
    expect([...read.tools.keys()]).toEqual(["x}:y z"]);
    await store.close();
  });

  it("refuses a prefix that could reshape keys, and needs a client or a URL", () => {
    for (const prefix of ["a:b", "a{b}", "a b", "", "x\n"]) {
      expect(() => redisStore({ url: suite.redis.url, prefix })).toThrow(/redisStore\.prefix/);
    }
    const missing = (() => {
      try {
        redisStore({});
      } catch (error) {
        return error;
      }
    })();
    expect(isSelfHealConfigError(missing)).toBe(true);
  });

  it("Redis killed mid-run: no call fails, status goes on from memory, sharing resumes", async () => {
    const clock = new VirtualClock();
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m) };
    const store = redisStore({
      url: suite.redis.url,
      prefix: "t3",
      flushMs: 20,
      commandTimeoutMs: 200,
      logger,
    });
    const sh = createSelfHealing({
      agent: "fleet",
      clock,
      store,
      logger: { warn: (m) => warnings.push(m) },
    });
    const states: boolean[] = [];
    sh.on("store-degraded", (e) => states.push(e.degraded));
    const search = sh.tool("search", { readOnly: true }, () => "ok");
    for (let i = 0; i < 20; i++) await search(undefined);
    await store.flush();

    await suite.redis.kill();
    for (let i = 0; i < 30; i++) {
      await expect(search(undefined)).resolves.toBe("ok");
      await clock.advance(6_000); // past the status cache: every status is a fresh read
      const status = await sh.status();
      expect(status.status).toBe("healthy");
    }
    expect(states).toEqual([true]);
    expect(store.isDegraded).toBe(true);

    await suite.redis.restart();
    await waitFor(() => !store.isDegraded);
    expect(states).toEqual([true, false]);
    // Another worker reads the fleet from Redis. The restarted server is empty (no persistence:
    // the 20 calls sent before the crash died with it); the 30 made while it was down were kept
    // and sent when it came back.
    const other = redisStore({ url: suite.redis.url, prefix: "t3" });
    const shared = await other.read("fleet", clock.now());
    expect(shared.tools.get("search")?.calls.ok).toBe(30);
    // Told once, not once per failed command; and told when it is back.
    expect(warnings.filter((w) => w.includes("Redis unavailable"))).toHaveLength(1);
    expect(warnings.filter((w) => w.includes("Redis is back"))).toHaveLength(1);
    await other.close();
    await sh.close();
    await store.close();
  }, 60_000);

  it("sends at flushRecords without waiting for flushMs: one round trip a batch, never one a call", async () => {
    // The program's own client, so the test sees every write on its socket (a round trip each).
    const client = new Redis(suite.redis.url);
    await waitFor(() => client.status === "ready");
    let roundTrips = 0;
    const socket = client.stream;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    socket.write = (...args: unknown[]) => {
      roundTrips++;
      return write(...args);
    };
    const store = redisStore({ client, prefix: "t5", flushMs: 60_000, flushRecords: 10 });
    const at = Date.UTC(2026, 0, 1);
    const call: CallRecord = { agent: "a", tool: "search", outcome: "success", durationMs: 5 };
    const inRedis = async () =>
      Number(await suite.admin.hget(`t5:{a}:c:${Math.floor(at / 10_000)}`, "search|ok"));

    for (let i = 0; i < 9; i++) store.recordCall(call, at);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(roundTrips).toBe(0); // 9 < flushRecords, and flushMs is a minute away
    expect(await inRedis()).toBe(0);

    store.recordCall(call, at); // the 10th
    await waitFor(async () => (await inRedis()) === 10);
    expect(roundTrips).toBe(1);

    // 95 recorded at once: the batch started at the 10th takes every one of them.
    for (let i = 0; i < 95; i++) store.recordCall(call, at);
    await waitFor(async () => (await inRedis()) === 105);
    expect(roundTrips).toBe(2);
    expect(store.stats).toEqual({ batches: 2, resends: 0, duplicates: 0 });
    await store.close();
    expect(client.status).toBe("ready"); // the program's client stays open
    client.disconnect();
  });

  it("flush() waits for the flush already on the wire; close() sends what is left, once", async () => {
    const store = redisStore({
      url: suite.redis.url,
      prefix: "t9",
      flushMs: 60_000,
      flushRecords: 10,
    });
    await waitFor(() => store.connection.status === "ready");
    const at = Date.UTC(2026, 0, 1);
    const call: CallRecord = { agent: "a", tool: "search", outcome: "success", durationMs: 5 };
    const inRedis = async () =>
      Number(await suite.admin.hget(`t9:{a}:c:${Math.floor(at / 10_000)}`, "search|ok"));
    for (let i = 0; i < 10; i++) store.recordCall(call, at); // the 10th starts a flush
    expect(store.backlog).toEqual({ records: 10, batches: 0 });
    await store.flush(); // nothing left to send: it waits for that one
    expect(store.backlog).toEqual({ records: 0, batches: 0 });
    expect(store.stats.batches).toBe(1);
    expect(await inRedis()).toBe(10);
    for (let i = 0; i < 3; i++) store.recordCall(call, at);
    await store.close();
    await store.close();
    expect(store.stats.batches).toBe(2);
    expect(await inRedis()).toBe(13);
  });

  it("the selfheal_store_degraded gauge reads 1 while Redis is away and 0 once it is back", async () => {
    const meters = recordingMeters();
    const store = redisStore({
      url: suite.redis.url,
      prefix: "t6",
      flushMs: 20,
      commandTimeoutMs: 200,
    });
    const quiet = { warn: () => undefined };
    const sh = createSelfHealing({
      agent: "gauge",
      store,
      meterProvider: meters.meterProvider,
      logger: quiet,
    });
    const search = sh.tool("search", { readOnly: true }, () => "ok");
    const gauge = async () => (await meters.read()).get(`${METRIC_STORE_DEGRADED}{agent=gauge}`);
    await search(undefined);
    await store.flush();
    expect(await gauge()).toBe(0);

    await suite.redis.kill();
    await search(undefined);
    await store.flush();
    expect(store.isDegraded).toBe(true);
    expect(await gauge()).toBe(1);

    await suite.redis.restart();
    await waitFor(() => !store.isDegraded);
    expect(await gauge()).toBe(0);
    await sh.close();
    await store.close();
    await meters.shutdown();
  }, 60_000);

  it("a call made while Redis is hung (SIGSTOP) does not wait: the last report now, the new one in the background", async () => {
    const clock = new VirtualClock();
    // A command timeout of 30 s: a call that waited on Redis would take that long. The pass mark
    // is a third of it, far from both that and the milliseconds a call takes (issue 27).
    const commandTimeoutMs = 30_000;
    const store = redisStore({ url: suite.redis.url, prefix: "t7", commandTimeoutMs });
    const sh = createSelfHealing({
      agent: "hung",
      clock,
      store,
      logger: { warn: () => undefined },
    });
    const search = sh.tool("search", { readOnly: true }, () => "ok");
    await search(undefined); // the first report, read from Redis
    await store.flush();
    const pid = suite.redis.pid;
    if (pid === undefined) throw new Error("no redis-server");
    process.kill(pid, "SIGSTOP");
    const waits: number[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        await clock.advance(6_000); // past the 5 s status cache: every call needs a new report
        const started = performance.now();
        await expect(search(undefined)).resolves.toBe("ok");
        await expect(sh.status()).resolves.toMatchObject({ status: "healthy" });
        waits.push(performance.now() - started);
      }
    } finally {
      process.kill(pid, "SIGCONT");
    }
    expect(Math.max(...waits)).toBeLessThan(commandTimeoutMs / 3);
    // Redis answers again: what was recorded meanwhile is counted once.
    await waitFor(async () => {
      await store.flush();
      return store.backlog.records === 0 && !store.isDegraded;
    });
    const reader = redisStore({ url: suite.redis.url, prefix: "t7" });
    expect((await reader.read("hung", clock.now())).tools.get("search")?.calls.ok).toBe(6);
    await reader.close();
    await sh.close();
    await store.close();
  }, 120_000);

  it("a batch whose answer came too late is sent again with its id: Redis applies it once", async () => {
    const client = new Redis(suite.redis.url);
    await waitFor(() => client.status === "ready");
    const store = redisStore({ client, prefix: "t8", flushMs: 60_000, commandTimeoutMs: 200 });
    const at = Date.UTC(2026, 0, 1);
    const call: CallRecord = { agent: "a", tool: "search", outcome: "success", durationMs: 5 };
    for (let i = 0; i < 7; i++) store.recordCall(call, at);
    const pid = suite.redis.pid;
    if (pid === undefined) throw new Error("no redis-server");
    process.kill(pid, "SIGSTOP");
    try {
      await store.flush(); // on the wire; no answer within 200 ms
      expect(store.isDegraded).toBe(true);
      expect(store.backlog).toEqual({ records: 7, batches: 1 });
      for (let i = 0; i < 3; i++) store.recordCall(call, at); // newer: never merged into it
      await store.flush(); // the same batch again (Redis away: the newer records wait)
      await store.flush();
      expect(store.backlog).toEqual({ records: 10, batches: 1 });
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await waitFor(async () => {
      await store.flush();
      return store.backlog.records === 0;
    });
    // Three copies of the first batch reached Redis: one applied, the others found its id.
    const stats = store.stats;
    expect(stats.batches).toBe(2);
    expect(stats.resends).toBeGreaterThanOrEqual(2);
    expect(stats.duplicates).toBeGreaterThanOrEqual(1);
    expect(await suite.admin.hget(`t8:{a}:c:${Math.floor(at / 10_000)}`, "search|ok")).toBe("10");
    // Each batch id is kept under the agent's tag, for twice the call window.
    const ids = await suite.admin.keys("t8:{a}:b:*");
    expect(ids).toHaveLength(2);
    for (const id of ids) {
      const ttl = await suite.admin.pttl(id);
      expect(ttl).toBeGreaterThan(19 * 60_000);
      expect(ttl).toBeLessThanOrEqual(20 * 60_000);
    }
    await store.close();
    client.disconnect();
  }, 60_000);
});

/**
 * Polls `condition` until it holds. The limit only ends a test that would never pass: a busy
 * machine may take seconds for what takes milliseconds on an idle one (issue 27).
 */
async function waitFor(condition: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
