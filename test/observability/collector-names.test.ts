/**
 * What each export path of collector/ calls selfheal's metrics, on real Collectors: ten virtual
 * minutes of the wording-drift scenario (its SDK's OTLP exports, spans too) go through
 * - local.yaml to Prometheus 3's OTLP receiver (prometheus/prometheus.yml's `otlp:` section:
 *   UnderscoreEscapingWithSuffixes),
 * - grafana.yaml's prometheus_remote_write (translation_strategy UnderscoreEscapingWithSuffixes)
 *   to the same Prometheus's remote-write receiver (a job of its own),
 * - honeycomb.yaml's OTLP/HTTP exporter to a sink Collector standing in for Honeycomb.
 * The two Prometheus paths store the same names: `_total` on counters, the unit on histograms
 * (`_seconds`, already in selfheal's names, is not doubled; `{token}` adds nothing; the GenAI
 * conventions' `gen_ai.client.operation.duration` gets it), `_bucket`,
 * `_sum`, `_count`, dots as underscores. The Honeycomb path adds nothing: Honeycomb gets the
 * OpenTelemetry names (`selfheal_tool_calls`, `gen_ai.client.token.usage`,
 * `traces.span.metrics.calls`), each histogram as one metric. Both Prometheus paths carry the span
 * metrics' exemplars (trace ids) into Prometheus's exemplar storage.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  pipelineAvailable,
  playWorkload,
  scenarioWorkload,
  type SentRun,
  type Workload,
} from "./collector-e2e.js";
import {
  INSTRUMENTATION_SCOPE,
  METRIC_GEN_AI_TOKEN_USAGE,
  TOKEN_BUCKETS,
} from "../../src/telemetry/conventions.js";
import {
  collectorFile,
  startCollector,
  startSink,
  stopAllCollectors,
  waitFor,
  type Sink,
} from "./otelcol-run.js";
import { startPrometheus3, type RunningPrometheus3 } from "./prometheus3.js";

/**
 * The workload, plus the GenAI token usage histogram (unit `{token}`) as metrics.ts makes it: the
 * simulator's calls report no tokens.
 */
function withTokenUsage(workload: Workload): Workload {
  return {
    ...workload,
    run: (telemetry) => {
      const usage = telemetry.meterProvider
        .getMeter(INSTRUMENTATION_SCOPE)
        .createHistogram(METRIC_GEN_AI_TOKEN_USAGE, {
          unit: "{token}",
          advice: { explicitBucketBoundaries: [...TOKEN_BUCKETS] },
        });
      usage.record(1_200, { agent: workload.agent, "gen_ai.token.type": "input" });
      return workload.run(telemetry);
    },
  };
}

const SUITE = "metric names on each export path (local.yaml, grafana.yaml, honeycomb.yaml)";
const available = pipelineAvailable(SUITE);
const MINUTE = 60_000;

let dir = "";
let prometheus: RunningPrometheus3 | undefined;
let sink: Sink;
const sent: Record<"otlp" | "prw" | "honeycomb", SentRun | undefined> = {
  otlp: undefined,
  prw: undefined,
  honeycomb: undefined,
};
const SERVICES = { otlp: "names-otlp", prw: "names-prw", honeycomb: "names-honeycomb" };

const prom = (): RunningPrometheus3 => {
  if (!prometheus) throw new Error("no Prometheus");
  return prometheus;
};
const namesOfJob = (job: string) =>
  prom().get<string[]>(`/api/v1/label/__name__/values?match[]={job="${job}"}`);

/** The metric names that reached the Honeycomb stand-in. */
const honeycombNames = () =>
  new Set(
    sink
      .metricRequests()
      .flatMap((r) => r.resourceMetrics ?? [])
      .flatMap((rm) => rm.scopeMetrics ?? [])
      .flatMap((sm) => sm.metrics ?? [])
      .map((m) => m.name),
  );

