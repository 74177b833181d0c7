import {
  AggregationTemporality,
  AggregationType,
  InstrumentType,
  type PushMetricExporter,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import { ExportResultCode } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  exportFailureReason,
  ExportGuard,
  guardMetricExporter,
  guardSpanExporter,
} from "../../src/otel/guard.js";

afterEach(() => {
  vi.useRealTimers();
});

type Callback = Parameters<SpanExporter["export"]>[1];
type Result = Parameters<Callback>[0];

/** A guarded exporter over `run` (what the inner exporter does with the callback), with its guard. */
function guardedOver(kind: "traces" | "metrics", run: (cb: Callback) => void) {
  const guard = new ExportGuard({ warn: () => undefined }, 60_000);
  const exporter =
    kind === "traces"
      ? guardSpanExporter(
          {
            export: (_spans, cb) => {
              run(cb);
            },
            shutdown: () => Promise.resolve(),
          },
          guard,
          "http://c/v1/traces",
          500,
        )
      : guardMetricExporter(
          {
            export: (_metrics, cb) => {
              run(cb);
            },
            shutdown: () => Promise.resolve(),
            forceFlush: () => Promise.resolve(),
          },
          guard,
          "http://c/v1/metrics",
          500,
        );
  const results: Result[] = [];
  const exportOnce = () => {
    const done = (r: Result) => results.push(r);
    if (kind === "traces") (exporter as SpanExporter).export([{} as ReadableSpan], done);
    else (exporter as PushMetricExporter).export({} as ResourceMetrics, done);
  };
  return { guard, results, exportOnce };
}

describe("exportFailureReason", () => {
  it.each<[string, unknown, string]>([
    ["an HTTP status with no message", { message: "", code: 503 }, "HTTP 503"],
    [
      "an HTTP status",
      Object.assign(new Error("Bad Gateway"), { code: 502 }),
      "HTTP 502 Bad Gateway",
    ],
    [
      "an errno already in the message",
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }),
      "connect ECONNREFUSED 127.0.0.1:1",
    ],
    [
      "a function's code is not read",
      Object.assign(() => undefined, { code: 503 }),
      "a function was thrown",
    ],
    ["null", null, "null was thrown"],
    ["a string", "socket hang up", "socket hang up"],
    [
      "a code getter that throws",
      Object.defineProperty(new Error("boom"), "code", {
        get() {
          throw new Error("hostile");
        },
      }),
      "boom",
    ],
  ])("%s", (_what, error, expected) => {
    expect(exportFailureReason(error)).toBe(expected);
  });
});

describe("ExportGuard: the log line", () => {
  it.each([
    [0, ""],
    [400, ""],
    [1_600, " (at most one such line per 2 s)"],
  ])("an interval of %i ms: every line ends %j", (interval, suffix) => {
    let now = 0;
    const lines: string[] = [];
    const guard = new ExportGuard({ warn: (l) => lines.push(l) }, interval, () => now);
    guard.failed("metrics", "console", new Error("full"));
    now += interval;
    guard.failed("metrics", "console", new Error("full"));
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(
      "selfheal/otel: telemetry export failing, the agent is unaffected and the data is dropped: 1 failed export(s) since the last report (in all: traces 0, metrics 2, 0 spans); last: metrics to console: full" +
        suffix,
    );
  });
});

describe.each(["traces", "metrics"] as const)("the guarded %s exporter", (kind) => {
  const lost = kind === "traces" ? 1 : 0;
  const snapshotAfter = (last: string) => ({
    traces: kind === "traces" ? 1 : 0,
    metrics: kind === "metrics" ? 1 : 0,
    spansLost: lost,
    last: `${kind} to http://c/v1/${kind}: ${last}`,
  });

  it("an exporter that never answers: done (with success) at the deadline, counted once", () => {
    vi.useFakeTimers();
    const { guard, results, exportOnce } = guardedOver(kind, () => undefined);
    exportOnce();
    vi.advanceTimersByTime(499);
    expect(results).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(results).toEqual([{ code: 0 }]);
    vi.advanceTimersByTime(10_000);
    expect(results).toHaveLength(1);
    expect(guard.snapshot()).toEqual(snapshotAfter("no answer within 500 ms"));
  });

  it("an exporter that answers twice (failure, then success): done once, one failure", () => {
    vi.useFakeTimers();
    const { guard, results, exportOnce } = guardedOver(kind, (cb) => {
      cb({ code: ExportResultCode.FAILED, error: new Error("refused") });
      cb({ code: ExportResultCode.SUCCESS });
    });
    exportOnce();
    vi.advanceTimersByTime(1_000);
    expect(results).toEqual([{ code: 0 }]);
    expect(guard.snapshot()).toEqual(snapshotAfter("refused"));
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an exporter that throws: done at once, counted", () => {
    const { guard, results, exportOnce } = guardedOver(kind, () => {
      throw new Error("serializer broke");
    });
    exportOnce();
    expect(results).toEqual([{ code: 0 }]);
    expect(guard.snapshot()).toEqual(snapshotAfter("serializer broke"));
  });

  it("a success: done, nothing counted", () => {
    const { guard, results, exportOnce } = guardedOver(kind, (cb) => {
      cb({ code: ExportResultCode.SUCCESS });
    });
    exportOnce();
    expect(results).toEqual([{ code: 0 }]);
    expect(guard.snapshot()).toEqual({ traces: 0, metrics: 0, spansLost: 0, last: undefined });
  });
});

