/**
 * What the dashboard and Grafana need from the Collector's span metrics, checked on the Collector
 * configurations that send them to Prometheus (local.yaml: Prometheus's OTLP receiver;
 * grafana.yaml: remote write to Grafana Cloud):
 * - exemplars: the connector attaches the trace of a span to its calls and duration points, which
 *   Prometheus keeps (exemplar storage) and Grafana opens in Tempo (`trace_id`);
 * - labels: a `transform` processor on the span metrics renames selfheal.agent.name and
 *   selfheal.tool.name (on every selfheal span) to `agent` and `tool` (SPAN_METRICS_LABELS), the labels of selfheal's own
 *   metrics, so the dashboard's variables and Tempo's trace-to-metrics tags filter both.
 * Then, with the Collector built (scripts/build-collector.sh, as collector-validate.test.ts),
 * local.yaml's connector and transform run on a real Collector: selfheal's own spans of a failed
 * and recovered call go in over OTLP/HTTP, and the span metrics that come out (file exporter) are,
 * translated to Prometheus label names, the series span-metrics.ts makes of the same spans for the
 * end-to-end backfill: the same label sets and counts.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { createSelfHealing } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/virtual-clock.js";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { eventually } from "../helpers/otlp.js";
import { BUILD_SCRIPT } from "./collector-dist.js";
import { isRecord, list, loadYaml, record, strings, type YamlRecord } from "./config-files.js";
import {
  loadCollectorConfig,
  promName,
  recordingTracerProvider,
  SPAN_METRICS_LABELS,
  SpanMetricsConnector,
  spanMetricsConfig,
} from "./span-metrics.js";

/** The configurations whose span metrics reach Prometheus (and so the dashboard). */
const PROMETHEUS_CONFIGS = ["collector/local.yaml", "collector/grafana.yaml"];

/** The pipelines of a configuration that take the span_metrics connector's output. */
function spanMetricsPipelines(root: YamlRecord): { name: string; processors: string[] }[] {
  const pipelines = record(record(root.service, "service").pipelines, "service.pipelines");
  return Object.entries(pipelines)
    .filter(([name]) => name === "metrics" || name.startsWith("metrics/"))
    .map(([name, p]) => ({ name, pipeline: record(p, name) }))
    .filter(({ pipeline }) =>
      strings(pipeline.receivers, "receivers").some((r) => r === "span_metrics"),
    )
    .map(({ name, pipeline }) => ({
      name,
      processors: pipeline.processors === undefined ? [] : strings(pipeline.processors, name),
    }));
}

const isTransform = (id: string) => id === "transform" || id.startsWith("transform/");

/** Every OTTL statement of a transform processor's metric_statements. */
function metricStatements(processor: YamlRecord): string[] {
  return list(processor.metric_statements, "metric_statements").flatMap((group) =>
    typeof group === "string"
      ? [group]
      : strings(record(group, "metric_statements group").statements, "statements"),
  );
}

describe.each(PROMETHEUS_CONFIGS)("%s: span metrics for the dashboard", (file) => {
  const { root } = loadYaml(file);
  const connector = record(record(root.connectors, "connectors").span_metrics, "span_metrics");

  it("keeps exemplars (each calls and duration point names a span's trace)", () => {
    const exemplars = isRecord(connector.exemplars) ? connector.exemplars : {};
    expect(exemplars.enabled, `${file}: connectors.span_metrics.exemplars.enabled`).toBe(true);
  });

  it("renames selfheal.agent.name and selfheal.tool.name to agent and tool on the span metrics", () => {
    const pipelines = spanMetricsPipelines(root);
    expect(pipelines.length, `${file}: no metrics pipeline takes span_metrics`).toBeGreaterThan(0);
    const processors = record(root.processors, "processors");
    for (const p of pipelines) {
      const statements = p.processors
        .filter(isTransform)
        .flatMap((id) => metricStatements(record(processors[id], id)));
      for (const [from, to] of Object.entries(SPAN_METRICS_LABELS)) {
        const sets = statements.some(
          (s) =>
            s.includes(`attributes["${to}"]`) &&
            s.includes(`attributes["${from}"]`) &&
            s.trim().startsWith("set("),
        );
        const drops = statements.some((s) => s.includes("delete_key(") && s.includes(`"${from}"`));
        expect(sets && drops, `${file}, pipeline ${p.name}: ${from} -> ${to}`).toBe(true);
      }
    }
  });
});

