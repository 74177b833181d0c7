import { describe, expect, it } from "vitest";
import { RecoveryBudget, type BudgetSync } from "../../src/recovery/budget.js";
import { attemptCost } from "../../src/recovery/providers.js";

describe("attemptCost", () => {
  const priced = { name: "openai", usdPer1kTokens: 0.5, usdPerCall: 0.01 };

  it("takes a reported cost first, even zero, over tokens and the per-call price", () => {
    expect(attemptCost(priced, 0.2, { inputTokens: 1000 })).toBe(0.2);
    expect(attemptCost(priced, 0, { inputTokens: 1000 })).toBe(0);
  });

  it("prices reported tokens, input and output alike, per 1,000", () => {
    expect(attemptCost(priced, undefined, { inputTokens: 1500, outputTokens: 500 })).toBe(1);
    expect(attemptCost(priced, undefined, { outputTokens: 2000 })).toBe(1);
    expect(attemptCost(priced, undefined, { inputTokens: 400 })).toBeCloseTo(0.2, 12);
    expect(attemptCost(priced, undefined, {})).toBe(0);
  });

  it("falls back to the per-call price without usage or a token price, else to nothing", () => {
    expect(attemptCost(priced, undefined, undefined)).toBe(0.01);
    expect(attemptCost({ name: "b", usdPerCall: 0.03 }, undefined, { inputTokens: 1000 })).toBe(
      0.03,
    );
    expect(attemptCost({ name: "c" }, undefined, { inputTokens: 1000 })).toBe(0);
    expect(attemptCost(undefined, undefined, { inputTokens: 1000 })).toBe(0);
  });
});

/** A fleet record whose totals come back when `settle` is called. */
function fleet(totals: number[]) {
  const added: [string, number][] = [];
  const waiting: (() => void)[] = [];
  const sync: BudgetSync = {
    spent: () => Promise.resolve(0),
    add: (taskId, usd) => {
      added.push([taskId, usd]);
      const total = totals.shift();
      return new Promise((resolve, reject) => {
        waiting.push(() => {
          if (total === undefined) reject(new Error("redis away"));
          else resolve(total);
        });
      });
    },
  };
  const settle = async () => {
    for (const go of waiting.splice(0)) go();
    await new Promise((r) => setImmediate(r));
  };
  return { sync, added, settle };
}

describe("RecoveryBudget", () => {
  it("allows an attempt that fits the limit exactly, and none past it", () => {
    const budget = new RecoveryBudget(1);
    expect(budget.allows(1)).toBe(true);
    budget.spend(0.75);
    expect(budget.allows(0.25)).toBe(true);
    expect(budget.allows(0.2500001)).toBe(false);
    budget.spend(0.25);
    expect(budget.allows(0)).toBe(true);
    expect(budget.allows(0.01)).toBe(false);
  });

  it("tells the fleet each spend but a zero one, and takes the fleet's larger total", async () => {
    const { sync, added, settle } = fleet([0.5, 0.55]);
    const budget = new RecoveryBudget(1, { sync, taskId: "task-1" });
    budget.spend(0.1);
    budget.spend(0);
    expect(added).toEqual([["task-1", 0.1]]);
    expect(budget.spentUsd).toBe(0.1);
    await settle();
    expect(budget.spentUsd).toBe(0.5); // other workers spent 0.4 on this task
    expect(budget.allows(0.5)).toBe(true);
    expect(budget.allows(0.51)).toBe(false);
    budget.spend(0.2);
    expect(budget.spentUsd).toBeCloseTo(0.7, 12);
    await settle(); // the fleet's total (0.55) is below this worker's own count: kept
    expect(budget.spentUsd).toBeCloseTo(0.7, 12);
  });

  it("keeps its own count when the fleet's record is away", async () => {
    const { sync, settle } = fleet([]);
    const budget = new RecoveryBudget(1, { sync, taskId: "task-1" });
    budget.spend(0.3);
    await settle();
    expect(budget.spentUsd).toBe(0.3);
  });

  it("keeps its own count without a fleet", () => {
    const budget = new RecoveryBudget(1);
    budget.spend(0.4);
    expect(budget.spentUsd).toBe(0.4);
  });
});
