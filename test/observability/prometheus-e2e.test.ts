/**
 * End to end on a real Prometheus: the simulator plays scenarios on virtual time against selfheal
 * with a real SDK MeterProvider and TracerProvider; its metrics, collected after every virtual
 * minute, are written as OpenMetrics with the virtual timestamps (by the Prometheus exporter's
 * serializer), with the Collector's span metrics made from its spans the way the span_metrics
 * connector makes them (span-metrics.ts) and, where a run's calls report no tokens, stand-in token
 * usage and model cost from its calls (model-usage.ts); all is loaded with `promtool tsdb
 * create-blocks-from openmetrics` and served by `prometheus` on 127.0.0.1 with alerts/*.rules.yml.
 * Then, through its HTTP API: every dashboard query returns data when run as Grafana runs it (its
 * `$__interval`, `$__rate_interval` and step for the panel's width, from the provisioned data
 * source's timeInterval, at the dashboard's default 6 h range and at 1 h; grafana-interval.ts),
 * the alert expressions hold where their scenario says and nowhere else, and every rule
 * evaluates. The stream metrics come from an hour of `sh.stream` calls (stream-workload.ts), added
 * the same way. Samples land at second 23 of each minute, as pushes land at any second, never on a
 * Grafana step. The virtual hours take a few seconds.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import { LONG_RUNS, runLongRuns } from "../../src/sim/long-runs.js";
import { PATTERNS, STREAM_PATTERNS } from "../../src/telemetry/conventions.js";
import { buildDashboard } from "./dashboard.js";
import {
  alignToStep,
  DEFAULT_GRID_PX,
  grafanaQueryIntervals,
  panelWidthPx,
  substituteIntervals,
  type GrafanaQueryIntervals,
} from "./grafana-interval.js";
import { provisionedTimeInterval } from "./grafana-provisioning.js";
import { contractMetrics, resolveSeriesName } from "./metric-names.js";
import { UsageBackfill } from "./model-usage.js";
import { collectingMeterProvider, OpenMetricsWriter } from "./openmetrics.js";
import {
  recordingTracerProvider,
  SpanMetricsConnector,
  spanMetricNames,
  spanMetricsConfig,
} from "./span-metrics.js";
import { runStreamWorkload, STREAM_WORKLOAD } from "./stream-workload.js";
import {
  haveBinaries,
  PROMTOOL,
  startPrometheus,
  type RunningPrometheus,
  type Sample,
} from "./prometheus.js";
import { alertingRules, allGroups, inlineRecordings, isAlert, ruleFiles } from "./rules.js";

const run = promisify(execFile);
const available = haveBinaries("Prometheus end-to-end (dashboards, alerts)", { prometheus: true });

const SCENARIO_NAMES = ["wording-drift", "provider-outage", "bad-request-storm"] as const;
const LONG_RUNS_HOUR = { ...LONG_RUNS, durationMs: 60 * 60_000, stepMs: 10_000 };
const agentOf = (scenario: string) => `sim-${scenario}`;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Where in each minute the samples land: pushes come at any second, rarely on a query step. */
const PHASE_MS = 23_000;
/** The dashboard's default range (its `time`) and a shorter one. */
const RANGES: [string, number][] = [
  ["6 h", 6 * HOUR],
  ["1 h", HOUR],
];
const SPAN_METRICS = spanMetricsConfig();

let dir: string;
let prometheus: RunningPrometheus;
let stopPrometheus: (() => Promise<void>) | undefined;
/** The virtual runs' first and last sample, Unix ms (the scenarios play side by side). */
let startMs = 0;
let endMs = 0;
const timings: Record<string, number> = {};
/** Per scenario, the token usage and cost metrics selfheal itself recorded. */
const usageSources: Record<string, string> = {};
/** Label sets of every span-metrics series written. */
const spanSeries: Record<string, string>[] = [];

