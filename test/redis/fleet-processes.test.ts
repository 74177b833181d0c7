import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FLEET_BREAKER,
  FleetProcess,
  realtimeClock,
  startFakeProvider,
  type CallDone,
  type Charge,
  type ChargeDone,
  type Line,
} from "../fixtures/redis-fleet-worker.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";

const available = haveRedis("Redis fleet of worker processes calling a provider");

const WORKERS = 3;
const PREFIX = "fleet-proc";
/**
 * How long the fake provider takes to charge a card, ms: the other workers arrive meanwhile. A
 * second: each is told to charge at the same moment, and on a busy machine one may wake late.
 */
const CHARGE_MS = 1_000;
/**
 * How long p1 takes to answer the half-open probe, ms: the other workers call again and again
 * meanwhile (each call about COMPLETE_MS), and are refused the probe.
 */
const PROBE_MS = 1_000;
/**
 * Limits on waits for what takes milliseconds on an idle machine (a start, a pub/sub message):
 * generous, so a busy one passes; they only end a run that would never get there (issue 27).
 */
const WAIT_MS = 60_000;
/** How long the fake LLM takes to answer, ms (so a request is well before its answer's events). */
const COMPLETE_MS = 10;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The clock every process reports on (see realtimeClock): the fake provider stamps with it. */
const clock = realtimeClock();
const { now } = clock;

const isEvent =
  (state: string) =>
  (l: Line): l is Extract<Line, { type: "event" }> =>
    l.type === "event" && l.dependency === "p1" && l.state === state;

