/**
 * The core cases of the selfheal/redis suites on a real Redis Cluster (three masters, one replica
 * each, on 127.0.0.1: test/helpers/redis-cluster.ts), through ioredis's `Cluster` client and the
 * public API: health of several agents summed over two instances, breaker verdicts and the
 * half-open probe shared, one charge per idempotency key, and a master failed over mid-run.
 */
import { Cluster } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { fleetTag } from "../../src/redis/keys.js";
import { redisStore, type RedisSignalStore } from "../../src/redis/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { haveRedisCluster, redisClusterForSuite } from "../helpers/redis-cluster.js";

const available = haveRedisCluster("Redis Cluster (selfheal/redis)");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The breaker's open period, ms: the instances that hear "open" call inside it. */
const OPEN_MS = 3_000;

/**
 * Polls `condition` every 10 ms until it holds. The limit only ends a test that would never pass:
 * a busy machine may take seconds for what takes milliseconds on an idle one (issue 27).
 */
async function waitFor(condition: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(10);
  }
}

/** A tool error no plan retries (BAD_REQUEST): one failed attempt, outcome error. */
const badRequest = () => Object.assign(new Error("amount must be positive"), { status: 400 });

describe.skipIf(!available)("selfheal/redis on a real 3-master Redis Cluster", () => {
  const suite = redisClusterForSuite();
  const opened: { close: () => Promise<unknown> }[] = [];

  /** A Cluster client as an application would make one (one startup node is enough). */
  const connect = (): Cluster => {
    const client = new Cluster(suite.cluster.startupNodes.slice(0, 1), {
      slotsRefreshTimeout: 500,
      retryDelayOnFailover: 50,
    });
    client.on("error", () => undefined);
    opened.push({
      close: () => {
        client.disconnect();
        return Promise.resolve();
      },
    });
    return client;
  };

  /** A store on its own Cluster client, with what it reported while running. */
  const store = (prefix: string, extra: { flushMs?: number; flushRecords?: number } = {}) => {
    const warnings: string[] = [];
    const s = redisStore({
      client: connect(),
      prefix,
      flushMs: 50,
      logger: { warn: (m) => warnings.push(m) },
      ...extra,
    });
    const states: boolean[] = [];
    s.onStateChange((state) => states.push(state.degraded));
    opened.unshift({ close: () => s.close() });
    return { store: s, warnings, states };
  };

  afterEach(async () => {
    for (const o of opened.splice(0)) await o.close().catch(() => undefined);
  });

  /**
   * Until `n` stores listen on `s`'s breaker channel, over every node (each counts the
   * subscribers connected to it): a fixed sleep is a guess.
   */
  const subscribed = (s: RedisSignalStore, n: number) =>
    waitFor(async () => {
      let listeners = 0;
      for (const port of suite.cluster.pids().keys()) {
        const reply = (await suite.cluster
          .admin(port)
          .pubsub("NUMSUB", s.fleet.breakerChannel)) as [string, number];
        listeners += reply[1];
      }
      return listeners === n;
    });

  /** Agent names whose keys (`prefix:{agent}:...`) live on `count` different masters. */
  async function agentsOnMasters(prefix: string, count: number): Promise<Map<string, number>> {
    const chosen = new Map<string, number>();
    const masters = new Set<number>();
    for (let i = 0; chosen.size < count && i < 200; i++) {
      const agent = `agent-${i}`;
      const port = await suite.cluster.masterOf(`${prefix}:{${agent}}`);
      if (masters.has(port)) continue;
      masters.add(port);
      chosen.set(agent, port);
    }
    if (chosen.size < count) throw new Error(`no ${count} agents on distinct masters`);
    return chosen;
  }

  it("health of several agents and tools, recorded by two instances, reads back as the fleet's sum", async () => {
    const prefix = "c1";
    const agents = await agentsOnMasters(prefix, 3);
    const tools = ["search", "pay:card", "ask {llm}"];
    /** Calls made, by agent and tool: ok and failed. */
    const made = new Map<string, { ok: number; failed: number }>();
    const workers = [store(prefix), store(prefix)];
    for (const [w, worker] of workers.entries()) {
      for (const agent of agents.keys()) {
        const sh = createSelfHealing({
          agent,
          store: worker.store,
          logger: { warn: () => undefined },
          recovery: { plans: { BAD_REQUEST: [] } },
        });
        opened.unshift({ close: () => sh.close() });
        for (const [t, tool] of tools.entries()) {
          const call = sh.tool(tool, { readOnly: true }, (fail: boolean) => {
            if (fail) throw badRequest();
            return "ok";
          });
          // Each (worker, agent, tool) its own count, so a sum can only come from Redis.
          const calls = 10 + 7 * w + 3 * t;
          for (let i = 0; i < calls; i++) {
            const fail = i % 5 === 0;
            await call(fail).catch(() => undefined);
            const m = made.get(`${agent}/${tool}`) ?? { ok: 0, failed: 0 };
            if (fail) m.failed++;
            else m.ok++;
            made.set(`${agent}/${tool}`, m);
          }
        }
      }
    }
    await Promise.all(workers.map((w) => w.store.flush()));
    for (const w of workers) {
      expect(w.store.isDegraded, w.warnings.join("\n")).toBe(false);
      expect(w.states).toEqual([]);
    }

    const reader = store(prefix);
    for (const agent of agents.keys()) {
      const signals = await reader.store.read(agent, Date.now());
      expect(reader.store.isDegraded, reader.warnings.join("\n")).toBe(false);
      for (const tool of tools) {
        const { ok, failed } = signals.tools.get(tool)?.calls ?? { ok: NaN, failed: NaN };
        expect({ agent, tool, ok, failed }).toEqual({
          agent,
          tool,
          ...made.get(`${agent}/${tool}`),
        });
      }
      const sum = tools.reduce(
        (s, tool) => {
          const m = made.get(`${agent}/${tool}`);
          return { ok: s.ok + (m?.ok ?? 0), failed: s.failed + (m?.failed ?? 0) };
        },
        { ok: 0, failed: 0 },
      );
      expect(signals.agent.calls).toMatchObject(sum);
    }

    // Each agent's buckets are on its own master: the fleet really is spread over the cluster.
    for (const [agent, port] of agents) {
      const keys = await suite.cluster.admin(port).keys(`${prefix}:{${agent}}:*`);
      expect(keys.length, `${agent}'s keys on master ${port}`).toBeGreaterThan(0);
    }
  }, 120_000);

  /** A worker of agent "fleet" with two routes, p1 (down while `p1Down()`) and p2. */
  function breakerWorker(prefix: string, name: string, p1Down: () => boolean, sent: Sent[]) {
    const { store: s } = store(prefix);
    const sh = createSelfHealing({
      agent: "fleet",
      store: s,
      logger: { warn: () => undefined },
      recovery: {
        providers: [{ name: "p1" }, { name: "p2" }],
        // A probe lease of 10 s: one probe in the fleet, however long a busy machine makes it.
        breaker: {
          baseOpenMs: OPEN_MS,
          probeTimeoutMs: 10_000,
          minimumAttempts: 2,
          failureRate: 0.5,
        },
        plans: { SERVICE_DOWN: ["failover_to_secondary"] },
      },
    });
    opened.unshift({ close: () => sh.close() });
    const circuits: { dependency: string; state: string; at: number }[] = [];
    sh.on("circuit-change", (e) => {
      circuits.push({ dependency: e.dependency, state: e.state, at: Date.now() });
    });
    const complete = sh.tool(
      "complete",
      { readOnly: true, providers: ["p1", "p2"] },
      async (q: string, ctx) => {
        sent.push({ worker: name, provider: ctx.provider, at: Date.now() });
        await sleep(5);
        if (ctx.provider === "p1" && p1Down()) throw thrownFault("http_503");
        return `${q} from ${ctx.provider ?? "?"}`;
      },
    );
    return { name, sh, store: s, complete, circuits };
  }
  type Sent = { worker: string; provider: string | undefined; at: number };
  type BreakerWorker = ReturnType<typeof breakerWorker>;

  /** Worker `a` alone calls until its breaker on p1 opens. */
  async function trip(a: BreakerWorker): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (!a.circuits.some((e) => e.dependency === "p1" && e.state === "open")) {
      if (Date.now() > deadline) throw new Error("a's breaker never opened");
      await a.complete("q");
    }
  }

  it("a breaker verdict reached by one instance is applied by the other", async () => {
    const sent: Sent[] = [];
    const a = breakerWorker("c2", "a", () => true, sent);
    const b = breakerWorker("c2", "b", () => true, sent);
    await subscribed(a.store, 2);
    await trip(a);
    await waitFor(() => b.circuits.some((e) => e.dependency === "p1" && e.state === "open"));
    const before = sent.length;
    await b.complete("q");
    // b never tried p1 itself: its first call goes straight to p2.
    expect(sent.slice(before).map((s) => s.provider)).toEqual(["p2"]);
    expect(sent.filter((s) => s.worker === "b" && s.provider === "p1")).toEqual([]);
    expect([a.store.isDegraded, b.store.isDegraded]).toEqual([false, false]);
  }, 120_000);

  it("one half-open probe for the whole fleet, then every instance is back on p1", async () => {
    let p1Down = true;
    const sent: Sent[] = [];
    const workers = ["a", "b", "c"].map((name) => breakerWorker("c3", name, () => p1Down, sent));
    const [a] = workers as [BreakerWorker];
    await subscribed(a.store, 3);
    await trip(a);
    await waitFor(() => workers.every((w) => w.circuits.some((e) => e.state === "open")));

    p1Down = false;
    const openedAt = Math.max(...a.circuits.filter((e) => e.state === "open").map((e) => e.at));
    await sleep(Math.max(0, openedAt + OPEN_MS + 50 - Date.now()));
    const halfOpenFrom = sent.length;
    const closed = () => workers.every((w) => w.circuits.at(-1)?.state === "closed");
    const deadline = Date.now() + 60_000;
    while (!closed()) {
      if (Date.now() > deadline) throw new Error("the fleet's breakers never closed");
      await Promise.all(workers.map((w) => w.complete("q")));
      await sleep(20);
    }
    const firstClose = Math.min(
      ...workers.flatMap((w) => w.circuits.filter((e) => e.state === "closed").map((e) => e.at)),
    );
    const probes = sent.slice(halfOpenFrom).filter((s) => s.provider === "p1" && s.at < firstClose);
    expect(probes).toHaveLength(1);
    const after = sent.length;
    await Promise.all(workers.map((w) => w.complete("q")));
    expect(sent.slice(after).map((s) => s.provider)).toEqual(["p1", "p1", "p1"]);
    // Shared through the cluster, not decided alone: no store fell back to its own memory.
    expect(workers.map((w) => w.store.isDegraded)).toEqual([false, false, false]);
  }, 120_000);

  /**
   * The catch-up reads the standing verdicts with SCAN (then MGET); a Cluster client sends a
   * keyless SCAN to one master picked at random, so the store scans every master. Nine late
   * instances: all nine finding the verdict by chance would be (1/3)^9.
   */
  it("an instance that starts late takes the verdicts standing in the cluster", async () => {
    const sent: Sent[] = [];
    const first = breakerWorker("c7", "first", () => true, sent);
    await trip(first);
    // The verdict is stored (after the call, not awaited by it); the late ones were not listening
    // when it went out.
    const verdict = `${fleetTag("c7")}:breaker:p1`;
    const reader = connect();
    await waitFor(async () => (await reader.exists(verdict)) === 1);
    const late = Array.from({ length: 9 }, (_, i) =>
      breakerWorker("c7", `late-${i}`, () => true, sent),
    );
    const informed = () =>
      late.filter((w) => w.circuits.some((e) => e.dependency === "p1" && e.state === "open"));
    await waitFor(() => informed().length === late.length).catch(() => undefined);
    // Each does, whichever node its client's SCAN would have landed on.
    expect(informed().map((w) => w.name)).toEqual(late.map((w) => w.name));
  }, 120_000);

  it("two instances sending one idempotency key charge once; both get the result", async () => {
    const charges: string[] = [];
    const workers = ["a", "b"].map((name) => {
      const { store: s } = store("c4");
      const sh = createSelfHealing({ agent: "pay", store: s, logger: { warn: () => undefined } });
      opened.unshift({ close: () => sh.close() });
      const charge = sh.tool(
        "charge",
        { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
        async (o: { order: string }) => {
          charges.push(`${name}:${o.order}`);
          await sleep(150); // the other arrives while this one is in flight
          return { charged: o.order, by: name };
        },
      );
      return { sh, store: s, charge };
    });
    await sleep(200);
    const results = await Promise.all(workers.map((w) => w.charge({ order: "order-1" })));
    expect(charges).toHaveLength(1);
    const sender = charges[0]?.split(":")[0];
    expect(results).toEqual([0, 1].map(() => ({ charged: "order-1", by: sender })));
    // Later, from the other instance: still one charge.
    const other = workers.find((_, i) => ["a", "b"][i] !== sender);
    expect(await other?.charge({ order: "order-1" })).toEqual({ charged: "order-1", by: sender });
    expect(charges).toHaveLength(1);
    expect(workers.map((w) => w.store.isDegraded)).toEqual([false, false]);
  }, 120_000);

  /**
   * Two instances call their tools in a loop; `during` runs meanwhile (the failover). Every call
   * must succeed and no call may take long; a status read works throughout.
   */
  async function runAround(
    workers: ReturnType<typeof recordingWorker>[],
    during: () => Promise<unknown>,
    afterMs: number,
  ): Promise<{ slowestMs: number; failedCalls: number; callsDuring: number }> {
    let stop = false;
    let slowestMs = 0;
    let failedCalls = 0;
    let calls = 0;
    const loops = workers.map(async (w) => {
      for (let i = 0; !stop; i++) {
        const started = performance.now();
        const ok = await w.call(i % 4 === 0).then(
          () => true,
          (e: unknown) => e instanceof Error && e.message === "amount must be positive",
        );
        slowestMs = Math.max(slowestMs, performance.now() - started);
        calls++;
        if (!ok) failedCalls++;
        if (i % 20 === 0) await w.sh.status();
        await sleep(2);
      }
    });
    await sleep(300);
    const before = calls;
    await during();
    const callsDuring = calls - before;
    await sleep(afterMs);
    stop = true;
    await Promise.all(loops);
    return { slowestMs, failedCalls, callsDuring };
  }

  /** An instance of agent `agent` whose every call (and intended failure) is counted. */
  function recordingWorker(prefix: string, agent: string, options: { quiet?: boolean } = {}) {
    // quiet: records go out only on an explicit flush (the kill case knows what was sent).
    const { store: s, warnings } = store(
      prefix,
      options.quiet ? { flushMs: 3_600_000, flushRecords: 1e9 } : {},
    );
    const sh = createSelfHealing({
      agent,
      store: s,
      logger: { warn: () => undefined },
      recovery: { plans: { BAD_REQUEST: [] } },
      ...(options.quiet && { health: { cacheMs: 3_600_000 } }),
    });
    opened.unshift({ close: () => sh.close() });
    const made = { ok: 0, failed: 0 };
    const tool = sh.tool("work", { readOnly: true }, (fail: boolean) => {
      if (fail) {
        made.failed++;
        throw badRequest();
      }
      made.ok++;
      return "ok";
    });
    return { sh, store: s, warnings, made, call: tool };
  }

  async function fleetTotals(prefix: string, agent: string) {
    const reader = store(prefix);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const signals = await reader.store.read(agent, Date.now());
      if (!reader.store.isDegraded) return signals.tools.get("work")?.calls;
      if (Date.now() > deadline) throw new Error(`reader degraded: ${reader.warnings.join("\n")}`);
      await sleep(100);
    }
  }

  /** Flushes until the store says it is not degraded (Redis reachable again). */
  async function flushedAndShared(s: RedisSignalStore): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      await s.flush();
      if (!s.isDegraded) return;
      if (Date.now() > deadline) throw new Error("the store never came back from degraded");
      await sleep(100);
    }
  }

  it("CLUSTER FAILOVER of the agent's master mid-run: recording and reading go on, totals exact", async () => {
    const prefix = "c5";
    const agent = "support";
    const workers = [recordingWorker(prefix, agent), recordingWorker(prefix, agent)];
    const master = await suite.cluster.masterOf(`${prefix}:{${agent}}`);
    let moved: { from: number; to: number } | undefined;
    const { slowestMs, failedCalls, callsDuring } = await runAround(
      workers,
      async () => {
        moved = await suite.cluster.failover(`${prefix}:{${agent}}`, { how: "manual" });
      },
      1_500,
    );
    expect(moved?.from).toBe(master);
    expect(await suite.cluster.masterOf(`${prefix}:{${agent}}`)).toBe(moved?.to);
    expect(failedCalls).toBe(0);
    expect(callsDuring, "calls made while the failover ran").toBeGreaterThan(0);
    for (const w of workers) await flushedAndShared(w.store);
    const made = workers.reduce(
      (s, w) => ({ ok: s.ok + w.made.ok, failed: s.failed + w.made.failed }),
      { ok: 0, failed: 0 },
    );
    expect(made.ok).toBeGreaterThan(50);
    const totals = await fleetTotals(prefix, agent);
    expect({ ok: totals?.ok, failed: totals?.failed }).toEqual(made);
    // A call waits on Redis no longer than one command timeout (500 ms) plus scheduling.
    expect(slowestMs).toBeLessThan(1_500);
  }, 120_000);

  // The killed master stays dead, so its slots have no replica any more: the other scenarios
  // use keys on other shards and pass after it (a shuffled run orders them anyhow).
  it("the agent's master killed (SIGKILL) mid-run: its replica takes over, nothing acknowledged is lost", async () => {
    const prefix = "c6";
    const agent = "billing";
    const workers = [
      recordingWorker(prefix, agent, { quiet: true }),
      recordingWorker(prefix, agent, { quiet: true }),
    ];
    const key = `${prefix}:{${agent}}`;
    const master = await suite.cluster.masterOf(key);
    let moved: { from: number; to: number; tookMs: number } | undefined;
    const { slowestMs, failedCalls, callsDuring } = await runAround(
      workers,
      async () => {
        // What was recorded so far is sent and acknowledged; the replica has it all (the harness
        // waits for its offset) when the master dies, while the calls go on.
        for (const w of workers) await w.store.flush();
        moved = await suite.cluster.failover(key, { how: "kill" });
        // The calls made while the slots had no master are kept and sent once it is back.
        for (const w of workers) await w.store.flush();
      },
      1_000,
    );
    expect(moved?.from).toBe(master);
    expect(await suite.cluster.masterOf(key)).toBe(moved?.to);
    expect(suite.cluster.pids().has(master)).toBe(false);
    expect(failedCalls).toBe(0);
    expect(callsDuring, "calls made while the failover ran").toBeGreaterThan(0);
    for (const w of workers) await flushedAndShared(w.store);
    const made = workers.reduce(
      (s, w) => ({ ok: s.ok + w.made.ok, failed: s.failed + w.made.failed }),
      { ok: 0, failed: 0 },
    );
    const totals = await fleetTotals(prefix, agent);
    expect({ ok: totals?.ok, failed: totals?.failed }).toEqual(made);
    expect(slowestMs).toBeLessThan(1_500);
  }, 120_000);
});
