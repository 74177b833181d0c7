/**
 * readFleet (what `selfheal status --redis` prints), in process against a real redis-server: its
 * option checks, each section read back from the keys a fleet writes (agents, open breakers,
 * alert throttles, budgets), the client it is given left open and its own closed, and each way a
 * read fails as one line with credentials redacted. The CLI suite (status.test.ts) runs it as a
 * child process; this one lets mutation testing see it.
 */
import { createServer, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { readFleet } from "../../src/redis/fleet.js";
import { redisStore } from "../../src/redis/index.js";
import { encodeName } from "../../src/redis/keys.js";
import { freePort } from "../helpers/binaries.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("readFleet against a real redis-server");

const verdict = (open: boolean, until: number, opens = 1) =>
  JSON.stringify({ open, until, opens, at: Date.now() });

/** What `readFleet` throws (its message), failing the test when it resolves. */
async function failure(read: Promise<unknown>): Promise<string> {
  const error = await read.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  return (error as Error).message;
}

describe("readFleet's options", () => {
  it("needs exactly one of client and url", async () => {
    const unused = new Redis({ lazyConnect: true });
    try {
      for (const options of [{}, { url: "redis://127.0.0.1:1", client: unused }]) {
        const error = await readFleet(options).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SelfHealConfigError);
        expect((error as Error).message).toContain(
          "pass either `client` (an ioredis client) or `url`",
        );
      }
      expect(unused.status).toBe("wait"); // refused before any connection
    } finally {
      unused.disconnect();
    }
  });

  it("refuses a prefix that could reshape keys before connecting", async () => {
    await expect(readFleet({ url: "redis://127.0.0.1:1", prefix: "a:{b}" })).rejects.toThrow(
      SelfHealConfigError,
    );
  });
});

