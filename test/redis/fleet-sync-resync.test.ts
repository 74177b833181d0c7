/**
 * What RedisFleetSync puts back and sends when Redis is back: after a retry (nothing was lost,
 * only what waited is sent), after a new connection (Redis may have lost everything: what the
 * worker still knows is put back, what expired is not), and after a real restart without
 * persistence (SIGKILL, then a fresh empty server on the same port). Real `redis-server`; each
 * test under its own key prefix, read back with a separate admin client.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BreakerVerdict } from "../../src/recovery/breaker.js";
import { RedisFleetSync, RESTART_GRACE_MS } from "../../src/redis/fleet-sync.js";
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
  connected,
} from "../helpers/fleet-keys.js";

/** The client options a test changes (the rest are the store's). */
interface ClientOptions {
  db?: number;
  protocol?: 2 | 3;
  lazyConnect?: boolean;
  username?: string;
  password?: string;
}

const available = haveRedis("RedisFleetSync resync");

interface Worker {
  client: Redis;
  sync: RedisFleetSync;
  troubles: unknown[];
  degraded: boolean;
}

describe.skipIf(!available)("RedisFleetSync resync (real redis-server)", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let n = 0;
  const workers: Worker[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
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
  });

  const fresh = () => `fsr${++n}`;

  /** A prefix whose epoch started long ago (no restart grace for claims). */
  async function settled(): Promise<string> {
    const p = fresh();
    await admin.set(epochKey(p), "1");
    return p;
  }

  /** A connected worker, built as the store builds one (see src/redis/store.ts). */
  async function worker(prefix: string, options: ClientOptions = {}): Promise<Worker> {
    const client = new Redis(redis.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      protocol: 3,
      ...options,
    });
    RedisFleetSync.define(client);
    client.on("error", () => undefined);
    const w = { client, troubles: [] as unknown[], degraded: false } as Worker;
    w.sync = new RedisFleetSync(
      {
        client,
        degraded: () => w.degraded,
        timed: (work) => work,
        onTrouble: (error) => {
          w.troubles.push(error);
        },
        ready: () => connected(client),
      },
      prefix,
    );
    workers.push(w);
    await connected(client);
    return w;
  }

  /** Attaches `w`, waits until `count` listen on its channel; what it applies. */
  async function attached(w: Worker, count = 1): Promise<[string, BreakerVerdict][]> {
    const applied: [string, BreakerVerdict][] = [];
    w.sync.attach((dependency, v) => applied.push([dependency, v]));
    await waitFor(async () => {
      const [, listening] = (await admin.pubsub("NUMSUB", w.sync.breakerChannel)) as [
        string,
        number,
      ];
      return listening === count;
    });
    return applied;
  }

  /** The worker's client drops its connection and makes a new one (a new connection: resync). */
  async function reconnect(w: Worker): Promise<void> {
    w.client.disconnect();
    await waitFor(() => w.client.status === "end");
    await w.client.connect();
  }

  /** Deletes every key under `p` (what a restart without persistence does to a fleet). */
  async function lose(p: string): Promise<void> {
    const keys = await admin.keys(`${p}:*`);
    if (keys.length > 0) await admin.del(...keys);
  }

  async function serverNow(): Promise<number> {
    const [s, us] = await admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  describe("a retry (nothing was lost)", () => {
    it("sends only what waited: the lost state of earlier decisions is not put back", async () => {
      const p = await settled();
      const a = await worker(p);
      a.sync.publish("earlier", verdict(60_000));
      expect(await a.sync.admit("kind", Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      const held = a.sync.write("t", "held");
      expect(await held.claim(60_000)).toEqual({ kind: "mine" });
      const shared = a.sync.write("t", "shared");
      expect(await shared.claim(60_000)).toEqual({ kind: "mine" });
      shared.complete("v", 60_000);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "shared"))) === 1);
      await lose(p);
      // A verdict decided alone waits: the retry (not a new connection) sends it.
      a.degraded = true;
      const later = verdict(30_000);
      a.sync.publish("later", later);
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      expect(await admin.get(stateKey(p, "later"))).toBe(JSON.stringify(later));
      within(await admin.pttl(leaseKey(p, "later")), 30_000);
      // Every resync starts the fleet's epoch if Redis has none.
      expect(Number(await admin.get(epochKey(p)))).toBeGreaterThan(0);
      for (const key of [
        stateKey(p, "earlier"),
        leaseKey(p, "earlier"),
        gateKey(p, "kind"),
        markerKey(p, "t", "held"),
        resultKey(p, "t", "shared"),
      ])
        expect(await admin.exists(key)).toBe(0);
      expect(a.troubles).toEqual([]);
    });

    it("once a new connection was resynced, nothing is put back again", async () => {
      const p = await settled();
      const a = await worker(p);
      await attached(a); // the subscriber's first connection: a resync
      a.sync.publish("d", verdict(60_000));
      await waitFor(async () => (await admin.exists(stateKey(p, "d"))) === 1);
      await lose(p);
      // A retry (a verdict decided alone) sends only what waited.
      a.degraded = true;
      const alone = verdict(60_000);
      a.sync.publish("alone", alone);
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      await sleep(300);
      expect(await admin.get(stateKey(p, "alone"))).toBe(JSON.stringify(alone));
      expect(await admin.exists(stateKey(p, "d"))).toBe(0);
      expect(a.sync.waiting).toBe(false);
      // Done: no further resync runs (each would start the epoch again).
      await admin.del(epochKey(p));
      await sleep(300);
      expect(await admin.exists(epochKey(p))).toBe(0);
    });

    it("an epoch Redis already has is kept", async () => {
      const p = fresh();
      await admin.set(epochKey(p), "12345");
      const a = await worker(p);
      a.degraded = true;
      a.sync.publish("d", verdict(30_000));
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      expect(await admin.get(epochKey(p))).toBe("12345");
    });
  });

  describe("a new connection (Redis may have restarted empty)", () => {
    it("puts back what the worker still knows, not what expired, and never over what Redis holds", async () => {
      const p = await settled();
      const a = await worker(p);
      const heard: string[] = [];
      const listener = new Redis(redis.url);
      listener.on("error", () => undefined);
      listener.on("message", (_: string, text: string) => heard.push(text));
      await listener.subscribe(a.sync.breakerChannel);
      try {
        const open = verdict(60_000, Date.now(), 3);
        const theirs = verdict(60_000, Date.now() + 60_000, 5);
        a.sync.publish("open", open);
        a.sync.publish("newer in redis", verdict(60_000));
        a.sync.publish("closed", verdict(undefined));
        a.sync.publish("past", { open: true, until: Date.now() - 1_000, opens: 1, at: Date.now() });
        const now = Date.now();
        expect(await a.sync.admit("long", now, 60_000)).toEqual({ send: true, suppressed: 0 });
        expect(await a.sync.admit("taken", now, 60_000)).toEqual({ send: true, suppressed: 0 });
        expect(await a.sync.admit("short", now, 1)).toEqual({ send: true, suppressed: 0 });
        expect(await a.sync.write("t", "held").claim(60_000)).toEqual({ kind: "mine" });
        expect(await a.sync.write("t", "held 2").claim(60_000)).toEqual({ kind: "mine" });
        expect(await a.sync.write("t", "brief").claim(1)).toEqual({ kind: "mine" });
        for (const [key, ttl] of [
          ["done", 60_000],
          ["done 2", 60_000],
          ["expired", 1],
        ] as const) {
          const write = a.sync.write("t", key);
          expect(await write.claim(60_000)).toEqual({ kind: "mine" });
          write.complete(`value of ${key}`, ttl);
        }
        await waitFor(() => !a.sync.waiting);
        await waitFor(() => heard.length === 4);
        const from = (JSON.parse(heard[0] ?? "") as { from: string }).from;
        const held = await admin.get(markerKey(p, "t", "held"));
        expect(held).toMatch(/\|\d+$/);
        await sleep(30); // past the 1 ms ones
        await lose(p);
        // Meanwhile other workers wrote: Redis keeps theirs.
        await admin.set(stateKey(p, "newer in redis"), JSON.stringify(theirs));
        await admin.set(gateKey(p, "taken"), "theirs", "PX", 120_000);
        await admin.set(markerKey(p, "t", "held 2"), "theirs|1", "PX", 120_000);
        await admin.set(resultKey(p, "t", "done 2"), '{"value":"theirs"}', "PX", 120_000);
        heard.length = 0;
        await reconnect(a);
        await waitFor(async () => (await admin.exists(resultKey(p, "t", "done"))) === 1);
        await a.client.ping();

        expect(Number(await admin.get(epochKey(p)))).toBeGreaterThan(0);
        expect(await admin.get(stateKey(p, "open"))).toBe(JSON.stringify(open));
        expect(await admin.get(leaseKey(p, "open"))).toBe(from);
        within(await admin.pttl(leaseKey(p, "open")), 60_000);
        expect(await admin.pttl(stateKey(p, "open"))).toBeGreaterThan(23 * 3_600_000);
        expect(await admin.get(stateKey(p, "newer in redis"))).toBe(JSON.stringify(theirs));
        expect(await admin.exists(stateKey(p, "closed"))).toBe(0);
        expect(await admin.exists(stateKey(p, "past"))).toBe(0);
        expect(await admin.exists(leaseKey(p, "past"))).toBe(0);

        expect(await admin.get(gateKey(p, "long"))).toBe("1");
        within(await admin.pttl(gateKey(p, "long")), 60_000);
        expect(await admin.get(gateKey(p, "taken"))).toBe("theirs");
        expect(await admin.exists(gateKey(p, "short"))).toBe(0);

        expect(await admin.get(markerKey(p, "t", "held"))).toBe(held);
        within(await admin.pttl(markerKey(p, "t", "held")), 60_000);
        expect(await admin.get(markerKey(p, "t", "held 2"))).toBe("theirs|1");
        expect(await admin.exists(markerKey(p, "t", "brief"))).toBe(0);

        expect(await admin.get(resultKey(p, "t", "done"))).toBe('{"value":"value of done"}');
        within(await admin.pttl(resultKey(p, "t", "done")), 60_000);
        expect(await admin.get(resultKey(p, "t", "done 2"))).toBe('{"value":"theirs"}');
        expect(await admin.exists(resultKey(p, "t", "expired"))).toBe(0);

        // The verdict put back is told to the fleet (only the one put back).
        await waitFor(() => heard.length === 1);
        expect(JSON.parse(heard[0] ?? "")).toEqual({ from, dependency: "open", verdict: open });
        expect(a.troubles).toEqual([]);
        expect(a.sync.waiting).toBe(false);
      } finally {
        listener.disconnect();
      }
    });

    it("puts back the open verdicts it heard from others, and takes those reached while it was away", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const applied = await attached(b);
      const heard = verdict(60_000, Date.now(), 2);
      a.sync.publish("heard", heard);
      await waitFor(() => applied.length === 1);
      const from = await admin.get(leaseKey(p, "heard"));
      a.sync.close();
      await lose(p);
      // Reached by another worker while b was away (no message b could hear).
      const missed = verdict(undefined, Date.now() + 1);
      await admin.set(stateKey(p, "heard"), JSON.stringify(verdict(undefined, heard.at - 1)));
      await admin.set(stateKey(p, "missed"), JSON.stringify(verdict(60_000)));
      await admin.set(stateKey(p, "heard 2"), JSON.stringify(missed));
      await reconnect(b);
      await waitFor(() => applied.length === 2);
      expect(applied[1]).toEqual([
        "missed",
        JSON.parse((await admin.get(stateKey(p, "missed"))) ?? ""),
      ]);
      await b.client.ping();
      expect(await admin.get(stateKey(p, "heard"))).toBe(JSON.stringify(heard));
      const lease = await admin.get(leaseKey(p, "heard"));
      expect(lease).toMatch(/^[0-9a-f-]{36}$/);
      expect(lease).not.toBe(from);
      within(await admin.pttl(leaseKey(p, "heard")), 60_000);
      expect(applied).toHaveLength(2);
    });

    it("keeps the latest verdict of a dependency; a heard one of the same time replaces its own", async () => {
      const p = await settled();
      const b = await worker(p);
      const applied = await attached(b);
      const at = Date.now();
      const own = verdict(60_000, at, 1);
      const sameTime = { ...verdict(40_000, at, 2) };
      const olderOwn = verdict(60_000, at, 1);
      const older = verdict(50_000, at - 1_000, 7);
      b.sync.publish("same", own);
      b.sync.publish("older", olderOwn);
      await b.client.ping();
      for (const [dependency, v] of [
        ["same", sameTime],
        ["older", older],
      ] as const)
        await admin.publish(
          b.sync.breakerChannel,
          JSON.stringify({ from: "another-worker", dependency, verdict: v }),
        );
      await waitFor(() => applied.length === 2);
      // Heard messages are applied as they come, whatever their time.
      expect(applied).toEqual([
        ["same", sameTime],
        ["older", older],
      ]);
      await lose(p);
      await reconnect(b);
      await waitFor(async () => (await admin.exists(stateKey(p, "older"))) === 1);
      await waitFor(async () => (await admin.exists(stateKey(p, "same"))) === 1);
      expect(await admin.get(stateKey(p, "same"))).toBe(JSON.stringify(sameTime));
      expect(await admin.get(stateKey(p, "older"))).toBe(JSON.stringify(olderOwn));
    });

    it("an alert gate it was told to hold is not its own to put back", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      expect(await a.sync.admit("k", Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      expect(await b.sync.admit("k", Date.now(), 60_000)).toEqual({ send: false, suppressed: 1 });
      await lose(p);
      await reconnect(b);
      await waitFor(async () => (await admin.exists(epochKey(p))) === 1);
      await b.client.ping();
      expect(await admin.exists(gateKey(p, "k"))).toBe(0);
    });

    it("only a sync the engine uses writes on a new connection", async () => {
      const p = fresh();
      const idle = await worker(p);
      expect(await idle.sync.add("task", 1)).toBe(1);
      await idle.sync.spent("task");
      await reconnect(idle);
      await idle.client.ping();
      await sleep(300);
      expect(await admin.exists(epochKey(p))).toBe(0);

      // Each use engages it: after a new connection the epoch is started.
      const uses: [string, (w: Worker) => Promise<unknown>][] = [
        ["admit", (w) => w.sync.admit("k", Date.now(), 60_000)],
        [
          "publish",
          (w) => {
            w.sync.publish("d", verdict(undefined));
            return w.client.ping();
          },
        ],
        [
          "write",
          (w) => {
            w.sync.write("t", "k").complete(1, 60_000);
            return w.client.ping();
          },
        ],
        ["attach", (w) => attached(w)],
      ];
      for (const [name, use] of uses) {
        const q = `${fresh()}-${name}`;
        const w = await worker(q);
        await use(w);
        await admin.del(epochKey(q));
        await reconnect(w);
        await waitFor(async () => (await admin.exists(epochKey(q))) === 1);
      }
    });

    it("puts back the newest 1,000 results it shared (a result shared again is the newest)", async () => {
      const p = await settled();
      const a = await worker(p);
      for (let i = 0; i < 1_000; i++) a.sync.write("t", `k${i}`).complete(i, 60_000);
      a.sync.write("t", "k0").complete("again", 60_000);
      a.sync.write("t", "k1000").complete(1_000, 60_000);
      await waitFor(() => !a.sync.waiting);
      await lose(p);
      await reconnect(a);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "k1000"))) === 1);
      await a.client.ping();
      expect(await admin.exists(resultKey(p, "t", "k1"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "k0"))).toBe('{"value":"again"}');
      expect(await admin.get(resultKey(p, "t", "k2"))).toBe('{"value":2}');
      expect((await admin.keys(`${p}:*:ledger:*`)).length).toBe(1_000);
    });

    it("keeps at most 10,000 shares while no connection exists (the oldest go first)", async () => {
      const p = await settled();
      const a = await worker(p);
      a.client.disconnect();
      await waitFor(() => a.client.status === "end");
      for (let i = 0; i <= 10_000; i++) a.sync.write("t", `k${i}`).complete(i, 60_000);
      expect(a.sync.waiting).toBe(true);
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      expect(await admin.exists(resultKey(p, "t", "k0"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "k1"))).toBe('{"value":1}');
      expect(await admin.get(resultKey(p, "t", "k10000"))).toBe('{"value":10000}');
      expect((await admin.keys(`${p}:*:ledger:*`)).length).toBe(10_000);
    });

    it("a share whose result expired while it waited is dropped; the others and releases are sent", async () => {
      const p = await settled();
      const a = await worker(p);
      const write = a.sync.write("t", "k");
      expect(await write.claim(60_000)).toEqual({ kind: "mine" });
      const released = a.sync.write("t", "released");
      expect(await released.claim(60_000)).toEqual({ kind: "mine" });
      a.client.disconnect();
      await waitFor(() => a.client.status === "end");
      write.complete("v", 1);
      released.release();
      a.sync.write("t", "k2").complete("v2", 60_000);
      expect(a.sync.waiting).toBe(true);
      await sleep(30);
      await a.client.connect();
      await waitFor(() => !a.sync.waiting);
      await a.client.ping();
      expect(await admin.exists(resultKey(p, "t", "k"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "k2"))).toBe('{"value":"v2"}');
      // A release made meanwhile is sent too.
      expect(await admin.exists(markerKey(p, "t", "released"))).toBe(0);
    });
  });

  describe("a restart without persistence", () => {
    it("the workers put back verdicts, gates, claims and results, send what waited, and claims settle", async () => {
      const p = await settled();
      const a = await worker(p);
      const b = await worker(p);
      const appliedByA = await attached(a, 1);
      const appliedByB = await attached(b, 2);
      const open = verdict(60_000, Date.now(), 2);
      a.sync.publish("p1", open);
      await waitFor(() => appliedByB.length === 1);
      const holder = await admin.get(leaseKey(p, "p1"));
      expect(await a.sync.admit("gate", Date.now(), 60_000)).toEqual({ send: true, suppressed: 0 });
      const held = a.sync.write("t", "held");
      const toComplete = a.sync.write("t", "to complete");
      const toRelease = a.sync.write("t", "to release");
      for (const w of [held, toComplete, toRelease])
        expect(await w.claim(60_000)).toEqual({ kind: "mine" });
      const shared = a.sync.write("t", "shared");
      expect(await shared.claim(60_000)).toEqual({ kind: "mine" });
      shared.complete({ n: 1 }, 60_000);
      await waitFor(async () => (await admin.exists(resultKey(p, "t", "shared"))) === 1);
      const heldMarker = await admin.get(markerKey(p, "t", "held"));

      await redis.kill();
      await waitFor(() => a.client.status !== "ready" && b.client.status !== "ready");
      await waitFor(() => a.sync.away());
      // The subscriber's connection errors reach onTrouble.
      await waitFor(() => a.troubles.length > 0);
      a.degraded = true;
      toComplete.complete("done", 60_000);
      toRelease.release();
      const during = verdict(60_000, Date.now(), 3);
      a.sync.publish("p2", during);
      await expect(a.sync.admit("gate 2", Date.now(), 60_000)).rejects.toThrow("Redis is away");
      expect(a.sync.waiting).toBe(true);

      await redis.restart();
      a.degraded = false;
      await waitFor(() => !a.sync.waiting);
      await waitFor(async () => (await admin.exists(stateKey(p, "p1"))) === 1);
      await waitFor(() => appliedByB.some(([d]) => d === "p2"));
      await a.client.ping();
      expect(a.sync.away()).toBe(false);
      const epoch = Number(await admin.get(epochKey(p)));
      expect(epoch).toBeGreaterThan(0);
      expect(epoch).toBeLessThanOrEqual(await serverNow());

      expect(await admin.get(stateKey(p, "p1"))).toBe(JSON.stringify(open));
      expect(await admin.get(leaseKey(p, "p1"))).toMatch(/^[0-9a-f-]{36}$/);
      within(await admin.pttl(leaseKey(p, "p1")), 60_000);
      expect(await admin.get(stateKey(p, "p2"))).toBe(JSON.stringify(during));
      expect(appliedByB.find(([d]) => d === "p2")).toEqual(["p2", during]);
      // Its own verdict put back is not applied by the worker that put it back.
      expect(appliedByA.some(([d]) => d === "p2")).toBe(false);
      expect(holder).toMatch(/^[0-9a-f-]{36}$/);

      expect(await admin.get(gateKey(p, "gate"))).toBe("1");
      within(await admin.pttl(gateKey(p, "gate")), 60_000);
      expect(await admin.get(gateKey(p, "gate 2"))).toBe("1");

      expect(await admin.get(markerKey(p, "t", "held"))).toBe(heldMarker);
      within(await admin.pttl(markerKey(p, "t", "held")), 60_000);
      expect(await admin.exists(markerKey(p, "t", "to complete"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "to complete"))).toBe('{"value":"done"}');
      expect(await admin.exists(markerKey(p, "t", "to release"))).toBe(0);
      expect(await admin.get(resultKey(p, "t", "shared"))).toBe('{"value":{"n":1}}');

      // The key a claims is still its own; for the fleet the others wait.
      expect(await held.claim(60_000)).toEqual({ kind: "mine" });
      expect((await b.sync.write("t", "held").claim(60_000)).kind).toBe("busy");
      expect(await b.sync.write("t", "shared").claim(60_000)).toEqual({
        kind: "done",
        value: { n: 1 },
      });
      // A new key: no claim is granted during the grace after the epoch started.
      const claim = await b.sync.write("t", "new").claim(60_000);
      const age = (await serverNow()) - epoch;
      if (age < RESTART_GRACE_MS) {
        expect(claim.kind).toBe("settle");
        const retryMs = claim.kind === "settle" ? claim.retryMs : 0;
        expect(retryMs).toBeGreaterThanOrEqual(1);
        expect(retryMs).toBeLessThanOrEqual(RESTART_GRACE_MS);
      } else expect(claim).toEqual({ kind: "mine" });
    });
  });
});
