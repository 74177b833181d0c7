/**
 * readFleet's edges, in process against a real redis-server: a key of another type where a
 * bucket should be (the store degrades: the read fails with Redis's reason), connections left
 * behind, listeners left on a client it is given, sorting of many names, errors that have no
 * message of their own (a code, or Node's AggregateError of several addresses), and silence.
 */
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { readFleet } from "../../src/redis/fleet.js";
import { encodeName } from "../../src/redis/keys.js";
import { freePort } from "../helpers/binaries.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const available = haveRedis("readFleet's edges against a real redis-server");

async function failure(read: Promise<unknown>): Promise<Error> {
  const error = await read.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  return error as Error;
}

it("both or neither of client and url: a SelfHealConfigError on readFleet", async () => {
  const error = await readFleet({}).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(SelfHealConfigError);
  expect((error as SelfHealConfigError).field).toBe("readFleet");
});

describe.skipIf(!available)("readFleet's edges on a real redis-server", () => {
  const suite = redisForSuite();
  let n = 0;
  const prefix = () => `re${String(++n)}`;
  const warned = vi.fn();

  beforeEach(() => {
    warned.mockClear();
    vi.spyOn(console, "warn").mockImplementation(warned);
    vi.spyOn(console, "error").mockImplementation(warned);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** Connections the server has open now, the admin's included. */
  const connections = async () =>
    String(await suite.admin.client("LIST"))
      .trim()
      .split("\n").length;

  it("a bucket key of another type: the read fails with Redis's reason, nothing logged", async () => {
    const p = prefix();
    await suite.admin.sadd(`${p}:agents`, "a");
    // Every call bucket a read of the next minute can touch.
    const now = Math.floor(Date.now() / 10_000);
    for (let b = now - 60; b <= now + 6; b++) await suite.admin.set(`${p}:{a}:c:${String(b)}`, "x");
    const error = await failure(readFleet({ url: suite.redis.url, prefix: p }));
    expect(error.message).toMatch(/^WRONGTYPE Operation against a key holding the wrong kind/);
    expect(error.message).not.toContain("\n");
    expect(error.cause).toBeInstanceOf(Error);
    expect(warned).not.toHaveBeenCalled();
  });

  it("its own connection is closed after a read and after a failure", async () => {
    // The admin's alone, once the earlier tests' connections have gone.
    await waitFor(async () => (await connections()) === 1, 10_000);
    const p = prefix();
    await suite.admin.sadd(`${p}:agents`, "a");
    await readFleet({ url: suite.redis.url, prefix: p });
    await waitFor(async () => (await connections()) === 1, 10_000);
    await failure(readFleet({ url: suite.redis.url, prefix: p, agent: "ghost" }));
    await waitFor(async () => (await connections()) === 1, 10_000);
  });

  it("a client it is given, read through again and again, keeps no listener of the reads'", async () => {
    const client = new Redis(suite.redis.url, { lazyConnect: true });
    try {
      const count = () => client.eventNames().map((e) => [e, client.listenerCount(e)]);
      const before = count();
      await readFleet({ client, prefix: prefix() });
      expect(count()).toEqual(before);
      for (let i = 0; i < 12; i++) await readFleet({ client, prefix: prefix() });
      expect(count()).toEqual(before);
    } finally {
      client.disconnect();
    }
  });

  it("many open breakers and throttles come sorted by name, whatever SCAN's order", async () => {
    const p = prefix();
    const names = ["kappa", "delta", "zeta", "alpha", "theta", "beta", "omega", "eta", "iota"];
    const until = Date.now() + 60_000;
    for (const name of names) {
      await suite.admin.set(
        `${p}:{fleet}:breaker:${encodeName(name)}`,
        JSON.stringify({ open: true, until, opens: 1, at: Date.now() }),
      );
      await suite.admin.set(`${p}:{fleet}:alert:${encodeName(name)}`, "1", "PX", 60_000);
    }
    const fleet = await readFleet({ url: suite.redis.url, prefix: p });
    const sorted = [...names].sort();
    expect(fleet.openBreakers.map((b) => b.dependency)).toEqual(sorted);
    expect(fleet.throttledAlerts.map((a) => a.kind)).toEqual(sorted);
  });

  it("exactly ten known agents are all named, with no count of more", async () => {
    const p = prefix();
    const names = Array.from({ length: 10 }, (_, i) => `agent-${String(i)}`);
    await suite.admin.sadd(`${p}:agents`, ...names);
    const error = await failure(readFleet({ url: suite.redis.url, prefix: p, agent: "ghost" }));
    expect(error.message).toBe(
      `no agent "ghost" under prefix "${p}" (known: ${names.map((a) => `"${a}"`).join(", ")})`,
    );
  });
});

describe("readFleet's errors that have no message of their own", () => {
  /** A client that never reaches a server: the read waits for it, and the test says how it fails. */
  const unreachable = async () => {
    const client = new Redis({
      port: await freePort(),
      lazyConnect: true,
      retryStrategy: () => null,
    });
    client.on("error", () => undefined); // the real refusal, after the one the test emits
    return client;
  };

  it("an error with only a code: the code", async () => {
    const client = await unreachable();
    const reading = failure(readFleet({ client }));
    client.emit("error", Object.assign(new Error(""), { code: "EHOSTUNREACH" }));
    expect((await reading).message).toBe("EHOSTUNREACH");
    client.disconnect();
  });

  it("several addresses refused: each reason once, on one line", async () => {
    const client = await unreachable();
    const reading = failure(readFleet({ client }));
    const refused = (address: string) =>
      Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: "ECONNREFUSED" });
    client.emit(
      "error",
      new AggregateError([refused("::1:6379"), refused("127.0.0.1:6379"), refused("::1:6379")]),
    );
    expect((await reading).message).toBe(
      "connect ECONNREFUSED ::1:6379; connect ECONNREFUSED 127.0.0.1:6379",
    );
    client.disconnect();
  });

  it("an AggregateError with nothing inside, or with a message: its code or its message", async () => {
    const client = await unreachable();
    let reading = failure(readFleet({ client }));
    client.emit("error", Object.assign(new AggregateError([]), { code: "ECONNREFUSED" }));
    expect((await reading).message).toBe("ECONNREFUSED");
    reading = failure(readFleet({ client }));
    client.emit("error", new AggregateError([new Error("inner")], "all refused"));
    expect((await reading).message).toBe("all refused");
    client.disconnect();
  });

  it("a message over several lines, or inner errors that are: one line", async () => {
    const client = await unreachable();
    let reading = failure(readFleet({ client }));
    client.emit("error", new Error("first line  \n   second line\nthird"));
    expect((await reading).message).toBe("first line second line third");
    reading = failure(readFleet({ client }));
    client.emit("error", new AggregateError([new Error("a\nb"), new Error("c")]));
    expect((await reading).message).toBe("a b; c");
    client.disconnect();
  });

  it("a thrown value that is not an Error: its text", async () => {
    const client = await unreachable();
    const reading = failure(readFleet({ client }));
    client.emit("error", "plain words");
    const error = await reading;
    expect(error.message).toBe("plain words");
    client.disconnect();
  });
});