// ---- A real Collector ---------------------------------------------------------------------
/** The configuration whose connector and transform run (a draft elsewhere can be tried with it). */
const REAL_CONFIG = process.env.SELFHEAL_SPAN_METRICS_CONFIG ?? "collector/local.yaml";
const SUITE = `span metrics on a real Collector (${REAL_CONFIG}'s connector and transform)`;
const OVERRIDE = process.env.SELFHEAL_OTELCOL;
/** The binary scripts/build-collector.sh has built for these sources; this suite does not build. */
const BINARY = (() => {
  if (OVERRIDE !== undefined) return which("otelcol", OVERRIDE);
  const r = spawnSync("bash", [BUILD_SCRIPT, "--path"], { encoding: "utf8" });
  const path = r.status === 0 ? r.stdout.trim().split("\n").pop() : undefined;
  return path !== undefined ? which("otelcol", path) : undefined;
})();
const available = haveAll(
  SUITE,
  BINARY === undefined ? ["a built Collector"] : [],
  "bash scripts/build-collector.sh, or set SELFHEAL_OTELCOL",
);

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
}
interface OtlpPoint {
  attributes?: OtlpAttribute[];
  asInt?: string;
  count?: string;
}
interface OtlpMetrics {
  resourceMetrics?: {
    scopeMetrics?: {
      metrics?: {
        name: string;
        sum?: { dataPoints?: OtlpPoint[] };
        histogram?: { dataPoints?: OtlpPoint[] };
      }[];
    }[];
  }[];
}

/** A data point's attributes as Prometheus labels (names as its OTLP receiver writes them). */
const labelsOf = (p: OtlpPoint): Record<string, string> =>
  Object.fromEntries(
    (p.attributes ?? []).map((a) => [
      promName(a.key),
      String(a.value.stringValue ?? a.value.intValue ?? a.value.boolValue ?? a.value.doubleValue),
    ]),
  );

/** A series' identity without what differs by nature: the Collector's instance id. */
const identity = (labels: Record<string, string>) =>
  JSON.stringify(
    Object.entries(labels)
      .filter(([k]) => k !== "collector_instance_id" && k !== "job")
      .sort(([a], [b]) => a.localeCompare(b)),
  );

