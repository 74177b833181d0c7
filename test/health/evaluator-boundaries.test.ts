import { afterEach, describe, expect, it, vi } from "vitest";
import {
  FRESH_READ_WAIT_MS,
  type HealthReport,
  type SignalReading,
} from "../../src/health/evaluator.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { AgentSignals, ScopeSignals, SignalStore } from "../../src/health/store.js";
import {
  DEFAULT_THRESHOLDS,
  mergeThresholds,
  type ThresholdOverrides,
} from "../../src/health/thresholds.js";
import { emptyTotals, latencyBucket, latencyBucketValue } from "../../src/health/window.js";
import { CACHE_MS, evaluator, sync, T0, TAU_MS } from "../helpers/health.js";

/** What a scope's signals hold, in plain numbers (latency: ms of each call, by count). */
interface ScopeSpec {
  ok?: number;
  failed?: number;
  recentOk?: number;
  recentFailed?: number;
  /** Calls per latency in ms (latency is recorded apart from ok/failed, as a store may). */
  latency?: [ms: number, count: number][];
  llmTotal?: number;
  llmEmpty?: number;
  completed?: number;
  tasksFailed?: number;
}

function scope(spec: ScopeSpec = {}): ScopeSignals {
  const calls = emptyTotals();
  calls.ok = spec.ok ?? 0;
  calls.failed = spec.failed ?? 0;
  for (const [ms, count] of spec.latency ?? []) {
    const i = latencyBucket(ms);
    calls.latency[i] = (calls.latency[i] ?? 0) + count;
  }
  return {
    calls,
    recent: { ok: spec.recentOk ?? 0, failed: spec.recentFailed ?? 0 },
    llm: { total: spec.llmTotal ?? 0, empty: spec.llmEmpty ?? 0 },
    tasks: { completed: spec.completed ?? 0, failed: spec.tasksFailed ?? 0 },
  };
}

/**
 * A store that answers what the test set (`next`), synchronously, and counts its reads. The
 * evaluator is read with an explicit `now`, so no clock moves behind the test's back.
 */
function scripted(agent: ScopeSpec = {}, tools: Record<string, ScopeSpec> = {}) {
  const state = {
    next: { agent, tools },
    reads: 0,
    fail: undefined as Error | undefined,
  };
  const store: SignalStore = {
    recordCall: () => undefined,
    recordTask: () => undefined,
    read: (): AgentSignals => {
      state.reads++;
      if (state.fail) throw state.fail;
      return {
        agent: scope(state.next.agent),
        tools: new Map(Object.entries(state.next.tools).map(([k, v]) => [k, scope(v)])),
      };
    },
  };
  return { state, store };
}

/** An evaluator with the default thresholds on a scripted store (see `scripted`). */
function scriptedEvaluator(agent: ScopeSpec = {}, tools: Record<string, ScopeSpec> = {}) {
  const { state, store } = scripted(agent, tools);
  return { state, ...evaluator(store) };
}

/** The report when the store failed before any report: healthy, empty and stale, at T0. */
const emptyStale: HealthReport = {
  agent: "a",
  status: "healthy",
  signals: [],
  tools: {},
  at: T0,
  stale: true,
};

/** One signal of the agent's report for these signals, read once with these thresholds. */
function reading(
  name: SignalReading["signal"],
  agent: ScopeSpec,
  overrides: ThresholdOverrides = {},
): SignalReading | undefined {
  const { store } = scripted(agent);
  const { h } = evaluator(store, () => mergeThresholds(DEFAULT_THRESHOLDS, overrides));
  return sync(h.current(T0)).signals.find((s) => s.signal === name);
}

const statusOf = (
  name: SignalReading["signal"],
  agent: ScopeSpec,
  overrides: ThresholdOverrides = {},
) => reading(name, agent, overrides)?.status;

