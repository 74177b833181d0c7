/**
 * End to end through the real Collector (collector/local.yaml) into a real Prometheus 3 and a
 * trace store, with the simulator as the app (collector-e2e.ts): wording-drift, provider-outage
 * and an hour of long runs, their metrics and spans exported over OTLP after every virtual minute.
 * What lands must be what the dashboards and alerts read:
 * - every metric under its Prometheus name (`_total` on counters, `_bucket`/`_sum`/`_count` on
 *   histograms), with `agent` labels;
 * - the span metrics under the connector's names, labelled `agent` and `tool` (the transform on
 *   the span-metrics pipeline), counting every tool-call span sent, with exemplars naming traces;
 * - every trace with an error, a diagnosis or recovery, or the watchdog at work in the trace store;
 * - the UNKNOWN-share alert's expression holds for the wording-drift agent at the end, not for
 *   provider-outage; the watchdog's give-up shows for the long runs.
 * Needs the Collector (scripts/build-collector.sh) and Prometheus 3 (scripts/build-prometheus.sh):
 * skipped with a notice without them, failed under CI=true.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contractMetrics, resolveSeriesName } from "./metric-names.js";
import { alertingRules, inlineRecordings } from "./rules.js";
import {
  pipelineAvailable,
  startCollectorPipeline,
  type CollectorPipeline,
} from "./collector-e2e.js";

const SUITE = "the Collector end to end (local.yaml -> Prometheus 3, trace store)";
const available = pipelineAvailable(SUITE);

let pipeline: CollectorPipeline | undefined;
const p = (): CollectorPipeline => {
  if (!pipeline) throw new Error("the pipeline did not start");
  return pipeline;
};
const MINUTE = 60_000;

describe.skipIf(!available)(SUITE, () => {
  beforeAll(async () => {
    pipeline = await startCollectorPipeline();
  }, 240_000);

  afterAll(async () => {
    if (pipeline) console.info(`[collector e2e] ms: ${JSON.stringify(pipeline.timings)}`);
    await pipeline?.stop();
  });

  it("stores the contract's metrics under their Prometheus names, with agent labels", async () => {
    const names = await p().prometheus.get<string[]>("/api/v1/label/__name__/values");
    const selfheal = names.filter((n) => n.startsWith("selfheal_"));
    const contract = contractMetrics();
    const unknown = selfheal
      .map((n) => resolveSeriesName(n, contract))
      .filter((r): r is { error: string } => "error" in r);
    expect(unknown).toEqual([]);
    expect(selfheal).toEqual(
      expect.arrayContaining([
        "selfheal_tool_calls_total",
        "selfheal_diagnoses_total",
        "selfheal_recoveries_total",
        "selfheal_tool_call_duration_seconds_bucket",
        "selfheal_recovery_duration_seconds_bucket",
        "selfheal_recovery_duration_seconds_count",
        "selfheal_recovery_duration_seconds_sum",
        "selfheal_health_status",
        "selfheal_circuit_state",
        "selfheal_watchdog_verdicts_total",
        "selfheal_watchdog_recoveries_total",
      ]),
    );
    // No OpenTelemetry name got through untranslated, and no counter without `_total`.
    expect(names.filter((n) => n.includes("."))).toEqual([]);
    expect(selfheal).not.toContain("selfheal_tool_calls");

    const agents = await p().prometheus.get<string[]>(
      "/api/v1/label/agent/values?match[]=selfheal_diagnoses_total",
    );
    expect(agents.sort()).toEqual(["sim-provider-outage", "sim-wording-drift"]);
    // Every push landed: a series that starts at 0 has one sample per virtual minute.
    for (const run of p().runs) {
      const [samples] = await p().prometheus.query(
        `max(count_over_time(selfheal_tasks_total{job="${run.workload.name}"}[3h]))` +
          ` or max(count_over_time(selfheal_watchdog_verdicts_total{job="${run.workload.name}"}[3h]))`,
        run.lastMs,
      );
      expect(run.pushes, run.workload.name).toBeGreaterThanOrEqual(60);
      expect(Number(samples?.value?.[1]), run.workload.name).toBe(run.pushes);
    }
  });

  it("stores the span metrics as traces_span_metrics_*, labelled agent and tool, counting every span", async () => {
    const names = await p().prometheus.get<string[]>("/api/v1/label/__name__/values");
    expect(names.filter((n) => n.startsWith("traces_")).sort()).toEqual([
      "traces_span_metrics_calls_total",
      "traces_span_metrics_duration_seconds_bucket",
      "traces_span_metrics_duration_seconds_count",
      "traces_span_metrics_duration_seconds_sum",
    ]);
    const labels = await p().prometheus.get<string[]>(
      "/api/v1/labels?match[]=traces_span_metrics_calls_total",
    );
    expect(labels).toEqual(expect.arrayContaining(["agent", "tool", "span_name", "status_code"]));
    // Renamed, not copied (gen_ai.provider.name stays a dimension of its own); the GenAI names of
    // the call span are no dimension (the children carry selfheal's names only).
    for (const label of [
      "selfheal_agent_name",
      "selfheal_tool_name",
      "gen_ai_agent_name",
      "gen_ai_tool_name",
    ])
      expect(labels).not.toContain(label);
    const now = Date.now();
    const byAgentTool = await p().prometheus.query(
      'sum by (agent, tool) (traces_span_metrics_calls_total{span_name="agent.tool_call"})',
      now,
    );
    const scenarioAgents = ["sim-provider-outage", "sim-wording-drift"];
    expect([...new Set(byAgentTool.map((s) => s.metric.agent))].sort()).toEqual(scenarioAgents);
    expect([...new Set(byAgentTool.map((s) => s.metric.tool))].sort()).toEqual([
      "charge",
      "complete",
    ]);
    // Every tool-call span sent is counted once (collector-e2e.ts waited for the counts).
    for (const run of p().runs)
      for (const [agent, count] of run.toolCallSpans) {
        const [sum] = await p().prometheus.query(
          `sum(traces_span_metrics_calls_total{agent="${agent}", span_name="agent.tool_call"})`,
          now,
        );
        expect(Number(sum?.value?.[1]), agent).toBe(count);
      }
    // At nowMs a dashboard's rate sees them, and the last pushes of selfheal's own metrics too.
    for (const expr of [
      'sum by (agent) (rate(traces_span_metrics_calls_total{span_name="agent.tool_call"}[4m]))',
      "sum by (agent) (rate(selfheal_tool_calls_total[4m]))",
    ]) {
      const rates = await p().prometheus.query(expr, p().nowMs);
      expect(rates.map((s) => s.metric.agent).sort(), expr).toEqual(scenarioAgents);
    }
    // The histogram's buckets filter on the dashboard's variables too.
    const buckets = await p().prometheus.query(
      'sum by (le) (traces_span_metrics_duration_seconds_bucket{agent="sim-wording-drift", tool="complete"})',
      now,
    );
    expect(buckets.length).toBeGreaterThan(10);
  });

  it("keeps exemplars on the span metrics that name traces the app sent", async () => {
    const sent = new Set(p().runs.flatMap((r) => [...r.traceIds]));
    const found = await p().prometheus.exemplars(
      'traces_span_metrics_duration_seconds_bucket{span_name="agent.tool_call"}',
      p().startMs - MINUTE,
      Date.now() + MINUTE,
    );
    const traceIds = found.flatMap((s) => s.exemplars.map((e) => e.labels.trace_id ?? ""));
    expect(traceIds.length, p().prometheus.log()).toBeGreaterThan(0);
    for (const id of traceIds) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(traceIds.some((id) => sent.has(id))).toBe(true);
  });

  it("keeps every trace with an error, a diagnosis or recovery, or the watchdog at work", () => {
    const stored = p().traces();
    const byService = (service: string) =>
      stored.filter((s) => s.resource["service.name"] === service);
    for (const name of ["sim-wording-drift", "sim-provider-outage"]) {
      const spans = byService(name);
      expect(
        spans.some((s) => s.statusCode === 2),
        name,
      ).toBe(true);
      expect(new Set(spans.map((s) => s.name)), name).toEqual(
        new Set(["agent.tool_call", "agent.tool_call.error", "agent.diagnosis", "agent.recovery"]),
      );
    }
    const drift = byService("sim-wording-drift").filter((s) => s.name === "agent.diagnosis");
    expect(new Set(drift.map((s) => s.attributes["selfheal.diagnosis.pattern"]))).toContain(
      "UNKNOWN",
    );
    const watchdog = byService("sim-long-runs");
    const verdicts = watchdog
      .filter((s) => s.name === "agent.watchdog.verdict")
      .map((s) => s.attributes["selfheal.watchdog.verdict"]);
    expect(verdicts.filter((v) => v !== "healthy").length).toBeGreaterThan(0);
    expect(watchdog.some((s) => s.name === "agent.watchdog.recovery")).toBe(true);
    // Every one of them, whole: collector-e2e.ts waited for each trace id; check the count.
    const storedIds = new Set(stored.map((s) => s.traceId));
    for (const run of p().runs)
      expect(
        [...run.mustKeep].filter((id) => !storedIds.has(id)),
        run.workload.name,
      ).toEqual([]);
  });

  it("holds the UNKNOWN-share alert's expression for wording-drift at the end, not for provider-outage", async () => {
    const drift = alertingRules().find((a) => a.alert === "SelfhealUnknownDiagnosesHigh");
    const expr = inlineRecordings(drift?.expr ?? "");
    const atEnd = await p().prometheus.query(expr, p().endMs);
    expect(atEnd.map((s) => s.metric.agent)).toEqual(["sim-wording-drift"]);
    // It held through its `for` (15 min) before the end: Prometheus would be firing it.
    const last = await p().prometheus.queryRange(expr, p().endMs - 15 * MINUTE, p().endMs, 60);
    expect(last.find((s) => s.metric.agent === "sim-wording-drift")?.values).toHaveLength(16);
    const whole = await p().prometheus.queryRange(expr, p().startMs, p().endMs, 60);
    expect(whole.filter((s) => s.metric.agent === "sim-provider-outage")).toEqual([]);
  });

  it("shows the watchdog's verdicts and the run it gave up on", async () => {
    const run = p().runs.find((r) => r.workload.name === "sim-long-runs");
    if (!run) throw new Error("no long runs");
    const [gaveUp] = await p().prometheus.query(
      'sum(increase(selfheal_watchdog_recoveries_total{agent="sim-long-runs", outcome="gave_up"}[1h]))',
      run.lastMs,
    );
    expect(Number(gaveUp?.value?.[1])).toBeGreaterThan(0);
    const states = await p().prometheus.query(
      'sum by (state) (selfheal_watchdog_verdicts_total{agent="sim-long-runs"}) > 0',
      run.lastMs,
    );
    expect(states.map((s) => s.metric.state)).toEqual(
      expect.arrayContaining(["healthy", "stalled"]),
    );
  });
});
