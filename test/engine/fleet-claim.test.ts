/**
 * A keyed write's claim on the fleet's idempotency ledger (src/engine/tool.ts), against a
 * scripted ledger on virtual time: what each answer does (mine, done, busy, lost), how a fleet
 * that cannot be asked is waited for ("refuse") or decided without ("local"), and what is let go.
 * With a real Redis and real workers: test/redis/ledger-*.test.ts and fleet-processes.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import {
  isFleetUnavailableError,
  isInFlightElsewhereError,
  type ToolCallEvent,
} from "../../src/index.js";
import type {
  Claim,
  FleetWrite,
  LedgerOptions,
  LedgerSync,
  WhenFleetDown,
} from "../../src/recovery/idempotency.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";

/** The default result lifetime, ms (`recovery.ledger.ttlMs`). */
const TTL_MS = 24 * 3_600_000;
const DEADLINE_MS = 1_000;

/**
 * One answer of the script: a claim, a thrown error, or `"hang"` (an ask never answered, as of a
 * stopped Redis); the last answer is kept for every ask.
 */
type Answer = Claim | Error | "hang";

/** A fleet ledger that answers claims from `script` (the last answer repeats) and keeps a log. */
function scriptedLedger(script: Answer[], now: () => number) {
  const log: string[] = [];
  const asks: { at: number; leaseMs: number; holdMs: number | undefined }[] = [];
  let away = false;
  const answers = [...script];
  const ledger: LedgerSync = {
    away: () => away,
    write(tool, key): FleetWrite {
      log.push(`write ${tool} ${key}`);
      return {
        claim(leaseMs, holdMs) {
          asks.push({ at: now(), leaseMs, holdMs });
          const answer = (answers.length > 1 ? answers.shift() : answers[0]) as Answer;
          if (answer === "hang") return new Promise<Claim>(() => undefined);
          return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
        },
        complete(value, ttlMs) {
          log.push(`complete ${JSON.stringify(value)} ${ttlMs}`);
        },
        release() {
          log.push("release");
        },
      };
    },
  };
  return {
    ledger,
    log,
    asks,
    setAway: (v: boolean) => {
      away = v;
    },
  };
}

/** A worker whose keyed `charge` counts its real sends, on a store whose fleet is `script`. */
function worker(
  script: Answer[],
  whenFleetDown?: WhenFleetDown,
  ledger: Partial<LedgerOptions> = {},
) {
  let now = () => 0;
  const fleet = scriptedLedger(script, () => now());
  const store = Object.assign(new MemorySignalStore(), { fleet: { ledger: fleet.ledger } });
  const options = { ...ledger, ...(whenFleetDown && { whenFleetDown }) };
  const instance = virtualInstance({
    store,
    ...(Object.keys(options).length > 0 && { recovery: { ...NO_RECOVERY, ledger: options } }),
  });
  now = () => instance.clock.now();
  const sent: string[] = [];
  let fail = false;
  const charge = instance.sh.tool(
    "charge",
    {
      readOnly: false,
      idempotencyKey: (o: { order: string }) => o.order,
      deadlineMs: DEADLINE_MS,
      timeoutMs: 500,
    },
    (o: { order: string }) => {
      sent.push(o.order);
      if (fail) throw Object.assign(new Error("card declined"), { status: 402 });
      return { charged: o.order };
    },
  );
  const calls: ToolCallEvent[] = [];
  instance.sh.on("tool-call", (e) => calls.push(e));
  const start = instance.clock.now();
  return {
    ...instance,
    ...fleet,
    charge,
    sent,
    calls,
    /** Ms since the worker was made. */
    elapsed: () => instance.clock.now() - start,
    failing: () => {
      fail = true;
    },
  };
}

/** Runs `promise` on the worker's virtual time; its value, or what it threw. */
async function settle<T>(
  w: ReturnType<typeof worker>,
  promise: Promise<T>,
): Promise<{ value?: T; error?: unknown }> {
  return w.clock.run(
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    { stepMs: 10, maxMs: 10 * DEADLINE_MS },
  );
}