describe("thresholds at their exact boundaries", () => {
  it("success rate: exactly 0.5 is warning, just under is critical; exactly 0.8 healthy", () => {
    expect(statusOf("success_rate", { ok: 80, failed: 20 })).toBe("healthy");
    expect(statusOf("success_rate", { ok: 79, failed: 21 })).toBe("warning");
    expect(statusOf("success_rate", { ok: 50, failed: 50 })).toBe("warning");
    expect(statusOf("success_rate", { ok: 49, failed: 51 })).toBe("critical");
  });

  it("success rate with a level off: no warning, or no critical", () => {
    expect(
      statusOf("success_rate", { ok: 1, failed: 99 }, { successRate: { critical: null } }),
    ).toBe("warning");
    expect(
      statusOf("success_rate", { ok: 79, failed: 21 }, { successRate: { warning: null } }),
    ).toBe("healthy");
    expect(
      statusOf("success_rate", { ok: 0, failed: 10 }, { successRate: { warning: null } }),
    ).toBe("critical");
  });

  it("empty responses: exactly 20% is warning, above it critical; exactly 5% healthy", () => {
    expect(reading("empty_response_rate", { llmTotal: 100, llmEmpty: 5 })).toStrictEqual({
      signal: "empty_response_rate",
      status: "healthy",
      value: 0.05,
      samples: 100,
    });
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 6 })).toBe("warning");
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 20 })).toBe("warning");
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 21 })).toBe("critical");
  });

  it("empty responses with the warning off: healthy until above the critical share", () => {
    const off = { emptyResponses: { warning: null } };
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 10 }, off)).toBe("healthy");
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 20 }, off)).toBe("healthy");
    expect(statusOf("empty_response_rate", { llmTotal: 100, llmEmpty: 21 }, off)).toBe("critical");
    const noCritical = { emptyResponses: { critical: null } };
    expect(statusOf("empty_response_rate", { llmTotal: 20, llmEmpty: 20 }, noCritical)).toBe(
      "warning",
    );
  });

  it("empty responses need 20 LLM calls: 19 say nothing, 20 decide", () => {
    expect(reading("empty_response_rate", { llmTotal: 19, llmEmpty: 19 })).toStrictEqual({
      signal: "empty_response_rate",
      status: "healthy",
      value: null,
      samples: 19,
    });
    expect(reading("empty_response_rate", { llmTotal: 20, llmEmpty: 19 })).toMatchObject({
      status: "critical",
      value: 0.95,
      samples: 20,
    });
  });

  it("task completion: exactly 0.7 is healthy, under it critical (no warning level by default)", () => {
    expect(statusOf("task_completion", { completed: 7, tasksFailed: 3 })).toBe("healthy");
    expect(reading("task_completion", { completed: 69, tasksFailed: 31 })).toStrictEqual({
      signal: "task_completion",
      status: "critical",
      value: 0.69,
      samples: 100,
    });
    expect(statusOf("task_completion", { completed: 4, tasksFailed: 0 })).toBe("healthy");
    expect(reading("task_completion", { completed: 0, tasksFailed: 4 })).toMatchObject({
      value: null,
      samples: 4,
    });
    expect(
      statusOf(
        "task_completion",
        { completed: 8, tasksFailed: 2 },
        { taskCompletion: { warning: 0.9 } },
      ),
    ).toBe("warning");
  });

  it("a minimum of 0 samples with none at all says nothing (no 0/0)", () => {
    const zero = {
      successRate: { minSamples: 0 },
      emptyResponses: { minSamples: 0 },
      taskCompletion: { minSamples: 0 },
    };
    for (const name of ["success_rate", "empty_response_rate", "task_completion"] as const) {
      expect(reading(name, {}, zero)).toStrictEqual({
        signal: name,
        status: "healthy",
        value: null,
        samples: 0,
      });
    }
  });
});

