import { describe, expect, it } from "vitest";
import { HealthEvaluator, type StatusChangeEvent } from "../../src/health/evaluator.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { SignalStore } from "../../src/health/store.js";
import {
  DEFAULT_THRESHOLDS,
  mergeThresholds,
  type ThresholdOverrides,
} from "../../src/health/thresholds.js";
import { isHealthCheckFailedError } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

function evaluator(
  overrides: ThresholdOverrides = {},
  store: SignalStore = new MemorySignalStore(),
) {
  const clock = new VirtualClock();
  const changes: StatusChangeEvent[] = [];
  const storeErrors: unknown[] = [];
  const h = new HealthEvaluator({
    agent: "a",
    store,
    clock,
    cacheMs: 5_000,
    baselineTauMs: 3_600_000,
    thresholds: () => mergeThresholds(DEFAULT_THRESHOLDS, overrides),
    onChange: (e) => changes.push(e),
    onStoreError: (e) => storeErrors.push(e),
  });
  const record = (
    n: number,
    fields: { ok?: boolean; ms?: number; empty?: boolean; tool?: string },
  ) => {
    for (let i = 0; i < n; i++) {
      store.recordCall(
        {
          agent: "a",
          tool: fields.tool ?? "t",
          outcome: fields.ok === false ? "error" : "success",
          durationMs: fields.ms ?? 10,
          empty: fields.empty,
        },
        clock.now(),
      );
    }
  };
  const read = async () => {
    await clock.advance(5_000);
    return h.current();
  };
  const signal = async (name: string) => (await read()).signals.find((s) => s.signal === name);
  return { h, clock, changes, storeErrors, record, read, signal, store };
}

describe("HealthEvaluator", () => {
  it("says nothing below the minimum sample count", async () => {
    const e = evaluator();
    e.record(9, { ok: false });
    expect(await e.signal("success_rate")).toMatchObject({
      status: "healthy",
      value: null,
      samples: 9,
    });
    e.record(1, { ok: false });
    expect(await e.signal("success_rate")).toMatchObject({
      status: "critical",
      value: 0,
      samples: 10,
    });
  });

  it("success rate: < 0.8 warning, < 0.5 critical", async () => {
    const e = evaluator();
    e.record(80, { ok: true });
    e.record(20, { ok: false });
    expect((await e.signal("success_rate"))?.status).toBe("healthy"); // exactly 0.8
    e.record(1, { ok: false });
    expect((await e.signal("success_rate"))?.status).toBe("warning");
    e.record(60, { ok: false });
    expect(await e.signal("success_rate")).toMatchObject({ status: "critical" });
  });

  it("latency: learns the P95 baseline and warns above 3x, without learning from the incident", async () => {
    const e = evaluator();
    e.record(100, { ms: 100 });
    const learned = await e.signal("latency_p95");
    expect(learned?.status).toBe("healthy");
    await e.clock.advance(11 * 60_000); // the window clears
    e.record(100, { ms: 400 });
    const slow = await e.signal("latency_p95");
    expect(slow?.status).toBe("warning");
    expect(slow?.baselineMs).toBeCloseTo(learned?.value ?? NaN);
    // Still slow an hour later: the baseline did not drift towards the incident.
    for (let i = 0; i < 12; i++) {
      await e.clock.advance(5 * 60_000);
      e.record(50, { ms: 400 });
    }
    expect(await e.signal("latency_p95")).toMatchObject({
      status: "warning",
      baselineMs: slow?.baselineMs,
    });
  });

  it("latency: a fixed baseline and a critical factor", async () => {
    const e = evaluator({ latency: { baselineMs: 50, criticalFactor: 5 } });
    e.record(100, { ms: 120 });
    expect((await e.signal("latency_p95"))?.status).toBe("healthy");
    e.record(100, { ms: 200 });
    expect((await e.signal("latency_p95"))?.status).toBe("warning");
    e.record(500, { ms: 400 });
    expect(await e.signal("latency_p95")).toMatchObject({ status: "critical", baselineMs: 50 });
  });

  it("empty responses over the last 100 LLM calls: > 5% warning, > 20% critical", async () => {
    const e = evaluator();
    e.record(95, { empty: false });
    e.record(5, { empty: true });
    expect(await e.signal("empty_response_rate")).toMatchObject({ status: "healthy", value: 0.05 });
    e.record(1, { empty: true });
    expect((await e.signal("empty_response_rate"))?.status).toBe("warning");
    e.record(20, { empty: true });
    expect(await e.signal("empty_response_rate")).toMatchObject({
      status: "critical",
      samples: 100,
    });
    e.record(100, { empty: false });
    expect(await e.signal("empty_response_rate")).toMatchObject({ status: "healthy", value: 0 });
  });

  it("caches the report for 5 s and reports each transition once, per scope", async () => {
    const e = evaluator();
    e.record(20, { ok: true, tool: "good" });
    const first = e.h.current();
    e.record(100, { ok: false, tool: "bad" });
    await e.clock.advance(4_999);
    expect(e.h.current()).toBe(first);
    await e.clock.advance(1);
    const second = await e.h.current();
    expect(second).not.toBe(first);
    expect(second.status).toBe("critical");
    expect(second.tools.good?.status).toBe("healthy");
    expect(e.changes.map((c) => [c.tool, c.from, c.to])).toEqual([
      [undefined, "healthy", "critical"],
      ["bad", "healthy", "critical"],
    ]);
    await e.read();
    expect(e.changes).toHaveLength(2);
  });

  it("keeps the last report, marked stale, when the store cannot be read", async () => {
    let fail = false;
    const inner = new MemorySignalStore();
    const flaky: SignalStore = {
      recordCall: (r, now) => {
        inner.recordCall(r, now);
      },
      recordTask: (r, now) => {
        inner.recordTask(r, now);
      },
      read: async (agent, now) => {
        await Promise.resolve();
        if (fail) throw new Error("ECONNREFUSED 127.0.0.1:6379");
        return inner.read(agent, now);
      },
    };
    const e = evaluator({}, flaky);
    e.record(20, { ok: false });
    expect((await e.read()).status).toBe("critical");
    fail = true;
    const stale = await e.read();
    expect(stale).toMatchObject({ status: "critical", stale: true });
    expect(e.storeErrors).toHaveLength(1);
    fail = false;
    expect(await e.read()).not.toHaveProperty("stale");
  });
});