describe.skipIf(!available)(SUITE, () => {
  let dir = "";
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> = Promise.resolve();

  afterAll(async () => {
    if (child?.exitCode === null && child.pid !== undefined) {
      process.kill(child.pid, "SIGTERM");
      await exited;
    }
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("makes the series span-metrics.ts makes from selfheal's spans, labelled agent and tool, with exemplars", async () => {
    const root = loadCollectorConfig(REAL_CONFIG);
    const processors = record(root.processors, "processors");
    const transforms = (spanMetricsPipelines(root)[0]?.processors ?? []).filter(isTransform);
    dir = mkdtempSync(join(tmpdir(), "selfheal-spanmetrics-"));
    const out = join(dir, "metrics.jsonl");
    const port = await freePort();
    const connector = {
      ...record(record(root.connectors, "connectors").span_metrics, "span_metrics"),
      metrics_flush_interval: "500ms",
    };
    const config = {
      receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${String(port)}` } } } },
      processors: Object.fromEntries(transforms.map((id) => [id, processors[id]])),
      connectors: { span_metrics: connector },
      exporters: { file: { path: out, flush_interval: "100ms" } },
      service: {
        telemetry: { metrics: { level: "none" } },
        pipelines: {
          traces: { receivers: ["otlp"], exporters: ["span_metrics"] },
          metrics: { receivers: ["span_metrics"], processors: transforms, exporters: ["file"] },
        },
      },
    };
    writeFileSync(join(dir, "config.yaml"), stringify(config));
    let log = "";
    const proc = spawn(BINARY ?? "", ["--config", join(dir, "config.yaml")], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    child = proc;
    proc.stderr.on("data", (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-8_000);
    });
    exited = new Promise((resolve) => proc.once("exit", resolve));

    // selfheal's spans of one call that fails, is diagnosed and recovered by a retry.
    const traces = recordingTracerProvider("support-bot");
    const clock = new VirtualClock(Date.now() - 60_000);
    const sh = createSelfHealing({
      agent: "support-bot",
      clock,
      tracerProvider: traces.tracerProvider,
      logger: { warn: () => undefined },
    });
    let attempts = 0;
    const search = sh.tool("search", { readOnly: true }, (_query: string) => {
      if (attempts++ === 0) throw Object.assign(new Error("rate limited"), { status: 429 });
      return Promise.resolve("found");
    });
    const answer = search("refund policy");
    for (let i = 0; i < 120 && attempts < 2; i++) await clock.advance(1_000);
    await clock.advance(1_000);
    expect(await answer).toBe("found");
    await sh.close();
    const spans = traces.take();
    expect(new Set(spans.map((s) => s.name))).toEqual(
      new Set(["agent.tool_call", "agent.tool_call.error", "agent.diagnosis", "agent.recovery"]),
    );
    const ours = new SpanMetricsConnector(spanMetricsConfig(REAL_CONFIG));
    ours.consume(spans, Date.now());
    const expected = new Map(ours.snapshot().map((s) => [identity(s.labels), s]));

    // Into the Collector once its receiver listens.
    const exporter = new OTLPTraceExporter({ url: `http://127.0.0.1:${String(port)}/v1/traces` });
    await eventually(
      () => proc.exitCode === null && log.includes("Everything is ready"),
      `the Collector to start:\n${log}`,
      60_000,
    );
    const code = await new Promise<number>((resolve) => {
      exporter.export(spans, (r) => {
        resolve(r.code);
      });
    });
    expect(code, log).toBe(0);

    // The last flush with every series at its count.
    let got = new Map<string, { labels: Record<string, string>; calls: number; count: number }>();
    const exemplarTraces = new Set<string>();
    const read = () => {
      if (!existsSync(out)) return false;
      const lines = readFileSync(out, "utf8")
        .split("\n")
        .filter((l) => l.includes("resourceMetrics"));
      // Exemplars come with the flush after their spans arrived (then they are cleared).
      for (const line of lines)
        for (const id of line.matchAll(/"traceId":"([0-9a-f]+)"/g)) exemplarTraces.add(id[1] ?? "");
      const last = JSON.parse(lines.at(-1) ?? "{}") as OtlpMetrics;
      const series = new Map<
        string,
        { labels: Record<string, string>; calls: number; count: number }
      >();
      for (const m of (last.resourceMetrics ?? []).flatMap((r) =>
        (r.scopeMetrics ?? []).flatMap((s) => s.metrics ?? []),
      )) {
        for (const p of m.sum?.dataPoints ?? m.histogram?.dataPoints ?? []) {
          const labels = labelsOf(p);
          const entry = series.get(identity(labels)) ?? { labels, calls: 0, count: 0 };
          if (m.name === "traces.span.metrics.calls") entry.calls = Number(p.asInt ?? 0);
          if (m.name === "traces.span.metrics.duration") entry.count = Number(p.count ?? 0);
          series.set(identity(labels), entry);
        }
      }
      got = series;
      return (
        series.size === expected.size &&
        [...expected].every(([k, s]) => series.get(k)?.calls === s.calls)
      );
    };
    await eventually(read, `the span metrics in ${out}`, 60_000).catch(() => undefined);

    expect([...got.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [k, s] of expected) {
      expect(got.get(k)?.calls, k).toBe(s.calls);
      expect(got.get(k)?.count, k).toBe(s.count);
    }
    const toolCall = [...got.values()].find((s) => s.labels.span_name === "agent.tool_call");
    expect(toolCall?.labels).toMatchObject({ agent: "support-bot", tool: "search" });
    expect(toolCall?.labels).not.toHaveProperty("selfheal_agent_name");
    expect(toolCall?.labels).not.toHaveProperty("gen_ai_agent_name");
    expect([...exemplarTraces]).toEqual([spans[0]?.spanContext().traceId]);
  }, 180_000);
});
