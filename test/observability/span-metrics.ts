/**
 * The Collector's span metrics, made in the test as the `span_metrics` connector makes them from
 * the same spans: a real SDK tracer provider records selfheal's spans on the simulator's virtual
 * clock, and each virtual minute the spans that ended are counted per key (service.name,
 * span.name, span.kind, status.code, collector.instance.id and the configured dimensions found
 * on the span, then on its resource), as cumulative calls and a duration histogram with the
 * configured buckets, the way spanmetricsconnector v0.161 aggregates (`aggregateMetrics`,
 * `buildAttributes`). The series are named and labelled as Prometheus's OTLP receiver stores them
 * (UnderscoreEscapingWithSuffixes: dots become underscores, `_total` on counters, the unit on the
 * histogram), after the renames the Collector's span-metrics pipeline applies (`SPAN_METRICS_LABELS`).
 *
 * A new calls series is written as 0 at its first flush, then its count, as the connector does.
 * span-metrics-collector.test.ts runs the same spans through a real Collector and compares.
 * What it leaves out: exemplars (Prometheus keeps them in memory, never in backfilled blocks) and
 * the 15 s flush (one sample a minute here, the sparser and so the stricter case).
 */
import { SpanKind, SpanStatusCode, type AttributeValue } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { parse } from "yaml";
import {
  durationSeconds,
  list,
  loadYaml,
  record,
  strings,
  type YamlRecord,
} from "./config-files.js";
import {
  ATTR_AGENT_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_TOOL_NAME,
  LABEL_AGENT,
  LABEL_TOOL,
} from "../../src/telemetry/conventions.js";
import type { OpenMetricsWriter } from "./openmetrics.js";

/**
 * The Collector renames these span attributes on the span metrics (a `transform` processor in
 * the span-metrics pipeline), so span metrics carry the same `agent` and `tool` labels as
 * selfheal's own metrics and the dashboard's variables filter both.
 */
export const SPAN_METRICS_LABELS: Readonly<Record<string, string>> = {
  [ATTR_AGENT_NAME]: LABEL_AGENT,
  [ATTR_TOOL_NAME]: LABEL_TOOL,
  // A tool's own call span names the tool as the GenAI conventions do; selfheal's name first.
  [ATTR_GEN_AI_TOOL_NAME]: LABEL_TOOL,
};

/** The connector's configuration that shapes the series (from a Collector YAML file). */
export interface SpanMetricsConfig {
  namespace: string;
  /** Histogram bucket bounds, seconds. */
  buckets: number[];
  /** Span (then resource) attributes that become labels, in order. */
  dimensions: string[];
  /** Spans of a service not seen for this long drop all its series (`metrics_expiration`). */
  expirationMs: number;
}

/** A Collector configuration: a path in the repository, or an absolute one (a draft to try). */
export function loadCollectorConfig(file: string): YamlRecord {
  return isAbsolute(file) ? record(parse(readFileSync(file, "utf8")), file) : loadYaml(file).root;
}

/** `connectors.span_metrics` of a Collector configuration in collector/. */
export function spanMetricsConfig(file = "collector/local.yaml"): SpanMetricsConfig {
  const root = loadCollectorConfig(file);
  const connector = record(record(root.connectors, "connectors").span_metrics, "span_metrics");
  const histogram = record(connector.histogram, "span_metrics.histogram");
  const explicit = record(histogram.explicit, "span_metrics.histogram.explicit");
  if (histogram.unit !== "s") throw new Error(`${file}: span metrics histogram unit is not s`);
  return {
    namespace:
      typeof connector.namespace === "string" ? connector.namespace : "traces.span.metrics",
    buckets: strings(explicit.buckets, "buckets").map(durationSeconds),
    dimensions: list(connector.dimensions, "dimensions").map((d) => {
      const name = record(d, "dimension").name;
      if (typeof name !== "string") throw new Error(`${file}: a dimension without a name`);
      return name;
    }),
    expirationMs:
      typeof connector.metrics_expiration === "string"
        ? durationSeconds(connector.metrics_expiration) * 1000
        : 0,
  };
}

/** Prometheus's OTLP translation of a name (UnderscoreEscapingWithSuffixes): `a.b-c` -> `a_b_c`. */
export const promName = (name: string): string =>
  name.replace(/[^A-Za-z0-9_:]/g, "_").replace(/_{2,}/g, "_");

/** The Prometheus names of the connector's two metrics. */
export function spanMetricNames(config: Pick<SpanMetricsConfig, "namespace">): {
  calls: string;
  duration: string;
} {
  const base = promName(config.namespace);
  return { calls: `${base}_calls_total`, duration: `${base}_duration_seconds` };
}

const KIND: Record<SpanKind, string> = {
  [SpanKind.INTERNAL]: "SPAN_KIND_INTERNAL",
  [SpanKind.SERVER]: "SPAN_KIND_SERVER",
  [SpanKind.CLIENT]: "SPAN_KIND_CLIENT",
  [SpanKind.PRODUCER]: "SPAN_KIND_PRODUCER",
  [SpanKind.CONSUMER]: "SPAN_KIND_CONSUMER",
};
const STATUS: Record<SpanStatusCode, string> = {
  [SpanStatusCode.UNSET]: "STATUS_CODE_UNSET",
  [SpanStatusCode.OK]: "STATUS_CODE_OK",
  [SpanStatusCode.ERROR]: "STATUS_CODE_ERROR",
};

/** `pcommon.Value.AsString()` of a scalar attribute. */
const asString = (v: AttributeValue): string => (Array.isArray(v) ? JSON.stringify(v) : String(v));

const seconds = ([s, ns]: [number, number]) => s + ns / 1e9;

