import { describe, expect, it } from "vitest";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { DEFAULT_WINDOWS } from "../../src/health/store.js";
import {
  emptyTotals,
  histogramQuantile,
  LATENCY_BUCKET_COUNT,
  latencyBucket,
  latencyBucketValue,
  OutcomeRing,
  RollingWindow,
} from "../../src/health/window.js";
import { evaluator, sync, T0 } from "../helpers/health.js";

const LAST = LATENCY_BUCKET_COUNT - 1;

describe("latency buckets at their edges", () => {
  it("0.1 ms and below is the first bucket, whose value is 0.1 ms; just above is the second", () => {
    expect(latencyBucket(0.1)).toBe(0);
    expect(latencyBucketValue(0)).toBe(0.1);
    expect(latencyBucket(0.100001)).toBe(1);
    const counts = new Float64Array(LATENCY_BUCKET_COUNT);
    counts[0] = 3;
    expect(histogramQuantile(counts, 0.95)).toBe(0.1);
  });

  it("the slowest calls share the last bucket, from just past its lower bound to any length", () => {
    // Bucket i holds (0.1 * 2^((i-1)/4), 0.1 * 2^(i/4)]: 0.1 * 2^25.9 would be bucket 104.
    expect(latencyBucket(0.1 * 2 ** 25.6)).toBe(LAST);
    expect(latencyBucket(0.1 * 2 ** 25.9)).toBe(LAST);
    expect(latencyBucket(0.1 * 2 ** 40)).toBe(LAST);
    expect(latencyBucket(0.1 * 2 ** 25.4)).toBe(LAST - 1);
  });

  it("a quantile past 1 is the last bucket's value", () => {
    const counts = new Float64Array(LATENCY_BUCKET_COUNT);
    counts[latencyBucket(50)] = 10;
    expect(histogramQuantile(counts, 2)).toBe(latencyBucketValue(LAST));
    expect(histogramQuantile(counts, 1)).toBe(latencyBucketValue(latencyBucket(50)));
  });
});

describe("RollingWindow edges", () => {
  it("an event counts until exactly windowMs after its bucket began, not at it", () => {
    const w = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: false });
    w.add(T0 + 9_999, 1, 2);
    expect(w.totals(T0 + 59_999)).toMatchObject({ ok: 1, failed: 2 });
    expect(w.totals(T0 + 60_000)).toMatchObject({ ok: 0, failed: 0 });
  });

  it("the recent span is rounded up to whole buckets", () => {
    const w = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: false });
    w.add(T0, 1, 0);
    w.add(T0 + 10_000, 0, 1);
    expect(w.totals(T0 + 19_999, 15_000)).toMatchObject({ ok: 1, failed: 1 });
    expect(w.totals(T0 + 20_000, 15_000)).toMatchObject({ ok: 0, failed: 1 });
    expect(w.totals(T0 + 19_999, 10_000)).toMatchObject({ ok: 0, failed: 1 });
    // A span longer than the window is the window.
    expect(w.totals(T0 + 59_999, 600_000)).toMatchObject({ ok: 1, failed: 1 });
  });

  it("events dated after the time read are not counted (a worker whose clock runs ahead)", () => {
    const w = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: true });
    w.add(T0 + 20_000, 3, 1, 40);
    const before = w.totals(T0);
    expect(before).toMatchObject({ ok: 0, failed: 0 });
    expect(histogramQuantile(before.latency, 0.5)).toBeUndefined();
    expect(w.totals(T0 + 20_000)).toMatchObject({ ok: 3, failed: 1 });
  });

  it("a window without latency ignores a latency; one with it records only those given", () => {
    const counts = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: false });
    expect(() => {
      counts.add(T0, 1, 0, 25);
    }).not.toThrow();
    expect(counts.totals(T0)).toEqual({ ...emptyTotals(), ok: 1 });
    expect(counts.footprint).toBe(6 * 3);

    const timed = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: true });
    timed.add(T0, 1, 0);
    expect(histogramQuantile(timed.totals(T0).latency, 0.5)).toBeUndefined();
    expect(timed.footprint).toBe(6 * 3); // no histogram until a latency comes
    timed.add(T0, 1, 0, 25);
    expect(timed.footprint).toBe(6 * 3 + LATENCY_BUCKET_COUNT);
    expect(histogramQuantile(timed.totals(T0).latency, 0.5)).toBe(
      latencyBucketValue(latencyBucket(25)),
    );
  });
});

