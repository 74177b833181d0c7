/**
 * RedisFleetSync's outage and restart machinery, in the test process: what is sent at once and
 * what waits (the outbox, its 10,000 limit), the retry every poll while something waits, a retry
 * after a stop (only what waited is sent) against a new connection or a restart without
 * persistence (everything the worker still knows is put back, not what expired), the verdicts
 * taken after a reconnect, the connection commands go through (the subscriber's under RESP3), and
 * claims made while the client is still connecting. Real `redis-server` (stopped with SIGSTOP,
 * killed with SIGKILL and restarted empty); each test under its own key prefix, read back with a
 * separate admin client.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BreakerVerdict } from "../../src/recovery/breaker.js";
import { RedisFleetSync, RESTART_GRACE_MS, type SyncHost } from "../../src/redis/fleet-sync.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";
import { sleep, waitFor } from "../helpers/wait.js";
import {
  epochKey,
  gateKey,
  leaseKey,
  markerKey,
  resultKey,
  stateKey,
  within,
  connected,
} from "../helpers/fleet-keys.js";

const available = haveRedis("RedisFleetSync outage and restart");

/** An open verdict reached at `at`, open for `openMs`. */
const opened = (openMs: number, at = Date.now(), opens = 1): BreakerVerdict => ({
  open: true,
  until: at + openMs,
  opens,
  at,
});
/** A closed verdict reached at `at`. */
const closed = (at = Date.now(), until = at): BreakerVerdict => ({
  open: false,
  until,
  opens: 1,
  at,
});

interface Worker {
  client: Redis;
  sync: RedisFleetSync;
  troubles: unknown[];
  degraded: boolean;
  /** Calls of the host's `timed` (each round trip the sync makes). */
  timedCalls: number;
  /** `timed` calls rejected by its timeout. */
  timedOut: number;
  /** The `timed` call (by number) that rejects at once, as a timed-out command would. */
  failAt?: number;
}

interface WorkerOptions {
  /** RESP version (the store's: 3). */
  protocol?: 2 | 3;
  lazyConnect?: boolean;
  /** `timed` rejects after this long (none: pass-through). */
  timeoutMs?: number;
  /** Do not wait for the first connection. */
  noWait?: boolean;
}

