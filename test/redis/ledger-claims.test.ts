/**
 * How a keyed write treats the fleet's answers (`selfheal/redis`'s ledger, scripted here): what
 * it sends, what it refuses, how often it asks, under `whenFleetDown` "refuse" and "local".
 * No Redis: a fake ledger answers from a script, and time is a VirtualClock, so every branch,
 * every wait and every deadline is exact and fast, whatever the machine's load.
 */
import { describe, expect, it } from "vitest";
import {
  createSelfHealing,
  FleetUnavailableError,
  InFlightElsewhereError,
  isFleetUnavailableError,
  isInFlightElsewhereError,
  isSelfHealError,
  type ToolCallEvent,
} from "../../src/index.js";
import type { FleetSync } from "../../src/fleet.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { Claim, FleetWrite, LedgerSync } from "../../src/recovery/idempotency.js";
import { VirtualClock } from "../../src/testing/index.js";

/** One answer of the fake fleet to a claim: a Claim, or an error (Redis away). */
type Answer = Claim | Error;

/** A ledger that answers claims from a list (the last answer repeats) and logs every call. */
class ScriptedLedger implements LedgerSync {
  readonly log: string[] = [];
  isAway = false;

  constructor(private readonly answers: Answer[]) {}

  away(): boolean {
    return this.isAway;
  }

  write(tool: string, key: string): FleetWrite {
    return {
      claim: (leaseMs, holdMs) => {
        this.log.push(`claim ${tool}:${key} hold=${holdMs === undefined ? "-" : "ttl"}`);
        const answer = this.answers.length > 1 ? this.answers.shift() : this.answers[0];
        if (!answer) throw new Error("no answer scripted");
        expect(leaseMs).toBeGreaterThan(0);
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
      },
      complete: (value) => {
        this.log.push(`complete ${JSON.stringify(value)}`);
      },
      release: () => {
        this.log.push("release");
      },
    };
  }
}

class FleetStore extends MemorySignalStore {
  readonly fleet: FleetSync;
  constructor(ledger: LedgerSync) {
    super();
    this.fleet = { ledger };
  }
}

const away = () => new Error("Redis did not answer within 300 ms");

/** Runs `promise` on `clock`, 10 virtual ms a step: its waits and deadlines take no real time. */
const onClock = <T>(clock: VirtualClock, promise: Promise<T>): Promise<T> =>
  clock.run(promise, { stepMs: 10, maxMs: 60_000 });

