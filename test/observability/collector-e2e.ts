/**
 * The local stack's telemetry path, for real, with the simulator as the app: selfheal's metrics
 * and spans go over OTLP/HTTP (the SDK's own OTLP exporters) into a real Collector running
 * collector/local.yaml unchanged (its variables point it at 127.0.0.1: free ports, Prometheus,
 * a trace store), which sends metrics, and the span metrics it makes, to a real Prometheus 3's
 * OTLP receiver (prometheus/prometheus.yml's `otlp:` section, alerts/*.rules.yml loaded), and the
 * traces it keeps to a second Collector that stands in for Tempo (file exporter).
 *
 * The simulator plays on virtual time (an hour in a second or two). After each virtual minute its
 * metrics are collected from a real SDK MeterProvider and exported with their timestamps moved
 * onto a real window that ends just before now (sample n of a run at `startMs + n min`), so
 * Prometheus stores an hour of one-minute pushes that PromQL reads as it would read a live hour:
 * rates over $__rate_interval, `increase(...[1h])` at the end. Its spans (dated on the same
 * window) are exported each minute too. Runs play one after another over the same window, each
 * from its own providers (service.name = the run's name, so `job` tells them apart); Prometheus
 * takes their interleaved pushes with an out-of-order window (`outOfOrderWindow`, 6 h). The span
 * metrics are stamped by the Collector at real time (its flush, every
 * SELFHEAL_SPAN_METRICS_FLUSH_INTERVAL, set to 1 s here): they land in the last seconds of the
 * window, cumulative over every span.
 *
 * `startCollectorPipeline()` returns when everything has landed: every run's last push is in
 * Prometheus, the span metrics count every tool-call span sent, and every trace the Collector
 * must keep (an error, a diagnosis or recovery, the watchdog at work) is in the trace store.
 * Other suites use it to run queries on what the Collector delivered (dashboards at Grafana's
 * $__rate_interval, alert expressions after a scenario):
 *
 *   const p = await startCollectorPipeline();            // ~10 s once the binaries are built
 *   await p.prometheus.queryRange(expr, p.nowMs - 6 * 3_600_000, p.nowMs, 60);
 *   await p.prometheus.query(alertExpr, p.endMs);        // the selfheal_* series at the last push
 *   await p.stop();
 *
 * Guard the suite with `pipelineAvailable(name)` (skip with a notice locally, fail under CI=true).
 * Each call starts its own processes on free ports, so suites may run it side by side.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SpanStatusCode, type MeterProvider, type TracerProvider } from "@opentelemetry/api";
import { millisToHrTime } from "@opentelemetry/core";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  MeterProvider as SdkMeterProvider,
  MetricReader,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { parse, stringify } from "yaml";
import { LONG_RUNS, runLongRuns, type LongRunsScenario } from "../../src/sim/long-runs.js";
import { runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import type { ReceivedSpan } from "../helpers/otlp.js";
import { ROOT } from "./config-files.js";
import {
  collectorAvailable,
  collectorFile,
  startCollector,
  startSink,
  waitFor,
  type RunningCollector,
  type Sink,
} from "./otelcol-run.js";
import { prometheus3Available, startPrometheus3, type RunningPrometheus3 } from "./prometheus3.js";
import { ruleFiles } from "./rules.js";

const MINUTE = 60_000;
/** Where in each minute the samples land: pushes come at any second, rarely on a query step. */
const PHASE_MS = 23_000;

/** What a workload gets to report through: real SDK providers, and a per-minute hook. */
export interface WorkloadTelemetry {
  meterProvider: MeterProvider;
  tracerProvider: TracerProvider;
  /** Virtual time the run starts at (epoch ms): the window's start. */
  startMs: number;
  /** Call after each virtual minute, with the virtual ms since the start. */
  onMinute: (virtualMs: number) => Promise<void>;
}

/** Something that plays on virtual time and reports through selfheal's telemetry. */
export interface Workload {
  /** Its service.name (Prometheus `job`); the scenarios' agents are named `sim-<scenario>`. */
  name: string;
  /** The agent label its metrics carry. */
  agent: string;
  /** Virtual time it runs, ms (its last onMinute is at most this). */
  durationMs: number;
  run: (telemetry: WorkloadTelemetry) => Promise<unknown>;
}

/** Grace the simulator gives a scenario's fleet after its last task (src/sim/run.ts). */
const SCENARIO_GRACE_MS = 10 * MINUTE;