describe.skipIf(!available)("RedisFleetSync outage and restart (real redis-server)", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let n = 0;
  let stopped = false;
  const workers: Worker[] = [];
  const others: Redis[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => {
    unhandled.push(reason);
  };

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    admin.on("error", () => undefined);
    process.on("unhandledRejection", onUnhandled);
  });
  afterAll(async () => {
    process.off("unhandledRejection", onUnhandled);
    admin.disconnect();
    await redis.stop();
  });
  afterEach(() => {
    if (stopped) process.kill(redis.pid ?? 0, "SIGCONT");
    stopped = false;
    for (const w of workers.splice(0)) {
      w.sync.close();
      w.client.disconnect();
    }
    for (const c of others.splice(0)) c.disconnect();
  });

  const stop = () => {
    process.kill(redis.pid ?? 0, "SIGSTOP");
    stopped = true;
  };
  const resume = () => {
    process.kill(redis.pid ?? 0, "SIGCONT");
    stopped = false;
  };

  /** A prefix whose epoch started long ago (no restart grace for claims). */
  async function settled(): Promise<string> {
    const p = `fsx${++n}`;
    await admin.set(epochKey(p), "1");
    return p;
  }

  /** A worker built as the store builds one (see src/redis/store.ts), connected unless told. */
  async function worker(prefix: string, options: WorkerOptions = {}): Promise<Worker> {
    const { timeoutMs, noWait, protocol = 3, lazyConnect = false } = options;
    const client = new Redis(redis.url, {
      // As the store: fail fast while disconnected, RESP3; reconnects sooner than the store's
      // (up to 5 s) to keep the tests short.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: (times) => Math.min(25 * 2 ** Math.min(times, 6), 100),
      protocol,
      lazyConnect,
    });
    RedisFleetSync.define(client);
    client.on("error", () => undefined);
    const w = {
      client,
      troubles: [],
      degraded: false,
      timedCalls: 0,
      timedOut: 0,
    } as unknown as Worker;
    const host: SyncHost = {
      client,
      degraded: () => w.degraded,
      timed: <T>(work: Promise<T>): Promise<T> => {
        w.timedCalls++;
        if (w.timedCalls === w.failAt) {
          work.catch(() => undefined);
          return Promise.reject(new Error("Redis command timed out"));
        }
        if (timeoutMs === undefined) return work;
        return new Promise<T>((resolve, reject) => {
          const timer = setTimeout(() => {
            w.timedOut++;
            reject(new Error("Redis command timed out"));
          }, timeoutMs);
          work.then(
            (value) => {
              clearTimeout(timer);
              resolve(value);
            },
            (error: unknown) => {
              clearTimeout(timer);
              reject(error instanceof Error ? error : new Error(String(error)));
            },
          );
        });
      },
      onTrouble: (error) => {
        w.troubles.push(error);
      },
      ready: () => connected(client),
    };
    w.sync = new RedisFleetSync(host, prefix);
    workers.push(w);
    if (!noWait) await connected(client);
    return w;
  }

  /** Attaches `w` and waits until it listens on its channel; what it applies. */
  async function attached(w: Worker): Promise<[string, BreakerVerdict][]> {
    const applied: [string, BreakerVerdict][] = [];
    w.sync.attach((dependency, v) => applied.push([dependency, v]));
    await waitFor(async () => {
      const [, listening] = (await admin.pubsub("NUMSUB", w.sync.breakerChannel)) as [
        string,
        number,
      ];
      return listening === 1;
    });
    return applied;
  }

  /** The worker's client drops its connection (status `end`). */
  async function drop(w: Worker): Promise<void> {
    w.client.disconnect();
    await waitFor(() => w.client.status === "end");
  }

  /** Deletes every key under `p`. */
  async function lose(p: string): Promise<void> {
    const keys = await admin.keys(`${p}:*`);
    if (keys.length > 0) await admin.del(...keys);
  }

  async function serverNow(): Promise<number> {
    const [s, us] = await admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  describe("sending at once", () => {
    it("a share and a release go out at once, land with the time left, and leave nothing waiting", async () => {
      const p = await settled();
      const a = await worker(p);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      write.complete("v", 60_000);
      // Nothing waits once the share's reply is in (a script's first run may take two).
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":"v"}');
      within(await admin.pttl(resultKey(p, "t", "k")), 60_000);
      expect(await admin.exists(markerKey(p, "t", "k"))).toBe(0);

      const released = a.sync.write("t", "r");
      expect(await released.claim(60_000)).toEqual({ kind: "mine" });
      expect(await admin.exists(markerKey(p, "t", "r"))).toBe(1);
      released.release();
      await waitFor(() => !a.sync.waiting);
      expect(await admin.exists(markerKey(p, "t", "r"))).toBe(0);
      expect(await admin.exists(resultKey(p, "t", "r"))).toBe(0);

      // A write whose claim was never asked: shared with no claim id, another's marker stays.
      await admin.set(markerKey(p, "t", "alone"), "other|1", "PX", 60_000);
      a.sync.write("t", "alone").complete(3, 60_000);
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(resultKey(p, "t", "alone"))).toBe('{"value":3}');
      expect(await admin.get(markerKey(p, "t", "alone"))).toBe("other|1");
      expect(a.sync.waiting).toBe(false);
      expect(a.troubles).toEqual([]);
    });

    it("a share made just before close() is still sent", async () => {
      const p = await settled();
      const a = await worker(p);
      a.sync.write("t", "last").complete("v", 60_000);
      a.sync.close();
      await waitFor(async () => (await admin.get(resultKey(p, "t", "last"))) === '{"value":"v"}');
    });

    it("a share that fails is reported and sent again by the retry", async () => {
      const p = await settled();
      const a = await worker(p, { timeoutMs: 300 });
      await a.client.ping();
      stop();
      a.sync.write("t", "k").complete("v", 60_000);
      await waitFor(() => a.timedOut > 0);
      await sleep(20);
      expect(a.troubles.length).toBeGreaterThan(0);
      expect(String(a.troubles[0])).toContain("timed out");
      resume();
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":"v"}');
    });
  });

  describe("while the client has no connection", () => {
    it("the sync is away, keeps what it cannot send without throwing, and sends it once connected", async () => {
      const p = await settled();
      const a = await worker(p);
      await drop(a);
      expect(a.sync.away()).toBe(true);
      expect(() => {
        a.sync.write("t", "k").complete("v", 60_000);
      }).not.toThrow();
      expect(a.sync.waiting).toBe(true);
      await expect(a.sync.write("t", "c").claim(60_000)).rejects.toThrow("Redis is not connected");
      // A few polls with no connection: each retry waits for one, none fails.
      const before = unhandled.length;
      await sleep(450);
      expect(unhandled.slice(before)).toEqual([]);
      expect(a.sync.waiting).toBe(true);
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      expect(a.sync.away()).toBe(false);
      expect(await admin.get(resultKey(p, "t", "k"))).toBe('{"value":"v"}');
      expect(a.troubles).toEqual([]);
    });

    it("keeps at most 10,000 shares (the oldest go first)", async () => {
      const p = await settled();
      const a = await worker(p);
      await drop(a);
      for (let i = 0; i <= 10_000; i++) a.sync.write("t", `k${i}`).complete(i, 60_000);
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      expect(await admin.exists(resultKey(p, "t", "k0"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "k1"))).toBe('{"value":1}');
      expect(await admin.get(resultKey(p, "t", "k10000"))).toBe('{"value":10000}');
      expect((await admin.keys(`${p}:*:ledger:*`)).length).toBe(10_000);
      await lose(p); // keeps the catch-ups' scans of later tests short
    });
  });

  describe("the retry while something decided alone waits", () => {
    it("sends a verdict and an alert gate decided alone, then stops retrying", async () => {
      const p = await settled();
      const a = await worker(p);
      a.degraded = true;
      const v = closed();
      a.sync.publish("d", v);
      await expect(a.sync.admit("k", Date.now(), 60_000)).rejects.toThrow("Redis is away");
      expect(a.sync.waiting).toBe(true);
      // A gate already in force is kept as it is (not pushed out by a later, longer period).
      await expect(a.sync.admit("k", Date.now(), 600_000)).rejects.toThrow("Redis is away");
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      expect(await admin.get(stateKey(p, "d"))).toBe(JSON.stringify(v));
      expect(await admin.get(gateKey(p, "k"))).toBe("1");
      within(await admin.pttl(gateKey(p, "k")), 60_000);
      // Done: no further resync runs (each would start the epoch again).
      await admin.del(epochKey(p));
      await sleep(450);
      expect(await admin.exists(epochKey(p))).toBe(0);
      expect(a.troubles).toEqual([]);
    });

    it("a resync Redis refuses is reported and tried again until it lands, a new connection's included", async () => {
      const p = await settled();
      const a = await worker(p);
      const v = opened(60_000);
      a.sync.publish("d", v);
      await a.client.ping();
      await admin.del(stateKey(p, "d"), leaseKey(p, "d"));
      // A key of another type: the verdict's script fails on it.
      await admin.hset(stateKey(p, "d"), "x", "1");
      await drop(a);
      await a.client.connect();
      await waitFor(() => a.troubles.some((e) => String(e).includes("WRONGTYPE")));
      expect(await admin.type(stateKey(p, "d"))).toBe("hash");
      await admin.del(stateKey(p, "d"));
      await waitFor(async () => (await admin.get(stateKey(p, "d"))) === JSON.stringify(v));
      within(await admin.pttl(leaseKey(p, "d")), 60_000);
    });

    it("after a stop only what waited is sent: what Redis lost meanwhile is not put back", async () => {
      const p = await settled();
      const a = await worker(p);
      await admin.set(stateKey(p, "probe"), JSON.stringify(opened(60_000, Date.now() - 10)));
      const applied = await attached(a);
      // The subscriber's first connection was resynced (the standing verdicts taken).
      await waitFor(() => applied.some(([d]) => d === "probe"));
      await sleep(20);
      a.sync.publish("known", opened(60_000));
      expect(await a.sync.admit("gate", Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      const held = a.sync.write("t", "held");
      expect(await held.claim(60_000)).toEqual({ kind: "mine" });
      const shared = a.sync.write("t", "shared");
      expect(await shared.claim(60_000)).toEqual({ kind: "mine" });
      shared.complete("v", 60_000);
      await waitFor(() => !a.sync.waiting);
      // Deleted behind the worker's back (not a restart: it has no reason to put them back).
      await admin.del(
        stateKey(p, "known"),
        leaseKey(p, "known"),
        gateKey(p, "gate"),
        markerKey(p, "t", "held"),
        resultKey(p, "t", "shared"),
      );
      // Set with no message: only a new connection's catch-up would take it.
      await admin.set(stateKey(p, "unheard"), JSON.stringify(opened(60_000)));

      stop();
      a.degraded = true;
      const during = closed();
      a.sync.publish("during", during);
      expect(a.sync.waiting).toBe(true);
      await sleep(50);
      resume();
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      await sleep(300); // a catch-up, were one to run, would have applied "unheard" by now
      expect(await admin.get(stateKey(p, "during"))).toBe(JSON.stringify(during));
      for (const key of [
        stateKey(p, "known"),
        leaseKey(p, "known"),
        gateKey(p, "gate"),
        markerKey(p, "t", "held"),
        resultKey(p, "t", "shared"),
      ])
        expect(await admin.exists(key)).toBe(0);
      expect(applied.map(([d]) => d)).toEqual(["probe"]);
      expect(a.troubles).toEqual([]);
    });

    it("what is decided while a retry is in flight is sent after it", async () => {
      const p = await settled();
      const a = await worker(p);
      const calls = a.timedCalls;
      a.degraded = true;
      const first = closed();
      a.sync.publish("d", first);
      stop();
      a.degraded = false;
      // The retry's round trip is out (Redis answers it once resumed).
      await waitFor(() => a.timedCalls > calls);
      a.degraded = true;
      const second = closed(first.at + 1);
      a.sync.publish("d", second);
      await expect(a.sync.admit("k", Date.now(), 60_000)).rejects.toThrow("Redis is away");
      resume();
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await waitFor(async () => (await admin.get(stateKey(p, "d"))) === JSON.stringify(second));
      expect(await admin.get(gateKey(p, "k"))).toBe("1");
    });
  });

  describe("a new connection", () => {
    it("puts back what it knows without overwriting others, and sends the shares and releases made meanwhile", async () => {
      const p = await settled();
      const a = await worker(p);
      const heard: string[] = [];
      const listener = new Redis(redis.url);
      others.push(listener);
      listener.on("error", () => undefined);
      listener.on("message", (_: string, text: string) => heard.push(text));
      await listener.subscribe(a.sync.breakerChannel);
      const open = opened(60_000);
      a.sync.publish("open", open);
      await waitFor(() => heard.length === 1);
      const from = (JSON.parse(heard[0] ?? "") as { from: string }).from;
      const held = a.sync.write("t", "held");
      const theirs = a.sync.write("t", "theirs");
      const op = a.sync.write("t", "op");
      const rel = a.sync.write("t", "rel");
      const gone = a.sync.write("t", "gone");
      for (const w of [held, theirs, op, rel, gone])
        expect(await w.claim(60_000)).toEqual({ kind: "mine" });
      const heldMarker = await admin.get(markerKey(p, "t", "held"));

      await drop(a);
      op.complete("v-op", 60_000);
      gone.complete("v-gone", 1);
      rel.release();
      // 1,000 later results: op's is no longer remembered, only its share (waiting) puts it back.
      for (let i = 0; i < 1_000; i++) a.sync.write("t", `x${i}`).complete(i, 60_000);
      await sleep(30); // past gone's 1 ms
      // Lost meanwhile; another worker holds "theirs" now.
      await admin.del(
        stateKey(p, "open"),
        leaseKey(p, "open"),
        markerKey(p, "t", "held"),
        markerKey(p, "t", "theirs"),
      );
      await admin.set(markerKey(p, "t", "theirs"), "theirs|1", "PX", 120_000);
      heard.length = 0;
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      await waitFor(async () => (await admin.exists(stateKey(p, "open"))) === 1);
      await a.client.ping();

      expect(await admin.get(stateKey(p, "open"))).toBe(JSON.stringify(open));
      expect(await admin.get(leaseKey(p, "open"))).toBe(from);
      within(await admin.pttl(leaseKey(p, "open")), 60_000);
      await waitFor(() => heard.length === 1);
      expect(JSON.parse(heard[0] ?? "")).toEqual({ from, dependency: "open", verdict: open });

      expect(await admin.get(markerKey(p, "t", "held"))).toBe(heldMarker);
      within(await admin.pttl(markerKey(p, "t", "held")), 60_000);
      expect(await admin.get(markerKey(p, "t", "theirs"))).toBe("theirs|1");

      expect(await admin.get(resultKey(p, "t", "op"))).toBe('{"value":"v-op"}');
      within(await admin.pttl(resultKey(p, "t", "op")), 60_000);
      expect(await admin.exists(markerKey(p, "t", "op"))).toBe(0);
      expect(await admin.exists(markerKey(p, "t", "rel"))).toBe(0);
      expect(await admin.exists(resultKey(p, "t", "rel"))).toBe(0);
      expect(await admin.exists(resultKey(p, "t", "gone"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "x999"))).toBe('{"value":999}');
      expect(a.troubles).toEqual([]);
      await lose(p);
    });

    it("takes only the standing verdicts newer than it knows (an unknown closed one is not taken)", async () => {
      const p = await settled();
      const b = await worker(p);
      const at = Date.now() - 5_000;
      for (const d of ["eq", "newer", "older"]) b.sync.publish(d, closed(at));
      await b.client.ping();
      const newer = opened(60_000, at + 1_000, 4);
      const unknownOpen = opened(60_000, at, 2);
      await admin.set(stateKey(p, "eq"), JSON.stringify(opened(60_000, at, 9)));
      await admin.set(stateKey(p, "newer"), JSON.stringify(newer));
      await admin.set(stateKey(p, "older"), JSON.stringify(opened(60_000, at - 1_000, 3)));
      await admin.set(stateKey(p, "unknown open"), JSON.stringify(unknownOpen));
      await admin.set(stateKey(p, "unknown closed"), JSON.stringify(closed(at)));
      const applied = await attached(b);
      await waitFor(() => applied.length >= 2);
      await b.client.ping();
      await sleep(50);
      expect(new Map(applied)).toEqual(
        new Map([
          ["newer", newer],
          ["unknown open", unknownOpen],
        ]),
      );
      expect(applied).toHaveLength(2);
    });
  });

  describe("the catch-up after a new connection", () => {
    it("a catch-up that fails is reported and tried again", async () => {
      const p = await settled();
      const a = await worker(p);
      const missed = opened(60_000);
      await admin.set(stateKey(p, "missed"), JSON.stringify(missed));
      // The first resync's round trip lands; its catch-up's first read times out.
      a.failAt = a.timedCalls + 2;
      const applied = await attached(a);
      await waitFor(() => applied.length === 1);
      expect(applied).toEqual([["missed", missed]]);
      expect(a.troubles.map(String)).toEqual(["Error: Redis command timed out"]);
    });
  });

  describe("the connection commands go through", () => {
    it("under RESP3 the subscriber's connection carries them while the client is away", async () => {
      const p = await settled();
      const a = await worker(p);
      await attached(a);
      await drop(a);
      expect(a.sync.away()).toBe(false);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      write.complete("v", 60_000);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "k"))) === 1);
      expect(await admin.exists(markerKey(p, "t", "k"))).toBe(0);
      await waitFor(() => !a.sync.waiting);
    });

    it("under RESP2 a subscribed connection takes no commands: the sync is away", async () => {
      const p = await settled();
      const a = await worker(p, { protocol: 2 });
      await attached(a);
      await drop(a);
      expect(a.sync.away()).toBe(true);
      await expect(a.sync.write("t", "k").claim(60_000)).rejects.toThrow("Redis is not connected");
    });

    it("a claim waits for a client still making its first connection", async () => {
      const p = await settled();
      const lazy = await worker(p, { lazyConnect: true, noWait: true });
      expect(lazy.client.status).toBe("wait");
      expect(lazy.sync.away()).toBe(false);
      expect(await lazy.sync.write("t", "wait").claim(60_000)).toEqual({ kind: "mine" });

      const connecting = await worker(p, { lazyConnect: true, noWait: true });
      void connecting.client.connect().catch(() => undefined);
      expect(connecting.client.status).toBe("connecting");
      expect(await connecting.sync.write("t", "connecting").claim(60_000)).toEqual({
        kind: "mine",
      });

      // A hung Redis: the socket is open (`connect`), the handshake has no answer yet.
      stop();
      const handshake = await worker(p, { lazyConnect: true, noWait: true });
      void handshake.client.connect().catch(() => undefined);
      await waitFor(() => handshake.client.status === "connect");
      expect(handshake.sync.away()).toBe(false);
      const claim = handshake.sync.write("t", "connect").claim(60_000);
      await sleep(20);
      resume();
      expect(await claim).toEqual({ kind: "mine" });
      for (const key of ["wait", "connecting", "connect"])
        expect(await admin.exists(markerKey(p, "t", key))).toBe(1);
    });
  });

  describe("a restart without persistence", () => {
    it("puts back what is still in force, not what expired or closed, sends what waited, and claims settle", async () => {
      const p = await settled();
      const a = await worker(p);
      const at = Date.now();
      const open = opened(60_000, at, 2);
      a.sync.publish("open", open);
      // The latest of a dependency: the same time replaces, an older one does not.
      a.sync.publish("same", opened(60_000, at, 1));
      const same = opened(30_000, at, 2);
      a.sync.publish("same", same);
      const newest = opened(60_000, at, 3);
      a.sync.publish("older", newest);
      a.sync.publish("older", opened(60_000, at - 1_000, 1));
      a.sync.publish("closed", closed(at, at + 60_000));
      a.sync.publish("past", { open: true, until: at - 1_000, opens: 1, at });
      expect(await a.sync.admit("long", Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      expect(await a.sync.admit("short", Date.now(), 1)).toEqual({ send: true, suppressed: 0 });
      const held = a.sync.write("t", "held");
      expect(await held.claim(60_000)).toEqual({ kind: "mine" });
      expect(await a.sync.write("t", "brief").claim(1)).toEqual({ kind: "mine" });
      const toComplete = a.sync.write("t", "to complete");
      expect(await toComplete.claim(60_000)).toEqual({ kind: "mine" });
      a.sync.write("t", "done").complete("d", 60_000);
      a.sync.write("t", "expired").complete("e", 1);
      await a.client.ping();
      const heldMarker = await admin.get(markerKey(p, "t", "held"));
      expect(heldMarker).toMatch(/\|\d+$/);

      await redis.kill();
      await waitFor(() => a.client.status !== "ready");
      a.degraded = true;
      expect(a.sync.away()).toBe(true);
      toComplete.complete("c", 60_000);
      a.sync.write("t", "late").complete("l", 1);
      const during = opened(60_000, Date.now(), 4);
      a.sync.publish("during", during);
      await expect(a.sync.admit("alone", Date.now(), 60_000)).rejects.toThrow("Redis is away");
      expect(a.sync.waiting).toBe(true);
      await sleep(30); // past every 1 ms one

      const before = Date.now();
      await redis.restart();
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "done"))) === 1);
      await a.client.ping();
      expect(a.sync.away()).toBe(false);

      const epoch = Number(await admin.get(epochKey(p)));
      expect(epoch).toBeGreaterThanOrEqual(before - 1_000);
      expect(epoch).toBeLessThanOrEqual(await serverNow());

      expect(await admin.get(stateKey(p, "open"))).toBe(JSON.stringify(open));
      expect(await admin.get(leaseKey(p, "open"))).toMatch(/^[0-9a-f-]{36}$/);
      within(await admin.pttl(leaseKey(p, "open")), 60_000);
      expect(await admin.get(stateKey(p, "same"))).toBe(JSON.stringify(same));
      within(await admin.pttl(leaseKey(p, "same")), 30_000);
      expect(await admin.get(stateKey(p, "older"))).toBe(JSON.stringify(newest));
      expect(await admin.get(stateKey(p, "during"))).toBe(JSON.stringify(during));
      for (const key of [
        stateKey(p, "closed"),
        leaseKey(p, "closed"),
        stateKey(p, "past"),
        leaseKey(p, "past"),
      ])
        expect(await admin.exists(key)).toBe(0);

      expect(await admin.get(gateKey(p, "long"))).toBe("1");
      within(await admin.pttl(gateKey(p, "long")), 60_000);
      expect(await admin.get(gateKey(p, "alone"))).toBe("1");
      expect(await admin.exists(gateKey(p, "short"))).toBe(0);

      expect(await admin.get(markerKey(p, "t", "held"))).toBe(heldMarker);
      within(await admin.pttl(markerKey(p, "t", "held")), 60_000);
      expect(await admin.exists(markerKey(p, "t", "brief"))).toBe(0);
      expect(await admin.exists(markerKey(p, "t", "to complete"))).toBe(0);

      expect(await admin.get(resultKey(p, "t", "done"))).toBe('{"value":"d"}');
      within(await admin.pttl(resultKey(p, "t", "done")), 60_000);
      expect(await admin.get(resultKey(p, "t", "to complete"))).toBe('{"value":"c"}');
      within(await admin.pttl(resultKey(p, "t", "to complete")), 60_000);
      expect(await admin.exists(resultKey(p, "t", "expired"))).toBe(0);
      expect(await admin.exists(resultKey(p, "t", "late"))).toBe(0);
      expect(a.troubles.filter((e) => String(e).includes("ERR"))).toEqual([]);

      // The key held is still this worker's; a new one waits out the grace after the restart.
      expect(await held.claim(60_000)).toEqual({ kind: "mine" });
      const claim = await a.sync.write("t", "new").claim(60_000);
      if ((await serverNow()) - epoch < RESTART_GRACE_MS) {
        expect(claim.kind).toBe("settle");
        const retryMs = claim.kind === "settle" ? claim.retryMs : 0;
        expect(retryMs).toBeGreaterThanOrEqual(1);
        expect(retryMs).toBeLessThanOrEqual(RESTART_GRACE_MS);
      } else expect(claim).toEqual({ kind: "mine" });
    });

    it("a worker new to the fleet on a Redis that started moments ago keeps the grace (it may have restarted)", async () => {
      const before = Date.now();
      await redis.kill();
      await redis.restart();
      // It never saw this fleet: it cannot tell a new fleet from a lost one, but Redis's uptime
      // says it may have just restarted, the old workers still on their way back.
      const p = `fsx${++n}`;
      const a = await worker(p);
      const claim = await a.sync.write("t", "k").claim(60_000);
      const epoch = Number(await admin.get(epochKey(p)));
      // The epoch is when this Redis started, never earlier.
      expect(epoch).toBeGreaterThanOrEqual(before - 1_000);
      expect(epoch).toBeLessThanOrEqual(await serverNow());
      if ((await serverNow()) - epoch < RESTART_GRACE_MS) {
        expect(claim.kind).toBe("settle");
        expect(await admin.exists(markerKey(p, "t", "k"))).toBe(0);
      }
      await waitFor(async () => (await a.sync.write("t", "k").claim(60_000)).kind === "mine");
    });
  });
});
