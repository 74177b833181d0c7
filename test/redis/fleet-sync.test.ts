import { describe, expect, it } from "vitest";
import { createSelfHealing, type SelfHealing } from "../../src/index.js";
import type { Notifier } from "../../src/notify/index.js";
import { redisStore, type RedisSignalStore } from "../../src/redis/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { haveRedis, redisForSuite } from "../helpers/redis-server.js";

const available = haveRedis("Redis fleet sync");

interface Worker {
  name: string;
  sh: SelfHealing;
  store: RedisSignalStore;
  complete: (q: string) => Promise<string>;
  circuits: { dependency: string; state: string; at: number }[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(10);
  }
}

describe.skipIf(!available)("selfheal/redis: what a fleet shares, on one real redis-server", () => {
  const suite = redisForSuite();

  describe("breakers and alerts shared by a fleet through Redis", () => {
    it("one worker's verdict opens the breaker for all; one probe per half-open period in the fleet", async () => {
      let primaryDown = true;
      const sent: { worker: string; provider: string | undefined; at: number }[] = [];
      const workers: Worker[] = [];
      for (const name of ["a", "b", "c"]) {
        const store = redisStore({ url: suite.redis.url, prefix: "fleet1", flushMs: 50 });
        const sh = createSelfHealing({
          agent: "fleet",
          store,
          logger: { warn: () => undefined },
          recovery: {
            providers: [{ name: "p1" }, { name: "p2" }],
            breaker: { baseOpenMs: 400, probeTimeoutMs: 300, minimumAttempts: 2, failureRate: 0.5 },
            plans: { SERVICE_DOWN: ["failover_to_secondary"] },
          },
        });
        const circuits: Worker["circuits"] = [];
        sh.on("circuit-change", (e) => {
          circuits.push({ dependency: e.dependency, state: e.state, at: Date.now() });
        });
        const complete = sh.tool(
          "complete",
          { readOnly: true, providers: ["p1", "p2"] },
          async (q: string, ctx) => {
            sent.push({ worker: name, provider: ctx.provider, at: Date.now() });
            await sleep(5);
            if (ctx.provider === "p1" && primaryDown) throw thrownFault("http_503");
            return `${q} from ${ctx.provider ?? "?"}`;
          },
        );
        workers.push({ name, sh, store, complete, circuits });
      }
      const [a, b, c] = workers as [Worker, Worker, Worker];
      await sleep(200); // subscribers connected

      // Worker a alone sees p1 fail until its breaker opens...
      while (!a.circuits.some((e) => e.dependency === "p1" && e.state === "open"))
        await a.complete("q");
      // ...and b and c hear it: their next calls go straight to p2.
      await waitFor(() => [b, c].every((w) => w.circuits.some((e) => e.state === "open")));
      const before = sent.length;
      await Promise.all([b.complete("q"), c.complete("q")]);
      expect(sent.slice(before).map((s) => s.provider)).toEqual(["p2", "p2"]);

      // p1 is back. Past the open period the whole fleet calls at once: one worker probes p1.
      primaryDown = false;
      const opened = Math.max(...a.circuits.filter((e) => e.state === "open").map((e) => e.at));
      await sleep(Math.max(0, opened + 450 - Date.now()));
      const halfOpenFrom = sent.length;
      const closed = () => workers.every((w) => w.circuits.at(-1)?.state === "closed");
      while (!closed()) {
        await Promise.all(workers.map((w) => w.complete("q")));
        await sleep(20);
      }
      const probes = sent
        .slice(halfOpenFrom)
        .filter((s) => s.provider === "p1" && s.at < Math.min(...closeTimes(workers)));
      expect(probes).toHaveLength(1);
      // Closed everywhere: p1 takes the traffic again.
      const after = sent.length;
      await Promise.all(workers.map((w) => w.complete("q")));
      expect(sent.slice(after).map((s) => s.provider)).toEqual(["p1", "p1", "p1"]);

      await closeAll(workers);
    }, 20_000);

    it("a worker that joins late takes the breaker verdicts already standing", async () => {
      const make = () => {
        const store = redisStore({ url: suite.redis.url, prefix: "fleet3" });
        const sh = createSelfHealing({
          agent: "fleet",
          store,
          logger: { warn: () => undefined },
          recovery: {
            providers: [{ name: "p1" }, { name: "p2" }],
            breaker: { baseOpenMs: 60_000 },
            plans: { SERVICE_DOWN: ["circuit_break", "failover_to_secondary"] },
          },
        });
        const used: (string | undefined)[] = [];
        const complete = sh.tool(
          "complete",
          { readOnly: true, providers: ["p1", "p2"] },
          (_: undefined, ctx) => {
            used.push(ctx.provider);
            if (ctx.provider === "p1") throw thrownFault("http_503");
            return "ok";
          },
        );
        const opened: string[] = [];
        sh.on("circuit-change", (e) => {
          if (e.state === "open") opened.push(e.dependency);
        });
        return { sh, store, complete, used, opened };
      };
      const first = make();
      await first.complete(undefined); // p1 fails; the plan opens its breaker; p2 answers
      expect(first.opened).toEqual(["p1"]);
      await sleep(100);
      const late = make();
      await waitFor(() => late.opened.includes("p1"));
      await late.complete(undefined);
      expect(late.used).toEqual(["p2"]);
      await closeAll([first, late]);
    }, 20_000);

    it("ten workers escalating the same failure page once per throttle period", async () => {
      const pages: string[] = [];
      const pager: Notifier = {
        channel: "pager",
        send: (alert) => {
          pages.push(alert.title);
          return Promise.resolve();
        },
      };
      const workers = Array.from({ length: 10 }, () => {
        const store = redisStore({ url: suite.redis.url, prefix: "fleet2" });
        const sh = createSelfHealing({
          agent: "fleet",
          store,
          logger: { warn: () => undefined },
          recovery: { notifiers: [pager], plans: { AUTH: ["escalate_to_human"] } },
        });
        const pay = sh.tool("pay", { readOnly: true }, () => {
          throw thrownFault("auth");
        });
        return { sh, store, pay };
      });
      await Promise.all(workers.map((w) => w.pay(undefined).catch(() => undefined)));
      expect(pages).toHaveLength(1);
      await closeAll(workers);
    }, 20_000);
  });

  describe("the idempotency ledger shared by a fleet through Redis", () => {
    it("three workers sending the same key: one sends, the others get its result", async () => {
      const charges: string[] = [];
      const workers = ["a", "b", "c"].map((name) => {
        const store = redisStore({ url: suite.redis.url, prefix: "ledger1" });
        const sh = createSelfHealing({ agent: "pay", store, logger: { warn: () => undefined } });
        const charge = sh.tool(
          "charge",
          { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
          async (o: { order: string }) => {
            charges.push(`${name}:${o.order}`);
            await sleep(150); // slow enough that the others arrive while it is in flight
            return { charged: o.order, by: name };
          },
        );
        return { sh, store, charge };
      });
      await sleep(100);
      const results = await Promise.all(workers.map((w) => w.charge({ order: "order-1" })));
      expect(charges).toHaveLength(1);
      const sender = charges[0]?.split(":")[0];
      expect(results).toEqual([0, 1, 2].map(() => ({ charged: "order-1", by: sender })));
      // Later, the same key again: still no second charge.
      const again = await workers[2]?.charge({ order: "order-1" });
      expect(again).toEqual({ charged: "order-1", by: sender });
      expect(charges).toHaveLength(1);
      await closeAll(workers);
    }, 20_000);

    it("a write that failed frees its key: another worker may send it", async () => {
      let fail = true;
      const sent: string[] = [];
      const make = (name: string) => {
        const store = redisStore({ url: suite.redis.url, prefix: "ledger2" });
        const sh = createSelfHealing({
          agent: "pay",
          store,
          logger: { warn: () => undefined },
          recovery: { plans: { BAD_REQUEST: [] } },
        });
        const charge = sh.tool(
          "charge",
          { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
          (o: { order: string }) => {
            sent.push(name);
            if (fail) throw Object.assign(new Error("amount must be positive"), { status: 400 });
            return { charged: o.order };
          },
        );
        return { sh, store, charge };
      };
      const a = make("a");
      const b = make("b");
      await expect(a.charge({ order: "o2" })).rejects.toThrow(/amount/);
      fail = false;
      await expect(b.charge({ order: "o2" })).resolves.toEqual({ charged: "o2" });
      expect(sent).toEqual(["a", "b"]);
      await closeAll([a, b]);
    }, 20_000);
  });

  describe("a task's recovery budget shared by a fleet through Redis", () => {
    it("a task that moves to another worker keeps one budget", async () => {
      const sends: string[] = [];
      const make = (name: string, failures: number) => {
        const store = redisStore({ url: suite.redis.url, prefix: "budget1" });
        const sh = createSelfHealing({
          agent: "pay",
          store,
          logger: { warn: () => undefined },
          recovery: {
            budgetUsd: 0.5,
            providers: [{ name: "p", usdPerCall: 0.2 }],
            backoff: { baseMs: 5, jitter: 0, maxAttempts: 5 },
            plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
          },
        });
        let left = failures;
        const lookup = sh.tool("lookup", { readOnly: true, provider: "p" }, () => {
          sends.push(name);
          if (left-- > 0) throw thrownFault("http_503");
          return "ok";
        });
        return { sh, store, lookup };
      };
      const a = make("a", 1); // one retry: $0.20 of the task's $0.50
      const b = make("b", 99); // always failing
      await a.sh.task("task-1", () => a.lookup(undefined));
      await sleep(100); // the spend reached Redis
      await expect(b.sh.task("task-1", () => b.lookup(undefined))).rejects.toThrow(/budget/i);
      // b had $0.30 left: one retry ($0.20), not two.
      expect(sends).toEqual(["a", "a", "b", "b"]);
      await closeAll([a, b]);
    }, 20_000);
  });

  describe("the UNKNOWN share watched across a fleet", () => {
    it("two workers with too few diagnoses each: the fleet's count reports the drift", async () => {
      const drifts: { worker: string; samples: number }[] = [];
      const workers = ["a", "b"].map((name) => {
        const store = redisStore({ url: suite.redis.url, prefix: "drift1" });
        const sh = createSelfHealing({
          agent: "support",
          store,
          logger: { warn: () => undefined },
          diagnosis: { drift: { minSamples: 20 } },
          recovery: { unknown: "none" },
        });
        sh.on("diagnoser-drift", (e) => {
          if (e.tool === undefined) drifts.push({ worker: name, samples: e.samples });
        });
        const odd = sh.tool("odd", { readOnly: true }, () => {
          throw new Error("the flux capacitor hiccuped");
        });
        return { sh, store, odd };
      });
      await sleep(100);
      for (let i = 0; i < 15; i++) {
        for (const w of workers) await w.odd(undefined).catch(() => undefined);
      }
      await waitFor(() => drifts.length > 0);
      // Neither worker alone had 20 diagnoses; the fleet had 30.
      expect(Math.max(...drifts.map((d) => d.samples))).toBeGreaterThanOrEqual(20);
      await closeAll(workers);
    }, 20_000);
  });
});

/** When each worker saw its breaker close (the prober first, by its own verdict). */
function closeTimes(workers: Worker[]): number[] {
  return workers.flatMap((w) => w.circuits.filter((e) => e.state === "closed").map((e) => e.at));
}

/** Closes each worker's instance, then its store. */
async function closeAll(workers: { sh: SelfHealing; store: RedisSignalStore }[]): Promise<void> {
  for (const w of workers) {
    await w.sh.close();
    await w.store.close();
  }
}