describe("success rate recovers on the recent part of the window", () => {
  it("a failing window with enough healthy recent calls is healthy, and says so", () => {
    expect(
      reading("success_rate", { ok: 10, failed: 20, recentOk: 10, recentFailed: 0 }),
    ).toStrictEqual({
      signal: "success_rate",
      status: "healthy",
      value: 10 / 30,
      samples: 30,
      recent: 1,
    });
    expect(
      reading("success_rate", { ok: 60, failed: 30, recentOk: 8, recentFailed: 2 }),
    ).toStrictEqual({
      signal: "success_rate",
      status: "healthy",
      value: 60 / 90,
      samples: 90,
      recent: 0.8,
    });
  });

  it("too few recent calls, or an unhealthy recent rate, keep the window's status", () => {
    expect(
      reading("success_rate", { ok: 10, failed: 20, recentOk: 9, recentFailed: 0 }),
    ).toStrictEqual({ signal: "success_rate", status: "critical", value: 10 / 30, samples: 30 });
    expect(reading("success_rate", { ok: 10, failed: 20 })).toStrictEqual({
      signal: "success_rate",
      status: "critical",
      value: 10 / 30,
      samples: 30,
    });
    expect(
      reading("success_rate", { ok: 10, failed: 20, recentOk: 7, recentFailed: 3 }),
    ).toStrictEqual({ signal: "success_rate", status: "critical", value: 10 / 30, samples: 30 });
    expect(
      reading("success_rate", { ok: 70, failed: 30, recentOk: 0, recentFailed: 10 }),
    ).toStrictEqual({ signal: "success_rate", status: "warning", value: 0.7, samples: 100 });
  });

  it("a healthy window is reported as is, whatever the recent calls", () => {
    expect(
      reading("success_rate", { ok: 90, failed: 10, recentOk: 10, recentFailed: 0 }),
    ).toStrictEqual({ signal: "success_rate", status: "healthy", value: 0.9, samples: 100 });
    expect(reading("success_rate", { ok: 9, failed: 0, recentOk: 9 })).toStrictEqual({
      signal: "success_rate",
      status: "healthy",
      value: null,
      samples: 9,
    });
  });

  it("through the memory store: errors, then a minute of successes lifts the status", () => {
    const store = new MemorySignalStore();
    const { h } = evaluator(store);
    const call = (ok: boolean, at: number) => {
      store.recordCall(
        { agent: "a", tool: "t", outcome: ok ? "success" : "error", durationMs: 5 },
        at,
      );
    };
    for (let i = 0; i < 20; i++) call(false, T0);
    expect(sync(h.current(T0)).status).toBe("critical");
    const later = T0 + 5 * 60_000;
    for (let i = 0; i < 10; i++) call(true, later);
    const report = sync(h.current(later));
    expect(report.status).toBe("healthy");
    expect(report.signals[0]).toMatchObject({ value: 10 / 30, recent: 1, status: "healthy" });
    // A minute on, the successes have left the recent part: the window alone decides again.
    expect(sync(h.current(later + 60_000)).signals[0]).toStrictEqual({
      signal: "success_rate",
      status: "critical",
      value: 10 / 30,
      samples: 30,
    });
  });
});