describe.skipIf(!available)("three worker processes, one fleet, one fake provider", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let provider: Awaited<ReturnType<typeof startFakeProvider>>;
  let workers: FleetProcess[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    provider = await startFakeProvider(CHARGE_MS, COMPLETE_MS);
  });
  afterAll(async () => {
    // Whatever happened, every child and server is stopped by its PID or handle.
    for (const w of workers) w.kill();
    await Promise.all(workers.map((w) => w.exited));
    admin.disconnect();
    await provider.server.close();
    await redis.stop();
  });

  it("share breaker verdicts, one half-open probe and one charge per key, by the provider's counts", async () => {
    const started = performance.now();
    workers = Array.from({ length: WORKERS }, (_, i) =>
      FleetProcess.start(i, {
        redisUrl: redis.url,
        prefix: PREFIX,
        providerUrl: provider.server.url,
      }),
    );
    const ready = await Promise.all(
      workers.map((w) =>
        w.waitFor((l): l is Extract<Line, { type: "ready" }> => l.type === "ready", WAIT_MS),
      ),
    );
    // Three processes, none of them this one.
    expect(new Set(ready.map((r) => r.pid)).size).toBe(WORKERS);
    expect(ready.map((r) => r.pid)).not.toContain(process.pid);
    // Every worker's subscriber listens for verdicts before anyone calls.
    const channel = `${PREFIX}:breakers`;
    for (const deadline = Date.now() + WAIT_MS; ; await sleep(20)) {
      const [, listeners] = (await admin.pubsub("NUMSUB", channel)) as [string, number];
      if (listeners === WORKERS) break;
      if (Date.now() > deadline) throw new Error("the workers did not subscribe in time");
    }
    const spawnedMs = performance.now() - started;
    const [w0, w1, w2] = workers as [FleetProcess, FleetProcess, FleetProcess];
    const { requests } = provider;
    const p1Requests = (from: number, to = Infinity) =>
      requests.filter((r) => r.path === "/p1" && r.at >= from && r.at < to);

    // --- 1. p1 fails for worker 0 alone; its breaker opens; workers 1 and 2 never try p1. ---
    const phase1 = now();
    // Workers 1 and 2 will call once, each as soon as its own p1 breaker is open.
    const theirCalls = [w1, w2].map((w) =>
      w.send<CallDone>({ cmd: "call-on-open", maxMs: WAIT_MS }),
    );
    const own: CallDone[] = [];
    while (!w0.lines.some(isEvent("open"))) {
      own.push(await w0.send<CallDone>({ cmd: "call" }));
      if (own.length > 10) throw new Error("worker 0's breaker did not open");
    }
    // Each call was answered by p2 after p1's 503: recovered by failover.
    expect(own.map((c) => [c.provider, c.outcome])).toEqual(own.map(() => ["p2", "recovered"]));
    // minimumAttempts (2) failed attempts at failureRate 1 opened it: two 503s from worker 0.
    expect(p1Requests(phase1).map((r) => [r.worker, r.status])).toEqual([
      [0, 503],
      [0, 503],
    ]);
    const opened = await w0.waitFor(isEvent("open"), WAIT_MS);
    const halfOpenAt = opened.at + FLEET_BREAKER.baseOpenMs;
    // Workers 1 and 2 hear the verdict (pub/sub): open, though p1 never failed for them.
    const heard = await Promise.all([w1, w2].map((w) => w.waitFor(isEvent("open"), WAIT_MS)));
    const theirs = await Promise.all(theirCalls);
    // Straight to p2: first attempt, no failure, and the provider saw no /p1 from them.
    expect(theirs.map((c) => [c.provider, c.outcome, c.attempts])).toEqual([
      ["p2", "success", 1],
      ["p2", "success", 1],
    ]);
    expect(p1Requests(phase1)).toHaveLength(2); // still worker 0's two
    expect(requests.filter((r) => r.worker !== 0 && r.path === "/p1")).toEqual([]);
    const others = requests.filter((r) => r.worker !== 0).sort((a, b) => a.worker - b.worker);
    expect(others.map((r) => [r.worker, r.path])).toEqual([
      [1, "/p2"],
      [2, "/p2"],
    ]);
    // ...and all of that inside the open period (not a half-open rejection): 3 s, for what takes
    // milliseconds.
    for (const c of theirs) expect(c.ended).toBeLessThan(halfOpenAt);
    const verdictLagMs = Math.max(...heard.map((e) => e.at - opened.at));

    // --- 2. p1 is back; past the open period all three call at once: one probe in the fleet. ---
    provider.state.p1Down = false;
    provider.state.p1Ms = PROBE_MS;
    const phase2 = now();
    const go = halfOpenAt + 50;
    const rounds = await Promise.all(
      workers.map((w) =>
        w.send<{ calls: CallDone[]; closed: boolean }>({
          cmd: "call-until-closed",
          at: go,
          pauseMs: 20,
          maxMs: WAIT_MS,
        }),
      ),
    );
    expect(rounds.map((r) => r.closed)).toEqual([true, true, true]);
    // Nothing reached p1 while the breaker was open everywhere.
    expect(p1Requests(phase2, halfOpenAt)).toEqual([]);
    const closes = workers.map((w) =>
      w.circuits().filter((e) => e.at >= phase2 && e.state === "closed"),
    );
    for (const c of closes) expect(c).toHaveLength(1);
    const firstClosed = Math.min(...closes.map((c) => c[0]?.at ?? Infinity));
    // Between half-open and the first "closed": exactly one /p1 request in the whole fleet...
    const probes = p1Requests(halfOpenAt, firstClosed);
    expect(probes).toHaveLength(1);
    const prober = probes[0]?.worker ?? -1;
    // ...from the one worker that went half-open (it held the lease) and closed first, by its
    // own verdict; the others closed on hearing it.
    const halfOpens = workers.map(
      (w) => w.circuits().filter((e) => e.at >= phase2 && e.state === "half_open").length,
    );
    expect(halfOpens).toEqual(workers.map((w) => (w.index === prober ? 1 : 0)));
    expect(closes[prober]?.[0]?.at).toBe(firstClosed);
    // Every other call in the half-open period went to p2 and none failed.
    const calls = rounds.flatMap((r) => r.calls);
    expect(calls.every((c) => c.outcome === "success")).toBe(true);
    const halfOpenCalls = calls.filter((c) => c.started >= halfOpenAt && c.started < firstClosed);
    expect(halfOpenCalls.filter((c) => c.provider === "p1")).toHaveLength(1);
    // They did call repeatedly meanwhile (the probe took PROBE_MS).
    expect(halfOpenCalls.length).toBeGreaterThan(WORKERS);
    const lastClosed = Math.max(...closes.map((c) => c[0]?.at ?? -Infinity));
    const afterFirstClose = p1Requests(firstClosed, lastClosed).length;
    // Closed everywhere: p1 takes each worker's traffic again.
    provider.state.p1Ms = COMPLETE_MS;
    const after = await Promise.all(workers.map((w) => w.send<CallDone>({ cmd: "call" })));
    expect(after.map((c) => c.provider)).toEqual(["p1", "p1", "p1"]);

    // --- 3. The same order charged by all three at the same moment: one charge. ---
    const at = now() + 500;
    const charged = await Promise.all(
      workers.map((w) => w.send<ChargeDone>({ cmd: "charge", order: "order-1", at })),
    );
    const chargeRequests = requests.filter((r) => r.path === "/charge");
    // The provider charged once, and only one request ever reached it.
    expect(provider.charges.get("order-1")).toBe(1);
    expect([...provider.charges.values()].reduce((a, b) => a + b, 0)).toBe(1);
    expect(chargeRequests).toHaveLength(1);
    const sender = chargeRequests[0]?.worker;
    // All three got that one charge: the sender from the provider, the others from the ledger.
    const expected: Charge = { order: "order-1", chargeId: "ch_order-1_1", by: sender ?? -1 };
    expect(charged.map((c) => c.value)).toEqual([expected, expected, expected]);
    expect(charged.map((c) => c.replayed)).toEqual(workers.map((w) => w.index !== sender));
    // They did call at the same moment: each started before the charge was answered.
    const answeredAt = (chargeRequests[0]?.at ?? 0) + CHARGE_MS;
    for (const c of charged) expect(c.started).toBeLessThan(answeredAt);

    // --- The end: each worker closes its instance and store and exits 0 on its own. ---
    const closed = await Promise.all(
      workers.map((w) => w.send<{ degraded: boolean }>({ cmd: "close" })),
    );
    expect(closed.map((c) => c.degraded)).toEqual([false, false, false]);
    for (const w of workers) w.child.stdin.end();
    const exits = await Promise.race([
      Promise.all(workers.map((w) => w.exited)),
      sleep(WAIT_MS).then(() => undefined),
    ]);
    expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
    for (const w of workers) {
      expect(w.stderr).toBe("");
      expect(w.warnings()).toEqual([]);
    }

    // The measured numbers, for the record (none of them is a pass mark).
    console.info(
      JSON.stringify({
        spawnedMs: Math.round(spawnedMs),
        // How far each worker's engine clock is from this process's, ms (0 unless the wall clock
        // moved between their starts; the realtime clock every time here is on does not care).
        engineSkewMs: ready.map((r) => Math.round((r.offset - clock.offset) * 100) / 100),
        verdictLagMs: Math.round(verdictLagMs * 10) / 10,
        phase1Calls: own.length,
        prober,
        halfOpenCalls: halfOpenCalls.length,
        closeSpreadMs: Math.round((lastClosed - firstClosed) * 10) / 10,
        p1AfterFirstClose: afterFirstClose,
        totalMs: Math.round(performance.now() - started),
      }),
    );
  }, 300_000);
});