describe("RollingWindow latency counts", () => {
  it("every call counts in its latency bucket, several in one time bucket included", () => {
    const w = new RollingWindow({ windowMs: 60_000, buckets: 6, latency: true });
    for (let i = 0; i < 3; i++) w.add(T0, 1, 0, 10);
    w.add(T0, 1, 0, 1_000);
    const { latency } = w.totals(T0);
    expect(latency[latencyBucket(10)]).toBe(3);
    expect(latency[latencyBucket(1_000)]).toBe(1);
    expect(histogramQuantile(latency, 0.75)).toBe(latencyBucketValue(latencyBucket(10)));
  });
});

describe("OutcomeRing", () => {
  it("counts up to its size, then forgets the oldest outcome first", () => {
    const ring = new OutcomeRing(3);
    expect(ring.counts()).toEqual({ total: 0, hits: 0 });
    ring.add(true);
    ring.add(false);
    expect(ring.counts()).toEqual({ total: 2, hits: 1 });
    ring.add(true);
    expect(ring.counts()).toEqual({ total: 3, hits: 2 });
    ring.add(false); // the first hit leaves
    expect(ring.counts()).toEqual({ total: 3, hits: 1 });
    ring.add(false); // a miss leaves
    expect(ring.counts()).toEqual({ total: 3, hits: 1 });
    ring.add(false); // the second hit leaves
    expect(ring.counts()).toEqual({ total: 3, hits: 0 });
  });
});

describe("MemorySignalStore windows", () => {
  it("an agent it never saw holds nothing", () => {
    const store = new MemorySignalStore();
    expect(store.footprint("nobody")).toBe(0);
    store.recordTask({ agent: "a", outcome: "completed" }, T0);
    // The task window keeps counts only: no latency histogram.
    expect(store.footprint("a")).toBe(DEFAULT_WINDOWS.buckets * 3 + DEFAULT_WINDOWS.llmSampleSize);
  });

  it("tasks count for one hour, to the millisecond", () => {
    const store = new MemorySignalStore();
    store.recordTask({ agent: "a", outcome: "completed" }, T0);
    store.recordTask({ agent: "a", outcome: "failed" }, T0);
    const hour = DEFAULT_WINDOWS.taskWindowMs;
    expect(store.read("a", T0 + hour - 1).agent.tasks).toEqual({ completed: 1, failed: 1 });
    expect(store.read("a", T0 + hour).agent.tasks).toEqual({ completed: 0, failed: 0 });
  });

  it("calls count for ten minutes; the recent part for one", () => {
    const store = new MemorySignalStore();
    store.recordCall({ agent: "a", tool: "t", outcome: "error", durationMs: 3 }, T0);
    const at = (ms: number) => store.read("a", T0 + ms).agent;
    expect(at(DEFAULT_WINDOWS.recentWindowMs - 1).recent).toEqual({ ok: 0, failed: 1 });
    expect(at(DEFAULT_WINDOWS.recentWindowMs).recent).toEqual({ ok: 0, failed: 0 });
    expect(at(DEFAULT_WINDOWS.callWindowMs - 1).calls.failed).toBe(1);
    expect(at(DEFAULT_WINDOWS.callWindowMs).calls.failed).toBe(0);
  });

  it("a call that recovered after a failed attempt counts both; a tool holds no tasks", () => {
    const store = new MemorySignalStore();
    store.recordCall(
      { agent: "a", tool: "t", outcome: "recovered", durationMs: 4, failedAttempts: 1 },
      T0,
    );
    store.recordCall({ agent: "a", tool: "t", outcome: "error", durationMs: 4 }, T0);
    const t = store.read("a", T0).tools.get("t");
    expect(t?.calls).toMatchObject({ ok: 1, failed: 2 });
    expect(t?.recent).toEqual({ ok: 1, failed: 2 });
    expect(t?.tasks).toEqual({ completed: 0, failed: 0 });
  });

  it("alternating tools and agents each count their own calls", () => {
    const store = new MemorySignalStore();
    for (let i = 0; i < 4; i++) {
      store.recordCall({ agent: "a", tool: "x", outcome: "success", durationMs: 1 }, T0);
      store.recordCall({ agent: "a", tool: "y", outcome: "error", durationMs: 1 }, T0);
      store.recordCall(
        { agent: "b", tool: "x", outcome: "success", durationMs: 1, empty: true },
        T0,
      );
    }
    const a = store.read("a", T0);
    expect(a.tools.get("x")?.calls).toMatchObject({ ok: 4, failed: 0 });
    expect(a.tools.get("y")?.calls).toMatchObject({ ok: 0, failed: 4 });
    expect(a.agent.llm).toEqual({ total: 0, empty: 0 });
    const b = store.read("b", T0);
    expect(b.agent.llm).toEqual({ total: 4, empty: 4 });
    expect(b.tools.get("x")?.llm).toEqual({ total: 4, empty: 4 });
  });
});

