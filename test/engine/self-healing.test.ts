/**
 * The instance's own methods (src/engine/self-healing.ts) where no other suite looks: streams
 * registered after close or without a name, the UNKNOWN samples per tool, and a task's budget
 * read from the fleet's record of it.
 */
import { describe, expect, it } from "vitest";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { SignalStore } from "../../src/health/store.js";
import { isRecoveryBudgetExhaustedError, isSelfHealClosedError } from "../../src/index.js";
import type { BudgetSync } from "../../src/recovery/budget.js";
import { thrownFault } from "../../src/testing/index.js";
import { configError, virtualInstance } from "../helpers/engine.js";

const fn = () => (async function* () {})();

describe("sh.stream", () => {
  it("after close() is refused, named", async () => {
    const { sh } = virtualInstance();
    await sh.close();
    let thrown: unknown;
    try {
      sh.stream("answer", { readOnly: true }, fn);
    } catch (error) {
      thrown = error;
    }
    expect(isSelfHealClosedError(thrown)).toBe(true);
    expect((thrown as Error).message).toBe(
      'selfheal: stream("answer") was registered after close()',
    );
  });

  it("without a name is refused, and a name is taken once, tools and streams alike", () => {
    const { sh } = virtualInstance();
    expect(configError(() => sh.stream("", { readOnly: true }, fn)).field).toBe("stream(name)");
    sh.tool("search", { readOnly: true }, () => "found");
    const taken = configError(() => sh.stream("search", { readOnly: true }, fn));
    expect(taken.field).toBe('stream("search")');
    expect(taken.message).toMatch(/already registered/);
  });
});

describe("sh.unknownSamples", () => {
  it("lists the UNKNOWN texts seen, redacted, for one tool or all", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("t", { readOnly: true }, () => {
      throw new Error("flux capacitor misaligned for ops@example.com");
    });
    const u = sh.tool("u", { readOnly: true }, () => "fine");
    await expect(t(undefined)).rejects.toThrow("flux");
    await u(undefined);
    const samples = sh.unknownSamples("t");
    expect(samples.map((s) => s.tool)).toEqual(["t"]);
    expect(samples[0]?.text).toMatch(/^flux capacitor misaligned for /);
    expect(samples[0]?.text).not.toContain("ops@example.com");
    expect(sh.unknownSamples("u")).toEqual([]);
    expect(sh.unknownSamples()).toEqual(samples);
  });
});

describe("a task's budget kept by the fleet", () => {
  /** A fleet budget record: `spent` answers `already` (or fails), `add` is kept. */
  function fleetBudgets(already: number | Error) {
    const added: [string, number][] = [];
    const budgets: BudgetSync = {
      spent: () => (already instanceof Error ? Promise.reject(already) : Promise.resolve(already)),
      add: (taskId, usd) => {
        added.push([taskId, usd]);
        return Promise.resolve((already instanceof Error ? 0 : already) + usd);
      },
    };
    const store = Object.assign(new MemorySignalStore(), { fleet: { budgets } });
    return { store, added };
  }

  /** An instance pricing each attempt at $0.1 with a $0.5 budget per task; one failure, then an answer. */
  function worker(store: SignalStore) {
    const { sh, clock } = virtualInstance({
      store,
      recovery: {
        budgetUsd: 0.5,
        providers: [{ name: "p", usdPerCall: 0.1 }],
        plans: { SERVICE_DOWN: ["retry_once"] },
        random: () => 0,
      },
    });
    let calls = 0;
    const t = sh.tool("complete", { readOnly: true, providers: ["p"] }, () => {
      if (++calls === 1) throw thrownFault("http_503");
      return "ok";
    });
    const run = () => clock.run(sh.task("task-7", () => t(undefined)).catch((e: unknown) => e));
    return { run, calls: () => calls };
  }

  it("counts what other workers spent: a retry past the budget is not made", async () => {
    const { store } = fleetBudgets(0.45);
    const w = worker(store);
    expect(isRecoveryBudgetExhaustedError(await w.run())).toBe(true);
    expect(w.calls()).toBe(1);
  });

  it("adds this worker's spend to the fleet's record of the task", async () => {
    const { store, added } = fleetBudgets(0.1);
    const w = worker(store);
    expect(await w.run()).toBe("ok");
    expect(w.calls()).toBe(2);
    expect(added.map(([id]) => id)).toContain("task-7");
    expect(added.reduce((sum, [, usd]) => sum + usd, 0)).toBeCloseTo(0.1, 10);
  });

  it("a fleet that cannot say what was spent counts nothing spent elsewhere", async () => {
    const { store } = fleetBudgets(new Error("Connection is closed."));
    const w = worker(store);
    expect(await w.run()).toBe("ok");
    expect(w.calls()).toBe(2);
  });
});
