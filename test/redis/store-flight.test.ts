/**
 * RedisSignalStore's batches on the wire, in the test process against a real redis-server: a
 * server stopped (SIGSTOP) so a round trip times out on the store's own (virtual) clock, its late
 * answer, the resend with the same id (applied once), parts that fail, the resend window, the
 * timer, the log throttle, and close(). The client is the test's own, with no command timeout of
 * its own, so only the store's virtual timers decide when Redis "did not answer".
 */
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import type { CallRecord, StoreState } from "../../src/health/store.js";
import { LATENCY_BUCKET_COUNT } from "../../src/health/window.js";
import { RedisSignalStore, type RedisStoreOptions } from "../../src/redis/store.js";
import { VirtualClock } from "../../src/testing/index.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const available = haveRedis("RedisSignalStore, batches on the wire");

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;
const TIMEOUT = 500;
const BUCKET = String(T0 / 10_000);
const call = (agent = "a"): CallRecord => ({ agent, tool: "t", outcome: "success", durationMs: 5 });

describe.skipIf(!available)("RedisSignalStore batches on a real redis-server", () => {
  const suite = redisForSuite();
  const clients: Redis[] = [];
  const stores: RedisSignalStore[] = [];
  let stopped = false;

  const stop = () => {
    process.kill(suite.redis.pid ?? 0, "SIGSTOP");
    stopped = true;
  };
  const resume = () => {
    if (stopped) process.kill(suite.redis.pid ?? 0, "SIGCONT");
    stopped = false;
  };

  /** A store on its own client and a virtual clock, with its events and log lines kept. */
  const make = async (prefix: string, options: Partial<RedisStoreOptions> = {}) => {
    const client = new Redis(suite.redis.url);
    clients.push(client);
    await client.ping();
    const clock = new VirtualClock(T0);
    const lines: string[] = [];
    const states: StoreState[] = [];
    const store = new RedisSignalStore({
      client,
      prefix,
      clock,
      flushMs: 3_600_000,
      logger: { warn: (m) => lines.push(m) },
      ...options,
    });
    stores.push(store);
    store.onStateChange((s) => states.push(s));
    return { store, client, clock, lines, states };
  };

  /** A flush that goes on the wire while the server is stopped, and times out. */
  const hungFlush = async (store: RedisSignalStore, clock: VirtualClock) => {
    const sent = store.stats.batches + store.stats.resends;
    const flushing = store.flush();
    await waitFor(() => store.stats.batches + store.stats.resends > sent);
    await clock.advance(TIMEOUT);
    await flushing;
  };

  afterEach(async () => {
    resume();
    await Promise.all(stores.splice(0).map((s) => s.close()));
    for (const client of clients.splice(0)) client.disconnect();
  });

  it("a round trip that times out degrades the store; its late answer still confirms the batch", async () => {
    const { store, clock, lines, states } = await make("f-late");
    store.recordCall(call(), T0);
    stop();
    await hungFlush(store, clock);
    expect(store.isDegraded).toBe(true);
    expect(states).toEqual([
      { degraded: true, reason: `Redis did not answer within ${String(TIMEOUT)} ms` },
    ]);
    expect(lines).toEqual([
      `selfheal: Redis unavailable, using local memory until it is back: Redis did not answer within ${String(TIMEOUT)} ms`,
    ]);
    expect(store.backlog).toEqual({ records: 1, batches: 1 });

    resume();
    await waitFor(() => store.backlog.batches === 0);
    expect(store.backlog).toEqual({ records: 0, batches: 0 });
    expect(store.stats).toEqual({ batches: 1, resends: 0, duplicates: 0 });
    expect(await suite.admin.hget(`f-late:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
  });

  it("degraded with nothing left to send, a read's probe finds Redis back", async () => {
    const { store, clock, lines, states } = await make("f-probe");
    store.recordCall(call(), T0);
    stop();
    await hungFlush(store, clock);
    resume();
    await waitFor(() => store.backlog.batches === 0);
    expect(store.isDegraded).toBe(true);

    // The read answers from memory at once; the probe it starts says Redis is back.
    expect((await store.read("a", T0)).agent.calls.ok).toBe(1);
    await waitFor(() => !store.isDegraded);
    expect(states.map((s) => s.degraded)).toEqual([true, false]);
    expect(lines.at(-1)).toBe("selfheal: Redis is back; signals are shared again");
    // Read from Redis now: a record of another worker is seen.
    await suite.admin.hincrby(`f-probe:{a}:c:${BUCKET}`, "t|ok", 4);
    expect((await store.read("a", T0)).agent.calls.ok).toBe(5);
  });

  it("degraded with nothing to send while Redis is still hung: the probe times out too", async () => {
    const { store, clock, states } = await make("f-still");
    stop();
    const reading = store.read("a", T0);
    await waitFor(() => clock.pendingTimers > 1); // the read's timeout, beside the flush timer
    await clock.advance(TIMEOUT);
    await reading;
    expect(store.isDegraded).toBe(true);
    expect(store.backlog).toEqual({ records: 0, batches: 0 });
    // Degraded: the next read's probe is a PING, still unanswered.
    await store.read("a", T0);
    await waitFor(() => clock.pendingTimers > 1);
    await clock.advance(TIMEOUT);
    expect(states.map((s) => s.degraded)).toEqual([true]);
    resume();
    await store.flush();
    expect(states.map((s) => s.degraded)).toEqual([true, false]);
  });

  it("flushRecords while a batch is on the wire: one batch at a time, the next right after", async () => {
    const { store } = await make("f-chain", { flushRecords: 2 });
    stop();
    store.recordCall(call(), T0);
    store.recordCall(call(), T0);
    await waitFor(() => store.stats.batches === 1);
    store.recordCall(call(), T0);
    store.recordCall(call(), T0);
    store.recordCall(call(), T0);
    await new Promise((resolve) => setImmediate(resolve)); // a second flush would be out by now
    expect(store.stats.batches).toBe(1);
    resume();
    await waitFor(() => store.stats.batches === 2 && store.backlog.batches === 0);
    expect(store.backlog).toEqual({ records: 0, batches: 0 });
    expect(await suite.admin.hget(`f-chain:{a}:c:${BUCKET}`, "t|ok")).toBe("5");
  });

  it("a batch resent after a timeout is applied once: the second answer says it had landed", async () => {
    const { store, clock } = await make("f-dup");
    store.recordCall(call(), T0);
    store.recordCall(call(), T0);
    stop();
    await hungFlush(store, clock);
    expect(store.stats).toEqual({ batches: 1, resends: 0, duplicates: 0 });
    // Still stopped: the next flush sends the same batch again (same id, same contents).
    await hungFlush(store, clock);
    expect(store.stats).toEqual({ batches: 1, resends: 1, duplicates: 0 });
    expect(store.backlog).toEqual({ records: 2, batches: 1 });

    resume();
    await waitFor(() => store.stats.duplicates === 1);
    expect(store.backlog).toEqual({ records: 0, batches: 0 });
    expect(await suite.admin.hget(`f-dup:{a}:c:${BUCKET}`, "t|ok")).toBe("2");
  });

  it("a batch on the wire is not sent again by a round trip that overlaps it", async () => {
    const { store, clock } = await make("f-busy");
    store.recordCall(call(), T0);
    stop();
    const flushing = store.flush();
    await waitFor(() => store.stats.batches === 1);
    // A read while the batch waits for its answer: the read goes alone.
    const reading = store.read("a", T0);
    await clock.advance(TIMEOUT);
    await flushing;
    expect((await reading).agent.calls.ok).toBe(1); // from memory: the read timed out too
    expect(store.stats).toEqual({ batches: 1, resends: 0, duplicates: 0 });
    resume();
    await waitFor(() => store.backlog.batches === 0);
    expect(store.stats.duplicates).toBe(0);
    expect(await suite.admin.hget(`f-busy:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
  });

  describe("parts that fail", () => {
    it("an agent whose part fails keeps it; the others' parts are confirmed", async () => {
      const { store, clock, lines } = await make("f-part");
      // A key of the wrong type: agent b's script fails, a's succeeds.
      await suite.admin.set(`f-part:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("a"), T0);
      store.recordCall(call("b"), T0);
      store.recordCall(call("b"), T0);
      await store.flush();
      expect(store.isDegraded).toBe(true);
      expect(store.backlog).toEqual({ records: 2, batches: 1 });
      expect(await suite.admin.hget(`f-part:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
      // Refused before anything was written, its id included: a resend is not taken as applied.
      expect(lines.at(-1)).toBe(
        `selfheal: Redis unavailable, using local memory until it is back: WRONGTYPE f-part:{b}:c:${BUCKET} holds a string, not a hash: batch not applied`,
      );
      expect(await suite.admin.keys("f-part:{b}:*")).toEqual([`f-part:{b}:c:${BUCKET}`]);

      // Resent for one call window (the store's clock), not a millisecond longer.
      await clock.advance(10 * MIN);
      await store.flush();
      expect(store.stats.resends).toBe(1);
      expect(store.backlog).toEqual({ records: 2, batches: 1 });
      await clock.advance(1);
      await store.flush();
      expect(store.backlog).toEqual({ records: 0, batches: 0 });
      expect(store.stats.resends).toBe(1);
      expect(lines).toContain(
        "selfheal: Redis did not confirm a batch of 2 records in 600 s; it is no longer sent",
      );
    });

    it("while a batch waits unconfirmed, new records wait merged; close() sends them", async () => {
      const { store, lines } = await make("f-hold");
      await suite.admin.set(`f-hold:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      await store.flush();
      expect(store.isDegraded).toBe(true);
      store.recordCall(call("a"), T0);
      store.recordCall(call("a"), T0);
      await store.flush(); // resends b's batch; a's records wait behind it
      expect(store.stats).toEqual({ batches: 1, resends: 1, duplicates: 0 });
      expect(store.backlog).toEqual({ records: 3, batches: 1 });
      expect(await suite.admin.exists(`f-hold:{a}:c:${BUCKET}`)).toBe(0);

      // The last round trip sends everything, however Redis is.
      await store.close();
      expect(store.stats).toEqual({ batches: 2, resends: 2, duplicates: 0 });
      expect(await suite.admin.hget(`f-hold:{a}:c:${BUCKET}`, "t|ok")).toBe("2");
      expect(lines.at(-1)).toBe("selfheal: closing with 1 records Redis did not confirm");
    });

    it("once fixed, the kept part lands and the batch leaves", async () => {
      const { store } = await make("f-fix");
      await suite.admin.set(`f-fix:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("a"), T0);
      store.recordCall(call("b"), T0);
      await store.flush();
      expect(store.backlog).toEqual({ records: 1, batches: 1 });
      await suite.admin.del(`f-fix:{b}:c:${BUCKET}`);
      await store.flush();
      expect(store.isDegraded).toBe(false);
      expect(store.backlog).toEqual({ records: 0, batches: 0 });
      expect(store.stats).toEqual({ batches: 1, resends: 1, duplicates: 0 });
      expect(await suite.admin.hget(`f-fix:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
      expect(await suite.admin.hget(`f-fix:{b}:c:${BUCKET}`, "t|ok")).toBe("1");
    });

    it("once fixed, one flush sends the kept part and then the records held behind it", async () => {
      const { store } = await make("f-fix2");
      await suite.admin.set(`f-fix2:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      await store.flush();
      store.recordCall(call("a"), T0);
      await store.flush();
      expect(store.backlog).toEqual({ records: 2, batches: 1 });
      await suite.admin.del(`f-fix2:{b}:c:${BUCKET}`);
      await store.flush();
      expect(store.backlog).toEqual({ records: 0, batches: 0 });
      expect(store.stats).toEqual({ batches: 2, resends: 2, duplicates: 0 });
      expect(await suite.admin.hget(`f-fix2:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
    });

    it("degraded, a read comes from this worker's memory, not from Redis", async () => {
      const { store } = await make("f-local");
      await suite.admin.set(`f-local:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      store.recordCall(call("a"), T0);
      await store.flush();
      expect(store.isDegraded).toBe(true);
      // Another worker's counts, in Redis: a degraded read does not see them.
      await suite.admin.hincrby(`f-local:{a}:c:${BUCKET}`, "t|ok", 10);
      expect((await store.read("a", T0)).agent.calls.ok).toBe(1);
    });

    it("records pruned while they wait leave the backlog's count", async () => {
      const { store, client } = await make("f-prune");
      client.disconnect();
      await waitFor(() => client.status === "end");
      store.recordCall(call("old"), T0);
      store.recordCall(call("old"), T0);
      store.recordCall(call("a"), T0 + 30 * MIN);
      await store.flush(); // fails before sending, after pruning
      expect(store.backlog).toEqual({ records: 1, batches: 0 });
    });

    it("a batch whose buckets left the window while unconfirmed is dropped quietly", async () => {
      const { store, clock, lines } = await make("f-old");
      await suite.admin.set(`f-old:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      await store.flush();
      expect(store.backlog).toEqual({ records: 1, batches: 1 });
      // Past its resend window too: it has nothing left to give up, so no line says so.
      await clock.advance(10 * MIN + 1);
      // Degraded: the read answers from memory, and its probe drops what no window reads.
      await store.read("other", T0 + 30 * MIN);
      await waitFor(() => store.backlog.batches === 0);
      expect(store.backlog).toEqual({ records: 0, batches: 0 });
      expect(store.stats.resends).toBe(0);
      expect(lines.some((l) => l.includes("no longer sent"))).toBe(false);
    });
  });

  describe("what is written and read back", () => {
    it("a call that recovered after one failed attempt counts one success and one failure", async () => {
      const { store } = await make("f-rec");
      store.recordCall({ ...call(), outcome: "recovered", failedAttempts: 1 }, T0);
      await store.flush();
      const fields = await suite.admin.hgetall(`f-rec:{a}:c:${BUCKET}`);
      expect(fields["t|ok"]).toBe("1");
      expect(fields["t|f"]).toBe("1");
    });

    it("a batch without LLM outcomes leaves the LLM ring's expiry alone", async () => {
      const { store } = await make("f-ring");
      await suite.admin.hset("f-ring:{a}:llm", "a|n", "1");
      await suite.admin.pexpire("f-ring:{a}:llm", 60_000);
      store.recordCall(call(), T0);
      await store.flush();
      expect(await suite.admin.pttl("f-ring:{a}:llm")).toBeLessThanOrEqual(60_000);
    });

    it("latency buckets out of range and ring slots past the sample size are not counted", async () => {
      const { store } = await make("f-range", { windows: { llmSampleSize: 2 } });
      const key = `f-range:{a}:c:${BUCKET}`;
      await suite.admin.hset(key, "t|ok", "1", "t|h0", "1", "t|h-1", "5", "t|h999", "7");
      await suite.admin.hset("f-range:{a}:llm", "a|n", "5", "a|0", "1", "a|1", "0", "a|2", "1");
      const read = await store.read("a", T0);
      expect(read.agent.calls.latency.reduce((sum, n) => sum + n, 0)).toBe(1);
      expect(read.agent.calls.latency[0]).toBe(1);
      const tool = read.tools.get("t")?.calls.latency ?? [];
      expect(Object.keys(tool)).toEqual(Object.keys(read.agent.calls.latency));
      expect(tool.length).toBe(LATENCY_BUCKET_COUNT);
      expect(read.agent.llm).toEqual({ total: 2, empty: 1 });
    });
  });

  describe("timer and log throttle", () => {
    it("records go every flushMs of the store's clock, and no timer is left after close", async () => {
      const { store, clock } = await make("f-timer", { flushMs: 1_000 });
      store.recordCall(call(), T0);
      await clock.advance(999);
      expect(store.stats.batches).toBe(0);
      await clock.advance(1);
      await waitFor(() => store.backlog.records === 0);
      expect(store.stats.batches).toBe(1);
      store.recordCall(call(), T0);
      await clock.advance(1_000);
      await waitFor(() => store.backlog.records === 0);
      expect(store.stats.batches).toBe(2);
      await store.close();
      expect(clock.pendingTimers).toBe(0);
    });

    it("connection trouble is logged once per logIntervalMs", async () => {
      const { store, clock, lines } = await make("f-log", { logIntervalMs: 5_000 });
      await suite.admin.set(`f-log:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      await store.flush();
      await store.flush();
      expect(store.stats.resends).toBe(1);
      expect(lines.filter((l) => l.includes("Redis unavailable"))).toHaveLength(1);
      await clock.advance(4_999);
      await store.flush();
      expect(lines.filter((l) => l.includes("Redis unavailable"))).toHaveLength(1);
      await clock.advance(1);
      await store.flush();
      expect(lines.filter((l) => l.includes("Redis unavailable"))).toHaveLength(2);
      expect(lines.at(-1)).toContain("WRONGTYPE");
    });
  });

  describe("close()", () => {
    it("once: a second close does nothing, and nothing goes out after it", async () => {
      const { store, client, lines } = await make("f-close");
      await suite.admin.set(`f-close:{b}:c:${BUCKET}`, "x");
      store.recordCall(call("b"), T0);
      await store.close();
      await store.close();
      expect(lines.filter((l) => l.startsWith("selfheal: closing with"))).toEqual([
        "selfheal: closing with 1 records Redis did not confirm",
      ]);
      const stats = store.stats;
      store.recordCall(call("a"), T0);
      await store.flush();
      expect(store.stats).toEqual(stats); // not even b's batch again
      expect(await suite.admin.exists(`f-close:{a}:c:${BUCKET}`)).toBe(0);
      // The client was the test's: still open.
      expect(await client.ping()).toBe("PONG");
    });

    it("the caller's client keeps none of the store's listeners", async () => {
      const client = new Redis(suite.redis.url);
      clients.push(client);
      await client.ping();
      const count = () => client.eventNames().map((e) => [e, client.listenerCount(e)]);
      const before = count();
      const store = new RedisSignalStore({ client, prefix: "f-listeners", flushMs: 3_600_000 });
      expect(count()).not.toEqual(before);
      store.recordCall(call(), T0);
      await store.close();
      expect(count()).toEqual(before);
    });

    it("a client that is not connected yet is connected on first use", async () => {
      const client = new Redis(suite.redis.url, { lazyConnect: true });
      clients.push(client);
      const store = new RedisSignalStore({ client, prefix: "f-lazy", flushMs: 3_600_000 });
      stores.push(store);
      store.recordCall(call(), T0);
      await store.flush();
      expect(store.isDegraded).toBe(false);
      expect(await suite.admin.hget(`f-lazy:{a}:c:${BUCKET}`, "t|ok")).toBe("1");
    });

    it("a client closed by its owner: degraded, with the connection's state as the reason", async () => {
      const { store, client, states } = await make("f-ended");
      client.disconnect();
      await waitFor(() => client.status === "end");
      store.recordCall(call(), T0);
      await store.flush();
      expect(states).toEqual([{ degraded: true, reason: "Redis connection is end" }]);
      expect(store.backlog).toEqual({ records: 1, batches: 0 });
    });
  });
});
