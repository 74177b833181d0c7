/**
 * What a fleet decided while Redis was away reaches it when Redis is back, and what a restart
 * without persistence lost is put back from the workers' own memory. Real `redis-server`,
 * stopped (SIGSTOP) or killed (SIGKILL, restarted empty) by its PID; three worker processes
 * for the breaker verdict, in-process workers for the rest.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfHealing, type SelfHealing } from "../../src/index.js";
import { redisStore, type RedisSignalStore } from "../../src/redis/index.js";
import { thrownFault } from "../../src/testing/index.js";
import {
  FleetProcess,
  realtimeClock,
  startFakeProvider,
  type CallDone,
  type Line,
  type WorkerState,
} from "../fixtures/redis-fleet-worker.js";
import { chargingWorker, recordingPager } from "../helpers/engine.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";
import { sleep, waitFor } from "../helpers/wait.js";

const available = haveRedis("Redis resync after an outage");

const isOpen = (l: Line): l is Extract<Line, { type: "event" }> =>
  l.type === "event" && l.dependency === "p1" && l.state === "open";

describe.skipIf(!available)("resync after an outage (real redis-server)", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let stopped = false;

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on("error", () => undefined);
  });
  afterAll(async () => {
    if (stopped) process.kill(redis.pid ?? 0, "SIGCONT");
    admin.disconnect();
    await redis.stop();
  });

  describe("a verdict reached during an outage, three worker processes", () => {
    let provider: Awaited<ReturnType<typeof startFakeProvider>>;
    const fleets: FleetProcess[] = [];
    const clock = realtimeClock();
    const lags: Record<string, number[]> = {};
    /**
     * The breaker's open period in these workers, ms. A verdict is worth hearing while it is
     * open: heard within half of it is the pass mark, far from both the few hundred ms it takes
     * (logged as verdictLagAfterBackMs) and from never.
     */
    const OPEN_MS = 20_000;

    beforeAll(async () => {
      provider = await startFakeProvider(10);
    });
    afterAll(async () => {
      for (const w of fleets) w.kill();
      await Promise.all(fleets.map((w) => w.exited));
      await provider.server.close();
      console.info(JSON.stringify({ verdictLagAfterBackMs: lags }));
    });

    /** Three workers under `prefix`, ready and subscribed to the breaker channel. */
    async function startFleet(prefix: string): Promise<FleetProcess[]> {
      const workers = [0, 1, 2].map((i) =>
        FleetProcess.start(
          i,
          { redisUrl: redis.url, prefix, providerUrl: provider.server.url },
          {
            SELFHEAL_FLEET_COMMAND_TIMEOUT_MS: "300",
            SELFHEAL_FLEET_BASE_OPEN_MS: String(OPEN_MS),
          },
        ),
      );
      fleets.push(...workers);
      await Promise.all(workers.map((w) => w.ready()));
      await waitFor(async () => {
        const [, n] = (await admin.pubsub("NUMSUB", `${prefix}:breakers`)) as [string, number];
        return n === 3;
      });
      return workers;
    }

    /** Worker 0 calls until its own p1 breaker opens (p1 is down); how many calls it took. */
    async function trip(w0: FleetProcess): Promise<CallDone[]> {
      const calls: CallDone[] = [];
      while (!w0.lines.some(isOpen)) {
        calls.push(await w0.send<CallDone>({ cmd: "call" }));
        if (calls.length > 10) throw new Error("worker 0's breaker did not open");
      }
      return calls;
    }

    /**
     * The other two workers hear the verdict, with no call of their own: how long after Redis was
     * back, ms.
     */
    async function heard(others: FleetProcess[], backAt: number): Promise<number[]> {
      const events = await Promise.all(others.map((w) => w.waitFor(isOpen, OPEN_MS)));
      const states = await Promise.all(others.map((w) => w.send<WorkerState>({ cmd: "state" })));
      expect(states.map((s) => s.p1)).toEqual(["open", "open"]);
      return events.map((e) => Math.round(e.at - backAt));
    }

    it("Redis stopped (SIGSTOP): the verdict reaches the other workers after SIGCONT, before they call", async () => {
      const started = performance.now();
      const [w0, w1, w2] = (await startFleet("resync-stop")) as [
        FleetProcess,
        FleetProcess,
        FleetProcess,
      ];
      provider.state.p1Down = true;
      process.kill(redis.pid ?? 0, "SIGSTOP");
      stopped = true;
      await trip(w0);
      await sleep(500); // the verdict waits; the others still know nothing of it
      expect([w1, w2].map((w) => w.lines.some(isOpen))).toEqual([false, false]);
      const backAt = clock.now();
      process.kill(redis.pid ?? 0, "SIGCONT");
      stopped = false;
      const lag = await heard([w1, w2], backAt);
      lags.sigstop = lag;
      lags.sigstopTestMs = [Math.round(performance.now() - started)];
      for (const ms of lag) expect(ms).toBeLessThan(OPEN_MS / 2);
      // They send nothing to p1 now: straight to p2.
      const from = provider.requests.length;
      const calls = await Promise.all([w1, w2].map((w) => w.send<CallDone>({ cmd: "call" })));
      expect(calls.map((c) => [c.provider, c.attempts])).toEqual([
        ["p2", 1],
        ["p2", 1],
      ]);
      expect(provider.requests.slice(from).filter((r) => r.path === "/p1")).toEqual([]);
    }, 120_000);

    it("Redis killed and restarted empty: the verdict reaches the other workers, before they call", async () => {
      const [w0, w1, w2] = (await startFleet("resync-kill")) as [
        FleetProcess,
        FleetProcess,
        FleetProcess,
      ];
      provider.state.p1Down = true;
      await redis.kill();
      await trip(w0);
      await sleep(500);
      expect([w1, w2].map((w) => w.lines.some(isOpen))).toEqual([false, false]);
      const backAt = clock.now(); // before the server starts: the lag measured is an upper bound
      await redis.restart();
      const lag = await heard([w1, w2], backAt);
      lags.sigkill = lag;
      for (const ms of lag) expect(ms).toBeLessThan(OPEN_MS / 2);
      // The verdict is in the new Redis too, with its lease: a late worker would take it.
      expect(await admin.exists("resync-kill:{fleet}:breaker:p1")).toBe(1);
      expect(await admin.pttl("resync-kill:{fleet}:lease:p1")).toBeGreaterThan(0);
    }, 120_000);
  });

  describe("state lost to a restart without persistence, put back from the workers' memory", () => {
    interface Worker {
      sh: SelfHealing;
      store: RedisSignalStore;
    }
    const closeAll = async (workers: Worker[]) => {
      for (const w of workers) {
        await w.sh.close();
        await w.store.close();
      }
    };

    it("an open breaker (verdict and lease, with their time left) and an alert throttle", async () => {
      const pages: string[] = [];
      const pager = recordingPager(pages);
      const make = () => {
        const store = redisStore({ url: redis.url, prefix: "reborn", commandTimeoutMs: 300 });
        const sh = createSelfHealing({
          agent: "fleet",
          store,
          logger: { warn: () => undefined },
          recovery: {
            providers: [{ name: "p1" }, { name: "p2" }],
            breaker: { baseOpenMs: 30_000 },
            notifiers: [pager],
            plans: {
              SERVICE_DOWN: ["circuit_break", "failover_to_secondary"],
              AUTH: ["escalate_to_human"],
            },
          },
        });
        const complete = sh.tool(
          "complete",
          { readOnly: true, providers: ["p1", "p2"] },
          (_: undefined, ctx) => {
            if (ctx.provider === "p1") throw thrownFault("http_503");
            return "ok";
          },
        );
        const pay = sh.tool("pay", { readOnly: true }, () => {
          throw thrownFault("auth");
        });
        const opened: string[] = [];
        sh.on("circuit-change", (e) => {
          if (e.state === "open") opened.push(e.dependency);
        });
        return { sh, store, complete, pay, opened };
      };
      const a = make();
      const b = make();
      await waitFor(async () => {
        const [, n] = (await admin.pubsub("NUMSUB", "reborn:breakers")) as [string, number];
        return n === 2; // both listen for verdicts
      });
      await a.complete(undefined); // p1 opens for 30 s, for the fleet
      await waitFor(() => b.opened.includes("p1"));
      await a.pay(undefined).catch(() => undefined); // one page; the gate holds the next ones
      expect(pages).toHaveLength(1);
      const keys = ["reborn:{fleet}:breaker:p1", "reborn:{fleet}:lease:p1"];
      const gate = "reborn:{fleet}:alert:";
      const gates = await admin.keys(`${gate}*`);
      expect(gates).toHaveLength(1);

      await admin.set("canary", "1");
      await redis.kill();
      await redis.restart();
      const restartedAt = Date.now();
      expect(await admin.exists("canary")).toBe(0); // it came back empty
      await waitFor(async () => (await admin.exists(...keys, ...gates)) === 3);
      const putBackMs = Date.now() - restartedAt;
      // With the time they had left, not a new period.
      const [verdictTtl, leaseTtl, gateTtl] = await Promise.all(
        [...keys, ...gates].map((k) => admin.pttl(k)),
      );
      expect(leaseTtl).toBeGreaterThan(25_000);
      expect(leaseTtl).toBeLessThanOrEqual(30_000);
      expect(verdictTtl).toBeGreaterThan(30_000); // the verdict itself is kept a day
      expect(gateTtl).toBeGreaterThan(8 * 60_000);
      expect(gateTtl).toBeLessThanOrEqual(10 * 60_000);
      // A worker that joins now takes the open breaker; an alert of the same kind is held.
      const late = make();
      await waitFor(() => late.opened.includes("p1"));
      await waitFor(() => [a, b, late].every((w) => w.store.connection.status === "ready"));
      await b.pay(undefined).catch(() => undefined);
      await late.pay(undefined).catch(() => undefined);
      expect(pages).toHaveLength(1);
      console.info(JSON.stringify({ putBackAfterRestartMs: putBackMs }));
      await closeAll([a, b, late]);
    }, 120_000);

    it('a keyed write made alone while Redis was away ("local") is shared when it is back', async () => {
      const charges: string[] = [];
      const make = (name: string) =>
        chargingWorker(
          redisStore({ url: redis.url, prefix: "alone", commandTimeoutMs: 300 }),
          name,
          charges,
          "local",
        );
      const a = make("a");
      await a.charge({ order: "warm-up" }); // connected, past the grace of a new Redis
      await redis.kill();
      // Alone: a's own ledger is all it can ask.
      await expect(a.charge({ order: "o-1" })).resolves.toEqual({ charged: "o-1", by: "a" });
      await redis.restart();
      await waitFor(() => !a.store.fleet.waiting);
      // A worker that was not there asks the fleet: a's result, not a second charge.
      const b = make("b");
      await expect(b.charge({ order: "o-1" })).resolves.toEqual({ charged: "o-1", by: "a" });
      expect(charges).toEqual(["a", "a"]); // the warm-up and o-1
      await closeAll([a, b]);
    }, 120_000);
  });
});
