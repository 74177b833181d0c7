/**
 * A collector that is down or slow costs the agent nothing: every exporter `startTelemetry`
 * builds is wrapped here. A failed or overdue export is counted, logged at most once per window
 * through the app's logger, and reported to the SDK as done, so the batch processor moves on
 * and the SDK's global error handler (the diag logger) is never called once per failure. The
 * batch is dropped either way: OTLP exporters already retry inside their own deadline.
 */
import {
  AggregationTemporality,
  AggregationType,
  type PushMetricExporter,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-node";
import { describeThrown, oneLine, redact, safeLogger } from "../telemetry/redact.js";

type ExportResult = Parameters<Parameters<SpanExporter["export"]>[1]>[0];
/** `ExportResultCode.SUCCESS` (0) without importing `@opentelemetry/core`, which is no peer. */
// eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- the enum's value, stable since 1.0
const DONE: ExportResult = { code: 0 };

export type Signal = "traces" | "metrics";

export interface ExportErrors {
  /** Span exports (batches) that failed or overran their deadline, since start. */
  traces: number;
  /** Metric exports that failed or overran their deadline, since start. */
  metrics: number;
  /** Spans in the failed batches (sent nowhere). Spans dropped by a full queue are not in it. */
  spansLost: number;
  /** The last failure on one redacted line (`traces to URL: reason`); undefined before any. */
  last: string | undefined;
}

/** Why an export failed, on one short line: errno or HTTP status first. */
export function exportFailureReason(error: unknown): string {
  if (error === undefined) return "export failed";
  let code: unknown;
  try {
    if (typeof error === "object" && error !== null) code = (error as { code?: unknown }).code;
  } catch {
    code = undefined;
  }
  const message = describeThrown(error);
  const text =
    typeof code === "number"
      ? `HTTP ${code}${message ? ` ${message}` : ""}`
      : typeof code === "string" && !message.includes(code)
        ? `${code} ${message}`
        : message;
  return oneLine(redact(text, 300));
}

/** Counts export failures and logs them, at most one line per `intervalMs`. */
export class ExportGuard {
  private readonly counts = { traces: 0, metrics: 0, spansLost: 0 };
  private last: string | undefined;
  private lastLogAt = -Infinity;
  private sinceLog = 0;
  private readonly logger: { warn(message: string): void };

  constructor(
    logger: { warn(message: string): void },
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.logger = safeLogger(logger);
  }

  failed(signal: Signal, target: string, error: unknown, spans = 0): void {
    this.counts[signal]++;
    this.counts.spansLost += spans;
    this.sinceLog++;
    this.last = `${signal} to ${target}: ${exportFailureReason(error)}`;
    const now = this.now();
    if (now - this.lastLogAt < this.intervalMs) return;
    const seconds = Math.round(this.intervalMs / 1000);
    this.logger.warn(
      `selfheal/otel: telemetry export failing, the agent is unaffected and the data is dropped: ` +
        `${this.sinceLog} failed export(s) since the last report (in all: traces ${this.counts.traces}, ` +
        `metrics ${this.counts.metrics}, ${this.counts.spansLost} spans); last: ${this.last}` +
        (seconds > 0 ? ` (at most one such line per ${seconds} s)` : ""),
    );
    this.lastLogAt = now;
    this.sinceLog = 0;
  }

  snapshot(): ExportErrors {
    return { ...this.counts, last: this.last };
  }
}

/**
 * Runs one export with a deadline: `done` is called exactly once, with success, whatever the
 * exporter does (fails, throws, never answers); a failure or overrun is handed to `onFailure`.
 */
function guarded(
  run: (callback: (result: ExportResult) => void) => void,
  deadlineMs: number,
  onFailure: (error: unknown) => void,
  done: (result: ExportResult) => void,
): void {
  let settled = false;
  const finish = (error: unknown, failed: boolean) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    if (failed) onFailure(error);
    done(DONE);
  };
  const timer = setTimeout(() => {
    finish(new Error(`no answer within ${deadlineMs} ms`), true);
  }, deadlineMs);
  timer.unref();
  try {
    run((result) => {
      finish(result.error, result.code !== DONE.code);
    });
  } catch (error) {
    finish(error, true);
  }
}

/** Never rejects: a flush or shutdown that fails is nothing the app could act on. */
async function quietly(work: () => Promise<void> | undefined): Promise<void> {
  try {
    await work();
  } catch {
    // The exports it waited for were counted as they failed.
  }
}

export function guardSpanExporter(
  inner: SpanExporter,
  guard: ExportGuard,
  target: string,
  deadlineMs: number,
): SpanExporter {
  return {
    export(spans: ReadableSpan[], done) {
      const fail = (error: unknown) => {
        guard.failed("traces", target, error, spans.length);
      };
      guarded(
        (cb) => {
          inner.export(spans, cb);
        },
        deadlineMs,
        fail,
        done,
      );
    },
    shutdown: () => quietly(() => inner.shutdown()),
    forceFlush: () => quietly(() => inner.forceFlush?.()),
  };
}

export function guardMetricExporter(
  inner: PushMetricExporter,
  guard: ExportGuard,
  target: string,
  deadlineMs: number,
): PushMetricExporter {
  const fail = (error: unknown) => {
    guard.failed("metrics", target, error);
  };
  const wrapped: PushMetricExporter = {
    export(metrics: ResourceMetrics, done) {
      guarded(
        (cb) => {
          inner.export(metrics, cb);
        },
        deadlineMs,
        fail,
        done,
      );
    },
    shutdown: () => quietly(() => inner.shutdown()),
    forceFlush: () => quietly(() => inner.forceFlush()),
  };
  // The reader asks the exporter for temporality (cumulative or delta) and aggregation.
  if (inner.selectAggregationTemporality)
    wrapped.selectAggregationTemporality = (type) =>
      inner.selectAggregationTemporality?.(type) ?? AggregationTemporality.CUMULATIVE;
  if (inner.selectAggregation)
    wrapped.selectAggregation = (type) =>
      inner.selectAggregation?.(type) ?? { type: AggregationType.DEFAULT };
  return wrapped;
}
