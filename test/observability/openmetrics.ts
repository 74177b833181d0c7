import { millisToHrTime } from "@opentelemetry/core";
import { PrometheusSerializer } from "@opentelemetry/exporter-prometheus";
import {
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import { withSecondsSuffix } from "../../src/otel/prometheus.js";

/** A metric reader that exports nowhere: the caller collects when it wants to. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface Family {
  /** `# TYPE` and `# HELP` lines, under the OpenMetrics family name. */
  header: string[];
  samples: string[];
}

/** A real SDK MeterProvider and a way to read all its data points now (cumulative). */
export function collectingMeterProvider(): {
  meterProvider: MeterProvider;
  collect: () => Promise<ResourceMetrics>;
} {
  const reader = new CollectingReader();
  return {
    meterProvider: new MeterProvider({ readers: [reader] }),
    collect: async () => {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new AggregateError(errors, "metric collection failed");
      return resourceMetrics;
    },
  };
}

/**
 * OpenMetrics text of collected metrics, each collection stamped with the caller's time (a
 * simulator's virtual clock), for `promtool tsdb create-blocks-from openmetrics`. Names and
 * samples come from the Prometheus exporter's own serializer, so counters get `_total` and
 * histograms `_bucket`/`_sum`/`_count` exactly as a scrape of selfheal/otel's `/metrics` shows
 * them (a histogram in seconds ends in `_seconds`, as on every Prometheus path). Each
 * series' samples must be added in time order; several providers (agents) may share one file.
 */
export class OpenMetricsWriter {
  // Timestamps on, no target_info (it has no timestamp), scope label kept as the exporter has it.
  private readonly serializer = new PrometheusSerializer(undefined, true, undefined, true);
  private readonly families = new Map<string, Family>();

  /** Adds every data point of a collection, stamped `atMs` (Unix ms). */
  add(resourceMetrics: ResourceMetrics, atMs: number): void {
    const endTime = millisToHrTime(atMs);
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        const stamped = {
          ...metric,
          dataPoints: metric.dataPoints.map((p) => ({ ...p, endTime })),
        } as MetricData;
        const one: ResourceMetrics = {
          resource: resourceMetrics.resource,
          scopeMetrics: [{ scope: scope.scope, metrics: [stamped] }],
        };
        // Named as selfheal/otel's exporter and every other Prometheus path name them.
        this.addText(metric, this.serializer.serialize(withSecondsSuffix(one)));
      }
    }
  }

  /**
   * Adds samples written elsewhere (series not made by an SDK, such as the Collector's span
   * metrics): `family` is the OpenMetrics family name, each sample a whole line with a timestamp
   * in seconds. Called again for the same family, the samples are appended.
   */
  addFamily(family: string, type: "counter" | "histogram", help: string, samples: string[]): void {
    let entry = this.families.get(family);
    if (!entry) {
      entry = { header: [`# HELP ${family} ${help}`, `# TYPE ${family} ${type}`], samples: [] };
      this.families.set(family, entry);
    }
    entry.samples.push(...samples);
  }

  /** Whether any sample of a family (by its OpenMetrics name) has been added. */
  has(family: string): boolean {
    return (this.families.get(family)?.samples.length ?? 0) > 0;
  }

  private addText(metric: MetricData, text: string): void {
    const lines = text.split("\n").filter((l) => l !== "");
    const type = lines.find((l) => l.startsWith("# TYPE "));
    if (type === undefined) return; // no data points yet
    const exposed = type.split(" ")[2] ?? "";
    // OpenMetrics names a counter's family without `_total`; its samples keep it.
    const counter = metric.dataPointType === DataPointType.SUM && metric.isMonotonic;
    const family = counter ? exposed.replace(/_total$/, "") : exposed;
    let entry = this.families.get(family);
    if (!entry) {
      entry = {
        header: lines
          .filter((l) => l.startsWith("# TYPE ") || l.startsWith("# HELP "))
          .map((l) => l.replace(` ${exposed} `, ` ${family} `)),
        samples: [],
      };
      this.families.set(family, entry);
    }
    for (const line of lines) {
      if (line.startsWith("#")) continue;
      // The exporter writes Unix ms; OpenMetrics timestamps are seconds.
      entry.samples.push(line.replace(/ (\d+)$/, (_, ms: string) => ` ${Number(ms) / 1000}`));
    }
  }

  /** The OpenMetrics exposition: each family once, its samples in time order, then `# EOF`. */
  text(): string {
    const out: string[] = [];
    for (const { header, samples } of this.families.values()) out.push(...header, ...samples);
    return `${out.join("\n")}\n# EOF\n`;
  }
}