/** A scenario of src/sim/scenarios.ts, its agents named `sim-<name>`. */
export function scenarioWorkload(
  name: string,
  options: { service?: string; durationMs?: number } = {},
): Workload {
  const shipped = SCENARIOS[name];
  if (!shipped) throw new Error(`no scenario ${name}`);
  const scenario = { ...shipped, durationMs: options.durationMs ?? shipped.durationMs };
  return {
    name: options.service ?? `sim-${name}`,
    agent: `sim-${name}`,
    durationMs: scenario.durationMs + SCENARIO_GRACE_MS,
    run: ({ meterProvider, tracerProvider, startMs, onMinute }) =>
      runScenario(scenario, { telemetry: { meterProvider, tracerProvider }, startMs, onMinute }),
  };
}

/** A night of long runs in an hour: the watchdog's verdicts, tiers and a run given up on. */
export const LONG_RUNS_HOUR: LongRunsScenario = {
  ...LONG_RUNS,
  durationMs: 60 * MINUTE,
  stepMs: 10_000,
};

export function longRunsWorkload(scenario: LongRunsScenario = LONG_RUNS_HOUR): Workload {
  return {
    name: `sim-${scenario.name}`,
    agent: `sim-${scenario.name}`,
    durationMs: scenario.durationMs,
    run: ({ meterProvider, tracerProvider, startMs, onMinute }) =>
      runLongRuns(scenario, { telemetry: { meterProvider, tracerProvider }, startMs, onMinute }),
  };
}

export const DEFAULT_WORKLOADS = (): Workload[] => [
  scenarioWorkload("wording-drift"),
  scenarioWorkload("provider-outage"),
  longRunsWorkload(),
];

export interface PipelineOptions {
  /** What plays (default: wording-drift, provider-outage, an hour of long runs). */
  workloads?: Workload[];
  /** SELFHEAL_TRACE_SAMPLE_PERCENT of the Collector (default: the file's, 10). */
  samplePercent?: number;
  /** Rule files Prometheus loads (default alerts/*.rules.yml). */
  ruleFiles?: string[];
  /** Prometheus's storage.tsdb.out_of_order_time_window (default 6h). */
  outOfOrderWindow?: string;
  /** How long to wait for everything to land, ms (default 30 s). */
  settleTimeoutMs?: number;
}

/** What one run sent, to check what landed against. */
export interface SentRun {
  workload: Workload;
  /** Its pushes' timestamps, Unix ms: the first and the last. */
  firstMs: number;
  lastMs: number;
  pushes: number;
  /** agent.tool_call spans exported, by agent. */
  toolCallSpans: Map<string, number>;
  /** Trace ids the Collector must keep: an ERROR span, a diagnosis or recovery, the watchdog at work. */
  mustKeep: Set<string>;
  /** Every trace id sent. */
  traceIds: Set<string>;
  /** The names of the metrics exported (the SDK's instrument names). */
  metricNames: Set<string>;
  spans: number;
}

export interface CollectorPipeline {
  /** Prometheus 3 with what the Collector delivered: query, queryRange, exemplars, get. */
  prometheus: RunningPrometheus3;
  url: string;
  /** The first and the last push of any run, Unix ms (samples at second 23 of each minute). */
  startMs: number;
  endMs: number;
  /**
   * Real time once everything landed, Unix ms. The span metrics are stamped by the Collector at
   * real time (the seconds the pipeline ran, after `endMs`): a query evaluated at `endMs` does
   * not see them. Evaluated at `nowMs`, it sees both: the last pushes are within Prometheus's
   * 5 min lookback (`nowMs - endMs` is about a minute) and the span metrics are there.
   */
  nowMs: number;
  runs: SentRun[];
  /** The spans in the trace store (the Collector's sampled traces). */
  traces: () => ReceivedSpan[];
  collector: RunningCollector;
  timings: Record<string, number>;
  /** Stops the processes (by PID) and deletes the data. */
  stop: () => Promise<void>;
}

/** Whether the pipeline's binaries are here (a notice, or an error under CI=true). */
export function pipelineAvailable(suite: string): boolean {
  // Both checks run so that both notices show.
  const collector = collectorAvailable(suite);
  const prometheus = prometheus3Available(suite);
  return collector && prometheus;
}

/** A metric reader that exports nowhere: the caller collects when it wants to. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** The collection with every point's times moved: start at `startMs`, end at `atMs`. */
function restamp(rm: ResourceMetrics, startMs: number, atMs: number): ResourceMetrics {
  const startTime = millisToHrTime(startMs);
  const endTime = millisToHrTime(atMs);
  return {
    resource: rm.resource,
    scopeMetrics: rm.scopeMetrics.map((sm) => ({
      scope: sm.scope,
      metrics: sm.metrics.map((m) => ({
        ...m,
        dataPoints: m.dataPoints.map((p) => ({ ...p, startTime, endTime })),
      })) as typeof sm.metrics,
    })),
  };
}

