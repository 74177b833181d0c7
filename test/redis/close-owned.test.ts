// sh.close() closes what selfheal opened (issue 27): a store the program made with
// `new RedisSignalStore({ url })` opened its own connections, so the instance's close() ends
// them; a client the program passed stays the program's.
import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { RedisSignalStore } from "../../src/redis/index.js";
import { CHILD_HANG_MS, builtJs } from "../helpers/built-js.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("close() and a store made with new RedisSignalStore()");

/** test/fixtures/redis-close-owned.ts as built JS on dist/ (no tsx at run time). */
const FIXTURE = builtJs("test/fixtures/redis-close-owned.ts");

/**
 * The fixture as its own process: its output lines and exit code. A connection left open holds it
 * for ever, so the hang guard finds it; exiting on its own is the test, not how soon.
 */
function runFixture(url: string, prefix: string) {
  return new Promise<{ code: number | null; lines: unknown[]; stderr: string }>(
    (resolve, reject) => {
      const child = spawn(process.execPath, [FIXTURE, url, prefix], {
        stdio: ["ignore", "pipe", "pipe"],
        timeout: CHILD_HANG_MS,
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      child.once("error", reject);
      child.once("exit", (code) => {
        const lines = stdout
          .trim()
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as unknown);
        resolve({ code, lines, stderr });
      });
    },
  );
}

/** Names of the clients connected to the server now, but the test's admin client. */
async function clients(admin: Redis): Promise<string[]> {
  const me = String(await admin.client("ID"));
  return String(await admin.client("LIST"))
    .trim()
    .split("\n")
    .filter((line) => !line.startsWith(`id=${me} `));
}

/** Polls `condition` every 20 ms; fails after `ms`. */
async function waitFor(condition: () => Promise<boolean>, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(!available)("sh.close() and a store made with new RedisSignalStore()", () => {
  const suite = redisForSuite();

  it("made from a URL: close() ends its client and its subscriber, leaving nothing connected", async () => {
    const store = new RedisSignalStore({ url: suite.redis.url, prefix: "owned1" });
    const sh = createSelfHealing({
      agent: "support",
      store,
      recovery: { providers: [{ name: "p1" }, { name: "p2" }] },
    });
    await sh.tool("search", { readOnly: true, providers: ["p1", "p2"] }, () => "ok")(undefined);
    await waitFor(async () => (await clients(suite.admin)).length === 2); // client + subscriber
    await sh.close();
    await waitFor(() => Promise.resolve(store.connection.status === "end"));
    await waitFor(async () => (await clients(suite.admin)).length === 0);
    // close() sent the call on its way out.
    const reader = new RedisSignalStore({ url: suite.redis.url, prefix: "owned1" });
    expect((await reader.read("support", Date.now())).agent.calls.ok).toBe(1);
    await reader.close();
  });

  it("made from the program's own client: close() leaves that client open and usable", async () => {
    const client = new Redis(suite.redis.url);
    const store = new RedisSignalStore({ client, prefix: "owned2" });
    const sh = createSelfHealing({ agent: "support", store });
    await sh.tool("search", { readOnly: true }, () => "ok")(undefined);
    await sh.close();
    expect(client.status).toBe("ready");
    await expect(client.ping()).resolves.toBe("PONG");
    client.disconnect();
  });

  it("a program that uses one exits on its own after sh.close()", async () => {
    const out = await runFixture(suite.redis.url, "owned3");
    // But for the store's one-line "Redis unavailable" warning: a fleet resync still in flight as
    // the store closes can fail on the closing connection and say so (as in close.test.ts).
    const unexpected = out.stderr
      .split("\n")
      .filter((line) => line !== "" && !line.startsWith("selfheal: Redis unavailable"));
    expect(unexpected).toEqual([]);
    expect(out.code).toBe(0); // not killed by the 20 s timeout: nothing held the event loop
    expect(out.lines).toEqual([
      { step: "called", via: "primary" },
      { step: "closed" },
      { step: "exit", client: "end" },
    ]);
  }, 150_000);
});