beforeAll(async () => {
  if (!available) return;
  const t0 = Date.now();
  dir = await mkdtemp(join(tmpdir(), "selfheal-prometheus-"));
  // Whole hours, in the past (a block may not reach into Prometheus's head), within retention.
  const base = Math.floor(Date.now() / (60 * MINUTE)) * 60 * MINUTE - 3 * 60 * MINUTE;
  const stamp = (virtualMs: number) => base + PHASE_MS + virtualMs;
  const out = new OpenMetricsWriter();
  for (const name of SCENARIO_NAMES) {
    const scenario = SCENARIOS[name];
    if (!scenario) throw new Error(`no scenario ${name}`);
    // One provider per run: each run's cumulative series end with it, and time starts over.
    const { meterProvider, collect } = collectingMeterProvider();
    const traces = recordingTracerProvider(agentOf(name));
    const spanMetrics = new SpanMetricsConnector(SPAN_METRICS);
    const usage = new UsageBackfill(agentOf(name), new Set(scenario.llm.map((d) => d.name)));
    await runScenario(scenario, {
      telemetry: { meterProvider, tracerProvider: traces.tracerProvider },
      onCall: usage.onCall,
      onMinute: async (virtualMs) => {
        const at = stamp(virtualMs);
        const collected = await collect();
        out.add(collected, at);
        await usage.minute(collected, at);
        spanMetrics.consume(traces.take(), at);
        spanMetrics.flush(out, at);
        endMs = Math.max(endMs, at);
      },
    });
    for (const { rm, atMs } of usage.collections()) out.add(rm, atMs);
    // Which token and cost series are the run's own (the rest are stand-ins from its calls).
    usageSources[name] = [...usage.real].sort().join(", ") || "none";
    spanSeries.push(...spanMetrics.labelSets());
    await Promise.all([
      meterProvider.shutdown(),
      usage.shutdown(),
      traces.tracerProvider.shutdown(),
    ]);
  }
  {
    // A night of long runs in an hour: the watchdog's verdicts and tiers, a run given up on.
    const { meterProvider, collect } = collectingMeterProvider();
    await runLongRuns(LONG_RUNS_HOUR, {
      telemetry: { meterProvider },
      onMinute: async (virtualMs) => {
        out.add(await collect(), stamp(virtualMs));
      },
    });
    await meterProvider.shutdown();
  }
  {
    // Streamed calls: time to first token, and stream failures of each STREAM_* pattern.
    const { meterProvider, collect } = collectingMeterProvider();
    await runStreamWorkload({
      meterProvider,
      onMinute: async (virtualMs) => {
        out.add(await collect(), stamp(virtualMs));
      },
    });
    await meterProvider.shutdown();
  }
  startMs = stamp(MINUTE);
  timings.simulate = Date.now() - t0;

  const t1 = Date.now();
  await writeFile(join(dir, "metrics.om"), out.text());
  await run(PROMTOOL ?? "promtool", [
    "tsdb",
    "create-blocks-from",
    "openmetrics",
    join(dir, "metrics.om"),
    join(dir, "data"),
  ]);
  timings.backfill = Date.now() - t1;

  const t2 = Date.now();
  const rules = ruleFiles()
    .map((f) => `  - ${JSON.stringify(f)}\n`)
    .join("");
  await writeFile(
    join(dir, "prometheus.yml"),
    `global:\n  evaluation_interval: 1s\nrule_files:\n${rules}`,
  );
  prometheus = await startPrometheus(join(dir, "prometheus.yml"), join(dir, "data"));
  stopPrometheus = prometheus.stop;
  timings.start = Date.now() - t2;
}, 240_000);

afterAll(async () => {
  await stopPrometheus?.();
  if (dir) await rm(dir, { recursive: true, force: true });
  if (available) {
    console.info(`[prometheus e2e] ms: ${JSON.stringify(timings)}`);
    console.info(`[prometheus e2e] recorded by selfheal: ${JSON.stringify(usageSources)}`);
  }
});

/** Minutes since the runs' start at which an expression returned a series with these labels. */
function minutesOf(samples: Sample[], labels: Record<string, string>): number[] {
  const series = samples.filter((s) => Object.entries(labels).every(([k, v]) => s.metric[k] === v));
  const minutes = series.flatMap((s) =>
    (s.values ?? []).map(([t]) => Math.round((t * 1000 - startMs) / MINUTE) + 1),
  );
  return [...new Set(minutes)].sort((a, b) => a - b);
}

/** The longest run of consecutive minutes. */
function longestRun(minutes: number[]): number {
  let best = 0;
  let current = 0;
  minutes.forEach((m, i) => {
    current = i > 0 && m === (minutes[i - 1] ?? 0) + 1 ? current + 1 : 1;
    best = Math.max(best, current);
  });
  return best;
}

const forMinutes = (duration: string | undefined): number => {
  const m = /^(\d+)([smh])$/.exec(duration ?? "0s");
  if (!m) throw new Error(`unexpected duration ${duration ?? ""}`);
  return (Number(m[1]) * { s: 1 / 60, m: 1, h: 60 }[m[2] as "s" | "m" | "h"]) | 0;
};

