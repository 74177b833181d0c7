/**
 * RedisFleetSync on its own, without an engine: what each of its calls leaves in Redis (keys,
 * values, TTLs), says on the breaker channel, returns and applies. Real `redis-server`; every
 * test works under its own key prefix and reads Redis back with a separate admin client.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BreakerVerdict } from "../../src/recovery/breaker.js";
import {
  RedisFleetSync,
  RESTART_GRACE_MS,
  breakerChannel,
  type SyncHost,
} from "../../src/redis/fleet-sync.js";
import { readVerdicts, scanKeys } from "../../src/redis/verdicts.js";
import {
  AgentKeys,
  breakerKeyPrefix,
  budgetKeyPrefix,
  encodeName,
  fleetTag,
} from "../../src/redis/keys.js";
import { hashKey } from "../../src/telemetry/spans.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";
import { sleep, waitFor } from "../helpers/wait.js";
import {
  epochKey,
  gateKey,
  leaseKey,
  markerKey,
  resultKey,
  stateKey,
  verdict,
  within,
} from "../helpers/fleet-keys.js";

/** The client options a test changes (the rest are the store's). */
interface ClientOptions {
  db?: number;
  protocol?: 2 | 3;
  lazyConnect?: boolean;
  username?: string;
  password?: string;
}

const available = haveRedis("RedisFleetSync, direct");

const HOUR = 3_600_000;

interface Message {
  from: string;
  dependency: string;
  verdict: BreakerVerdict;
}

/** One worker's side of the fleet: its client and sync, and the knobs a test turns. */
interface Worker {
  client: Redis;
  sync: RedisFleetSync;
  troubles: unknown[];
  /** What `degraded()` says. */
  degraded: boolean;
  /** How many of the next `timed` calls fail (the command is still sent: a timeout). */
  fail: number;
  /** How many commands went through `timed`. */
  timed: number;
  /** How many times the sync waited for the connection (`ready`). */
  readies: number;
}

/**
 * Resolves once the client is connected, connecting it if it waits; at once when it is neither
 * connected nor connecting (as the store's `connected()`).
 */
function connected(client: Redis): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  if (client.status === "wait") void client.connect().catch(() => undefined);
  if (!["wait", "connecting", "connect"].includes(client.status)) return Promise.resolve();
  return new Promise((resolve) => {
    client.once("ready", () => {
      resolve();
    });
  });
}

