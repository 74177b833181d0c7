import { describe, expect, it } from "vitest";
import { BASELINES } from "../../bench/baselines.js";
import { outcomeTable, type OutcomeRow } from "../../bench/outcome-table.js";
import { NO_RECOVERY, runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import type { CallRecord } from "../../src/sim/world.js";

const scenario = (name: string) => SCENARIOS[name] ?? expect.unreachable();
const baseline = (name: string) => ({ name, create: BASELINES[name] ?? expect.unreachable() });

/** rate-limit-storm with Retry-After on every 429: same-route retries sent before the period ended. */
async function earlyRetries(policy: string): Promise<{ throttled: number; early: number }> {
  const s = scenario("rate-limit-storm");
  const calls: CallRecord[] = [];
  await runScenario(
    { ...s, faults: s.faults.filter((f) => f.fault.kind === "rate_limit" && f.fault.retryAfter) },
    { policy: baseline(policy), onCall: (c) => calls.push(c) },
  );
  let early = 0;
  for (const call of calls) {
    call.attempts.forEach((a, i) => {
      const previous = call.attempts[i - 1];
      if (previous?.throttledUntilMs !== undefined && a.atMs < previous.throttledUntilMs) early++;
    });
  }
  return { throttled: calls.filter((c) => c.attempts[0]?.result === "rate_limit").length, early };
}

describe("the outcome benchmark", () => {
  it("gives the same table on every run (all randomness seeded)", async () => {
    const first = await outcomeTable();
    const second = await outcomeTable();
    expect(second).toEqual(first);
    const row = (s: string, p: string): OutcomeRow =>
      first.rows.find((r) => r.scenario === s && r.policy === p) ?? expect.unreachable();
    // Every scenario through every policy.
    expect(first.rows).toHaveLength(Object.keys(SCENARIOS).length * 4);
    // Total spend covers every request: never less than the recovery part of it.
    for (const r of first.rows)
      expect(r["spend $"]).toBeGreaterThanOrEqual(r["recovery $"] as number);
    // A keyless retry of a ghost write charges twice: the column can count.
    expect(row("ghost-write", "p-retry 9")["double charges"]).toBeGreaterThan(0);
    expect(row("ghost-write", "selfheal")["double charges"]).toBe(0);
  });
});

describe("baselines configured as their docs recommend", () => {
  it("no recovery is the simulator's own policy, the demo's \"without selfheal\": one, not two", () => {
    expect(BASELINES["no recovery"]).toBe(NO_RECOVERY.create);
  });

  it("p-retry 9 fails over to the secondary: no user sees the provider outage", async () => {
    const r = await runScenario(scenario("provider-outage"), { policy: baseline("p-retry 9") });
    expect(r.userVisibleFailures).toBe(0);
    expect(r.callsPerProvider.anthropic).toBeGreaterThan(0);
  });

  it("p-retry 9 and cockatiel 4 never retry a 4xx on the same route", async () => {
    for (const name of ["p-retry 9", "cockatiel 4"]) {
      const r = await runScenario(scenario("bad-request-storm"), { policy: baseline(name) });
      expect(r.wastedRetries).toBe(0);
      expect(r.callsPerProvider.payments).toBe(r.tasks); // the 401s were sent once each
    }
  });

  it("p-retry 9 and cockatiel 4 wait out Retry-After: no retry is sent before the throttled period ends", async () => {
    for (const name of ["p-retry 9", "cockatiel 4"]) {
      const { throttled, early } = await earlyRetries(name);
      expect(throttled).toBeGreaterThan(10);
      expect(early).toBe(0);
    }
  });

  it("cockatiel 4's breaker ignores 429s: it never opens in the rate-limit storm", async () => {
    const r = await runScenario(scenario("rate-limit-storm"), { policy: baseline("cockatiel 4") });
    expect(r.incidents).toBeGreaterThan(10);
    expect(r.timeline.filter((e) => e.kind === "circuit")).toEqual([]);
  });

  it("cockatiel 4 falls back to the secondary while its breaker is open", async () => {
    const r = await runScenario(scenario("flapping-dependency"), {
      policy: baseline("cockatiel 4"),
    });
    expect(r.userVisibleFailures).toBe(0);
    expect(r.callsPerProvider.anthropic).toBeGreaterThan(0);
  });
});