describe("latency P95 against the baseline", () => {
  const A = latencyBucketValue(latencyBucket(100));
  const B = latencyBucketValue(latencyBucket(200));

  it("counts failed calls as samples and needs 20 of them: 19 say nothing", () => {
    expect(reading("latency_p95", { ok: 10, failed: 10, latency: [[100, 20]] })).toStrictEqual({
      signal: "latency_p95",
      status: "healthy",
      value: A,
      samples: 20,
      baselineMs: null,
    });
    expect(reading("latency_p95", { ok: 10, failed: 9, latency: [[100, 19]] })).toStrictEqual({
      signal: "latency_p95",
      status: "healthy",
      value: null,
      samples: 19,
      baselineMs: null,
    });
    // Below the minimum even against a fixed baseline it would exceed many times over.
    expect(
      reading("latency_p95", { ok: 19, latency: [[10_000, 19]] }, { latency: { baselineMs: 50 } }),
    ).toStrictEqual({
      signal: "latency_p95",
      status: "healthy",
      value: null,
      samples: 19,
      baselineMs: 50,
    });
  });

  it("no latency recorded: no P95, whatever the call count", () => {
    expect(reading("latency_p95", { ok: 30 })).toStrictEqual({
      signal: "latency_p95",
      status: "healthy",
      value: null,
      samples: 30,
      baselineMs: null,
    });
    expect(reading("latency_p95", { ok: 30 }, { latency: { baselineMs: 50 } })).toStrictEqual({
      signal: "latency_p95",
      status: "healthy",
      value: null,
      samples: 30,
      baselineMs: 50,
    });
  });

  it("a fixed baseline: exactly the warning factor is healthy, above it warning; factors off", () => {
    const p95 = latencyBucketValue(latencyBucket(300));
    const slow = { ok: 20, latency: [[300, 20]] as [number, number][] };
    // p95 / (p95 / 2) is exactly 2.
    const at = (baselineMs: number, warningFactor: number | null, criticalFactor: number | null) =>
      statusOf("latency_p95", slow, { latency: { baselineMs, warningFactor, criticalFactor } });
    expect(at(p95 / 2, 2, null)).toBe("healthy");
    expect(at((p95 / 2) * 0.999, 2, null)).toBe("warning");
    expect(at(1, null, null)).toBe("healthy");
    expect(at(p95 / 2, null, 2)).toBe("healthy");
    expect(at((p95 / 2) * 0.999, null, 2)).toBe("critical");
    expect(at(p95 / 2, 1, 2)).toBe("warning");
    expect(at(p95 / 4, 1, 2)).toBe("critical");
  });

  it("learns the first P95 as it is, then moves towards a new one by 1 - exp(-dt/tau)", () => {
    const { state, h } = scriptedEvaluator({ ok: 20, latency: [[100, 20]] });
    expect(sync(h.current(T0)).signals[1]).toMatchObject({ value: A, baselineMs: null });
    const t1 = T0 + TAU_MS * Math.LN2; // half-way
    state.next = { agent: { ok: 20, latency: [[200, 20]] }, tools: {} };
    expect(sync(h.current(t1)).signals[1]).toMatchObject({ value: B, baselineMs: A });
    const third = sync(h.current(t1 + CACHE_MS)).signals[1];
    expect(third?.status).toBe("healthy");
    expect(third?.baselineMs).toBeCloseTo((A + B) / 2, 6);
  });

  it("learns nothing while a fixed baseline is set, nor from a slow P95", () => {
    let fixed: number | null = 50;
    const { state, store } = scripted({ ok: 20, latency: [[100, 20]] });
    const { h } = evaluator(store, () =>
      mergeThresholds(DEFAULT_THRESHOLDS, { latency: { baselineMs: fixed } }),
    );
    expect(sync(h.current(T0)).signals[1]).toMatchObject({ status: "healthy", baselineMs: 50 });
    fixed = null;
    // Nothing was learned under the fixed baseline.
    expect(sync(h.current(T0 + CACHE_MS)).signals[1]).toMatchObject({ baselineMs: null });
    expect(sync(h.current(T0 + 2 * CACHE_MS)).signals[1]).toMatchObject({ baselineMs: A });
    state.next = { agent: { ok: 20, latency: [[1_000, 20]] }, tools: {} };
    expect(sync(h.current(T0 + TAU_MS)).signals[1]).toMatchObject({
      status: "warning",
      baselineMs: A,
    });
    expect(sync(h.current(T0 + 2 * TAU_MS)).signals[1]).toMatchObject({
      status: "warning",
      baselineMs: A,
    });
  });

  it("each scope learns its own baseline; a tool named 'undefined' is not the agent", () => {
    const { h, changes } = scriptedEvaluator(
      { ok: 20, latency: [[100, 20]], completed: 0, tasksFailed: 5 },
      { undefined: { ok: 20, latency: [[1_000, 20]] } },
    );
    const first = sync(h.current(T0));
    expect(first.status).toBe("critical");
    expect(first.tools.undefined?.status).toBe("healthy");
    // Only the agent changed: the tool's previous status is its own.
    expect(changes.map((c) => [c.tool, c.from, c.to])).toEqual([
      [undefined, "healthy", "critical"],
    ]);
    const second = sync(h.current(T0 + CACHE_MS));
    expect(second.signals[1]?.baselineMs).toBe(A);
    expect(second.tools.undefined?.signals[1]?.baselineMs).toBe(
      latencyBucketValue(latencyBucket(1_000)),
    );
    expect(changes).toHaveLength(1);
  });
});

