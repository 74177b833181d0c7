import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { redisStore } from "../../src/redis/index.js";
import { builtJs } from "../helpers/built-js.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("close() and the connections selfheal opened");

/** test/fixtures/redis-close.ts as built JS on dist/ (no tsx at run time). */
const FIXTURE = builtJs("test/fixtures/redis-close.ts");

interface Exit {
  code: number | null;
  /** The signal that ended it: SIGTERM when it was still up after 60 s. */
  signal: NodeJS.Signals | null;
  lines: Record<string, unknown>[];
  stderr: string;
}

/**
 * The README's example as its own process; killed (and failed) if it is still up after 60 s. A
 * connection selfheal left open holds the process for ever, so any limit finds it; this one is
 * far past the seconds the example takes even on a busy machine. Exiting on its own is the
 * test, not how soon (issue 27).
 */
function runExample(mode: "url" | "client", url: string, prefix: string): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [FIXTURE, mode, url, prefix], {
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      const lines = stdout
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, signal, lines, stderr });
    });
  });
}

describe.skipIf(!available)(
  "sh.close() closes what selfheal opened, never the user's client",
  () => {
    const suite = redisForSuite();

    it("the README's example (a store made from a URL) exits on its own after sh.close(), its calls sent", async () => {
      const out = await runExample("url", suite.redis.url, "close1");
      expect(unexpected(out.stderr)).toEqual([]);
      // It exited on its own (exit code 0), not killed as a process still up after 60 s.
      expect([out.code, out.signal]).toEqual([0, null]);
      expect(out.lines).toEqual([
        { step: "called", value: "results for status", via: "primary" },
        { step: "closed" },
      ]);
      // close() sent what waited (a flush is 1 s away): the fleet has both calls.
      const reader = redisStore({ url: suite.redis.url, prefix: "close1" });
      const signals = await reader.read("support", Date.now());
      expect(signals.agent.calls.ok).toBe(2);
      await reader.close();
    }, 90_000);

    it("with the program's own client: the client stays usable, and quitting it is all the exit needs", async () => {
      const out = await runExample("client", suite.redis.url, "close2");
      expect(unexpected(out.stderr)).toEqual([]);
      expect([out.code, out.signal]).toEqual([0, null]);
      expect(out.lines.at(-1)).toEqual({ step: "closed", client: "ready", ping: "PONG" });
    }, 90_000);

    it("in process: a client the user passed stays open; the store's own connections are closed", async () => {
      const client = new Redis(suite.redis.url);
      await client.client("SETNAME", "users-own");
      const store = redisStore({ client, prefix: "close3" });
      const sh = createSelfHealing({
        agent: "support",
        store,
        recovery: { providers: [{ name: "p1" }, { name: "p2" }] },
      });
      await sh.tool("search", { readOnly: true, providers: ["p1", "p2"] }, () => "ok")(undefined);
      await waitFor(async () => (await connections(suite.admin)) === 3); // + the breaker subscriber
      await sh.close();
      expect(client.status).toBe("ready");
      await expect(client.ping()).resolves.toBe("PONG");
      // The call was sent on close; the subscriber selfheal opened is gone, the user's client not.
      expect(Number(await client.hget(await callKey(client, "close3"), "search|ok"))).toBe(1);
      await waitFor(async () => (await connections(suite.admin)) === 2);
      expect(String(await suite.admin.client("LIST"))).toContain("name=users-own");
      await store.close(); // idempotent: already closed
      expect(client.status).toBe("ready");
      client.disconnect();
    });

    it("a store made from a URL and shared by two instances is closed by the last one to close", async () => {
      const store = redisStore({ url: suite.redis.url, prefix: "close4" });
      const a = createSelfHealing({ agent: "a", store });
      const b = createSelfHealing({ agent: "b", store });
      await a.tool("t", { readOnly: true }, () => "ok")(undefined);
      const call = b.tool("t", { readOnly: true }, () => "ok");
      await a.close();
      await a.close(); // twice: still one release
      expect(store.connection.status).toBe("ready");
      await call(undefined);
      await store.flush();
      expect(store.isDegraded).toBe(false);
      await b.close();
      await waitFor(() => Promise.resolve(store.connection.status === "end"));
      const reader = redisStore({ url: suite.redis.url, prefix: "close4" });
      expect((await reader.read("b", Date.now())).agent.calls.ok).toBe(1);
      await reader.close();
    });

    it("an instance that was never made (bad options) holds nothing", async () => {
      const store = redisStore({ url: suite.redis.url, prefix: "close5", logger: quiet });
      expect(() => createSelfHealing({ agent: "x", store, maxErrorLength: 1 })).toThrow();
      const sh = createSelfHealing({ agent: "x", store });
      await sh.close();
      await waitFor(() => Promise.resolve(store.connection.status === "end"));
    });
  },
);

/**
 * What a child wrote to stderr, but for the store's one-line "Redis unavailable" warning and its
 * "Redis is back" line: a fleet resync still in flight as the store closes can fail on the
 * closing connection and say so (fleet-sync.ts: close() does not wait for it), and on a busy
 * machine a command can outlast the store's command timeout and come back (issue 27). Crashes
 * and anything else still fail the test.
 */
function unexpected(stderr: string): string[] {
  return stderr
    .split("\n")
    .filter(
      (line) =>
        line !== "" &&
        !line.startsWith("selfheal: Redis unavailable") &&
        !line.startsWith("selfheal: Redis is back"),
    );
}

/** A logger for stores closed before they connected (they say so; not what is tested here). */
const quiet = { warn: () => undefined };

/** How many clients are connected to the server now (the test's admin client included). */
async function connections(admin: Redis): Promise<number> {
  return String(await admin.client("LIST"))
    .trim()
    .split("\n").length;
}

/** Polls `condition` every 20 ms; fails after `ms` (a limit for a busy machine, not a measure). */
async function waitFor(condition: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The one call-count hash under a prefix. */
async function callKey(client: Redis, prefix: string): Promise<string> {
  const keys = await client.keys(`${prefix}:*:c:*`);
  expect(keys).toHaveLength(1);
  return keys[0] ?? "";
}
