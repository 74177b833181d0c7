import { describe, expect, it } from "vitest";
import {
  MemorySignalStore,
  MAX_TOOLS_PER_AGENT,
  OVERFLOW_TOOL,
} from "../../src/health/memory-store.js";
import {
  addTotals,
  histogramQuantile,
  LATENCY_BUCKET_COUNT,
  latencyBucket,
  OutcomeRing,
  RollingWindow,
} from "../../src/health/window.js";

const T0 = Date.UTC(2026, 0, 1);

describe("RollingWindow", () => {
  it("counts only the buckets inside the window", () => {
    const w = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: false });
    w.add(T0, 1, 0);
    w.add(T0 + 10_000, 0, 1);
    w.add(T0 + 50_000, 1, 0);
    expect(w.totals(T0 + 50_000)).toMatchObject({ ok: 2, failed: 1 });
    // At +65 s the first bucket (0-10 s) has left the window.
    expect(w.totals(T0 + 65_000)).toMatchObject({ ok: 1, failed: 1 });
    expect(w.totals(T0 + 65_000, 20_000)).toMatchObject({ ok: 1, failed: 0 });
    // Long after, everything has expired; a reused slot starts from zero.
    expect(w.totals(T0 + 3_600_000)).toMatchObject({ ok: 0, failed: 0 });
    w.add(T0 + 3_600_000, 0, 1);
    expect(w.totals(T0 + 3_600_000)).toMatchObject({ ok: 0, failed: 1 });
  });

  it("memory stays constant from 1e3 to 1e6 recorded calls", () => {
    const store = new MemorySignalStore();
    const record = (from: number, to: number) => {
      // One call a second, so the first 1e3 already fill the 10 min window; 3 tools, some LLM calls.
      for (let i = from; i < to; i++) {
        store.recordCall(
          {
            agent: "a",
            tool: `t${i % 3}`,
            outcome: i % 5 ? "success" : "error",
            durationMs: i % 997,
            empty: i % 2 ? i % 7 === 0 : undefined,
          },
          T0 + i * 1_000,
        );
      }
    };
    record(0, 1_000);
    const small = store.footprint("a");
    record(1_000, 1_000_000);
    expect(store.footprint("a")).toBe(small);
    // 3 tools x (60 buckets x 3 counters + 60 histograms x 104) + rings and the task window.
    expect(small).toBe(3 * (60 * 3 + 60 * LATENCY_BUCKET_COUNT + 100) + 60 * 3 + 100);
  });

  it("windows from several workers merge by addition", () => {
    const a = new RollingWindow({ windowMs: 60_000, buckets: 60, latency: true });
    const b = new RollingWindow({ windowMs: 60_000, buckets: 60, latency: true });
    for (let i = 0; i < 100; i++) a.add(T0 + i * 100, 1, 0, 10);
    for (let i = 0; i < 100; i++)
      b.add(T0 + i * 100, i % 2 === 0 ? 1 : 0, i % 2 === 0 ? 0 : 1, 1_000);
    const merged = a.totals(T0 + 10_000);
    addTotals(merged, b.totals(T0 + 10_000));
    expect(merged.ok).toBe(150);
    expect(merged.failed).toBe(50);
    const near = (value: number | undefined, expected: number) =>
      Math.abs((value ?? NaN) - expected) / expected;
    expect(near(histogramQuantile(merged.latency, 0.5), 10)).toBeLessThan(0.1);
    expect(near(histogramQuantile(merged.latency, 0.95), 1_000)).toBeLessThan(0.1);
  });
});

describe("latency histogram", () => {
  it("quantiles are within 10% of the true value across six orders of magnitude", () => {
    for (const ms of [0.5, 3, 47, 250, 1_800, 42_000, 600_000]) {
      const counts = new Float64Array(LATENCY_BUCKET_COUNT);
      counts[latencyBucket(ms)] = 1;
      const q = histogramQuantile(counts, 0.95) ?? NaN;
      expect(Math.abs(q - ms) / ms).toBeLessThan(0.1);
    }
  });

  it("clamps nonsense and extremes instead of throwing", () => {
    expect(latencyBucket(-5)).toBe(0);
    expect(latencyBucket(Number.NaN)).toBe(0);
    expect(latencyBucket(Number.POSITIVE_INFINITY)).toBe(LATENCY_BUCKET_COUNT - 1);
    expect(histogramQuantile(new Float64Array(LATENCY_BUCKET_COUNT), 0.95)).toBeUndefined();
  });
});

describe("OutcomeRing", () => {
  it("keeps exactly the last N outcomes", () => {
    const ring = new OutcomeRing(100);
    for (let i = 0; i < 100; i++) ring.add(i < 30);
    expect(ring.counts()).toEqual({ total: 100, hits: 30 });
    for (let i = 0; i < 50; i++) ring.add(false);
    expect(ring.counts()).toEqual({ total: 100, hits: 0 });
  });
});

describe("MemorySignalStore", () => {
  it("ignores blocked calls in the success rate and caps the number of tools", () => {
    const store = new MemorySignalStore();
    store.recordCall({ agent: "a", tool: "w", outcome: "blocked", durationMs: 0 }, T0);
    // Failed fast by an open circuit: nothing reached the dependency.
    store.recordCall(
      { agent: "a", tool: "w", outcome: "error", durationMs: 0, failedAttempts: 0 },
      T0,
    );
    expect(store.read("a", T0).tools.size).toBe(0);
    // A recovered call still shows the attempts that failed.
    store.recordCall(
      { agent: "b", tool: "r", outcome: "recovered", durationMs: 9, failedAttempts: 2 },
      T0,
    );
    expect(store.read("b", T0).tools.get("r")?.calls).toMatchObject({ ok: 1, failed: 2 });
    for (let i = 0; i < MAX_TOOLS_PER_AGENT + 50; i++) {
      store.recordCall({ agent: "a", tool: `tool-${i}`, outcome: "success", durationMs: 1 }, T0);
    }
    const signals = store.read("a", T0);
    expect(signals.tools.size).toBe(MAX_TOOLS_PER_AGENT + 1);
    expect(signals.tools.get(OVERFLOW_TOOL)?.calls.ok).toBe(50);
    expect(signals.agent.calls.ok).toBe(MAX_TOOLS_PER_AGENT + 50);
  });
});
