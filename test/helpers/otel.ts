import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";

// Real context propagation, as a Node SDK sets it up, so nested spans find their parent.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** A real SDK tracer provider that keeps finished spans in memory. */
export function recordingProvider(extra: SpanProcessor[] = []) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter), ...extra],
  });
  return {
    provider,
    spans: () => exporter.getFinishedSpans(),
    /** Finished spans of one name, in start order. */
    named: (name: string) =>
      exporter
        .getFinishedSpans()
        .filter((s) => s.name === name)
        .sort(byStart),
    reset: () => {
      exporter.reset();
    },
  };
}

const byStart = (a: ReadableSpan, b: ReadableSpan) =>
  a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1];

/** The span tree as nested names, children in start order, for exact assertions. */
export function tree(spans: readonly ReadableSpan[]): unknown[] {
  const byParent = new Map<string | undefined, ReadableSpan[]>();
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  for (const s of spans) {
    const parent = s.parentSpanContext?.spanId;
    const key = parent && ids.has(parent) ? parent : undefined;
    byParent.set(key, [...(byParent.get(key) ?? []), s]);
  }
  const build = (parent: string | undefined): unknown[] =>
    (byParent.get(parent) ?? []).sort(byStart).map((s) => {
      const children = build(s.spanContext().spanId);
      return children.length ? { [s.name]: children } : s.name;
    });
  return build(undefined);
}

/** A metric reader that exports nowhere: the test collects when it wants to. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * A real SDK meter provider; `read()` collects every data point now (cumulative) as a map from
 * `name{label=value,...}` (labels in recording order) to its value (a histogram's count).
 */
export function recordingMeters() {
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    read: async () => {
      const { resourceMetrics } = await reader.collect();
      const points = new Map<string, number>();
      for (const sm of resourceMetrics.scopeMetrics) {
        for (const m of sm.metrics) {
          for (const p of m.dataPoints) {
            const labels = Object.entries(p.attributes)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(",");
            const value =
              typeof p.value === "number" ? p.value : (p.value as { count: number }).count;
            points.set(`${m.descriptor.name}{${labels}}`, value);
          }
        }
      }
      return points;
    },
    shutdown: () => meterProvider.shutdown(),
  };
}