describe.skipIf(!available)(SUITE, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "selfheal-names-"));
    writeFileSync(
      join(dir, "prometheus.yml"),
      stringify({ global: { evaluation_interval: "15s" } }),
    );
    [prometheus, sink] = await Promise.all([
      startPrometheus3(join(dir, "prometheus.yml"), join(dir, "data")),
      startSink(dir, "honeycomb"),
    ]);
    const flush = {
      SELFHEAL_SPAN_METRICS_FLUSH_INTERVAL: "1s",
      SELFHEAL_TRACE_DECISION_WAIT: "2s",
    };
    const [local, grafana, honeycomb] = await Promise.all([
      startCollector({
        name: "local.yaml",
        configs: [collectorFile("local.yaml")],
        env: {
          ...flush,
          PROMETHEUS_OTLP_ENDPOINT: prom().otlpUrl,
          TEMPO_OTLP_GRPC_ENDPOINT: sink.grpcEndpoint,
        },
      }),
      startCollector({
        name: "grafana.yaml",
        configs: [collectorFile("grafana.yaml")],
        env: {
          ...flush,
          GRAFANA_CLOUD_PROMETHEUS_URL: prom().remoteWriteUrl,
          GRAFANA_CLOUD_OTLP_ENDPOINT: sink.httpUrl,
          GRAFANA_CLOUD_OTLP_BASIC_AUTH: Buffer.from("1:dummy").toString("base64"),
          GRAFANA_CLOUD_PROMETHEUS_BASIC_AUTH: Buffer.from("2:dummy").toString("base64"),
        },
      }),
      startCollector({
        name: "honeycomb.yaml",
        configs: [collectorFile("honeycomb.yaml")],
        env: {
          ...flush,
          HONEYCOMB_API_KEY: "hcaik_dummy0000000000000000000000",
          HONEYCOMB_API_ENDPOINT: sink.httpUrl,
        },
      }),
    ]);
    // Ten minutes of wording-drift (twenty pushes with the grace), in the last half hour.
    const base = Math.floor((Date.now() - 30 * MINUTE) / MINUTE) * MINUTE;
    const play = (service: string, url: string) =>
      playWorkload(
        withTokenUsage(scenarioWorkload("wording-drift", { service, durationMs: 10 * MINUTE })),
        url,
        base,
      );
    [sent.otlp, sent.prw, sent.honeycomb] = await Promise.all([
      play(SERVICES.otlp, local.httpUrl),
      play(SERVICES.prw, grafana.httpUrl),
      play(SERVICES.honeycomb, honeycomb.httpUrl),
    ]);
    const landed = async () => {
      const [otlp, prw] = await Promise.all([namesOfJob(SERVICES.otlp), namesOfJob(SERVICES.prw)]);
      return [otlp, prw].every(
        (names) =>
          names.includes("selfheal_diagnoses_total") &&
          names.includes("traces_span_metrics_calls_total"),
      );
    };
    const deadline = Date.now() + 30_000;
    while (!(await landed()) || !honeycombNames().has("traces.span.metrics.calls")) {
      if (Date.now() > deadline)
        throw new Error(
          `not landed in 30 s.\nlocal:\n${local.log()}\ngrafana:\n${grafana.log()}\n` +
            `honeycomb:\n${honeycomb.log()}\nprometheus:\n${prom().log()}`,
        );
      await waitFor(() => false, 250);
    }
    // A second flush of the span metrics, so both histograms and counters are in.
    await waitFor(() => false, 1_500);
  }, 240_000);

  afterAll(async () => {
    await stopAllCollectors();
    await prometheus?.stop();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  /** Prometheus's name for an OpenTelemetry counter or histogram (UnderscoreEscapingWithSuffixes). */
  const promNames = (run: SentRun | undefined): string[] => [...(run?.metricNames ?? [])];

  it("stores the same names through the OTLP receiver (local.yaml) and remote write (grafana.yaml)", async () => {
    const [otlp, prw] = await Promise.all([namesOfJob(SERVICES.otlp), namesOfJob(SERVICES.prw)]);
    expect(otlp.length).toBeGreaterThan(10);
    expect(prw.sort()).toEqual(otlp.sort());
    expect(promNames(sent.otlp).length).toBeGreaterThan(5);
  });

  it("adds _total to counters and the unit to histograms on both Prometheus paths", async () => {
    for (const job of [SERVICES.otlp, SERVICES.prw]) {
      const names = await namesOfJob(job);
      expect(names, job).toEqual(
        expect.arrayContaining([
          "selfheal_tool_calls_total",
          "selfheal_diagnoses_total",
          "selfheal_tool_call_duration_seconds_bucket",
          "selfheal_tool_call_duration_seconds_count",
          "selfheal_tool_call_duration_seconds_sum",
          "selfheal_health_status",
          // `{token}` is an annotation, not a unit: nothing is added.
          "gen_ai_client_token_usage_bucket",
          // The GenAI conventions' name has no unit in it: `s` adds `_seconds`.
          "gen_ai_client_operation_duration_seconds_bucket",
          "gen_ai_client_operation_duration_seconds_count",
          "traces_span_metrics_calls_total",
          "traces_span_metrics_duration_seconds_bucket",
        ]),
      );
      // No OpenTelemetry name untranslated, no counter without _total, no unit doubled.
      expect(
        names.filter((n) => n.includes(".")),
        job,
      ).toEqual([]);
      expect(names, job).not.toContain("selfheal_tool_calls");
      expect(
        names.filter((n) => n.includes("_seconds_seconds")),
        job,
      ).toEqual([]);
    }
  });

  it("carries the span metrics' exemplars on both Prometheus paths", async () => {
    for (const job of [SERVICES.otlp, SERVICES.prw]) {
      const found = await prom().exemplars(
        `traces_span_metrics_duration_seconds_bucket{job="${job}"}`,
        Date.now() - 60 * MINUTE,
        Date.now() + MINUTE,
      );
      const ids = found.flatMap((s) => s.exemplars.map((e) => e.labels.trace_id ?? ""));
      expect(ids.length, job).toBeGreaterThan(0);
      for (const id of ids) expect(id, job).toMatch(/^[0-9a-f]{32}$/);
    }
  });

  it("sends Honeycomb the OpenTelemetry names, without _total or unit suffixes", () => {
    const names = honeycombNames();
    const exported = new Set(promNames(sent.honeycomb));
    // Every instrument under its own name, and the connector's two metrics.
    for (const name of exported) expect(names, name).toContain(name);
    expect([...names].filter((n) => !exported.has(n)).sort()).toEqual([
      "traces.span.metrics.calls",
      "traces.span.metrics.duration",
    ]);
    expect([...names].filter((n) => /_total$|_bucket$|_count$|_sum$/.test(n))).toEqual([]);
    expect(names).toContain("selfheal_tool_calls");
    expect(names).toContain("selfheal_tool_call_duration_seconds");
    expect(names).toContain("gen_ai.client.token.usage");
    expect(names).toContain("gen_ai.client.operation.duration");
  });
});