describe("scopes", () => {
  it("tools have no task completion; the agent does, after the call signals", () => {
    const { h } = scriptedEvaluator({ ok: 10 }, { t: { ok: 10 } });
    const report = sync(h.current(T0));
    expect(report.signals.map((s) => s.signal)).toEqual([
      "success_rate",
      "latency_p95",
      "empty_response_rate",
      "task_completion",
    ]);
    expect(report.tools.t?.signals.map((s) => s.signal)).toEqual([
      "success_rate",
      "latency_p95",
      "empty_response_rate",
    ]);
  });

  it("the worst signal decides, and a tool's own signals decide the tool", () => {
    const { h } = scriptedEvaluator(
      { ok: 100, llmTotal: 100, llmEmpty: 10 },
      { t: { ok: 10 }, u: { ok: 100, failed: 100 } },
    );
    const report = sync(h.current(T0 + 0.9));
    expect(report).toMatchObject({ agent: "a", at: T0, status: "warning" });
    expect(report.tools.t?.status).toBe("healthy");
    expect(report.tools.u?.status).toBe("warning");
  });
});

describe("the cache and reading again", () => {
  it("first read fresh; within cacheMs served from the cache; at cacheMs fresh again", () => {
    const { state, h } = scriptedEvaluator({ ok: 10 });
    expect(h.last).toBeUndefined();
    const first = sync(h.current(T0));
    expect(state.reads).toBe(1);
    expect(h.last).toBe(first);
    expect(h.current(T0 + CACHE_MS - 1)).toBe(first);
    expect(h.fresh(T0 + CACHE_MS - 1)).toBe(first);
    expect(state.reads).toBe(1);
    const second = sync(h.current(T0 + CACHE_MS));
    expect(second).not.toBe(first);
    expect(second.at).toBe(T0 + CACHE_MS);
    expect(h.last).toBe(second);
    expect(state.reads).toBe(2);
  });

  it("invalidate: the next read evaluates, even within cacheMs", () => {
    const { state, h } = scriptedEvaluator({ ok: 10 });
    const first = sync(h.current(T0));
    h.invalidate();
    state.next = { agent: { ok: 0, failed: 10 }, tools: {} };
    const second = sync(h.current(T0 + 1));
    expect(second).not.toBe(first);
    expect(second.status).toBe("critical");
    expect(h.current(T0 + 2)).toBe(second);
    expect(state.reads).toBe(2);
  });

  it("fresh(): a record since the last read makes it read again; current() keeps the cache", () => {
    const { state, h } = scriptedEvaluator({ ok: 10 });
    const first = sync(h.fresh(T0));
    h.noteRecord();
    expect(h.current(T0 + 1)).toBe(first);
    const second = h.fresh(T0 + 2);
    // An in-process store answers at once: no promise.
    expect(second).not.toBeInstanceOf(Promise);
    expect(second).not.toBe(first);
    expect(h.fresh(T0 + 3)).toBe(second);
    expect(state.reads).toBe(2);
  });

  it("a store that throws on the first read: a healthy empty report, stale, kept for cacheMs", () => {
    const { state, h, errors } = scriptedEvaluator({ ok: 10 });
    state.fail = new Error("store down");
    const stale = sync(h.current(T0 + 0.5));
    expect(stale).toStrictEqual(emptyStale);
    expect(errors).toEqual([state.fail]);
    // Retried after one cache period, not before.
    expect(h.current(T0 + CACHE_MS - 1)).toBe(stale);
    expect(state.reads).toBe(1);
    state.fail = undefined;
    expect(sync(h.current(T0 + CACHE_MS))).not.toHaveProperty("stale");
    expect(state.reads).toBe(2);
  });

  it("a store that throws after an invalidate: the last report, stale, kept for cacheMs", () => {
    const { state, h } = scriptedEvaluator({ ok: 0, failed: 10 });
    const first = sync(h.current(T0));
    h.invalidate();
    state.fail = new Error("store down");
    const stale = sync(h.current(T0 + 1));
    expect(stale).toStrictEqual({ ...first, at: T0 + 1, stale: true });
    expect(h.current(T0 + 2)).toBe(stale);
    expect(state.reads).toBe(2);
  });
});

