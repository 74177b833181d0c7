import { describe, expect, it } from "vitest";
import { runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";

const run = (name: string) => runScenario(SCENARIOS[name] ?? expect.unreachable());

describe("scenarios on virtual time, selfheal with its defaults", () => {
  it("provider-outage: >= 90% auto-recovery, no page, MTTR under 2 minutes, no user-visible failure", async () => {
    const r = await run("provider-outage");
    expect(r.incidents).toBeGreaterThan(10);
    expect(r.auto_recovery_rate).toBeGreaterThanOrEqual(0.9);
    expect(r.pages).toBe(0);
    expect(r.mttr_seconds).toBeLessThan(120);
    expect(r.user_visible_failures).toBe(0);
    expect(r.calls_per_provider.anthropic).toBeGreaterThan(100); // the secondary carried the outage
    expect(r.timeline.some((e) => e.text === "openai breaker closed")).toBe(true); // and the primary came back
  });

  it("wording-drift: the UNKNOWN share rises and the drift alert fires", async () => {
    const r = await run("wording-drift");
    expect(r.drift_events).toBeGreaterThanOrEqual(1);
    expect(r.timeline.find((e) => e.kind === "drift")?.text).toContain("Request budget spent");
  });

  it("flapping-dependency: the breaker does not flap along, nobody is paged, spend stays small", async () => {
    const r = await run("flapping-dependency");
    const opens = r.timeline.filter((e) => e.text === "openai breaker open").length;
    expect(opens).toBeLessThanOrEqual(5); // not once per 30 s flap (120)
    expect(r.pages).toBe(0);
    expect(r.user_visible_failures).toBe(0);
    expect(r.recovery_cost_usd).toBeLessThan(0.1);
  });

  it("silent-failure: empty answers are caught and retried, none reaches a user", async () => {
    const r = await run("silent-failure");
    expect(r.incidents).toBeGreaterThan(20);
    expect(r.user_visible_failures).toBe(0);
  });

  it("rate-limit-storm: most 429s are absorbed; every write is charged at most once", async () => {
    const r = await run("rate-limit-storm");
    expect(r.auto_recovery_rate).toBeGreaterThan(0.7);
    expect(r.wasted_retries).toBe(0);
  });

  it("is deterministic: the same scenario gives the same figures", async () => {
    expect(await run("provider-outage")).toEqual(await run("provider-outage"));
  });
});