describe.skipIf(!available)("RedisFleetSync on a real redis-server", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let n = 0;
  const workers: Worker[] = [];
  const others: Redis[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on("error", () => undefined);
  });
  afterAll(async () => {
    admin.disconnect();
    await redis.stop();
  });
  afterEach(() => {
    for (const w of workers.splice(0)) {
      w.sync.close();
      w.client.disconnect();
    }
    for (const c of others.splice(0)) c.disconnect();
  });

  /** A fresh key prefix for one test. */
  const fresh = () => `fsd${++n}`;

  /** A worker as the store builds one (see src/redis/store.ts), not yet connected. */
  function makeWorker(
    prefix: string,
    options: ClientOptions = {},
    host: Partial<Pick<SyncHost, "ready">> = {},
  ): Worker {
    const client = new Redis(redis.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      protocol: 3,
      ...options,
    });
    RedisFleetSync.define(client);
    client.on("error", () => undefined);
    const w = {
      client,
      troubles: [] as unknown[],
      degraded: false,
      fail: 0,
      timed: 0,
      readies: 0,
    } as Worker;
    w.sync = new RedisFleetSync(
      {
        client,
        degraded: () => w.degraded,
        timed: <T>(work: Promise<T>): Promise<T> => {
          w.timed++;
          if (w.fail <= 0) return work;
          w.fail--;
          work.catch(() => undefined);
          return Promise.reject(new Error("Redis did not answer in time"));
        },
        onTrouble: (error) => {
          w.troubles.push(error);
        },
        ready: () => {
          w.readies++;
          return (host.ready ?? (() => connected(client)))();
        },
      },
      prefix,
    );
    workers.push(w);
    return w;
  }

  /** A connected worker. */
  async function worker(prefix: string, options: ClientOptions = {}): Promise<Worker> {
    const w = makeWorker(prefix, options);
    await connected(w.client);
    return w;
  }

  /** What arrives on `channel`, as a separate subscriber hears it. */
  async function listen(channel: string): Promise<string[]> {
    const heard: string[] = [];
    const sub = new Redis(redis.url);
    sub.on("error", () => undefined);
    others.push(sub);
    sub.on("message", (ch: string, text: string) => {
      if (ch === channel) heard.push(text);
    });
    await sub.subscribe(channel);
    return heard;
  }

  const listeners = async (channel: string) =>
    ((await admin.pubsub("NUMSUB", channel)) as [string, number])[1];

  /** Attaches `w` and waits until it listens on its channel; what it applies. */
  async function attached(w: Worker, count = 1): Promise<[string, BreakerVerdict][]> {
    const applied: [string, BreakerVerdict][] = [];
    w.sync.attach((dependency, v) => applied.push([dependency, v]));
    await waitFor(async () => (await listeners(w.sync.breakerChannel)) === count);
    return applied;
  }

  /** Another worker's message, as it travels on the channel. */
  const message = (dependency: string, v: BreakerVerdict, from = "another-worker") =>
    JSON.stringify({ from, dependency, verdict: v });

  /** The server's clock, ms (the ledger's leases are on it). */
  async function serverNow(): Promise<number> {
    const [s, us] = await admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  describe("the breaker channel", () => {
    it("is `prefix:breakers` on database 0 and names any other database", () => {
      expect(breakerChannel("app", 0)).toBe("app:breakers");
      expect(breakerChannel("app", 2)).toBe("app:breakers:db2");
      expect(breakerChannel("my.app", 15)).toBe("my.app:breakers:db15");
    });

    it("follows the database the client selects; a db that is no positive integer is 0", () => {
      const channelOf = (db: unknown) => {
        const client = { options: { db }, on: () => undefined, off: () => undefined };
        return new RedisFleetSync(
          {
            client: client as unknown as Redis,
            degraded: () => false,
            timed: (work) => work,
            onTrouble: () => undefined,
            ready: () => Promise.resolve(),
          },
          "app",
        ).breakerChannel;
      };
      expect(channelOf(3)).toBe("app:breakers:db3");
      expect(channelOf(1)).toBe("app:breakers:db1");
      expect(channelOf(0)).toBe("app:breakers");
      expect(channelOf(undefined)).toBe("app:breakers");
      expect(channelOf("3")).toBe("app:breakers");
      expect(channelOf(1.5)).toBe("app:breakers");
      expect(channelOf(-1)).toBe("app:breakers");
      const noOptions = { on: () => undefined, off: () => undefined };
      expect(
        new RedisFleetSync(
          {
            client: noOptions as unknown as Redis,
            degraded: () => false,
            timed: (work) => work,
            onTrouble: () => undefined,
            ready: () => Promise.resolve(),
          },
          "app",
        ).breakerChannel,
      ).toBe("app:breakers");
    });

    it("a sync on database 2 publishes on its own channel and writes in its database", async () => {
      const p = fresh();
      const w = await worker(p, { db: 2 });
      expect(w.sync.breakerChannel).toBe(`${p}:breakers:db2`);
      const heard = await listen(`${p}:breakers:db2`);
      const onZero = await listen(`${p}:breakers`);
      const v = verdict(60_000);
      w.sync.publish("p1", v);
      await waitFor(() => heard.length === 1);
      expect(onZero).toEqual([]);
      const db2 = new Redis(redis.url, { db: 2 });
      others.push(db2);
      expect(await db2.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
      expect(await admin.exists(stateKey(p, "p1"))).toBe(0);
    });
  });

  describe("publish", () => {
    it("writes the verdict for about 24 h, holds the probe lease for the open time left and tells the channel", async () => {
      const p = fresh();
      const w = await worker(p);
      const heard = await listen(w.sync.breakerChannel);
      const v = verdict(60_000, Date.now(), 3);
      w.sync.publish("db:primary 1", v);
      await waitFor(() => heard.length === 1);
      const m = JSON.parse(heard[0] ?? "") as Message;
      expect(m).toEqual({
        from: expect.any(String) as string,
        dependency: "db:primary 1",
        verdict: v,
      });
      expect(m.from.length).toBeGreaterThan(0);
      expect(await admin.get(stateKey(p, "db:primary 1"))).toBe(JSON.stringify(v));
      const ttl = await admin.pttl(stateKey(p, "db:primary 1"));
      expect(ttl).toBeGreaterThan(23 * HOUR);
      expect(ttl).toBeLessThanOrEqual(24 * HOUR);
      expect(await admin.get(leaseKey(p, "db:primary 1"))).toBe(m.from);
      const lease = await admin.pttl(leaseKey(p, "db:primary 1"));
      expect(lease).toBeGreaterThan(30_000);
      expect(lease).toBeLessThanOrEqual(60_000);
      expect(w.troubles).toEqual([]);
      expect(w.sync.waiting).toBe(false);
    });

    it("a closed verdict takes no lease, even one whose `until` is ahead", async () => {
      const p = fresh();
      const w = await worker(p);
      const heard = await listen(w.sync.breakerChannel);
      const v: BreakerVerdict = {
        open: false,
        until: Date.now() + 60_000,
        opens: 0,
        at: Date.now(),
      };
      w.sync.publish("p1", v);
      await waitFor(() => heard.length === 1);
      expect((JSON.parse(heard[0] ?? "") as Message).verdict).toEqual(v);
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
      expect(await admin.exists(leaseKey(p, "p1"))).toBe(0);
    });

    it("an open verdict whose period already ended is still written and told, without trouble", async () => {
      const p = fresh();
      const w = await worker(p);
      const heard = await listen(w.sync.breakerChannel);
      const v: BreakerVerdict = { open: true, until: Date.now() - 5_000, opens: 2, at: Date.now() };
      w.sync.publish("p1", v);
      await waitFor(() => heard.length === 1);
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
      expect(w.troubles).toEqual([]);
    });

    it("while degraded nothing is sent at once; the verdict waits and a retry puts it in Redis", async () => {
      const p = fresh();
      const w = await worker(p);
      const heard = await listen(w.sync.breakerChannel);
      // A hash where the verdict goes: a SET would replace it, the retry's script cannot.
      await admin.hset(stateKey(p, "p1"), "f", "1");
      w.degraded = true;
      const v = verdict(60_000);
      w.sync.publish("p1", v);
      expect(w.sync.waiting).toBe(true);
      await w.client.ping();
      await waitFor(() => w.troubles.length > 0); // the retry reached the hash
      expect(await admin.type(stateKey(p, "p1"))).toBe("hash");
      expect(await admin.exists(leaseKey(p, "p1"))).toBe(0);
      expect(heard).toEqual([]);
      expect(w.sync.waiting).toBe(true);
      w.degraded = false;
      await admin.del(stateKey(p, "p1"));
      await waitFor(() => !w.sync.waiting);
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
      const lease = await admin.pttl(leaseKey(p, "p1"));
      expect(lease).toBeGreaterThan(0);
      expect(lease).toBeLessThanOrEqual(60_000);
      await waitFor(() => heard.length === 1);
      const m = JSON.parse(heard[0] ?? "") as Message;
      expect(m).toEqual({ from: await admin.get(leaseKey(p, "p1")), dependency: "p1", verdict: v });
    });

    it("a degraded closed verdict is put back without a lease", async () => {
      const p = fresh();
      const w = await worker(p);
      w.degraded = true;
      const v: BreakerVerdict = {
        open: false,
        until: Date.now() + 60_000,
        opens: 0,
        at: Date.now(),
      };
      w.sync.publish("p1", v);
      expect(w.sync.waiting).toBe(true);
      await waitFor(() => !w.sync.waiting);
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
      expect(await admin.exists(leaseKey(p, "p1"))).toBe(0);
    });

    it("a publish that times out is reported, waits, and is sent again once Redis answers", async () => {
      const p = fresh();
      const w = await worker(p);
      w.fail = Infinity; // the retries time out too
      const v = verdict(60_000);
      w.sync.publish("p1", v);
      await waitFor(() => w.troubles.length > 0);
      expect(String(w.troubles[0])).toContain("Redis did not answer in time");
      expect(w.sync.waiting).toBe(true);
      w.fail = 0;
      await waitFor(() => !w.sync.waiting);
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(v));
    });

    it("a publish that times out after a newer verdict was reached does not wait to be sent", async () => {
      const p = fresh();
      const w = await worker(p);
      const older = verdict(60_000, Date.now() - 1_000);
      const newer = verdict(undefined, Date.now());
      w.fail = 1;
      w.sync.publish("p1", older);
      w.sync.publish("p1", newer);
      w.fail = Infinity; // a retry could not clear what waits
      await waitFor(() => w.troubles.length === 1);
      expect(w.sync.waiting).toBe(false);
      // Nothing waits: no retry is sent.
      const sent = w.timed;
      await sleep(400);
      expect(w.timed).toBe(sent);
      expect(w.troubles).toHaveLength(1);
      w.fail = 0;
      await w.client.ping();
      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(newer));
    });
  });

  describe("mayProbe: the fleet's probe lease", () => {
    it("while degraded the worker probes alone, asking Redis nothing", async () => {
      const p = fresh();
      const w = await worker(p);
      w.degraded = true;
      expect(w.sync.mayProbe("p1", Date.now(), 60_000)).toBe(true);
      expect(w.sync.mayProbe("p1", Date.now(), 60_000)).toBe(true);
      await w.client.ping();
      expect(await admin.exists(leaseKey(p, "p1"))).toBe(0);
    });

    it("asks for the lease (NX, PX), then may probe exactly once per lease taken", async () => {
      const p = fresh();
      const w = await worker(p);
      expect(w.sync.mayProbe("p 1", Date.now(), 60_000)).toBe(false);
      // Asked once while the answer is pending.
      expect(w.sync.mayProbe("p 1", Date.now(), 60_000)).toBe(false);
      expect(w.sync.mayProbe("p 1", Date.now(), 60_000)).toBe(false);
      expect(w.timed).toBe(1);
      await waitFor(() => w.sync.mayProbe("p 1", Date.now(), 60_000));
      const holder = await admin.get(leaseKey(p, "p 1"));
      expect(holder).toMatch(/^[0-9a-f-]{36}$/);
      const ttl = await admin.pttl(leaseKey(p, "p 1"));
      expect(ttl).toBeGreaterThan(30_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      // One probe per lease: asking again finds the key taken (by itself).
      for (let i = 0; i < 5; i++) {
        expect(w.sync.mayProbe("p 1", Date.now(), 60_000)).toBe(false);
        await w.client.ping();
        await sleep(10);
      }
      // The lease lapses (deleted here): the worker asks again and takes it.
      await admin.del(leaseKey(p, "p 1"));
      await waitFor(() => w.sync.mayProbe("p 1", Date.now(), 60_000));
      expect(await admin.get(leaseKey(p, "p 1"))).toBe(holder);
    });

    it("never probes while another worker holds the lease, and leaves its lease alone", async () => {
      const p = fresh();
      const w = await worker(p);
      await admin.set(leaseKey(p, "p1"), "someone-else", "PX", 60_000);
      for (let i = 0; i < 5; i++) {
        expect(w.sync.mayProbe("p1", Date.now(), 60_000)).toBe(false);
        await w.client.ping();
        await sleep(10);
      }
      expect(await admin.get(leaseKey(p, "p1"))).toBe("someone-else");
      expect(w.troubles).toEqual([]);
    });

    it("a lease whose time passed gives no probe", async () => {
      const p = fresh();
      const w = await worker(p);
      expect(w.sync.mayProbe("p1", Date.now(), 1)).toBe(false);
      await w.client.ping();
      await sleep(30);
      expect(w.sync.mayProbe("p1", Date.now(), 1)).toBe(false);
    });

    it("a lease request that fails is reported, and asked again on the next call", async () => {
      const p = fresh();
      const w = await worker(p);
      await admin.set(leaseKey(p, "p1"), "someone-else", "PX", 60_000);
      w.fail = 1;
      expect(w.sync.mayProbe("p1", Date.now(), 60_000)).toBe(false);
      await waitFor(() => w.troubles.length === 1);
      await admin.del(leaseKey(p, "p1"));
      await waitFor(() => w.sync.mayProbe("p1", Date.now(), 60_000));
    });
  });

  describe("attach: verdicts of the other workers", () => {
    it("applies another worker's verdict exactly as it was published", async () => {
      const p = fresh();
      const a = await worker(p);
      const b = await worker(p);
      const applied = await attached(b);
      const v = verdict(30_000, Date.now(), 4);
      a.sync.publish("db:primary 1", v);
      await waitFor(() => applied.length === 1);
      expect(applied).toEqual([["db:primary 1", v]]);
    });

    it("ignores its own verdicts", async () => {
      const p = fresh();
      const a = await worker(p);
      const applied = await attached(a);
      a.sync.publish("p1", verdict(30_000));
      await a.client.ping(); // its publish landed before the sentinel
      const sentinel = verdict(10_000);
      await admin.publish(a.sync.breakerChannel, message("sentinel", sentinel));
      await waitFor(() => applied.length > 0);
      expect(applied).toEqual([["sentinel", sentinel]]);
    });

    it("ignores what is no verdict message", async () => {
      const p = fresh();
      const a = await worker(p);
      const applied = await attached(a);
      const ok = verdict(10_000);
      const bad = [
        "not json",
        "null",
        "42",
        '"text"',
        JSON.stringify({ dependency: "d", verdict: ok }),
        JSON.stringify({ from: 7, dependency: "d", verdict: ok }),
        JSON.stringify({ from: "x", verdict: ok }),
        JSON.stringify({ from: "x", dependency: 7, verdict: ok }),
        JSON.stringify({ from: "x", dependency: "d" }),
        JSON.stringify({ from: "x", dependency: "d", verdict: null }),
        JSON.stringify({ from: "x", dependency: "d", verdict: "open" }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, open: "true" } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, open: 1 } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { until: 1, opens: 1, at: 1 } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, until: "5" } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, opens: "1" } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, at: "1" } }),
        JSON.stringify({ from: "x", dependency: "d", verdict: { ...ok, at: null } }),
        '{"from":"x","dependency":"d","verdict":{"open":true,"until":1e999,"opens":1,"at":1}}',
        '{"from":"x","dependency":"d","verdict":{"open":true,"until":1,"opens":-1e999,"at":1}}',
        '{"from":"x","dependency":"d","verdict":{"open":true,"until":1,"opens":1,"at":1e999}}',
      ];
      for (const text of bad) await admin.publish(a.sync.breakerChannel, text);
      await admin.publish(a.sync.breakerChannel, message("sentinel", ok));
      await waitFor(() => applied.length > 0);
      expect(applied).toEqual([["sentinel", ok]]);
      // Only the checked fields are applied.
      const extra = { ...ok, extra: "x" };
      await admin.publish(a.sync.breakerChannel, message("p2", extra));
      await waitFor(() => applied.length === 2);
      expect(applied[1]).toEqual(["p2", ok]);
      expect(Object.keys(applied[1]?.[1] ?? {}).sort()).toEqual(["at", "open", "opens", "until"]);
    });

    it("every attached applier hears a verdict; a second attach opens no second subscriber", async () => {
      const p = fresh();
      const a = await worker(p);
      const first = await attached(a);
      const second: string[] = [];
      a.sync.attach((dependency) => second.push(dependency));
      await sleep(100);
      expect(await listeners(a.sync.breakerChannel)).toBe(1);
      await admin.publish(a.sync.breakerChannel, message("p1", verdict(5_000)));
      await waitFor(() => first.length === 1 && second.length === 1);
      expect(second).toEqual(["p1"]);
    });

    it("listens on a connection of its own that queues commands and reconnects within 500 ms", async () => {
      const a = await worker(fresh());
      await attached(a);
      const subscriber = (a.sync as unknown as { subscriber: Redis }).subscriber;
      expect(subscriber).not.toBe(a.client);
      expect(subscriber.options.enableOfflineQueue).toBe(true);
      const retry = subscriber.options.retryStrategy;
      expect([1, 2, 3, 4, 5, 20].map((times) => retry?.(times))).toEqual([
        100, 200, 400, 500, 500, 500,
      ]);
      expect(retry?.(0)).toBe(50);
      // Its connection's errors are the store's trouble.
      const error = new Error("connection reset");
      subscriber.emit("error", error);
      expect(a.troubles).toContain(error);
    });

    it("on its first connection it puts back and reads what stands in Redis once", async () => {
      const p = fresh();
      const a = await worker(p, { db: 5 }); // a database of its own: one SCAN page
      await a.client.flushdb();
      await attached(a);
      // One round trip to put back (and start the epoch), one SCAN; no MGET (no verdict).
      await waitFor(() => a.timed >= 2);
      await sleep(300);
      expect(a.timed).toBe(2);
      expect(a.troubles).toEqual([]);
    });

    it("a subscription Redis refuses is reported", async () => {
      const p = fresh();
      const user = `nosub-${p}`;
      await admin.call("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-subscribe");
      try {
        const a = await worker(p, { username: user, password: "pw" });
        a.sync.attach(() => undefined);
        await waitFor(() => a.troubles.length > 0);
        expect(String(a.troubles[0])).toMatch(/NOPERM/);
        expect(await listeners(a.sync.breakerChannel)).toBe(0);
      } finally {
        await admin.call("ACL", "DELUSER", user);
      }
    });

    it("a message on another channel of its connection is not applied", async () => {
      const a = await worker(fresh());
      const applied = await attached(a);
      // The subscriber's connection hears every channel it is subscribed to on one event.
      const subscriber = (a.sync as unknown as { subscriber: Redis }).subscriber;
      subscriber.emit("message", `${a.sync.breakerChannel}:other`, message("p1", verdict(5_000)));
      subscriber.emit("message", a.sync.breakerChannel, message("p2", verdict(5_000)));
      expect(applied.map(([d]) => d)).toEqual(["p2"]);
    });

    it("a worker on another database does not hear this one", async () => {
      const p = fresh();
      const a = await worker(p);
      const b = await worker(p, { db: 3 });
      const applied = await attached(b);
      a.sync.publish("p1", verdict(30_000));
      await a.client.ping();
      const sentinel = verdict(10_000);
      await admin.publish(b.sync.breakerChannel, message("sentinel", sentinel));
      await waitFor(() => applied.length > 0);
      expect(applied).toEqual([["sentinel", sentinel]]);
    });

    it("a worker that attaches late takes the open verdicts standing in Redis", async () => {
      const p = fresh();
      const b = await worker(p);
      const now = Date.now();
      const standing = verdict(60_000, now - 500, 2);
      // Known to b, older in Redis: not applied. Known, newer in Redis: applied (even closed).
      const knownNewer = verdict(60_000, now);
      const knownOlder = verdict(60_000, now - 2_000);
      const sameAt = verdict(60_000, now - 1_000);
      b.sync.publish("kept", knownNewer);
      b.sync.publish("replaced", knownOlder);
      b.sync.publish("same", sameAt);
      await waitFor(async () => (await admin.exists(stateKey(p, "same"))) === 1);
      const newerClosed = verdict(undefined, now - 100);
      await admin.set(stateKey(p, "open one"), JSON.stringify(standing));
      await admin.set(stateKey(p, "closed one"), JSON.stringify(verdict(undefined, now)));
      await admin.set(stateKey(p, "kept"), JSON.stringify(verdict(undefined, now - 3_000)));
      await admin.set(stateKey(p, "replaced"), JSON.stringify(newerClosed));
      await admin.set(stateKey(p, "same"), JSON.stringify({ ...sameAt, opens: 9 }));
      await admin.set(stateKey(p, "garbage"), "{not json");
      const applied = await attached(b);
      await waitFor(() => applied.length >= 2);
      await sleep(50);
      expect(new Map(applied)).toEqual(
        new Map([
          ["open one", standing],
          ["replaced", newerClosed],
        ]),
      );
      expect(applied).toHaveLength(2);
      // What it took is known now: the catch-up of its next connection applies nothing again.
      await admin.del(epochKey(p));
      b.client.disconnect();
      await waitFor(() => b.client.status === "end");
      await b.client.connect();
      await waitFor(async () => (await admin.exists(epochKey(p))) === 1);
      await b.client.ping();
      await sleep(100);
      expect(applied).toHaveLength(2);
    });
  });

  describe("admit: the fleet's alert gate", () => {
    it("the first worker in a period sends, the others count what they held", async () => {
      const p = fresh();
      const a = await worker(p);
      const b = await worker(p);
      const kind = "SERVICE_DOWN:p 1";
      expect(await a.sync.admit(kind, Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      expect(await admin.get(gateKey(p, kind))).toBe("1");
      const ttl = await admin.pttl(gateKey(p, kind));
      expect(ttl).toBeGreaterThan(30_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      expect(await b.sync.admit(kind, Date.now(), 60_000)).toEqual({ send: false, suppressed: 1 });
      expect(await a.sync.admit(kind, Date.now(), 60_000)).toEqual({ send: false, suppressed: 2 });
      expect(await admin.get(`${gateKey(p, kind)}:held`)).toBe("2");
      // Another kind has its own gate.
      expect(await b.sync.admit("OTHER", Date.now(), 60_000)).toEqual({
        send: true,
        suppressed: 0,
      });
      // The period ends (the gate lapses): the next sender carries the count held back.
      await admin.del(gateKey(p, kind));
      expect(await b.sync.admit(kind, Date.now(), 60_000)).toEqual({ send: true, suppressed: 2 });
      expect(await admin.exists(`${gateKey(p, kind)}:held`)).toBe(0);
    });

    it("a period that is no whole number of ms is rounded (at least 1 ms)", async () => {
      const p = fresh();
      const a = await worker(p);
      expect(await a.sync.admit("k1", Date.now(), 60_000.4)).toEqual({ send: true, suppressed: 0 });
      expect(await admin.pttl(gateKey(p, "k1"))).toBeLessThanOrEqual(60_000);
      expect(await a.sync.admit("k2", Date.now(), 0.2)).toEqual({ send: true, suppressed: 0 });
      expect(a.troubles).toEqual([]);
    });

    it("while degraded it throws; the gate it decided alone reaches Redis after (NX, within the period)", async () => {
      const p = fresh();
      const a = await worker(p);
      a.degraded = true;
      await expect(a.sync.admit("k", Date.now(), 5_000)).rejects.toThrow("Redis is away");
      // A gate already in force is not extended by a longer period.
      await expect(a.sync.admit("k", Date.now(), 600_000)).rejects.toThrow("Redis is away");
      expect(a.sync.waiting).toBe(true);
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(gateKey(p, "k"))).toBe("1");
      const ttl = await admin.pttl(gateKey(p, "k"));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(5_000);
      expect(await admin.exists(`${gateKey(p, "k")}:held`)).toBe(0);
    });

    it("a gate set meanwhile by another worker is left as it is", async () => {
      const p = fresh();
      const a = await worker(p);
      await admin.set(gateKey(p, "k"), "other", "PX", 60_000);
      a.degraded = true;
      await expect(a.sync.admit("k", Date.now(), 5_000)).rejects.toThrow("Redis is away");
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(gateKey(p, "k"))).toBe("other");
      expect(await admin.pttl(gateKey(p, "k"))).toBeGreaterThan(5_000);
    });

    it("a gate that times out is rethrown as it came and decided alone", async () => {
      const p = fresh();
      const a = await worker(p);
      a.fail = 1;
      await expect(a.sync.admit("k", Date.now(), 60_000)).rejects.toThrow(
        "Redis did not answer in time",
      );
      expect(a.sync.waiting).toBe(true);
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(gateKey(p, "k"))).toBe("1");
    });
  });

  describe("away", () => {
    it("is false while connected, true while degraded", async () => {
      const w = await worker(fresh());
      expect(w.sync.away()).toBe(false);
      w.degraded = true;
      expect(w.sync.away()).toBe(true);
    });

    it("is false while the first connection is being made, true once the client is closed", async () => {
      const w = makeWorker(fresh(), { lazyConnect: true });
      expect(w.client.status).toBe("wait");
      expect(w.sync.away()).toBe(false);
      await connected(w.client);
      expect(w.sync.away()).toBe(false);
      w.client.disconnect();
      await waitFor(() => w.client.status === "end");
      expect(w.sync.away()).toBe(true);
    });

    it("RESP3: the subscriber carries the commands while the client is down", async () => {
      const p = fresh();
      await admin.set(epochKey(p), "1");
      const w = await worker(p);
      await attached(w);
      w.client.disconnect();
      await waitFor(() => w.client.status === "end");
      expect(w.sync.away()).toBe(false);
      expect(await w.sync.write("t", "k").claim(60_000)).toEqual({ kind: "mine" });
      expect(await admin.exists(markerKey(p, "t", "k"))).toBe(1);
    });

    it("RESP2: a subscribed connection takes no commands, so the fleet is away", async () => {
      const p = fresh();
      const w = await worker(p, { protocol: 2 });
      await attached(w);
      w.client.disconnect();
      await waitFor(() => w.client.status === "end");
      expect(w.sync.away()).toBe(true);
      await expect(w.sync.write("t", "k").claim(60_000)).rejects.toThrow("Redis is not connected");
    });
  });

  describe("write: the idempotency ledger", () => {
    /** A prefix whose epoch started long ago (no restart grace). */
    async function settled(): Promise<string> {
      const p = fresh();
      await admin.set(epochKey(p), "1");
      return p;
    }

    it("the first claim is mine; its marker holds the claim id and lease end; others are busy", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const before = await serverNow();
      expect(await a.sync.write("pay", "order-1").claim(60_000)).toEqual({ kind: "mine" });
      const marker = (await admin.get(markerKey(p, "pay", "order-1"))) ?? "";
      const match = /^([0-9a-f-]{36}):0\|(\d+)$/.exec(marker);
      expect(match).not.toBeNull();
      const leaseEnd = Number(match?.[2]);
      expect(leaseEnd).toBeGreaterThanOrEqual(before + 60_000);
      expect(leaseEnd).toBeLessThanOrEqual((await serverNow()) + 60_000);
      const ttl = await admin.pttl(markerKey(p, "pay", "order-1"));
      expect(ttl).toBeGreaterThan(30_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      // A second write of the same worker: the next claim id.
      expect(await a.sync.write("pay", "order-2").claim(60_000)).toEqual({ kind: "mine" });
      expect(await admin.get(markerKey(p, "pay", "order-2"))).toMatch(
        new RegExp(`^${match?.[1] ?? "?"}:1\\|\\d+$`),
      );
      const busy = await b.sync.write("pay", "order-1").claim(60_000);
      expect(busy.kind).toBe("busy");
      const retryMs = busy.kind === "busy" ? busy.retryMs : 0;
      expect(retryMs).toBeGreaterThanOrEqual(1);
      expect(retryMs).toBeLessThanOrEqual(60_000);
      // The same call asking again still holds it.
      const write = a.sync.write("pay", "order-3");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
    });

    it("the raw key never appears in a key name: it is hashed", async () => {
      const p = await settled();
      const a = await worker(p);
      const raw = "customer 42/secret";
      const write = a.sync.write("pay:card", raw);
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      write.complete("ok", 60_000);
      await waitFor(async () => (await admin.exists(resultKey(p, "pay:card", raw))) === 1);
      const keys = await admin.keys(`${p}*`);
      expect(keys.sort()).toEqual([epochKey(p), resultKey(p, "pay:card", raw)].sort());
      expect(keys.some((k) => k.includes("secret"))).toBe(false);
      expect(resultKey(p, "pay:card", raw)).toBe(`${p}:{fleet}:ledger:pay%3Acard:${hashKey(raw)}`);
    });

    it("a lease or hold that is no whole number of ms is rounded up (a lease of 0 is 1 ms)", async () => {
      const p = await settled();
      const a = await worker(p);
      expect(await a.sync.write("t", "k1").claim(1_000.5)).toEqual({ kind: "mine" });
      expect(await a.sync.write("t", "k2").claim(1_000, 5_000.5)).toEqual({ kind: "mine" });
      expect(await a.sync.write("t", "k3").claim(0)).toEqual({ kind: "mine" });
      expect(await a.sync.write("t", "k4").claim(-5, 0)).toEqual({ kind: "mine" });
    });

    it("a strict claim keeps the marker for the hold; a silent sender's key is lost to strict, free to lenient", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      expect(await a.sync.write("t", "k").claim(1, 60_000)).toEqual({ kind: "mine" });
      const ttl = await admin.pttl(markerKey(p, "t", "k"));
      expect(ttl).toBeGreaterThan(30_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      await sleep(20); // past the sender's lease of 1 ms
      expect(await b.sync.write("t", "k").claim(1_000, 60_000)).toEqual({ kind: "lost" });
      expect(await b.sync.write("t", "k").claim(1_000)).toEqual({ kind: "mine" });
      // A lenient claim keeps its marker only for its lease.
      const lenient = await admin.pttl(markerKey(p, "t", "k"));
      expect(lenient).toBeGreaterThan(0);
      expect(lenient).toBeLessThanOrEqual(1_000);
    });

    it("a completed write is done for everyone, with its value; the marker is let go", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const values: unknown[] = [{ id: 7, items: [1, "x", null] }, "text", 42, 0, false, null];
      for (const [i, value] of values.entries()) {
        const write = a.sync.write("t", `k${i}`);
        expect(await write.claim(60_000)).toEqual({ kind: "mine" });
        write.complete(value, 60_000);
        await waitFor(async () => (await admin.exists(markerKey(p, "t", `k${i}`))) === 0);
        expect(await admin.get(resultKey(p, "t", `k${i}`))).toBe(JSON.stringify({ value }));
        const ttl = await admin.pttl(resultKey(p, "t", `k${i}`));
        expect(ttl).toBeGreaterThan(30_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
        expect(await b.sync.write("t", `k${i}`).claim(60_000)).toEqual({ kind: "done", value });
      }
      expect(a.sync.waiting).toBe(false);
    });

    it("a value JSON cannot hold is stored as done but unshareable, never free again", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      for (const [key, value] of [
        ["big", 10n],
        ["loop", circular],
      ] as const) {
        const write = a.sync.write("t", key);
        expect(await write.claim(60_000)).toEqual({ kind: "mine" });
        write.complete(value, 60_000);
        await waitFor(async () => (await admin.exists(resultKey(p, "t", key))) === 1);
        expect(await admin.get(resultKey(p, "t", key))).toBe('{"unshareable":true}');
        const claim = await b.sync.write("t", key).claim(60_000);
        expect(claim.kind).toBe("done");
        expect(claim.kind === "done" && claim.value).toBeUndefined();
      }
    });

    it("a stored result that is no JSON reads as done without a value", async () => {
      const p = await settled();
      const a = await worker(p);
      await admin.set(resultKey(p, "t", "k"), "{broken");
      const claim = await a.sync.write("t", "k").claim(60_000);
      expect(claim.kind).toBe("done");
      expect(claim.kind === "done" && claim.value).toBeUndefined();
    });

    it("release lets the key go: another worker may then send it", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      write.release();
      await waitFor(async () => (await admin.exists(markerKey(p, "t", "k"))) === 0);
      expect(await b.sync.write("t", "k").claim(60_000)).toEqual({ kind: "mine" });
      expect(a.sync.waiting).toBe(false);
    });

    it("a release by a call that does not hold the key leaves the holder's marker", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      expect(await b.sync.write("t", "k").claim(60_000)).toEqual({ kind: "mine" });
      const held = await admin.get(markerKey(p, "t", "k"));
      const busy = a.sync.write("t", "k");
      expect((await busy.claim(60_000)).kind).toBe("busy");
      busy.release();
      await waitFor(() => !a.sync.waiting);
      const sent = a.timed;
      a.sync.write("t", "k").release(); // never claimed: nothing to send
      expect(a.timed).toBe(sent);
      expect(a.sync.waiting).toBe(false);
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(markerKey(p, "t", "k"))).toBe(held);
    });

    it("a write completed without a claim still stores its result, and leaves the holder's marker", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      expect(await b.sync.write("t", "k").claim(60_000)).toEqual({ kind: "mine" });
      const held = await admin.get(markerKey(p, "t", "k"));
      a.sync.write("t", "k").complete({ ok: true }, 60_000);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "k"))) === 1);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":{"ok":true}}');
      expect(await admin.get(markerKey(p, "t", "k"))).toBe(held);
      await waitFor(() => !a.sync.waiting);
      // The first result stored stays.
      const c = await worker(p);
      const other = c.sync.write("t", "k");
      other.complete("second", 60_000);
      await waitFor(() => !c.sync.waiting);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":{"ok":true}}');
    });

    it("a claim made while the client connects, or checks the connection, waits for it", async () => {
      const p = await settled();
      const connecting = makeWorker(p);
      expect(connecting.client.status).toBe("connecting");
      expect(connecting.sync.away()).toBe(false);
      expect(await connecting.sync.write("t", "k1").claim(60_000)).toEqual({ kind: "mine" });
      expect(connecting.readies).toBe(1);
      // Connected: a claim does not wait for the connection.
      expect(await connecting.sync.write("t", "k3").claim(60_000)).toEqual({ kind: "mine" });
      expect(connecting.readies).toBe(1);
      const checking = makeWorker(p);
      let seen: [string, boolean] | undefined;
      const claim = new Promise<unknown>((resolve, reject) => {
        checking.client.once("connect", () => {
          seen = [checking.client.status, checking.sync.away()];
          checking.sync.write("t", "k2").claim(60_000).then(resolve, reject);
        });
      });
      expect(await claim).toEqual({ kind: "mine" });
      expect(seen).toEqual(["connect", false]);
    });

    it("a claim waits for the first connection; with no connection it throws", async () => {
      const p = await settled();
      const lazy = makeWorker(p, { lazyConnect: true });
      expect(await lazy.sync.write("t", "k1").claim(60_000)).toEqual({ kind: "mine" });
      const never = makeWorker(
        p,
        { lazyConnect: true },
        { ready: () => Promise.reject(new Error("x")) },
      );
      await expect(never.sync.write("t", "k2").claim(60_000)).rejects.toThrow(
        "Redis is not connected",
      );
      const closed = await worker(p);
      closed.client.disconnect();
      await waitFor(() => closed.client.status === "end");
      await expect(closed.sync.write("t", "k3").claim(60_000)).rejects.toThrow(
        "Redis is not connected",
      );
      expect(closed.readies).toBe(0); // not connecting: no wait
    });

    it("a share made while no connection exists is sent once there is one", async () => {
      const p = await settled();
      const a = await worker(p);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      a.client.disconnect();
      await waitFor(() => a.client.status === "end");
      write.complete("v", 60_000);
      expect(a.sync.waiting).toBe(true);
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":"v"}');
      expect(await admin.exists(markerKey(p, "t", "k"))).toBe(0);
    });

    it("reads the claim script's replies: retry times at least 1 ms, a held key remembered as replied", async () => {
      const p = await settled();
      const a = await worker(p);
      const replying = async (kind: string, detail: string) => {
        a.client.defineCommand("selfhealLedgerClaim", {
          numberOfKeys: 3,
          lua: `return {'${kind}', '${detail}'}`,
        });
        return a.sync.write("t", "k").claim(60_000);
      };
      expect(await replying("busy", "250")).toEqual({ kind: "busy", retryMs: 250 });
      expect(await replying("busy", "0")).toEqual({ kind: "busy", retryMs: 1 });
      expect(await replying("busy", "-5")).toEqual({ kind: "busy", retryMs: 1 });
      expect(await replying("busy", "soon")).toEqual({ kind: "busy", retryMs: 1 });
      expect(await replying("settle", "1500")).toEqual({ kind: "settle", retryMs: 1_500 });
      expect(await replying("settle", "0")).toEqual({ kind: "settle", retryMs: 1 });
      expect(await replying("settle", "-5")).toEqual({ kind: "settle", retryMs: 1 });
      expect(await replying("settle", "")).toEqual({ kind: "settle", retryMs: 1 });
      expect(await replying("lost", "")).toEqual({ kind: "lost" });
      expect(await replying("done", '{"value":[1,2]}')).toEqual({ kind: "done", value: [1, 2] });
      // A "mine" reply holds the marker `claim id|detail`: put back as such on a new connection.
      expect(await replying("mine", "424242")).toEqual({ kind: "mine" });
      const long = "x".repeat(60);
      await expect(replying(long, "")).rejects.toThrow(
        `unexpected ledger reply ${JSON.stringify(long).slice(0, 40)}`,
      );
      await expect(replying(long, "")).rejects.not.toThrow(long.slice(0, 40));
      a.client.disconnect();
      await waitFor(() => a.client.status === "end");
      await a.client.connect();
      await waitFor(async () => (await admin.keys(`${p}:*:inflight`)).length === 1);
      const [marker] = await admin.keys(`${p}:*:inflight`);
      expect(marker).toBe(markerKey(p, "t", "k"));
      expect(await admin.get(marker ?? "")).toMatch(/^[0-9a-f-]{36}:a\|424242$/);
      within(await admin.pttl(marker ?? ""), 60_000);
    });

    it("an unexpected reply of the claim script is an error", async () => {
      const p = await settled();
      const a = await worker(p);
      a.client.defineCommand("selfhealLedgerClaim", {
        numberOfKeys: 3,
        lua: "return {'maybe', ''}",
      });
      await expect(a.sync.write("t", "k").claim(60_000)).rejects.toThrow(
        'unexpected ledger reply "maybe"',
      );
    });

    /** Redis's uptime, whole seconds (INFO). */
    async function uptime(): Promise<number> {
      const info = await admin.info("server");
      return Number(/uptime_in_seconds:(\d+)/.exec(info)?.[1]);
    }

    it("a new fleet's first claim on a Redis up longer than the grace is granted at once: no restart grace", async () => {
      // Waits for the server's state, not a time: a Redis up this long cannot have just restarted.
      await waitFor(async () => (await uptime()) - 1 >= RESTART_GRACE_MS / 1_000);
      const p = fresh();
      const a = await worker(p);
      expect(await a.sync.write("t", "k").claim(60_000)).toEqual({ kind: "mine" });
      // The epoch is when this Redis started (as far as INFO's whole seconds tell).
      const epoch = Number(await admin.get(epochKey(p)));
      expect(epoch).toBeLessThanOrEqual((await serverNow()) - RESTART_GRACE_MS);
      // A second worker new to the fleet, and a resync, leave it as it is.
      const b = await worker(p);
      expect(await b.sync.write("t", "k2").claim(60_000)).toEqual({ kind: "mine" });
      expect(Number(await admin.get(epochKey(p)))).toBe(epoch);
    });

    it("a worker that knew the fleet and finds its epoch gone (state lost) starts the grace: new claims settle", async () => {
      // A fleet with an epoch of its own: a fresh one's first claim would settle while this Redis
      // is younger than the grace, as it is when a shuffled run puts this test first.
      const p = await settled();
      const a = await worker(p);
      expect(await a.sync.write("t", "before").claim(60_000)).toEqual({ kind: "mine" });
      // Redis lost the fleet's state (a restart without persistence, a flush).
      await admin.del(epochKey(p));
      const before = await serverNow();
      const claim = await a.sync.write("t", "k").claim(60_000);
      expect(claim.kind).toBe("settle");
      const retryMs = claim.kind === "settle" ? claim.retryMs : 0;
      expect(retryMs).toBeGreaterThanOrEqual(1);
      expect(retryMs).toBeLessThanOrEqual(RESTART_GRACE_MS);
      const epoch = Number(await admin.get(epochKey(p)));
      expect(epoch).toBeGreaterThanOrEqual(before);
      expect(epoch).toBeLessThanOrEqual(await serverNow());
      expect(await admin.exists(markerKey(p, "t", "k"))).toBe(0);
      // A worker new to the fleet waits out the same grace: the epoch stands.
      const b = await worker(p);
      const other = await b.sync.write("t", "k3").claim(60_000);
      if ((await serverNow()) - epoch < RESTART_GRACE_MS) expect(other.kind).toBe("settle");
      // Past the grace, the key is claimed.
      await waitFor(async () => (await a.sync.write("t", "k").claim(60_000)).kind === "mine");
    });
  });

  describe("budgets", () => {
    it("add returns the fleet's running total, spent reads it; kept about 24 h", async () => {
      const p = fresh();
      const a = await worker(p);
      const b = await worker(p);
      expect(await a.sync.add("task 1", 0.1)).toBeCloseTo(0.1, 10);
      expect(await b.sync.add("task 1", 0.25)).toBeCloseTo(0.35, 10);
      expect(await a.sync.spent("task 1")).toBeCloseTo(0.35, 10);
      expect(await b.sync.spent("task 1")).toBeCloseTo(0.35, 10);
      expect(await a.sync.spent("unknown")).toBe(0);
      const key = `${budgetKeyPrefix(p)}${hashKey("task 1")}`;
      expect(Number(await admin.get(key))).toBeCloseTo(0.35, 10);
      const ttl = await admin.pttl(key);
      expect(ttl).toBeGreaterThan(23 * HOUR);
      expect(ttl).toBeLessThanOrEqual(24 * HOUR);
      expect(await a.sync.add("task 2", 2)).toBe(2);
    });

    it("both throw while degraded, and nothing is added", async () => {
      const p = fresh();
      const a = await worker(p);
      await a.sync.add("t", 1);
      a.degraded = true;
      await expect(a.sync.add("t", 1)).rejects.toThrow("Redis is away");
      await expect(a.sync.spent("t")).rejects.toThrow("Redis is away");
      a.degraded = false;
      expect(await a.sync.spent("t")).toBe(1);
    });
  });

  describe("drift", () => {
    it("counts UNKNOWN diagnoses over the last N, per tool and overall, kept about 24 h", async () => {
      const p = fresh();
      const a = await worker(p);
      const drift = a.sync.drift("agent 1", 3);
      expect(await drift.push("a b", true)).toEqual({
        overall: { total: 1, hits: 1 },
        tool: { total: 1, hits: 1 },
      });
      expect(await drift.push("c", false)).toEqual({
        overall: { total: 2, hits: 1 },
        tool: { total: 1, hits: 0 },
      });
      expect(await drift.push("a b", true)).toEqual({
        overall: { total: 3, hits: 2 },
        tool: { total: 2, hits: 2 },
      });
      // The window is 3: the oldest rolls off.
      expect(await drift.push("a b", false)).toEqual({
        overall: { total: 3, hits: 1 },
        tool: { total: 3, hits: 2 },
      });
      expect(await drift.push("a b", false)).toEqual({
        overall: { total: 3, hits: 1 },
        tool: { total: 3, hits: 1 },
      });
      const key = `${new AgentKeys(p, "agent 1").tag}:drift`;
      expect(await admin.hget(key, `t:${encodeName("a b")}|n`)).toBe("4");
      const ttl = await admin.pttl(key);
      expect(ttl).toBeGreaterThan(23 * HOUR);
      expect(ttl).toBeLessThanOrEqual(24 * HOUR);
      // Another agent has its own windows.
      expect(await a.sync.drift("agent 2", 3).push("a b", true)).toEqual({
        overall: { total: 1, hits: 1 },
        tool: { total: 1, hits: 1 },
      });
    });

    it("throws while degraded", async () => {
      const a = await worker(fresh());
      a.degraded = true;
      await expect(a.sync.drift("x", 5).push("t", true)).rejects.toThrow("Redis is away");
    });
  });

  describe("scanKeys and readVerdicts", () => {
    it("reads the verdicts under a prefix by dependency name, skipping what is no verdict", async () => {
      const p = fresh();
      const prefix = breakerKeyPrefix(p);
      const v1 = verdict(60_000, 1_000, 2);
      const v2 = verdict(undefined, 2_000, 0);
      await admin.set(stateKey(p, "p1"), JSON.stringify(v1));
      await admin.set(stateKey(p, "db:primary *"), JSON.stringify(v2));
      await admin.set(`${prefix}a`, "not json");
      await admin.set(`${prefix}b`, "null");
      await admin.set(`${prefix}c`, JSON.stringify({ ...v1, open: "yes" }));
      await admin.set(`${prefix}d`, JSON.stringify({ ...v1, until: "1" }));
      await admin.set(`${prefix}e`, JSON.stringify({ ...v1, opens: null }));
      await admin.set(`${prefix}f`, JSON.stringify({ ...v1, at: "1" }));
      await admin.set(`${prefix}g`, '{"open":true,"until":1e999,"opens":1,"at":1}');
      await admin.set(`${prefix}h`, "7");
      await admin.hset(`${prefix}i`, "f", JSON.stringify(v1));
      await admin.set(`${fleetTag(p)}:elsewhere`, JSON.stringify(v1));
      let calls = 0;
      const read = await readVerdicts(admin, prefix, (work) => {
        calls++;
        return work;
      });
      expect(read).toEqual(
        new Map([
          ["p1", v1],
          ["db:primary *", v2],
        ]),
      );
      expect(calls).toBeGreaterThanOrEqual(2);
      expect(await readVerdicts(admin, `${p}:nothing:`, (work) => work)).toEqual(new Map());
    });

    it("scans past the first page, and stops near 10,000 keys", async () => {
      const p = fresh();
      const few = Array.from({ length: 450 }, (_, i) => [`${p}:few:${i}`, "1"]).flat();
      await admin.mset(...few);
      await admin.set(`${p}:other`, "1");
      const found = await scanKeys(admin, `${p}:few:`, (work) => work);
      expect(new Set(found).size).toBe(450);
      expect(found.every((k) => k.startsWith(`${p}:few:`))).toBe(true);
      const many = Array.from({ length: 12_000 }, (_, i) => [`${p}:many:${i}`, "1"]).flat();
      await admin.mset(...many);
      const capped = await scanKeys(admin, `${p}:many:`, (work) => work);
      expect(capped.length).toBeGreaterThanOrEqual(10_000);
      expect(capped.length).toBeLessThan(12_000);
      await admin.flushall();
    });
  });

  describe("close", () => {
    it("stops listening: later verdicts are not applied; its client keeps no listener of it", async () => {
      const p = fresh();
      const a = await worker(p);
      const b = await worker(p);
      const readyListeners = b.client.listenerCount("ready");
      const applied = await attached(b);
      b.sync.close();
      expect(b.client.listenerCount("ready")).toBe(readyListeners - 1);
      await waitFor(async () => (await listeners(b.sync.breakerChannel)) === 0);
      a.sync.publish("p1", verdict(30_000));
      await admin.publish(b.sync.breakerChannel, message("p2", verdict(30_000)));
      await a.client.ping();
      await sleep(100);
      expect(applied).toEqual([]);
      // Attached again after close: no subscriber.
      b.sync.attach(() => undefined);
      await sleep(100);
      expect(await listeners(b.sync.breakerChannel)).toBe(0);
    });

    it("after close a share is no longer sent", async () => {
      const p = fresh();
      await admin.set(epochKey(p), "1");
      const a = await worker(p);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      a.sync.close();
      write.complete("v", 60_000);
      await a.client.ping();
      await sleep(300);
      expect(await admin.exists(resultKey(p, "t", "k"))).toBe(0);
      expect(a.timed).toBe(1);
    });

    it("drops what waited: no retry sends it after close", async () => {
      const p = fresh();
      const a = await worker(p);
      await admin.hset(stateKey(p, "p1"), "f", "1");
      a.degraded = true;
      a.sync.publish("p1", verdict(60_000));
      await waitFor(() => a.troubles.length > 0);
      a.sync.close();
      await sleep(300); // a retry already sent fails on the hash
      await admin.del(stateKey(p, "p1"));
      a.degraded = false;
      await sleep(500);
      expect(await admin.exists(stateKey(p, "p1"))).toBe(0);
    });
  });
});