const exported = (
  exporter: { export: (items: never, cb: (r: { code: number; error?: Error }) => void) => void },
  items: unknown,
  what: string,
) =>
  new Promise<void>((resolve, reject) => {
    exporter.export(items as never, (r) => {
      if (r.code === 0) resolve();
      else reject(new Error(`${what}: export failed: ${r.error?.message ?? String(r.code)}`));
    });
  });

/** Span names and attributes that make the Collector keep a trace (collector/local.yaml). */
function mustKeep(span: ReadableSpan): boolean {
  if (span.status.code === SpanStatusCode.ERROR) return true;
  if (span.name === "agent.diagnosis" || span.name === "agent.recovery") return true;
  if (span.name === "agent.watchdog.recovery") return true;
  return (
    span.name === "agent.watchdog.verdict" &&
    span.attributes["selfheal.watchdog.verdict"] !== "healthy"
  );
}

/**
 * Plays one workload and exports its telemetry to a Collector's OTLP/HTTP receiver after every
 * virtual minute, its samples stamped `baseMs + virtual ms`.
 */
export async function playWorkload(
  workload: Workload,
  collectorUrl: string,
  baseMs: number,
): Promise<SentRun> {
  const resource = resourceFromAttributes({ "service.name": workload.name });
  const reader = new CollectingReader();
  const meterProvider = new SdkMeterProvider({ resource, readers: [reader] });
  const memory = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    resource,
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const metricExporter = new OTLPMetricExporter({ url: `${collectorUrl}/v1/metrics` });
  const traceExporter = new OTLPTraceExporter({ url: `${collectorUrl}/v1/traces` });
  const sent: SentRun = {
    workload,
    firstMs: Number.POSITIVE_INFINITY,
    lastMs: 0,
    pushes: 0,
    toolCallSpans: new Map(),
    mustKeep: new Set(),
    traceIds: new Set(),
    metricNames: new Set(),
    spans: 0,
  };
  const flushSpans = async () => {
    const spans = memory.getFinishedSpans();
    memory.reset();
    if (spans.length === 0) return;
    for (const s of spans) {
      if (s.name === "agent.tool_call") {
        const agent = String(s.attributes["selfheal.agent.name"] ?? "");
        sent.toolCallSpans.set(agent, (sent.toolCallSpans.get(agent) ?? 0) + 1);
      }
      sent.traceIds.add(s.spanContext().traceId);
      if (mustKeep(s)) sent.mustKeep.add(s.spanContext().traceId);
    }
    sent.spans += spans.length;
    await exported(traceExporter, spans, `${workload.name} spans`);
  };
  await workload.run({
    meterProvider,
    tracerProvider,
    startMs: baseMs,
    onMinute: async (virtualMs) => {
      const at = baseMs + virtualMs;
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new AggregateError(errors, "metric collection failed");
      for (const sm of resourceMetrics.scopeMetrics)
        for (const m of sm.metrics) sent.metricNames.add(m.descriptor.name);
      await exported(metricExporter, restamp(resourceMetrics, baseMs, at), workload.name);
      sent.firstMs = Math.min(sent.firstMs, at);
      sent.lastMs = Math.max(sent.lastMs, at);
      sent.pushes++;
      await flushSpans();
    },
  });
  await flushSpans();
  await Promise.all([
    meterProvider.shutdown(),
    tracerProvider.shutdown(),
    metricExporter.shutdown(),
    traceExporter.shutdown(),
  ]);
  return sent;
}

/** prometheus/prometheus.yml's `otlp:` section, with the test's storage window and rules. */
function prometheusConfig(rules: string[], outOfOrderWindow: string): string {
  const shipped = parse(readFileSync(join(ROOT, "prometheus", "prometheus.yml"), "utf8")) as {
    otlp?: unknown;
  };
  if (shipped.otlp === undefined) throw new Error("prometheus/prometheus.yml has no otlp section");
  return stringify({
    global: { evaluation_interval: "15s" },
    rule_files: rules,
    otlp: shipped.otlp,
    storage: { tsdb: { out_of_order_time_window: outOfOrderWindow } },
  });
}

/**
 * Starts the pipeline, plays the workloads through it and waits until everything has landed
 * (see the header). Stop it with `stop()`.
 */