describe("a store that answers later", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * An evaluator on a store whose reads are promises the test settles (or never does);
   * `onStoreError` as in `evaluator`.
   */
  function deferred(onStoreError?: (error: unknown) => void) {
    const inner = scripted({ ok: 0, failed: 10 });
    const state = { mode: "answer" as "answer" | "reject" | "hang", reads: 0 };
    const store: SignalStore = {
      recordCall: () => undefined,
      recordTask: () => undefined,
      read: (agent, now) => {
        state.reads++;
        if (state.mode === "hang") return new Promise<AgentSignals>(() => undefined);
        if (state.mode === "reject") return Promise.reject(new Error("ECONNRESET"));
        return Promise.resolve(inner.store.read(agent, now));
      },
    };
    return { state, ...evaluator(store, undefined, onStoreError) };
  }

  it("current(): when the read fails and onStoreError throws, the last report", async () => {
    const { state, h, errors } = deferred(() => {
      throw new Error("listener failed");
    });
    const first = await h.current(T0);
    expect(first.status).toBe("critical");
    state.mode = "reject";
    expect(await h.current(T0 + CACHE_MS)).toBe(first);
    expect(errors).toHaveLength(1);
  });

  it("current(): the last report at once while the store is slow; the new one once it answered", async () => {
    const { state, h } = deferred();
    const first = await h.current(T0);
    state.mode = "hang";
    let got: HealthReport | undefined;
    void Promise.resolve(h.current(T0 + CACHE_MS)).then((r) => (got = r));
    await new Promise<void>((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(got).toBe(first);
  });

  it("reads in flight are shared: one store read for several readers", async () => {
    const { state, h } = deferred();
    const a = h.fresh(T0);
    const b = h.fresh(T0);
    const c = h.current(T0);
    const [ra, rb, rc] = await Promise.all([a, b, c]);
    expect(state.reads).toBe(1);
    expect(rb).toBe(ra);
    expect(rc).toBe(ra);
    // Once it answered, the next read past the cache reads again.
    await h.fresh(T0 + CACHE_MS);
    expect(state.reads).toBe(2);
  });

  it("fresh(): a hung store on the first read gives a healthy empty report, stale, after the wait", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { state, h } = deferred();
    state.mode = "hang";
    let got: HealthReport | undefined;
    void Promise.resolve(h.fresh(T0 + 0.25)).then((r) => (got = r));
    await vi.advanceTimersByTimeAsync(FRESH_READ_WAIT_MS - 1);
    expect(got).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(got).toStrictEqual(emptyStale);
  });

  it("fresh(): a hung store after a report gives that report, stale", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { state, h } = deferred();
    const first = await h.fresh(T0);
    expect(vi.getTimerCount()).toBe(0); // the wait is cancelled once the store answered
    expect(first.status).toBe("critical");
    state.mode = "hang";
    const late = h.fresh(T0 + CACHE_MS);
    await vi.advanceTimersByTimeAsync(FRESH_READ_WAIT_MS);
    expect(await late).toStrictEqual({ ...first, stale: true });
  });
});