describe.skipIf(!available)("readFleet on a real redis-server", () => {
  const suite = redisForSuite();
  let n = 0;
  const prefix = () => `rf${++n}`;

  it("an empty prefix: no agents, no breakers, no throttles, no budgets; `at` is whole ms", async () => {
    const before = Date.now();
    const fleet = await readFleet({ url: suite.redis.url, prefix: prefix() });
    expect(fleet).toEqual({
      prefix: `rf${n}`,
      at: fleet.at,
      agents: [],
      openBreakers: [],
      throttledAlerts: [],
      budgets: { tasks: 0, totalUsd: 0, maxUsd: 0 },
    });
    expect(Number.isInteger(fleet.at)).toBe(true);
    expect(fleet.at).toBeGreaterThanOrEqual(before - 1);
  });

  it('the default prefix is "selfheal"', async () => {
    const store = redisStore({ url: suite.redis.url });
    store.recordCall(
      { agent: "default-prefix", tool: "t", outcome: "success", durationMs: 3 },
      Date.now(),
    );
    await store.flush();
    await store.close();
    const fleet = await readFleet({ url: suite.redis.url });
    expect(fleet.prefix).toBe("selfheal");
    expect(fleet.agents.map((a) => a.agent)).toContain("default-prefix");
  });

  it("every agent sorted, or the one asked for; its calls read with the windows they were written with", async () => {
    const p = prefix();
    const windows = { callWindowMs: 1_800_000 };
    const store = redisStore({ url: suite.redis.url, prefix: p, windows });
    const now = Date.now();
    for (const agent of ["zeta", "alpha"]) {
      store.recordCall({ agent, tool: "search", outcome: "success", durationMs: 5 }, now);
      // 20 minutes old: inside the 30 min window.
      store.recordCall({ agent, tool: "search", outcome: "error", durationMs: 5 }, now - 1_200_000);
    }
    await store.flush();
    await store.close();

    const all = await readFleet({ url: suite.redis.url, prefix: p, windows });
    expect(all.agents.map((a) => a.agent)).toEqual(["alpha", "zeta"]);
    const one = await readFleet({ url: suite.redis.url, prefix: p, agent: "zeta", windows });
    expect(one.agents.map((a) => a.agent)).toEqual(["zeta"]);
    const calls = (fleet: typeof one) =>
      fleet.agents[0]?.signals.find((s) => s.signal === "success_rate")?.samples;
    expect(calls(one)).toBe(2);
    // The default windows cut time into other buckets: none of these is read.
    const other = await readFleet({ url: suite.redis.url, prefix: p, agent: "zeta" });
    expect(calls(other)).toBe(0);
  });

  it("an agent that never wrote: the known ones named (ten, then how many more), quoted and cut", async () => {
    const p = prefix();
    const none = await failure(readFleet({ url: suite.redis.url, prefix: p, agent: "ghost" }));
    expect(none).toBe(`no agent "ghost" under prefix "${p}" (known: none)`);

    const names = Array.from({ length: 12 }, (_, i) => `agent-${String(i).padStart(2, "0")}`);
    await suite.admin.sadd(`${p}:agents`, ...names.map(encodeName));
    const many = await failure(readFleet({ url: suite.redis.url, prefix: p, agent: "ghost" }));
    expect(many).toBe(
      `no agent "ghost" under prefix "${p}" (known: ${names
        .slice(0, 10)
        .map((a) => `"${a}"`)
        .join(", ")}, 2 more)`,
    );

    const long = "x".repeat(70);
    const cut = await failure(readFleet({ url: suite.redis.url, prefix: p, agent: long }));
    expect(cut).toContain(`no agent "${"x".repeat(59)}…" (70 chars) under prefix`);
    const short = "y".repeat(60); // 62 characters quoted: shown whole
    expect(await failure(readFleet({ url: suite.redis.url, prefix: p, agent: short }))).toContain(
      `no agent "${short}" under`,
    );
  });

  it("open breakers only (closed and lapsed ones left out), sorted, `until` rounded up", async () => {
    const p = prefix();
    const now = Date.now();
    const key = (dependency: string) => `${p}:{fleet}:breaker:${encodeName(dependency)}`;
    await suite.admin.set(key("payments"), verdict(true, now + 60_000.2, 3));
    await suite.admin.set(key("a:b"), verdict(true, now + 30_000));
    await suite.admin.set(key("closed"), verdict(false, now + 60_000));
    await suite.admin.set(key("lapsed"), verdict(true, now - 1_000));
    await suite.admin.set(key("garbage"), "{not json");
    const fleet = await readFleet({ url: suite.redis.url, prefix: p });
    expect(fleet.openBreakers).toEqual([
      { dependency: "a:b", until: now + 30_000, opens: 1 },
      { dependency: "payments", until: Math.ceil(now + 60_000.2), opens: 3 },
    ]);
  });

  it("alert throttles in force, sorted, with the time left and the count held back", async () => {
    const p = prefix();
    const gate = (kind: string) => `${p}:{fleet}:alert:${encodeName(kind)}`;
    await suite.admin.set(gate("tool_down"), "1", "PX", 60_000);
    await suite.admin.set(`${gate("tool_down")}:held`, "4", "PX", 60_000);
    await suite.admin.set(gate("a kind"), "1", "PX", 30_000);
    await suite.admin.set(gate("no-ttl"), "1"); // no expiry: not a throttle in force
    const fleet = await readFleet({ url: suite.redis.url, prefix: p });
    expect(fleet.throttledAlerts.map(({ kind, held }) => ({ kind, held }))).toEqual([
      { kind: "a kind", held: 0 },
      { kind: "tool_down", held: 4 },
    ]);
    const [first, second] = fleet.throttledAlerts;
    expect(first?.msLeft).toBeGreaterThan(0);
    expect(first?.msLeft).toBeLessThanOrEqual(30_000);
    expect(second?.msLeft).toBeGreaterThan(30_000);
    expect(second?.msLeft).toBeLessThanOrEqual(60_000);
  });

  it("budgets: how many tasks, their total and the largest", async () => {
    const p = prefix();
    await suite.admin.set(`${p}:{fleet}:budget:aaa`, "0.25");
    await suite.admin.set(`${p}:{fleet}:budget:bbb`, "1.5");
    await suite.admin.set(`${p}:{fleet}:budget:ccc`, "0.75");
    const fleet = await readFleet({ url: suite.redis.url, prefix: p });
    expect(fleet.budgets).toEqual({ tasks: 3, totalUsd: 2.5, maxUsd: 1.5 });
  });

  it("a client it is given is used as it is and left open; a lazy one is connected", async () => {
    const p = prefix();
    const client = new Redis(suite.redis.url, { lazyConnect: true });
    try {
      expect(client.status).toBe("wait");
      await expect(readFleet({ client, prefix: p })).resolves.toMatchObject({ prefix: p });
      expect(client.status).toBe("ready");
      await expect(client.ping()).resolves.toBe("PONG");
      // Failing does not close it either.
      await failure(readFleet({ client, prefix: p, agent: "ghost" }));
      await expect(client.ping()).resolves.toBe("PONG");
    } finally {
      client.disconnect();
    }
  });

  it("a client already closed: said so", async () => {
    const client = new Redis(suite.redis.url);
    const ended = new Promise((resolve) => client.once("end", resolve));
    await client.quit();
    await ended;
    expect(await failure(readFleet({ client, prefix: prefix() }))).toBe(
      "the Redis client is closed",
    );
  });

  it("a client mid-quit: its commands refused at once, not after the connect timeout", async () => {
    const client = new Redis(suite.redis.url);
    await client.ping();
    const quitting = client.quit();
    // An hour's timeout: a read that waited for it would fail the test by its own timeout.
    expect(
      await failure(readFleet({ client, prefix: prefix(), connectTimeoutMs: 3_600_000 })),
    ).toBe("Connection is closed.");
    await quitting;
  });

  it("a client that ends while it connects: said so at once", async () => {
    const client = new Redis(suite.redis.url, { lazyConnect: true });
    const reading = failure(readFleet({ client, prefix: prefix(), connectTimeoutMs: 3_600_000 }));
    expect(client.status).toBe("connecting");
    client.disconnect();
    expect(await reading).toBe("the Redis client is closed");
  });
});

describe.skipIf(!available)("readFleet when Redis cannot be read", () => {
  /** A TCP server that accepts connections and never answers (a hung Redis, say). */
  let silent: Server;
  let silentPort = 0;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    silentPort = await freePort();
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(silentPort, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it("a refused connection: one line, the password in the URL never shown", async () => {
    const port = await freePort();
    const message = await failure(
      readFleet({ url: `redis://user:hunter2secret@127.0.0.1:${port}`, connectTimeoutMs: 5_000 }),
    );
    expect(message).toContain("ECONNREFUSED");
    expect(message).not.toContain("hunter2secret");
    expect(message).not.toContain("\n");
  });

  it("a server that never answers: the handshake's command timeout named in ms", async () => {
    const message = await failure(
      readFleet({
        url: `redis://127.0.0.1:${silentPort}`,
        commandTimeoutMs: 400,
        connectTimeoutMs: 30_000,
      }),
    );
    expect(message).toBe("Redis did not answer within 400 ms");
  });

  it("a server that never answers, the connection's own limit shorter: that one named", async () => {
    const message = await failure(
      readFleet({
        url: `redis://127.0.0.1:${silentPort}`,
        commandTimeoutMs: 30_000,
        connectTimeoutMs: 350,
      }),
    );
    expect(message).toBe("Redis did not answer within 350 ms");
  });
});