describe("shutdown and forceFlush are delegated and never reject", () => {
  const guard = new ExportGuard({ warn: () => undefined }, 0);
  const rejecting = () => vi.fn(() => Promise.reject(new Error("collector gone")));

  it.each(["shutdown", "forceFlush"] as const)("span exporter: %s", async (method) => {
    const inner = { export: vi.fn(), shutdown: rejecting(), forceFlush: rejecting() };
    const wrapped = guardSpanExporter(inner, guard, "t", 1);
    await expect(
      method === "shutdown" ? wrapped.shutdown() : wrapped.forceFlush?.(),
    ).resolves.toBeUndefined();
    expect(inner[method]).toHaveBeenCalledTimes(1);
  });

  it("span exporter without forceFlush: forceFlush resolves", async () => {
    const wrapped = guardSpanExporter({ export: vi.fn(), shutdown: rejecting() }, guard, "t", 1);
    await expect(wrapped.forceFlush?.()).resolves.toBeUndefined();
  });

  it.each(["shutdown", "forceFlush"] as const)("metric exporter: %s", async (method) => {
    const inner = { export: vi.fn(), shutdown: rejecting(), forceFlush: rejecting() };
    const wrapped = guardMetricExporter(inner, guard, "t", 1);
    await expect(wrapped[method]()).resolves.toBeUndefined();
    expect(inner[method]).toHaveBeenCalledTimes(1);
  });
});

describe("the guarded metric exporter asks the inner one for temporality and aggregation", () => {
  const guard = new ExportGuard({ warn: () => undefined }, 0);
  const base = { export: vi.fn(), shutdown: vi.fn(), forceFlush: vi.fn() };

  it("none of its own: the reader's defaults apply", () => {
    const wrapped = guardMetricExporter(base, guard, "t", 1);
    expect(Object.keys(wrapped).sort()).toEqual(["export", "forceFlush", "shutdown"]);
  });

  it("delegated, per instrument type", () => {
    const wrapped = guardMetricExporter(
      {
        ...base,
        selectAggregationTemporality: (type) =>
          type === InstrumentType.COUNTER
            ? AggregationTemporality.DELTA
            : AggregationTemporality.CUMULATIVE,
        selectAggregation: (type) =>
          type === InstrumentType.HISTOGRAM
            ? { type: AggregationType.DROP }
            : { type: AggregationType.SUM },
      },
      guard,
      "t",
      1,
    );
    expect(wrapped.selectAggregationTemporality?.(InstrumentType.COUNTER)).toBe(
      AggregationTemporality.DELTA,
    );
    expect(wrapped.selectAggregationTemporality?.(InstrumentType.GAUGE)).toBe(
      AggregationTemporality.CUMULATIVE,
    );
    expect(wrapped.selectAggregation?.(InstrumentType.HISTOGRAM)).toEqual({
      type: AggregationType.DROP,
    });
    expect(wrapped.selectAggregation?.(InstrumentType.COUNTER)).toEqual({
      type: AggregationType.SUM,
    });
  });

  it("an inner answer of undefined: cumulative and the default aggregation", () => {
    const wrapped = guardMetricExporter(
      {
        ...base,
        selectAggregationTemporality: () => undefined as unknown as AggregationTemporality,
        selectAggregation: () => undefined as unknown as { type: AggregationType.DEFAULT },
      },
      guard,
      "t",
      1,
    );
    expect(wrapped.selectAggregationTemporality?.(InstrumentType.COUNTER)).toBe(
      AggregationTemporality.CUMULATIVE,
    );
    expect(wrapped.selectAggregation?.(InstrumentType.COUNTER)).toEqual({
      type: AggregationType.DEFAULT,
    });
  });
});
