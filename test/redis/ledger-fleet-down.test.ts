/**
 * Three worker processes send one idempotency key while Redis cannot be asked: stopped
 * (SIGSTOP) or killed (SIGKILL, then restarted empty) by its PID, before the claims or while
 * worker 0 is sending and the others wait on its claim. The fake provider counts the charges.
 * `"refuse"` (the default): one charge, or none with FleetUnavailableError when Redis is not
 * back within the deadline. `"local"`: one charge per worker that could not ask (3), none more
 * once another worker was heard holding the key. A worker with the default
 * `recovery.ledger.fleetWaitMs` (3 s): a keyed write with Redis stopped fails fast (within the
 * wait, not the call's 60 s deadline), nothing charged, and the same key charges once after.
 */
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  FleetProcess,
  startFakeProvider,
  type Charge,
  type ChargeDone,
  type Reply,
} from "../fixtures/redis-fleet-worker.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";

const available = haveRedis("Redis idempotency ledger with the fleet down");

/** How long the fake provider takes to charge a card, ms. */
const CHARGE_MS = 1_200;
/** Every Redis command of a worker gives up after this long, ms. */
const COMMAND_TIMEOUT_MS = 300;
/**
 * The three-worker fleets wait for the ledger as long as their deadlines (these scenarios are
 * about counting: Redis back within the deadline, the restart grace included).
 */
const FLEET_WAIT_MS = 60_000;
/** recovery.ledger.fleetWaitMs's default. */
const DEFAULT_FLEET_WAIT_MS = 3_000;
/**
 * How late a worker's deadline timer may fire on a busy machine, ms: a call ends when its timer
 * fires, and an event loop kept busy delays that (327 ms late was seen in CI with every core
 * busy). The bound issue 42 sets: the error within the wait plus one second. The exact bound
 * (the error at the deadline itself, not after an ask waited out) is asserted on virtual time in
 * test/engine/fleet-claim.test.ts.
 */
const TIMER_SLACK_MS = 1_000;

/**
 * The limit on waits for what takes milliseconds on an idle machine: generous, so a busy one
 * passes; it only ends a run that would never get there (issue 27). Tests get 120 s likewise.
 */
const WAIT_MS = 30_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How one scenario went, for the log line the suite prints. */
interface Measured {
  scenario: string;
  charges: number;
  outcomes: string[];
  /** From Redis being back to the last worker's answer, ms (undefined: never back in time). */
  lastAnswerAfterBackMs?: number;
}

