/**
 * The "without selfheal" policy on its own: one request to the primary route, bounded by the
 * fleet's per-call timeout, an empty answer taken for the error it is, nothing retried; and a
 * scenario without an LLM provider refused at once.
 */
import { describe, expect, it } from "vitest";
import { LLM_TIMEOUT_MS, PAYMENT_TIMEOUT_MS } from "../../src/sim/policy.js";
import { noRecoveryPolicy } from "../../src/sim/no-recovery-policy.js";
import type { Fault, Scenario } from "../../src/sim/scenarios.js";
import { createWorld, type CallRecord } from "../../src/sim/world.js";
import { anthropic, MIN, openai, payments, testScenario } from "./test-world.js";

/** A world whose only fault (if any) is `fault` on `dependency` all along, and the policy in it. */
function policyIn(fault?: Fault, dependency = "openai") {
  const scenario = testScenario(fault, dependency, 60 * MIN, { llm: [openai, anthropic] });
  const record = createWorld(scenario, () => undefined);
  const policy = noRecoveryPolicy({ world: record.world, telemetry: {} });
  /** One call through `run`, settled with the clock moved 30 s; what it came to. */
  const settle = async (id: string, op: CallRecord["op"], run: () => Promise<string>) => {
    record.calls.set(id, { id, op, startMs: record.world.elapsed(), attempts: [] });
    const out = run().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await record.world.clock.advance(30_000);
    return out;
  };
  return { ...record, policy, settle };
}

describe("noRecoveryPolicy: one request, no recovery", () => {
  it("answers through the primary provider and the payments API, one request each", async () => {
    const w = policyIn();
    expect(await w.settle("q1", "complete", () => w.policy.complete("q1"))).toEqual({
      value: "answer to q1",
    });
    expect(await w.settle("o1", "charge", () => w.policy.charge("o1"))).toEqual({
      value: "charged o1",
    });
    expect(w.requestsPerDependency).toEqual({ openai: 1, payments: 1 });
  });

  it("a hung LLM request fails with 'timed out' at the LLM timeout, never retried nor failed over", async () => {
    const w = policyIn({ kind: "timeout", rate: 1 });
    const out = await w.settle("q1", "complete", () => w.policy.complete("q1"));
    expect(out).toEqual({ error: new Error("timed out") });
    expect(w.calls.get("q1")?.attempts).toMatchObject([
      { dependency: "openai", result: "timeout", endMs: LLM_TIMEOUT_MS },
    ]);
    expect(w.requestsPerDependency).toEqual({ openai: 1 });
  });

  it("a hung payment fails with 'timed out' at the payment timeout", async () => {
    const w = policyIn({ kind: "timeout", rate: 1 }, "payments");
    const out = await w.settle("o1", "charge", () => w.policy.charge("o1"));
    expect(out).toEqual({ error: new Error("timed out") });
    expect(w.calls.get("o1")?.attempts).toMatchObject([{ endMs: PAYMENT_TIMEOUT_MS }]);
  });

  it("an empty answer is an error ('empty answer'), as a careful app checks", async () => {
    const w = policyIn({ kind: "empty", rate: 1 });
    const out = await w.settle("q1", "complete", () => w.policy.complete("q1"));
    expect(out).toEqual({ error: new Error("empty answer") });
  });

  it("a thrown failure reaches the caller as it is", async () => {
    const w = policyIn({ kind: "unavailable" });
    const out = await w.settle("q1", "complete", () => w.policy.complete("q1"));
    expect(out).toMatchObject({ error: { status: 503 } });
    expect(w.requestsPerDependency).toEqual({ openai: 1 });
  });

  it("has no figures of its own (no breaker, no drift watch) and nothing to close", async () => {
    const w = policyIn();
    expect(w.policy.figures()).toEqual({ falseTrips: 0, driftEvents: 0 });
    await expect(w.policy.close()).resolves.toBeUndefined();
  });

  it("a scenario without an LLM provider is refused when the policy is made", () => {
    const scenario: Scenario = {
      name: "no-llm",
      description: "",
      durationMs: MIN,
      seed: 1,
      agents: 1,
      taskEveryMs: MIN,
      llm: [],
      api: payments,
      faults: [],
    };
    const { world } = createWorld(scenario, () => undefined);
    expect(() => noRecoveryPolicy({ world, telemetry: {} })).toThrow(
      new Error("the scenario has no LLM provider"),
    );
  });
});