describe.skipIf(!available)("a real Prometheus on the simulator's metrics", () => {
  it("stores every metric under the name the Prometheus exporter gives it", async () => {
    // Recorded series (`level:metric:ops`) and ALERTS appear once the live rules have run: the
    // 6 h windows still reach the backfilled hours. Only the exported names are judged here.
    const all = (await prometheus.get<string[]>("/api/v1/label/__name__/values")).filter(
      (n) => !n.includes(":") && !n.startsWith("ALERTS"),
    );
    // The Collector's span metrics are judged by the next test.
    const span = spanMetricNames(SPAN_METRICS);
    const names = all.filter((n) => !n.startsWith(span.calls.replace(/calls_total$/, "")));
    const contract = contractMetrics();
    const problems: string[] = [];
    const metrics = new Set<string>();
    for (const name of names) {
      const resolved = resolveSeriesName(name, contract);
      if ("error" in resolved) problems.push(resolved.error);
      else metrics.add(resolved.metric);
    }
    expect(problems).toEqual([]);
    expect(names).toEqual(
      expect.arrayContaining([
        "selfheal_tool_calls_total",
        "selfheal_recovery_duration_seconds_bucket",
        "selfheal_recovery_duration_seconds_sum",
        "selfheal_recovery_duration_seconds_count",
        "selfheal_health_status",
        "gen_ai_client_token_usage_bucket",
        "selfheal_llm_cost_usd_total",
      ]),
    );
    // Every instrument selfheal has shows up in these runs.
    const instruments = [...contract].filter(([, kind]) => kind !== undefined).map(([m]) => m);
    expect([...metrics].sort()).toEqual(instruments.sort());
  });

  it("stores the span metrics under the Collector's names, with agent and tool on every span", async () => {
    const span = spanMetricNames(SPAN_METRICS);
    const all = await prometheus.get<string[]>("/api/v1/label/__name__/values");
    expect(all.filter((n) => n.startsWith("traces_")).sort()).toEqual(
      [span.calls, ...["bucket", "count", "sum"].map((x) => `${span.duration}_${x}`)].sort(),
    );
    const calls = spanSeries.filter((l) => l.span_name === "agent.tool_call");
    expect(calls.length).toBeGreaterThan(0);
    // The children too (selfheal.agent.name, selfheal.tool.name): a chosen agent and tool filter
    // the diagnosis and recovery panels as they filter the call panels.
    for (const l of spanSeries) {
      expect(l.agent, JSON.stringify(l)).toMatch(/^sim-/);
      expect(["complete", "charge"]).toContain(l.tool);
    }
    const names = new Set(spanSeries.map((l) => l.span_name));
    expect([...names].sort()).toEqual(
      ["agent.diagnosis", "agent.recovery", "agent.tool_call", "agent.tool_call.error"].sort(),
    );
    expect(new Set(spanSeries.map((l) => l.status_code))).toContain("STATUS_CODE_ERROR");
  });

  it("fills the dashboard's agent and tool variables", async () => {
    const agents = await prometheus.get<string[]>(
      "/api/v1/label/agent/values?match[]=selfheal_tool_calls_total",
    );
    expect(agents.sort()).toEqual([...SCENARIO_NAMES.map(agentOf), STREAM_WORKLOAD.agent].sort());
    const tools = await prometheus.get<string[]>(
      `/api/v1/label/tool/values?match[]=${encodeURIComponent('selfheal_tool_calls_total{agent=~".*"}')}`,
    );
    expect(tools.sort()).toEqual(["charge", "chat", "complete"]);
  });

  const dashboard = buildDashboard();
  const timeInterval = provisionedTimeInterval();
  const targets = (dashboard.panels ?? []).flatMap((p) =>
    "targets" in p
      ? (p.targets ?? []).map((t) => ({
          panel: p.title ?? "",
          refId: String(t.refId),
          expr: String(t.expr),
          /** maxDataPoints: the panel's width in pixels. */
          width: panelWidthPx(p.gridPos?.w ?? 24, DEFAULT_GRID_PX),
        }))
      : [],
  );
  const substitute = (expr: string, agent: string, tool: string, i: GrafanaQueryIntervals) =>
    substituteIntervals(expr.replaceAll("$agent", agent).replaceAll("$tool", tool), i);
  /**
   * A panel's query as Grafana runs it over the last `rangeMs` (now: half a push after the last
   * samples): its intervals for the panel's width, the range aligned to the step.
   */
  const runAsGrafana = (
    t: (typeof targets)[number],
    rangeMs: number,
    agent: string,
    tool: string,
  ): Promise<Sample[]> => {
    const i = grafanaQueryIntervals(rangeMs, t.width, timeInterval);
    const to = endMs + MINUTE / 2;
    return prometheus.queryRange(
      substitute(t.expr, agent, tool, i),
      alignToStep(to - rangeMs, i.stepMs),
      alignToStep(to, i.stepMs),
      i.stepMs / 1000,
    );
  };
  /** The simulator runs no sh.task, so selfheal_tasks stays at 0 and completion is 0/0. */
  const NO_VALUES_IN_SIMULATOR = new Set(["Task completion"]);
  /** Panels of long runs: an agent with tool calls only has none. */
  const WATCHDOG_PANELS = new Set(["Watchdog verdicts per hour", "Watchdog tiers per hour"]);
  /** Panels of streamed calls: a tool that does not stream has none. */
  const STREAM_PANELS = new Set(["Time to first token (P50, P95)", "Stream failures by pattern"]);
  const OTHER_KIND = new Set([...WATCHDOG_PANELS, ...STREAM_PANELS]);

  it("runs the dashboard at a $__rate_interval that holds several pushes", () => {
    // What Grafana substitutes at the dashboard's ranges, for its 12- and 24-column panels.
    const widths = [...new Set(targets.map((t) => t.width))].sort((a, b) => a - b);
    const seen = RANGES.flatMap(([, rangeMs]) =>
      widths.map((w) => grafanaQueryIntervals(rangeMs, w, timeInterval)),
    );
    console.info(
      `[prometheus e2e] timeInterval ${timeInterval ?? "(unset)"}: ` +
        RANGES.map(([name, rangeMs]) => {
          const i = grafanaQueryIntervals(rangeMs, Math.min(...widths), timeInterval);
          return `${name}: $__interval ${i.interval}, $__rate_interval ${i.rateInterval}`;
        }).join("; "),
    );
    // Pushes every 60 s: a rate needs two in its window, and a missed push must not empty it.
    for (const i of seen)
      expect(i.rateIntervalMs, JSON.stringify(i)).toBeGreaterThanOrEqual(3 * MINUTE);
  });

  describe.each(RANGES)("over the last %s, as Grafana runs each panel", (_range, rangeMs) => {
    it.each([
      ["All", ".*", ".*"],
      ["one agent and tool", agentOf("bad-request-storm"), "complete"],
    ])("answers every dashboard query with series (%s)", async (_case, agent, tool) => {
      const empty: string[] = [];
      const noValues: string[] = [];
      for (const t of targets) {
        const result = await runAsGrafana(t, rangeMs, agent, tool);
        const mayBeEmpty = agent !== ".*" && OTHER_KIND.has(t.panel);
        if (result.length === 0 && !mayBeEmpty) empty.push(`${t.panel} [${t.refId}]`);
        const finite = result.some((s) => (s.values ?? []).some(([, v]) => Number.isFinite(+v)));
        if (result.length > 0 && !finite && !NO_VALUES_IN_SIMULATOR.has(t.panel))
          noValues.push(`${t.panel} [${t.refId}]`);
      }
      expect(empty).toEqual([]);
      expect(noValues).toEqual([]);
    });

    it("answers the stream panels for the streamed tool alone", async () => {
      const stream = targets.filter((t) => STREAM_PANELS.has(t.panel));
      expect(stream).toHaveLength(3); // P50 and P95, failures
      for (const t of stream) {
        const result = await runAsGrafana(t, rangeMs, STREAM_WORKLOAD.agent, STREAM_WORKLOAD.tool);
        const values = result.flatMap((s) => (s.values ?? []).map(([, v]) => +v));
        expect(values.filter(Number.isFinite).length, `${t.panel} [${t.refId}]`).toBeGreaterThan(0);
      }
    });
  });

  it("shows the stream workload as played: its routes' first tokens, each STREAM_* spell", async () => {
    const selector = `agent="${STREAM_WORKLOAD.agent}",tool="${STREAM_WORKLOAD.tool}"`;
    const hourEnd = startMs + 60 * MINUTE;
    // The fake routes' first tokens come in 0.2 to 2.5 s, most under a second.
    const [median] = await prometheus.query(
      `histogram_quantile(0.5, sum by (le) (rate(selfheal_stream_time_to_first_token_seconds_bucket{${selector}}[1h])))`,
      hourEnd,
    );
    expect(+(median?.value?.[1] ?? NaN)).toBeGreaterThan(0.2);
    expect(+(median?.value?.[1] ?? NaN)).toBeLessThan(2.5);
    // One spell per STREAM_* pattern; every pattern's series is there from the start, at 0.
    const byPattern = await prometheus.query(
      `sum by (pattern) (increase(selfheal_stream_failures_total{${selector}}[1h]))`,
      hourEnd,
    );
    const failures = Object.fromEntries(
      byPattern.map((s) => [s.metric.pattern ?? "", +(s.value?.[1] ?? NaN)]),
    );
    expect(Object.keys(failures).sort()).toEqual([...PATTERNS].sort());
    for (const p of PATTERNS) {
      if (STREAM_PATTERNS.includes(p)) expect(failures[p], p).toBeGreaterThan(10);
      else expect(failures[p], p).toBe(0);
    }
  });

  const alerts = alertingRules();
  const drift = alerts.find((a) => a.alert === "SelfhealUnknownDiagnosesHigh");

  it("holds the UNKNOWN-share alert after wording-drift, not after provider-outage", async () => {
    const expr = inlineRecordings(drift?.expr ?? "");
    const atEnd = await prometheus.query(expr, endMs);
    expect(atEnd.map((s) => s.metric.agent)).toEqual([agentOf("wording-drift")]);
    // It has held for its whole `for` (15 min) before the end: Prometheus would be firing it.
    const lastFor = await prometheus.queryRange(expr, endMs - 15 * MINUTE, endMs, 60);
    expect(minutesOf(lastFor, { agent: agentOf("wording-drift") })).toHaveLength(16);
    // provider-outage's errors all have rules: the expression never holds for it.
    const whole = await prometheus.queryRange(expr, startMs, endMs, 60);
    expect(minutesOf(whole, { agent: agentOf("provider-outage") })).toEqual([]);
  });

  it("fires each alert only where its scenario says (expressions held for their `for`)", async () => {
    const fired: Record<string, string[]> = {};
    for (const alert of alerts) {
      const samples = await prometheus.queryRange(inlineRecordings(alert.expr), startMs, endMs, 60);
      for (const name of [...SCENARIO_NAMES, LONG_RUNS.name, STREAM_WORKLOAD.name]) {
        const minutes = minutesOf(samples, { agent: agentOf(name) });
        // Prometheus fires once the expression has held at every evaluation for `for`.
        if (minutes.length > 0 && longestRun(minutes) >= forMinutes(alert.for) + 1)
          (fired[name] ??= []).push(alert.alert);
      }
    }
    expect(fired).toEqual({
      // Worded errors drift to a wording no rule knows.
      "wording-drift": ["SelfhealUnknownDiagnosesHigh"],
      // The primary times out for 47 min: its breaker stays away from closed for over 5 min.
      "provider-outage": ["SelfhealCircuitOpenTooLong"],
      // A revoked key: every charge escalates for 10 min (60 escalations, 54% of recoveries).
      // The revoked key escalates every call for 10 min: at a 99.5% SLO that pages too.
      "bad-request-storm": [
        "SelfhealAutoRecoveryBurnFast",
        "SelfhealAutoRecoveryBurnSlow",
        "SelfhealEscalationsHigh",
      ],
      // One run of forty crash-loops: rotations hit the restart intensity.
      "long-runs": ["SelfhealWatchdogGaveUp"],
      // Every failed stream attempt is recovered on the backup route: no alert.
    });
  });

  it("loads every rule file and evaluates every rule without error", async () => {
    type Rules = {
      groups: { file: string; rules: { name: string; health: string; lastEvaluation: string }[] }[];
    };
    const expected = allGroups()
      .flatMap((g) => g.rules.map((r) => (isAlert(r) ? r.alert : r.record)))
      .sort();
    let rules: Rules["groups"][number]["rules"] = [];
    for (let i = 0; i < 100; i++) {
      rules = (await prometheus.get<Rules>("/api/v1/rules")).groups.flatMap((g) => g.rules);
      if (rules.length > 0 && rules.every((r) => !r.lastEvaluation.startsWith("0001-"))) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(rules.map((r) => r.name).sort()).toEqual(expected);
    expect(rules.filter((r) => r.health !== "ok")).toEqual([]);
  });
});