describe.skipIf(!available)("three workers, one key, Redis away (real redis-server)", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let provider: Awaited<ReturnType<typeof startFakeProvider>>;
  const fleets: FleetProcess[] = [];
  const measured: Measured[] = [];
  let stopped = false;

  const stop = () => {
    process.kill(redis.pid ?? 0, "SIGSTOP");
    stopped = true;
  };
  const resume = () => {
    process.kill(redis.pid ?? 0, "SIGCONT");
    stopped = false;
  };

  /** Three workers of one fleet under `prefix`, ready, each past the restart grace. */
  async function startFleet(prefix: string, ledger: "refuse" | "local"): Promise<FleetProcess[]> {
    const workers = [0, 1, 2].map((i) =>
      FleetProcess.start(
        i,
        { redisUrl: redis.url, prefix, providerUrl: provider.server.url },
        {
          SELFHEAL_FLEET_LEDGER: ledger,
          SELFHEAL_FLEET_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
          SELFHEAL_FLEET_WAIT_MS: String(FLEET_WAIT_MS),
        },
      ),
    );
    fleets.push(...workers);
    await Promise.all(workers.map((w) => w.ready()));
    // A first write each (its own key): the fleet's ledger answers; Redis's epoch is old enough.
    await Promise.all(
      workers.map((w) =>
        w.send<ChargeDone>({ cmd: "charge", order: `${prefix}-warm-${w.index}`, at: 0 }),
      ),
    );
    return workers;
  }

  /**
   * Each fleet's last step, in its own afterAll (not a test: tests run in any order): its workers
   * close and exit 0 with nothing on stderr, whatever the scenarios did to Redis.
   */
  async function closeFleet(workers: FleetProcess[]): Promise<void> {
    if (stopped) resume();
    const exits = await Promise.all(workers.map((w) => w.close()));
    expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
    for (const w of workers) expect(w.stderr).toBe("");
  }

  /** How long a FleetUnavailableError says its call waited for the fleet, ms (its own clock). */
  const waited = (reply: Reply | undefined): number => {
    const ms = reply && !reply.ok && /could not be asked within (\d+) ms/.exec(reply.error)?.[1];
    if (!ms) throw new Error(`not a FleetUnavailableError with its wait: ${JSON.stringify(reply)}`);
    return Number(ms);
  };

  /** Charges sent for `order` so far. */
  const charges = (order: string) => provider.charges.get(order) ?? 0;

  /** What a reply says: the charge id, or the error's class name. */
  const outcome = (reply: Reply | undefined): string => {
    if (!reply) return "no reply";
    if (!reply.ok) return reply.error.split(":")[0] ?? reply.error;
    const done = reply.result as ChargeDone;
    return `${done.value.chargeId}${done.replayed ? " (replayed)" : ""}`;
  };

  /** Resolves once the provider saw worker `index` send a charge of `order`. */
  async function sending(order: string, index: number): Promise<void> {
    for (const deadline = Date.now() + WAIT_MS; ; await sleep(10)) {
      if (provider.requests.some((r) => r.key === order && r.worker === index)) return;
      if (Date.now() > deadline) throw new Error(`worker ${index} never sent ${order}`);
    }
  }

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    admin.on("error", () => undefined);
    provider = await startFakeProvider(CHARGE_MS);
  });
  // A scenario that failed with Redis stopped leaves it running for the next (any order).
  afterEach(() => {
    if (stopped) resume();
  });
  afterAll(async () => {
    if (stopped) resume();
    for (const w of fleets) w.kill();
    await Promise.all(fleets.map((w) => w.exited));
    admin.disconnect();
    await provider.server.close();
    await redis.stop();
    console.info(JSON.stringify(measured));
  });

  describe('whenFleetDown: "refuse" (the default)', () => {
    let workers: FleetProcess[] = [];
    beforeAll(async () => {
      workers = await startFleet("refuse", "refuse");
    }, 120_000);
    afterAll(() => closeFleet(workers), 120_000);

    it("Redis stopped before the claims, back within the deadline: one charge, all three get it", async () => {
      const order = "refuse-stop-before";
      stop();
      const replies = workers.map((w) =>
        w.ask({ cmd: "charge", order, at: 0, deadlineMs: 10_000 }),
      );
      await sleep(1_500);
      expect(charges(order)).toBe(0); // nobody sent while the fleet could not be asked
      resume();
      const back = performance.now();
      const done = await Promise.all(replies);
      const after = performance.now() - back;
      expect(charges(order)).toBe(1);
      expect(done.map((r) => r.ok)).toEqual([true, true, true]);
      const values = done.map((r) => (r.ok ? (r.result as ChargeDone).value : undefined));
      expect(new Set(values.map((v?: Charge) => v?.chargeId))).toEqual(new Set([`ch_${order}_1`]));
      measured.push({
        scenario: "refuse, SIGSTOP before the claims (1.5 s)",
        charges: charges(order),
        outcomes: done.map(outcome),
        lastAnswerAfterBackMs: Math.round(after),
      });
    }, 120_000);

    it("Redis stopped past the deadline: none sent, FleetUnavailableError; the key is free after", async () => {
      const order = "refuse-stop-past-deadline";
      stop();
      const done = await Promise.all(
        workers.map((w) => w.ask({ cmd: "charge", order, at: 0, deadlineMs: 1_500 })),
      );
      resume();
      expect(charges(order)).toBe(0);
      expect(done.map(outcome)).toEqual([
        "FleetUnavailableError",
        "FleetUnavailableError",
        "FleetUnavailableError",
      ]);
      // Each ended by its deadline, on its own clock (an ask is cut off at it, not waited out).
      for (const reply of done) expect(waited(reply)).toBeLessThanOrEqual(1_500 + TIMER_SLACK_MS);
      // The claims that landed when Redis woke up were let go: the key can be sent once now.
      await sleep(300);
      const again = await workers[1]?.send<ChargeDone>({ cmd: "charge", order, at: 0 });
      expect(again?.value.chargeId).toBe(`ch_${order}_1`);
      expect(charges(order)).toBe(1);
      measured.push({
        scenario: "refuse, SIGSTOP past a 1.5 s deadline",
        charges: 0,
        outcomes: done.map(outcome),
      });
    }, 120_000);

    it("Redis killed before the claims and restarted empty: one charge", async () => {
      const order = "refuse-kill-before";
      await redis.kill();
      const replies = workers.map((w) =>
        w.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 }),
      );
      await sleep(1_000);
      expect(charges(order)).toBe(0);
      await redis.restart();
      const back = performance.now();
      const done = await Promise.all(replies);
      const after = performance.now() - back;
      expect(charges(order)).toBe(1);
      expect(done.map((r) => r.ok)).toEqual([true, true, true]);
      measured.push({
        scenario: "refuse, SIGKILL before the claims, restarted empty after 1 s",
        charges: charges(order),
        outcomes: done.map(outcome),
        lastAnswerAfterBackMs: Math.round(after),
      });
    }, 120_000);

    it("Redis stopped while worker 0 sends and the others wait on its claim: one charge", async () => {
      const order = "refuse-stop-during";
      const first = workers[0]?.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 });
      await sending(order, 0);
      const others = workers
        .slice(1)
        .map((w) => w.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 }));
      await sleep(350); // they asked: "busy"
      stop();
      await sleep(2_000); // worker 0's charge is answered meanwhile; its share cannot land
      expect(charges(order)).toBe(1);
      resume();
      const back = performance.now();
      const done = await Promise.all([first, ...others]);
      const after = performance.now() - back;
      expect(charges(order)).toBe(1);
      expect(done.map(outcome)).toEqual([
        `ch_${order}_1`,
        `ch_${order}_1 (replayed)`,
        `ch_${order}_1 (replayed)`,
      ]);
      measured.push({
        scenario: "refuse, SIGSTOP while worker 0 sends (2 s)",
        charges: charges(order),
        outcomes: done.map(outcome),
        lastAnswerAfterBackMs: Math.round(after),
      });
    }, 120_000);

    it("Redis killed while worker 0 sends, restarted empty: worker 0 puts its result back; one charge", async () => {
      const order = "refuse-kill-during";
      const first = workers[0]?.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 });
      await sending(order, 0);
      const others = workers
        .slice(1)
        .map((w) => w.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 }));
      await sleep(350);
      await redis.kill();
      await sleep(1_500);
      await redis.restart(); // empty: the claim and the result are gone from Redis
      const back = performance.now();
      const done = await Promise.all([first, ...others]);
      const after = performance.now() - back;
      expect(charges(order)).toBe(1);
      expect(done.map(outcome)).toEqual([
        `ch_${order}_1`,
        `ch_${order}_1 (replayed)`,
        `ch_${order}_1 (replayed)`,
      ]);
      measured.push({
        scenario: "refuse, SIGKILL while worker 0 sends, restarted empty",
        charges: charges(order),
        outcomes: done.map(outcome),
        lastAnswerAfterBackMs: Math.round(after),
      });
    }, 120_000);
  });

  describe("fleetWaitMs (default 3 s): a keyed write fails fast when the fleet cannot be asked", () => {
    let solo: FleetProcess;
    let soloFleet: FleetProcess[] = [];
    afterAll(() => closeFleet(soloFleet), 120_000);
    beforeAll(async () => {
      // One worker of its own fleet, with the library's defaults for the wait and the deadline.
      solo = FleetProcess.start(
        3,
        { redisUrl: redis.url, prefix: "wait", providerUrl: provider.server.url },
        { SELFHEAL_FLEET_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS) },
      );
      fleets.push(solo);
      await solo.ready();
      await solo.send<ChargeDone>({ cmd: "charge", order: "wait-warm", at: 0 });
      soloFleet = [solo];
    }, 120_000);

    it("Redis stopped: FleetUnavailableError within the wait, not the 60 s deadline; nothing charged; after SIGCONT the key charges once", async () => {
      const order = "wait-stop";
      stop();
      const asked = performance.now();
      const reply = await solo.ask({ cmd: "charge", order, at: 0 }, 90_000);
      const tookMs = performance.now() - asked;
      resume();
      expect(outcome(reply)).toBe("FleetUnavailableError");
      // The bound on the library's own clock: the wait, plus one second.
      expect(waited(reply)).toBeLessThanOrEqual(DEFAULT_FLEET_WAIT_MS + 1_000);
      // From outside, only that it did not wait out the call's 60 s deadline: the margin is for
      // a busy machine (the wait itself is asserted above, on the library's clock).
      expect(tookMs).toBeLessThan(30_000);
      expect(charges(order)).toBe(0);
      expect(provider.requests.filter((r) => r.key === order)).toEqual([]);
      // The claims that landed when Redis woke up are let go: the same key is sent once now.
      const again = await solo.send<ChargeDone>({
        cmd: "charge",
        order,
        at: 0,
        deadlineMs: 30_000,
      });
      expect(again.value.chargeId).toBe(`ch_${order}_1`);
      expect(again.replayed).toBe(false);
      expect(charges(order)).toBe(1);
      const replayed = await solo.send<ChargeDone>({ cmd: "charge", order, at: 0 });
      expect(replayed.replayed).toBe(true);
      expect(charges(order)).toBe(1);
      measured.push({
        scenario: "default fleetWaitMs, SIGSTOP, 60 s deadline",
        charges: charges(order),
        outcomes: [
          `${outcome(reply)} after ${waited(reply)} ms (${Math.round(tookMs)} ms outside)`,
        ],
      });
    }, 120_000);

    it("a deadline shorter than the wait ends the call at its deadline", async () => {
      const order = "wait-deadline";
      stop();
      const reply = await solo.ask({ cmd: "charge", order, at: 0, deadlineMs: 700 });
      resume();
      expect(outcome(reply)).toBe("FleetUnavailableError");
      expect(waited(reply)).toBeLessThanOrEqual(700 + TIMER_SLACK_MS);
      expect(charges(order)).toBe(0);
      measured.push({
        scenario: "default fleetWaitMs, SIGSTOP, 700 ms deadline",
        charges: 0,
        outcomes: [`${outcome(reply)} after ${waited(reply)} ms`],
      });
    }, 120_000);
  });

  describe('whenFleetDown: "local"', () => {
    let workers: FleetProcess[] = [];
    beforeAll(async () => {
      workers = await startFleet("local", "local");
    }, 120_000);
    afterAll(() => closeFleet(workers), 120_000);

    it("Redis stopped before the claims: one charge per worker (3), shared once Redis is back", async () => {
      const order = "local-stop-before";
      stop();
      const done = await Promise.all(workers.map((w) => w.ask({ cmd: "charge", order, at: 0 })));
      // Each worker decided alone: the number the README states, one per worker.
      expect(charges(order)).toBe(3);
      expect(done.map((r) => r.ok)).toEqual([true, true, true]);
      resume();
      // The results reach Redis when it is back: the first one stored stays.
      await admin.connect().catch(() => undefined);
      for (const deadline = Date.now() + WAIT_MS; ; await sleep(50)) {
        const keys = await admin.keys("local:{fleet}:ledger:charge:*");
        if (keys.some((k) => !k.endsWith(":inflight"))) break;
        if (Date.now() > deadline) throw new Error("no result was shared");
      }
      measured.push({
        scenario: "local, SIGSTOP before the claims",
        charges: charges(order),
        outcomes: done.map(outcome),
      });
    }, 120_000);

    it("Redis stopped while worker 0 sends: the others heard it holds the key and never send", async () => {
      const order = "local-stop-during";
      const first = workers[0]?.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 });
      await sending(order, 0);
      const others = workers
        .slice(1)
        .map((w) => w.ask({ cmd: "charge", order, at: 0, deadlineMs: 12_000 }));
      await sleep(350);
      stop();
      await sleep(2_000);
      resume();
      const done = await Promise.all([first, ...others]);
      expect(charges(order)).toBe(1);
      expect(done.map(outcome)).toEqual([
        `ch_${order}_1`,
        `ch_${order}_1 (replayed)`,
        `ch_${order}_1 (replayed)`,
      ]);
      measured.push({
        scenario: "local, SIGSTOP while worker 0 sends (2 s)",
        charges: charges(order),
        outcomes: done.map(outcome),
      });
    }, 120_000);
  });
});