function setup(ledger: ScriptedLedger, whenFleetDown?: "refuse" | "local") {
  const clock = new VirtualClock();
  const sh = createSelfHealing({
    agent: "pay",
    store: new FleetStore(ledger),
    clock,
    logger: { warn: () => undefined },
    ...(whenFleetDown && { recovery: { ledger: { whenFleetDown } } }),
  });
  const sent: string[] = [];
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const charge = sh.tool(
    "charge",
    { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
    (o: { order: string }) => {
      sent.push(o.order);
      return { charged: o.order };
    },
  );
  return { sh, charge, sent, calls, clock };
}

describe("a keyed write and the fleet's ledger", () => {
  it("the default is refuse: Redis away for the whole deadline, nothing is sent, FleetUnavailableError", async () => {
    const ledger = new ScriptedLedger([away()]);
    const { sh, charge, sent, calls, clock } = setup(ledger);
    const started = clock.now();
    const error: unknown = await onClock(
      clock,
      charge({ order: "o1" }, { deadlineMs: 450 }).catch((e: unknown) => e),
    );
    const took = clock.now() - started;
    expect(isFleetUnavailableError(error)).toBe(true);
    expect(isSelfHealError(error)).toBe(true);
    expect(error).toBeInstanceOf(FleetUnavailableError);
    const e = error as FleetUnavailableError;
    expect(e.code).toBe("SELFHEAL_FLEET_UNAVAILABLE");
    expect(e.tool).toBe("charge");
    expect(e.inFlightElsewhere).toBe(false);
    expect(e.message).toMatch(/nothing was sent/);
    expect((e.cause as Error).message).toMatch(/did not answer/);
    expect(sent).toEqual([]);
    // It asked again at a bounded interval (100 ms) until the deadline, and let go at the end.
    const claims = ledger.log.filter((l) => l.startsWith("claim"));
    expect(claims.length).toBeGreaterThanOrEqual(3);
    expect(claims.length).toBeLessThanOrEqual(6);
    expect(claims[0]).toBe("claim charge:o1 hold=ttl"); // strict: a vanished sender stays held
    expect(ledger.log.at(-1)).toBe("release");
    // It gave up at the deadline (virtual time: to the step of the run), not before, not later.
    expect(took).toBeGreaterThanOrEqual(350);
    expect(took).toBeLessThanOrEqual(460);
    // The call ended as an error, with its type; the tool never ran.
    expect(calls.map((c) => [c.outcome, c.errorType])).toEqual([
      ["error", "FleetUnavailableError"],
    ]);
    await sh.close();
  });

  it("refuse: Redis back within the deadline, the write is claimed and sent once", async () => {
    const ledger = new ScriptedLedger([away(), away(), { kind: "mine" }]);
    const { sh, charge, sent, clock } = setup(ledger, "refuse");
    await expect(onClock(clock, charge({ order: "o2" }))).resolves.toEqual({ charged: "o2" });
    expect(sent).toEqual(["o2"]);
    expect(ledger.log).toEqual([
      "claim charge:o2 hold=ttl",
      "claim charge:o2 hold=ttl",
      "claim charge:o2 hold=ttl",
      'complete {"charged":"o2"}',
    ]);
    await sh.close();
  });

  it("refuse: a restarted Redis still settling is waited for, then the result of another worker", async () => {
    const ledger = new ScriptedLedger([
      { kind: "settle", retryMs: 30 },
      { kind: "done", value: { charged: "o3", by: "another worker" } },
    ]);
    const { sh, charge, sent, clock } = setup(ledger);
    await expect(onClock(clock, charge.detailed({ order: "o3" }))).resolves.toMatchObject({
      value: { charged: "o3", by: "another worker" },
      replayed: true,
      attempts: 0,
    });
    expect(sent).toEqual([]);
    await sh.close();
  });

  it("local: Redis away, the worker decides alone at once (known away) or after one failed ask", async () => {
    const ledger = new ScriptedLedger([away()]);
    const { sh, charge, sent, clock } = setup(ledger, "local");
    await expect(onClock(clock, charge({ order: "o4" }))).resolves.toEqual({ charged: "o4" });
    expect(ledger.log).toEqual([
      "claim charge:o4 hold=-", // lenient: a vanished sender's key is free after its lease
      'complete {"charged":"o4"}', // shared with the fleet (when Redis is back)
    ]);
    ledger.isAway = true;
    await expect(onClock(clock, charge({ order: "o5" }))).resolves.toEqual({ charged: "o5" });
    expect(ledger.log.slice(2)).toEqual(['complete {"charged":"o5"}']); // no claim waited for
    expect(sent).toEqual(["o4", "o5"]);
    await sh.close();
  });

  it("a claim that heard another worker holds the key never sends alone, in either mode", async () => {
    for (const mode of ["local", "refuse"] as const) {
      const ledger = new ScriptedLedger([{ kind: "busy", retryMs: 5_000 }, away()]);
      const { sh, charge, sent, clock } = setup(ledger, mode);
      const error: unknown = await onClock(
        clock,
        charge({ order: "o6" }, { deadlineMs: 400 }).catch((e: unknown) => e),
      );
      expect(isFleetUnavailableError(error), mode).toBe(true);
      expect((error as FleetUnavailableError).inFlightElsewhere).toBe(true);
      expect(sent).toEqual([]);
      await sh.close();
    }
  });

  it("busy until the deadline: InFlightElsewhereError, nothing sent", async () => {
    const ledger = new ScriptedLedger([{ kind: "busy", retryMs: 5_000 }]);
    const { sh, charge, sent, clock } = setup(ledger, "local");
    const error: unknown = await onClock(
      clock,
      charge({ order: "o7" }, { deadlineMs: 350 }).catch((e: unknown) => e),
    );
    expect(isInFlightElsewhereError(error)).toBe(true);
    expect(sent).toEqual([]);
    await sh.close();
  });

  it("refuse: a sender that vanished mid-write (lost) is never sent again, at once", async () => {
    const ledger = new ScriptedLedger([{ kind: "lost" }]);
    const { sh, charge, sent, clock } = setup(ledger);
    const started = clock.now();
    await expect(onClock(clock, charge({ order: "o8" }))).rejects.toBeInstanceOf(
      InFlightElsewhereError,
    );
    // No wait for a deadline that cannot help (60 s by default): no more than the run's one step.
    expect(clock.now() - started).toBeLessThanOrEqual(10);
    expect(ledger.log).toEqual(["claim charge:o8 hold=ttl"]);
    expect(sent).toEqual([]);
    await sh.close();
  });

  it("a write that fails lets go of its claim; the caller does not wait for the share", async () => {
    const ledger = new ScriptedLedger([{ kind: "mine" }]);
    const sh = createSelfHealing({
      agent: "pay",
      store: new FleetStore(ledger),
      logger: { warn: () => undefined },
      recovery: { plans: { BAD_REQUEST: [] } },
    });
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
      () => {
        throw Object.assign(new Error("amount must be positive"), { status: 400 });
      },
    );
    await expect(charge({ order: "o9" })).rejects.toThrow(/amount/);
    expect(ledger.log).toEqual(["claim charge:o9 hold=ttl", "release"]);
    await sh.close();
  });
});