describe("a keyed write's claim on the fleet", () => {
  it("mine: sent once, its result shared for ttlMs; the ask carries the time left and the hold", async () => {
    const w = worker([{ kind: "mine" }]);
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1" });
    expect(w.sent).toEqual(["o1"]);
    expect(w.log).toEqual(["write charge o1", `complete {"charged":"o1"} ${TTL_MS}`]);
    // "refuse" (the default) is strict: the key stays held for the result's lifetime.
    expect(w.asks).toEqual([{ at: w.clock.now(), leaseMs: DEADLINE_MS, holdMs: TTL_MS }]);
    expect(w.calls.map((c) => c.outcome)).toEqual(["success"]);
  });

  it("done: another worker's result, replayed; nothing sent, nothing shared again", async () => {
    const w = worker([{ kind: "done", value: { charged: "o1", by: "other" } }]);
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1", by: "other" });
    expect(w.sent).toEqual([]);
    expect(w.log).toEqual(["write charge o1"]);
    // Asked again the next time: the fleet holds the result, not this worker.
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1", by: "other" });
    expect(w.asks).toHaveLength(2);
    expect(w.sent).toEqual([]);
  });

  it("busy, then done: asks again at the sender's retry time (at most 100 ms), then replays", async () => {
    const w = worker([
      { kind: "busy", retryMs: 30 },
      { kind: "busy", retryMs: 5_000 },
      { kind: "done", value: "paid" },
    ]);
    const out = await settle(w, w.charge({ order: "o1" }));
    expect(out).toEqual({ value: "paid" });
    expect(w.sent).toEqual([]);
    const t0 = w.asks[0]?.at ?? 0;
    expect(w.asks.map((a) => a.at - t0)).toEqual([0, 30, 130]);
    // Each ask leases what is left of the deadline.
    expect(w.asks.map((a) => a.leaseMs)).toEqual([
      DEADLINE_MS,
      DEADLINE_MS - 30,
      DEADLINE_MS - 130,
    ]);
  });

  it("busy until the deadline: InFlightElsewhereError, nothing sent, nothing let go", async () => {
    const w = worker([{ kind: "busy", retryMs: 0 }]);
    const out = await settle(w, w.charge({ order: "o1" }));
    expect(isInFlightElsewhereError(out.error)).toBe(true);
    expect(w.sent).toEqual([]);
    expect(w.log).toEqual(["write charge o1"]);
    // retryMs 0 still waits 1 ms; the last ask is the one whose wait would pass the deadline.
    const last = w.asks.at(-1)?.at ?? 0;
    expect(last - (w.asks[0]?.at ?? 0)).toBe(DEADLINE_MS - 1);
    expect(w.asks.every((a, i) => i === 0 || a.at - (w.asks[i - 1]?.at ?? 0) === 1)).toBe(true);
    expect(w.calls.map((c) => c.outcome)).toEqual(["error"]);
  });

  it("lost (a sender went silent mid-write): refused at once, never sent from here", async () => {
    const w = worker([{ kind: "lost" }]);
    const out = await settle(w, w.charge({ order: "o1" }));
    expect(isInFlightElsewhereError(out.error)).toBe(true);
    expect(w.asks).toHaveLength(1);
    expect(w.sent).toEqual([]);
  });

  it("settle (Redis restarting): asked again after retryMs, then sent", async () => {
    const w = worker([{ kind: "settle", retryMs: 40 }, { kind: "mine" }]);
    expect(await settle(w, w.charge({ order: "o1" }))).toEqual({ value: { charged: "o1" } });
    expect(w.asks.map((a) => a.at - (w.asks[0]?.at ?? 0))).toEqual([0, 40]);
    expect(w.sent).toEqual(["o1"]);
  });

  it("a write that fails after its claim lets the key go; the error reaches the caller", async () => {
    const w = worker([{ kind: "mine" }]);
    w.failing();
    const out = await settle(w, w.charge({ order: "o1" }));
    expect((out.error as Error).message).toMatch(/card declined/);
    expect(w.log).toEqual(["write charge o1", "release"]);
  });
});

describe("a fleet that cannot be asked", () => {
  it('"refuse": asked every 100 ms within the deadline, then FleetUnavailableError; the ask let go', async () => {
    const down = new Error("Connection is closed.");
    const w = worker([down]);
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Error & { inFlightElsewhere: boolean; cause: unknown };
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(error.inFlightElsewhere).toBe(false);
    expect(error.cause).toBe(down);
    expect(w.sent).toEqual([]);
    const t0 = w.asks[0]?.at ?? 0;
    // The last ask is the one whose wait would reach the deadline.
    expect(w.asks.map((a) => a.at - t0)).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
    // A failed ask may still land in Redis and hold the key: it is let go.
    expect(w.log).toEqual(["write charge o1", "release"]);
    // Refused before anything was sent: no health signal, so the error is not counted.
    expect(w.calls.map((c) => c.outcome)).toEqual(["error"]);
    expect(w.calls[0]?.failedAttempts).toBe(0);
  });

  it('"refuse": the fleet back within the deadline sends the write once', async () => {
    const w = worker([new Error("ETIMEDOUT"), new Error("ETIMEDOUT"), { kind: "mine" }]);
    expect(await settle(w, w.charge({ order: "o1" }))).toEqual({ value: { charged: "o1" } });
    expect(w.sent).toEqual(["o1"]);
    expect(w.log).toEqual(["write charge o1", `complete {"charged":"o1"} ${TTL_MS}`]);
  });

  it('"refuse" asks even while the fleet is known to be away', async () => {
    const w = worker([{ kind: "mine" }]);
    w.setAway(true);
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1" });
    expect(w.asks).toHaveLength(1);
  });

  it('"local": a failed ask decides alone at once, and shares the result when it can', async () => {
    const w = worker([new Error("ETIMEDOUT")], "local");
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1" });
    expect(w.asks).toEqual([{ at: w.clock.now(), leaseMs: DEADLINE_MS, holdMs: undefined }]);
    expect(w.sent).toEqual(["o1"]);
    expect(w.log).toEqual(["write charge o1", `complete {"charged":"o1"} ${TTL_MS}`]);
  });

  it('"local": a fleet known to be away is not asked (no timeout waited)', async () => {
    const w = worker([{ kind: "busy", retryMs: 10 }], "local");
    w.setAway(true);
    expect(await w.charge({ order: "o1" })).toEqual({ charged: "o1" });
    expect(w.asks).toEqual([]);
    expect(w.sent).toEqual(["o1"]);
  });

  it('"local" never decides alone after hearing another worker holds the key', async () => {
    const w = worker([{ kind: "busy", retryMs: 50 }, new Error("ETIMEDOUT")], "local");
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Error & { inFlightElsewhere: boolean; cause: unknown };
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(error.inFlightElsewhere).toBe(true);
    expect((error.cause as Error).message).toBe("ETIMEDOUT");
    expect(w.sent).toEqual([]);
    expect(w.log).toEqual(["write charge o1", "release"]);
  });
});