export async function startCollectorPipeline(
  options: PipelineOptions = {},
): Promise<CollectorPipeline> {
  const workloads = options.workloads ?? DEFAULT_WORKLOADS();
  const settleMs = options.settleTimeoutMs ?? 30_000;
  const timings: Record<string, number> = {};
  const dir = await mkdtemp(join(tmpdir(), "selfheal-collector-e2e-"));
  const started: { stop: () => Promise<unknown> }[] = [];
  const stop = async () => {
    await Promise.all(started.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    let t = Date.now();
    await writeFile(
      join(dir, "prometheus.yml"),
      prometheusConfig(options.ruleFiles ?? ruleFiles(), options.outOfOrderWindow ?? "6h"),
    );
    const [prometheus, traceStore] = await Promise.all([
      startPrometheus3(join(dir, "prometheus.yml"), join(dir, "data")),
      startSink(dir, "trace-store"),
    ]);
    started.push(prometheus, traceStore);
    const collector = await startCollector({
      name: "collector/local.yaml",
      configs: [collectorFile("local.yaml")],
      env: {
        PROMETHEUS_OTLP_ENDPOINT: prometheus.otlpUrl,
        TEMPO_OTLP_GRPC_ENDPOINT: traceStore.grpcEndpoint,
        SELFHEAL_SPAN_METRICS_FLUSH_INTERVAL: "1s",
        // Every simulated trace ends with its root: it is decided 2 s after (the file's rule);
        // this only bounds how long a trace without a root would wait.
        SELFHEAL_TRACE_DECISION_WAIT: "5s",
        ...(options.samplePercent !== undefined && {
          SELFHEAL_TRACE_SAMPLE_PERCENT: String(options.samplePercent),
        }),
      },
    });
    started.push(collector);
    timings.start = Date.now() - t;

    // The window: it ends a few seconds before now, its samples at second 23 of each minute.
    t = Date.now();
    const windowMs = Math.max(...workloads.map((w) => w.durationMs));
    const baseMs = Math.floor((Date.now() - windowMs - MINUTE) / MINUTE) * MINUTE + PHASE_MS;
    const runs: SentRun[] = [];
    for (const w of workloads) runs.push(await playWorkload(w, collector.httpUrl, baseMs));
    timings.simulate = Date.now() - t;

    t = Date.now();
    await settle(prometheus, traceStore, runs, settleMs, collector);
    timings.settle = Date.now() - t;
    return {
      prometheus,
      url: prometheus.url,
      startMs: Math.min(...runs.map((r) => r.firstMs)),
      endMs: Math.max(...runs.map((r) => r.lastMs)),
      nowMs: Date.now(),
      runs,
      traces: traceStore.spans,
      collector,
      timings,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Waits until every run's last push, every span metric and every must-keep trace landed. */
async function settle(
  prometheus: RunningPrometheus3,
  traceStore: Sink,
  runs: SentRun[],
  timeoutMs: number,
  collector: RunningCollector,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const pending = new Set<string>();
  const check = async (): Promise<boolean> => {
    pending.clear();
    for (const run of runs) {
      // The latest sample of the run's series at its last push.
      const [latest] = await prometheus.query(
        // (the name copied to a label: timestamp() drops __name__, and the series must stay apart)
        `max(timestamp(label_replace({job="${run.workload.name}", __name__=~"selfheal_.+"}, "name", "$1", "__name__", "(.+)")))`,
        run.lastMs,
      );
      if (Number(latest?.value?.[1] ?? 0) * 1000 < run.lastMs)
        pending.add(`${run.workload.name}: its last push`);
      for (const [agent, count] of run.toolCallSpans) {
        const [calls] = await prometheus.query(
          `sum(traces_span_metrics_calls_total{agent="${agent}", span_name="agent.tool_call"})`,
          Date.now(),
        );
        if (Number(calls?.value?.[1] ?? 0) !== count)
          pending.add(`${agent}: ${String(count)} tool-call spans in the span metrics`);
      }
    }
    const stored = new Set(traceStore.spans().map((s) => s.traceId));
    for (const run of runs) {
      const missing = [...run.mustKeep].filter((id) => !stored.has(id)).length;
      if (missing > 0) pending.add(`${run.workload.name}: ${String(missing)} traces to keep`);
    }
    return pending.size === 0;
  };
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline)
      throw new Error(
        `not landed in ${String(timeoutMs)} ms: ${[...pending].join("; ")}\n` +
          `Collector:\n${collector.log()}\nPrometheus:\n${prometheus.log()}`,
      );
    await waitFor(() => false, 250);
  }
}
