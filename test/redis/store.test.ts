import { describe, expect, it } from "vitest";
import { createSelfHealing, isSelfHealConfigError } from "../../src/index.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { CallRecord } from "../../src/health/store.js";
import { redisStore } from "../../src/redis/index.js";
import { VirtualClock } from "../../src/testing/index.js";
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
      expect(key).toMatch(/^t2:(agents|\{(a%3Ab%20%7Bc%7D|plain)\}:[a-z]+(:\d+)?)$/);
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
  }, 20_000);
});

async function waitFor(condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