describe("the wait for a fleet that cannot be asked (recovery.ledger.fleetWaitMs)", () => {
  type Unavailable = Error & { waitedMs: number; inFlightElsewhere: boolean; cause: unknown };

  it('"refuse": failed asks end at fleetWaitMs, not the deadline; nothing sent, the ask let go', async () => {
    const w = worker([new Error("ETIMEDOUT")], undefined, { fleetWaitMs: 300 });
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Unavailable;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(w.asks.map((a) => a.at - (w.asks[0]?.at ?? 0))).toEqual([0, 100, 200]);
    // The next wait would reach the limit: it gives up at once rather than ask past it.
    expect(error.waitedMs).toBe(200);
    expect(error.message).toContain("could not be asked within 200 ms");
    expect(w.sent).toEqual([]);
    expect(w.log).toEqual(["write charge o1", "release"]);
  });

  it("an ask that never answers (Redis stopped) is cut off by the call's own timer at fleetWaitMs", async () => {
    const w = worker(["hang"], undefined, { fleetWaitMs: 300 });
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Unavailable;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(error.waitedMs).toBe(300);
    expect(w.asks).toHaveLength(1);
    expect((error.cause as Error).message).toMatch(/did not answer within 300 ms/);
    expect(w.sent).toEqual([]);
    // The unanswered ask may yet land in Redis and hold the key: it is let go.
    expect(w.log).toEqual(["write charge o1", "release"]);
    expect(w.calls.map((c) => c.outcome)).toEqual(["error"]);
  });

  it("a deadline sooner than fleetWaitMs ends the wait at the deadline, not after it", async () => {
    const w = worker(["hang"], undefined, { fleetWaitMs: 5_000 });
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Unavailable;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(error.waitedMs).toBe(DEADLINE_MS);
    expect(w.calls[0]?.durationMs).toBe(DEADLINE_MS);
    expect(w.sent).toEqual([]);
  });

  it("a fleet back within the wait (a failed ask, then a restart's grace) sends the write once", async () => {
    const w = worker([new Error("ETIMEDOUT"), { kind: "settle", retryMs: 150 }, { kind: "mine" }]);
    expect(await settle(w, w.charge({ order: "o1" }))).toEqual({ value: { charged: "o1" } });
    expect(w.asks.map((a) => a.at - (w.asks[0]?.at ?? 0))).toEqual([0, 100, 200]);
    expect(w.sent).toEqual(["o1"]);
  });

  it("settle (a restart's grace) counts against the wait: it gives up once the next ask would pass it", async () => {
    const w = worker([{ kind: "settle", retryMs: 80 }], undefined, { fleetWaitMs: 250 });
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Unavailable;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(w.asks.map((a) => a.at - (w.asks[0]?.at ?? 0))).toEqual([0, 80, 160, 240]);
    expect(error.waitedMs).toBe(240);
    expect(w.sent).toEqual([]);
  });

  it("waiting on another worker's send is bounded by the deadline; the wait counts from the fleet's last answer", async () => {
    const busy = { kind: "busy", retryMs: 100 } as const;
    // Busy for 600 ms (longer than the 300 ms wait), then the fleet stops answering.
    const w = worker([busy, busy, busy, busy, busy, busy, busy, "hang"], undefined, {
      fleetWaitMs: 300,
    });
    const out = await settle(w, w.charge({ order: "o1" }));
    const error = out.error as Unavailable;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(error.inFlightElsewhere).toBe(true);
    // The last busy answer came at 600 ms: the hung ask is cut off 300 ms after it.
    expect(w.asks.at(-1)?.at).toBe((w.asks[0]?.at ?? 0) + 700);
    expect(error.waitedMs).toBe(900);
    expect(w.sent).toEqual([]);
  });

  it("the caller's abort ends a hung ask at once, with the caller's reason", async () => {
    const w = worker(["hang"], undefined, { fleetWaitMs: 5_000 });
    const controller = new AbortController();
    const reason = new Error("user went away");
    const pending = w.charge({ order: "o1" }, { signal: controller.signal });
    await w.clock.advance(50);
    controller.abort(reason);
    const out = await settle(w, pending);
    expect(out.error).toBe(reason);
    expect(w.sent).toEqual([]);
    expect(w.log).toEqual(["write charge o1", "release"]);
  });
});