interface Series {
  service: string;
  labels: [string, string][];
  calls: number;
  /** Not flushed yet: the connector writes a new cumulative sum as 0 first (`isFirst`). */
  first: boolean;
  /** Cumulative count per bucket (non-cumulative here; summed when written). */
  buckets: number[];
  sum: number;
  count: number;
}

const escape = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labelText = (labels: [string, string][]) =>
  labels.map(([k, v]) => `${k}="${escape(v)}"`).join(",");
/** `strconv.FormatFloat(bound, 'f', -1, 64)`, as the OTLP translation writes `le`. */
const le = (bound: number) => String(bound);

/** The span metrics of one Collector, fed spans as they end. */
export class SpanMetricsConnector {
  private readonly series = new Map<string, Series>();
  private readonly lastSeen = new Map<string, number>();
  /** Every series ever made, expired or not. */
  private readonly made = new Map<string, [string, string][]>();
  readonly names: { calls: string; duration: string };

  constructor(
    private readonly config: SpanMetricsConfig,
    /** `collector.instance.id` (the connector adds it: a beta feature gate, on by default). */
    private readonly instance = "4f0d3c1e-5b2a-4c8e-9d7f-6a1b2c3d4e5f",
  ) {
    this.names = spanMetricNames(config);
  }

  /** Counts spans that ended by `atMs` (Unix ms), as the connector does on receiving them. */
  consume(spans: readonly ReadableSpan[], atMs: number): void {
    for (const span of spans) {
      const resource = span.resource.attributes;
      const service = resource["service.name"];
      if (service === undefined) continue; // the connector skips spans without service.name
      const labels: [string, string][] = [
        ["job", asString(service)],
        ["service_name", asString(service)],
        ["span_name", span.name],
        ["span_kind", KIND[span.kind]],
        ["status_code", STATUS[span.status.code]],
        ["collector_instance_id", this.instance],
      ];
      for (const dim of this.config.dimensions) {
        const value = span.attributes[dim] ?? resource[dim];
        if (value === undefined) continue;
        const name = SPAN_METRICS_LABELS[dim] ?? promName(dim);
        // Two attributes renamed to one label: the first dimension found wins, as in the transform.
        if (labels.some(([n]) => n === name)) continue;
        labels.push([name, asString(value)]);
      }
      const key = labelText(labels);
      let s = this.series.get(key);
      if (!s) {
        s = {
          service: asString(service),
          labels,
          calls: 0,
          first: true,
          buckets: this.config.buckets.map(() => 0).concat(0),
          sum: 0,
          count: 0,
        };
        this.series.set(key, s);
        this.made.set(key, labels);
      }
      const duration = Math.max(0, seconds(span.endTime) - seconds(span.startTime));
      s.calls++;
      const i = this.config.buckets.findIndex((b) => duration <= b);
      const bucket = i === -1 ? this.config.buckets.length : i;
      s.buckets[bucket] = (s.buckets[bucket] ?? 0) + 1;
      s.sum += duration;
      s.count++;
      this.lastSeen.set(s.service, atMs);
    }
  }

  /** Labels of every series made so far, expired ones too (what the spans carried). */
  labelSets(): Record<string, string>[] {
    return [...this.made.values()].map((labels) => Object.fromEntries(labels));
  }

  /** Every series held now: its labels and cumulative calls, count and sum of durations. */
  snapshot(): { labels: Record<string, string>; calls: number; count: number; sum: number }[] {
    return [...this.series.values()].map((s) => ({
      labels: Object.fromEntries(s.labels),
      calls: s.calls,
      count: s.count,
      sum: s.sum,
    }));
  }

  /** Writes every series' cumulative value at `atMs` (one flush); expired services drop out. */
  flush(out: OpenMetricsWriter, atMs: number): void {
    const { expirationMs } = this.config;
    for (const [key, s] of this.series) {
      if (expirationMs > 0 && atMs - (this.lastSeen.get(s.service) ?? atMs) >= expirationMs)
        this.series.delete(key);
    }
    const calls: string[] = [];
    const durations: string[] = [];
    const ts = atMs / 1000;
    for (const s of this.series.values()) {
      const l = labelText(s.labels);
      // A new series starts at 0, so Prometheus sees its first increase (SumMetrics.isFirst).
      calls.push(`${this.names.calls}{${l}} ${s.first ? 0 : s.calls} ${ts}`);
      s.first = false;
      let cumulative = 0;
      this.config.buckets.forEach((bound, i) => {
        cumulative += s.buckets[i] ?? 0;
        durations.push(`${this.names.duration}_bucket{${l},le="${le(bound)}"} ${cumulative} ${ts}`);
      });
      durations.push(`${this.names.duration}_bucket{${l},le="+Inf"} ${s.count} ${ts}`);
      durations.push(`${this.names.duration}_sum{${l}} ${s.sum} ${ts}`);
      durations.push(`${this.names.duration}_count{${l}} ${s.count} ${ts}`);
    }
    out.addFamily(
      this.names.calls.replace(/_total$/, ""),
      "counter",
      "Span calls (the Collector's span_metrics connector).",
      calls,
    );
    out.addFamily(
      this.names.duration,
      "histogram",
      "Span durations (the Collector's span_metrics connector).",
      durations,
    );
  }
}

/**
 * A real SDK tracer provider whose finished spans can be taken as they end, with `service.name`
 * set (the connector ignores spans without it).
 */
export function recordingTracerProvider(serviceName: string): {
  tracerProvider: BasicTracerProvider;
  take: () => ReadableSpan[];
} {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  return {
    tracerProvider,
    take: () => {
      const spans = exporter.getFinishedSpans();
      exporter.reset();
      return spans;
    },
  };
}