describe("health over the memory store, on the injected clock", () => {
  function setup() {
    const store = new MemorySignalStore();
    const { h, clock } = evaluator(store);
    const read = () => sync(h.current());
    const signal = (name: string) => read().signals.find((s) => s.signal === name);
    return { clock, store, read, signal };
  }

  it("task completion over the hour: failures an hour old no longer count", async () => {
    const { clock, store, signal } = setup();
    for (let i = 0; i < 5; i++) store.recordTask({ agent: "a", outcome: "failed" }, clock.now());
    expect(signal("task_completion")).toMatchObject({ status: "critical", value: 0, samples: 5 });
    await clock.advance(30 * 60_000);
    for (let i = 0; i < 5; i++) store.recordTask({ agent: "a", outcome: "completed" }, clock.now());
    expect(signal("task_completion")).toMatchObject({ status: "critical", value: 0.5 });
    await clock.advance(30 * 60_000);
    expect(signal("task_completion")).toMatchObject({ status: "healthy", value: 1, samples: 5 });
  });

  it("empty responses over the last 100 LLM calls of all tools; calls without the flag do not count", async () => {
    const { clock, store, signal } = setup();
    const llm = (tool: string, empty: boolean | undefined) => {
      store.recordCall({ agent: "a", tool, outcome: "success", durationMs: 1, empty }, clock.now());
    };
    for (let i = 0; i < 19; i++) llm(i % 2 ? "m1" : "m2", true);
    for (let i = 0; i < 50; i++) llm("tool", undefined);
    expect(signal("empty_response_rate")).toMatchObject({ value: null, samples: 19 });
    llm("m1", false);
    await clock.advance(5_000);
    expect(signal("empty_response_rate")).toMatchObject({
      status: "critical",
      value: 0.95,
      samples: 20,
    });
    for (let i = 0; i < 94; i++) llm("m1", false);
    await clock.advance(5_000);
    // 100 held: the 14 oldest empties were pushed out, 5 remain (5%): healthy.
    expect(signal("empty_response_rate")).toMatchObject({
      status: "healthy",
      value: 0.05,
      samples: 100,
    });
    llm("m2", true); // the oldest (empty) leaves, one empty comes: still 5%
    await clock.advance(5_000);
    expect(signal("empty_response_rate")).toMatchObject({ value: 0.05, samples: 100 });
  });
});