describe("health through the public API", () => {
  it("task completion below 0.7 over the hour is critical: writes refused, reads and read-only tasks go on", async () => {
    const { sh, clock } = virtualInstance();
    for (let i = 0; i < 10; i++) {
      await sh
        .task(`t${i}`, () => {
          if (i % 10 < 4) throw new Error("task failed");
        })
        .catch(() => undefined);
    }
    await clock.advance(5_000);
    const report = await sh.status();
    expect(report.signals.find((s) => s.signal === "task_completion")).toMatchObject({
      status: "critical",
      value: 0.6,
      samples: 10,
    });
    const write = sh.tool("book", { readOnly: false }, () => "booked");
    const read = sh.tool("search", { readOnly: true }, () => "found");
    const seen = await sh.task("next", async (task) => {
      const refused = await write(undefined).catch((e: unknown) => e);
      return {
        mode: task.mode,
        refused: isHealthCheckFailedError(refused),
        read: await read(undefined),
      };
    });
    expect(seen).toEqual({ mode: "read-only", refused: true, read: "found" });
  });

  it("a critical tool's writes still run while the agent is healthy (recovery handles the tool)", async () => {
    const { sh, clock } = virtualInstance();
    const charge = sh.tool("charge", { readOnly: false }, () => {
      throw new Error("card processor down");
    });
    const note = sh.tool("note", { readOnly: false }, () => "noted");
    const read = sh.tool("read", { readOnly: true }, () => "ok");
    for (let i = 0; i < 10; i++) await charge(undefined).catch(() => undefined);
    for (let i = 0; i < 90; i++) await read(undefined);
    await clock.advance(5_000);
    const report = await sh.status();
    expect(report.status).toBe("healthy");
    expect(report.tools.charge?.status).toBe("critical");
    // Refusing them would starve the tool of the evidence it needs to turn healthy again.
    await expect(charge(undefined)).rejects.toThrow("card processor down");
    await expect(note(undefined)).resolves.toBe("noted");
  });

  it("per-tool thresholds override the agent's", async () => {
    const { sh, clock } = virtualInstance({
      health: { tools: { scraper: { successRate: { warning: 0.3, critical: 0.1 } } } },
    });
    let n = 0;
    const scraper = sh.tool("scraper", { readOnly: true }, () => {
      if (n++ % 2) throw new Error("blocked by robots.txt");
      return "page";
    });
    for (let i = 0; i < 20; i++) await scraper(undefined).catch(() => undefined);
    await clock.advance(5_000);
    const report = await sh.status();
    expect(report.tools.scraper?.status).toBe("healthy");
    expect(report.status).toBe("warning");
  });
});
