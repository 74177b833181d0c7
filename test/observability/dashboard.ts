/**
 * The selfheal overview dashboard (Grafana classic JSON model), built from the panel list below
 * and written to dashboards/selfheal-overview.json by `npx tsx test/observability/generate.ts`;
 * dashboard.test.ts fails when the file and this list disagree.
 *
 * Every query reads the raw metrics (never a recording rule), so the dashboard works against any
 * Prometheus that has the metrics, and the end-to-end test can run every query on backfilled data.
 */

export const DASHBOARD_UID = "selfheal-overview";
export const DATASOURCE_UID = "selfheal-prometheus";

type Unit = string;
interface Target {
  expr: string;
  legend: string;
}
interface Threshold {
  value: number;
  color: string;
}
interface PanelSpec {
  title: string;
  description: string;
  type: "timeseries" | "state-timeline" | "heatmap";
  unit: Unit;
  targets: Target[];
  /** Threshold lines (timeseries) above `base` (default green: red when low is bad). */
  thresholds?: Threshold[];
  base?: string;
  /** Value -> text and colour, for gauges that encode states. */
  states?: { value: number; text: string; color: string }[];
  stacked?: boolean;
  min?: number;
  max?: number;
  width?: number;
}
interface RowSpec {
  row: string;
  panels: PanelSpec[];
}

const A = 'agent=~"$agent"';
const AT = 'agent=~"$agent",tool=~"$tool"';
const R = "$__rate_interval";
const rate = (selector: string) => `rate(${selector}[${R}])`;

/** Auto-recovery: recovered / all recoveries; 0 (not absent) while none recovered. */
const recoveries = `selfheal_recovery_duration_seconds_count{${AT}}`;
const recovered = `selfheal_recovery_duration_seconds_count{${AT},outcome="recovered"}`;
const mttrBuckets = `selfheal_recovery_duration_seconds_bucket{${AT},outcome="recovered"}`;

const ROWS: RowSpec[] = [
  {
    row: "Health",
    panels: [
      {
        title: "Health status per agent",
        description:
          "selfheal_health_status: the worst of the agent's health signals (success rate, P95 latency, empty responses, task completion). Critical refuses the agent's write tools.",
        type: "state-timeline",
        unit: "none",
        targets: [{ expr: `max by (agent) (selfheal_health_status{${A}})`, legend: "{{agent}}" }],
        states: [
          { value: 0, text: "healthy", color: "green" },
          { value: 1, text: "warning", color: "yellow" },
          { value: 2, text: "critical", color: "red" },
        ],
        min: 0,
        max: 2,
      },
      {
        title: "Read-only periods",
        description:
          "selfheal_read_only: 1 while the agent's write tools are refused, because the agent is critical or because a degrade_to_readonly step made it read-only until health recovers.",
        type: "state-timeline",
        unit: "none",
        targets: [
          {
            expr: `max by (agent) (selfheal_read_only{${A}})`,
            legend: "{{agent}}",
          },
        ],
        states: [
          { value: 0, text: "writes allowed", color: "green" },
          { value: 1, text: "read-only", color: "red" },
        ],
        min: 0,
        max: 1,
      },
      {
        title: "Shared store away (workers on local memory)",
        description:
          "selfheal_store_degraded: 1 while a worker's shared signal store (Redis, selfheal/redis) is away and the worker reads its own memory: health, breakers, the ledger and alert throttles are per process until Redis is back. Always 0 with the in-memory store.",
        type: "state-timeline",
        unit: "none",
        targets: [
          {
            expr: `max by (agent) (selfheal_store_degraded{${A}})`,
            legend: "{{agent}}",
          },
        ],
        states: [
          { value: 0, text: "shared", color: "green" },
          { value: 1, text: "local only", color: "orange" },
        ],
        min: 0,
        max: 1,
      },
      {
        title: "Tool-call success rate",
        description:
          "Calls that got an answer (outcome success or recovered) over calls made (blocked calls left out: they never ran). Health's success-rate signal warns under 80% and is critical under 50% (over its own 10 min window).",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `sum by (agent, tool) (${rate(`selfheal_tool_calls_total{${AT},outcome=~"success|recovered"}`)}) / sum by (agent, tool) (${rate(`selfheal_tool_calls_total{${AT},outcome!="blocked"}`)})`,
            legend: "{{agent}} {{tool}}",
          },
        ],
        base: "red",
        thresholds: [
          { value: 0.5, color: "yellow" },
          { value: 0.8, color: "green" },
        ],
        min: 0,
        max: 1,
      },
      {
        title: "P95 tool-call latency",
        description:
          "95th percentile of selfheal_tool_call_duration_seconds (each logical call, recovery included), from the histogram buckets.",
        type: "timeseries",
        unit: "s",
        targets: [
          {
            expr: `histogram_quantile(0.95, sum by (agent, tool, le) (${rate(`selfheal_tool_call_duration_seconds_bucket{${AT}}`)}))`,
            legend: "{{agent}} {{tool}}",
          },
        ],
        min: 0,
      },
      {
        title: "Empty-response rate",
        description:
          "Share of LLM responses that were empty (selfheal_llm_responses, empty=true), per provider. Health warns over 5% and is critical over 20% (over the last 100 LLM calls).",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `sum by (agent, provider) (${rate(`selfheal_llm_responses_total{${A},empty="true"}`)}) / sum by (agent, provider) (${rate(`selfheal_llm_responses_total{${A}}`)})`,
            legend: "{{agent}} {{provider}}",
          },
        ],
        thresholds: [
          { value: 0.05, color: "yellow" },
          { value: 0.2, color: "red" },
        ],
        min: 0,
        max: 1,
      },
      {
        title: "Task completion",
        description:
          "Share of agent tasks (sh.task) that completed. Health is critical under 70% (over 1 h). Empty for agents that do not use sh.task.",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `sum by (agent) (${rate(`selfheal_tasks_total{${A},outcome="completed"}`)}) / sum by (agent) (${rate(`selfheal_tasks_total{${A}}`)})`,
            legend: "{{agent}}",
          },
        ],
        base: "red",
        thresholds: [{ value: 0.7, color: "green" }],
        min: 0,
        max: 1,
      },
    ],
  },
  {
    row: "Incidents and diagnosis",
    panels: [
      {
        title: "Incidents per hour by tool",
        description:
          "Failed tool calls (the first failure of a call, not its recovery attempts), per hour, by tool: selfheal_incidents.",
        type: "timeseries",
        unit: "suffix:/h",
        targets: [
          {
            expr: `sum by (tool) (${rate(`selfheal_incidents_total{${AT}}`)}) * 3600`,
            legend: "{{tool}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Diagnoses by pattern",
        description:
          "Diagnoses per minute by pattern (RATE_LIMIT, TIMEOUT, ..., UNKNOWN): every failed attempt, recovery attempts included.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (pattern) (${rate(`selfheal_diagnoses_total{${A}}`)}) * 60`,
            legend: "{{pattern}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "UNKNOWN share of diagnoses",
        description:
          "Share of diagnoses no rule recognised. The line is the alert's 5% (SelfhealUnknownDiagnosesHigh, over 1 h with at least 20 diagnoses): error wording has drifted, add a rule.",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `sum by (agent) (${rate(`selfheal_diagnoses_total{${A},pattern="UNKNOWN"}`)}) / sum by (agent) (${rate(`selfheal_diagnoses_total{${A}}`)})`,
            legend: "{{agent}}",
          },
        ],
        thresholds: [{ value: 0.05, color: "red" }],
        min: 0,
        max: 1,
        width: 24,
      },
    ],
  },
  {
    row: "Recovery",
    panels: [
      {
        title: "Recovery strategies invoked",
        description:
          "Recovery steps and attempts that ran, per minute, by strategy (selfheal_recoveries, skipped steps left out).",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (strategy) (${rate(`selfheal_recoveries_total{${AT},outcome!="skipped"}`)}) * 60`,
            legend: "{{strategy}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Recovery outcomes",
        description:
          "Whole recoveries per minute by how they ended: recovered, failed, escalated (a person was alerted) or budget_exhausted (the task's recovery budget ran out).",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (outcome) (${rate(recoveries)}) * 60`,
            legend: "{{outcome}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Auto-recovery rate",
        description:
          "Share of recoveries that ended recovered, the SLI of the 90% auto-recovery SLO (the line). The burn-rate alerts read the same ratio over 5 min to 6 h windows.",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `(sum by (agent) (${rate(recovered)}) or 0 * sum by (agent) (${rate(recoveries)})) / sum by (agent) (${rate(recoveries)})`,
            legend: "{{agent}}",
          },
        ],
        base: "red",
        thresholds: [{ value: 0.9, color: "green" }],
        min: 0,
        max: 1,
      },
      {
        title: "MTTR distribution",
        description:
          "Time from a call's first error to its recovered answer (selfheal_recovery_duration_seconds, outcome recovered), recoveries per bucket.",
        type: "heatmap",
        unit: "s",
        targets: [{ expr: `sum by (le) (increase(${mttrBuckets}[${R}]))`, legend: "{{le}}" }],
      },
      {
        title: "MTTR percentiles",
        description:
          "P50, P95 and P99 of the time from a call's first error to its recovered answer.",
        type: "timeseries",
        unit: "s",
        targets: [0.5, 0.95, 0.99].map((q) => ({
          expr: `histogram_quantile(${q}, sum by (le) (${rate(mttrBuckets)}))`,
          legend: `p${Math.round(q * 100)}`,
        })),
        min: 0,
        width: 24,
      },
    ],
  },
  {
    row: "Cost",
    panels: [
      {
        title: "Recovery cost per incident",
        description:
          "Spend of recovery attempts (selfheal_recovery_cost_usd) over incidents, by tool: what one failure costs to recover.",
        type: "timeseries",
        unit: "currencyUSD",
        targets: [
          {
            expr: `sum by (tool) (${rate(`selfheal_recovery_cost_usd_total{${AT}}`)}) / sum by (tool) (${rate(`selfheal_incidents_total{${AT}}`)})`,
            legend: "{{tool}}",
          },
        ],
        min: 0,
      },
      {
        title: "Wasted retries",
        description:
          "Recovery attempts per hour that could not help: those of calls left without a real answer (selfheal_wasted_retries).",
        type: "timeseries",
        unit: "suffix:/h",
        targets: [
          {
            expr: `sum by (tool) (${rate(`selfheal_wasted_retries_total{${AT}}`)}) * 3600`,
            legend: "{{tool}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Failover cost differential per hour",
        description:
          "Extra spend per hour of failover attempts over the primary's price, USD (selfheal_failover_cost_differential_usd), by route.",
        type: "timeseries",
        unit: "currencyUSD",
        targets: [
          {
            expr: `sum by (from, to) (${rate(`selfheal_failover_cost_differential_usd_total{${A}}`)}) * 3600`,
            legend: "{{from}} -> {{to}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Escalations per hour",
        description:
          "Alerts to people per hour by channel; suppressed=true were throttled. The line is the SelfhealEscalationsHigh threshold (10 in an hour).",
        type: "timeseries",
        unit: "suffix:/h",
        targets: [
          {
            expr: `sum by (channel, suppressed) (${rate(`selfheal_escalations_total{${A}}`)}) * 3600`,
            legend: "{{channel}} suppressed={{suppressed}}",
          },
        ],
        thresholds: [{ value: 10, color: "red" }],
        stacked: true,
        min: 0,
      },
    ],
  },
  {
    row: "Breakers and read-only mode",
    panels: [
      {
        title: "Breaker states",
        description:
          "selfheal_circuit_state per dependency. Half-open is the moment of a probe; a breaker that is not closed for over 5 min (its longest open period) fires SelfhealCircuitOpenTooLong.",
        type: "state-timeline",
        unit: "none",
        targets: [
          {
            expr: `max by (agent, dependency) (selfheal_circuit_state{${A}})`,
            legend: "{{agent}} {{dependency}}",
          },
        ],
        states: [
          { value: 0, text: "closed", color: "green" },
          { value: 1, text: "half-open", color: "yellow" },
          { value: 2, text: "open", color: "red" },
        ],
        min: 0,
        max: 2,
      },
      {
        title: "Writes refused",
        description:
          "Calls per minute refused before they ran (outcome blocked: read-only mode), and degrade_to_readonly steps applied by recovery.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (agent, tool) (${rate(`selfheal_tool_calls_total{${AT},outcome="blocked"}`)}) * 60`,
            legend: "{{agent}} {{tool}} refused",
          },
          {
            expr: `sum by (agent, tool) (${rate(`selfheal_recoveries_total{${AT},strategy="degrade_to_readonly",outcome="applied"}`)}) * 60`,
            legend: "{{agent}} {{tool}} degrade_to_readonly",
          },
        ],
        min: 0,
      },
    ],
  },
  {
    row: "Long runs (watchdog)",
    panels: [
      {
        title: "Watchdog verdicts per hour",
        description:
          "Verdicts the watchdog entered on long runs' heartbeats, per hour (selfheal_watchdog_verdicts, counted when a run's verdict changes): stalled, session_dead, context_bloat, unreadable, and healthy again.",
        type: "timeseries",
        unit: "suffix:/h",
        targets: [
          {
            expr: `sum by (state) (${rate(`selfheal_watchdog_verdicts_total{${A}}`)}) * 3600`,
            legend: "{{state}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Watchdog tiers per hour",
        description:
          "Tiers the watchdog ran, per hour, by outcome (selfheal_watchdog_recoveries): recovered = the run's step moved within the tier's time. gave_up is a rotation refused by the restart intensity: it fires SelfhealWatchdogGaveUp.",
        type: "timeseries",
        unit: "suffix:/h",
        targets: [
          {
            expr: `sum by (tier, outcome) (${rate(`selfheal_watchdog_recoveries_total{${A}}`)}) * 3600`,
            legend: "{{tier}} {{outcome}}",
          },
        ],
        stacked: true,
        min: 0,
      },
    ],
  },
  {
    // Last, so the panels above keep their ids (links to a panel name it by id).
    row: "Streams",
    panels: [
      {
        title: "Time to first token (P50, P95)",
        description:
          "P50 and P95 of selfheal_stream_time_to_first_token_seconds: from a streamed attempt's start to its first token, per tool (sh.stream; every attempt that got a token, recovery attempts included). An attempt with no token within firstTokenMs (default 20 s) fails as STREAM_FIRST_TOKEN_TIMEOUT and is not in this histogram.",
        type: "timeseries",
        unit: "s",
        targets: [0.5, 0.95].map((q) => ({
          expr: `histogram_quantile(${q}, sum by (agent, tool, le) (${rate(`selfheal_stream_time_to_first_token_seconds_bucket{${AT}}`)}))`,
          legend: `{{agent}} {{tool}} p${Math.round(q * 100)}`,
        })),
        min: 0,
      },
      {
        title: "Stream failures by pattern",
        description:
          "Failed attempts of streamed calls per minute by pattern (selfheal_stream_failures), recovered or not: STREAM_FIRST_TOKEN_TIMEOUT (no token in time), STREAM_STALLED (silent for idleMs after a token), STREAM_TRUNCATED (cut, or a finish reason such as length), CONTENT_POLICY (a content_filter finish), and the call patterns (RATE_LIMIT, TIMEOUT, ...) of attempts that failed before their first token.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (pattern) (${rate(`selfheal_stream_failures_total{${AT}}`)}) * 60`,
            legend: "{{pattern}}",
          },
        ],
        stacked: true,
        min: 0,
      },
    ],
  },
];

const datasource = { type: "prometheus", uid: "${datasource}" };

function fieldConfig(p: PanelSpec): Record<string, unknown> {
  const steps = [{ color: p.base ?? "green", value: null }, ...(p.thresholds ?? [])];
  const defaults: Record<string, unknown> = {
    unit: p.unit,
    ...(p.min !== undefined && { min: p.min }),
    ...(p.max !== undefined && { max: p.max }),
    thresholds: { mode: "absolute", steps },
    color: { mode: p.type === "state-timeline" ? "thresholds" : "palette-classic" },
  };
  if (p.states) {
    defaults.mappings = [
      {
        type: "value",
        options: Object.fromEntries(
          p.states.map((s, index) => [String(s.value), { text: s.text, color: s.color, index }]),
        ),
      },
    ];
    defaults.thresholds = {
      mode: "absolute",
      steps: p.states.map((s, i) => ({ color: s.color, value: i === 0 ? null : s.value })),
    };
  }
  if (p.type === "timeseries") {
    defaults.custom = {
      drawStyle: "line",
      lineWidth: 1,
      fillOpacity: p.stacked ? 40 : 10,
      showPoints: "never",
      spanNulls: false,
      stacking: { mode: p.stacked ? "normal" : "none", group: "A" },
      thresholdsStyle: { mode: p.thresholds ? "line" : "off" },
    };
  }
  if (p.type === "state-timeline") defaults.custom = { fillOpacity: 80, lineWidth: 0 };
  if (p.type === "heatmap") defaults.custom = { scaleDistribution: { type: "linear" } };
  return { defaults, overrides: [] };
}

function options(p: PanelSpec): Record<string, unknown> {
  const legend = { displayMode: "list", placement: "bottom", showLegend: true };
  switch (p.type) {
    case "timeseries":
      return { legend, tooltip: { mode: "multi", sort: "desc" } };
    case "state-timeline":
      return {
        legend,
        tooltip: { mode: "single", sort: "none" },
        mergeValues: true,
        showValue: "auto",
        alignValue: "left",
        rowHeight: 0.9,
      };
    case "heatmap":
      return {
        calculate: false,
        cellGap: 1,
        color: { mode: "scheme", scheme: "Oranges", scale: "exponential", exponent: 0.5 },
        yAxis: { axisPlacement: "left", unit: p.unit },
        rowsFrame: { layout: "auto" },
        tooltip: { mode: "single", yHistogram: true },
        legend: { show: true },
        cellValues: { unit: "short" },
      };
  }
}

/** The dashboard model, as Grafana's JSON export would write it. */
export function buildDashboard(): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of ROWS) {
    panels.push({
      id: id++,
      type: "row",
      title: row.row,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
      panels: [],
    });
    y += 1;
    let x = 0;
    for (const p of row.panels) {
      const w = p.width ?? 12;
      if (x + w > 24) {
        x = 0;
        y += 8;
      }
      panels.push({
        id: id++,
        type: p.type,
        title: p.title,
        description: p.description,
        datasource,
        gridPos: { h: 8, w, x, y },
        fieldConfig: fieldConfig(p),
        options: options(p),
        targets: p.targets.map((t, i) => ({
          refId: String.fromCharCode(65 + i),
          datasource,
          editorMode: "code",
          expr: t.expr,
          legendFormat: t.legend,
          range: true,
          ...(p.type === "heatmap" && { format: "heatmap" }),
        })),
      });
      x += w;
    }
    y += 8;
  }

  const queryVariable = (name: string, label: string, query: string) => ({
    name,
    label,
    type: "query",
    datasource,
    definition: query,
    query: { query, refId: "PrometheusVariableQueryEditor-VariableQuery", qryType: 1 },
    includeAll: true,
    multi: true,
    allValue: ".*",
    current: { selected: true, text: ["All"], value: ["$__all"] },
    options: [],
    refresh: 2,
    regex: "",
    sort: 1,
    hide: 0,
    skipUrlSync: false,
  });

  return {
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: "grafana", uid: "-- Grafana --" },
          enable: true,
          hide: true,
          iconColor: "rgba(0, 211, 255, 1)",
          name: "Annotations & Alerts",
          type: "dashboard",
        },
      ],
    },
    description:
      "selfheal: agent health, diagnosis, recovery, cost and breakers, from the selfheal_* metrics.",
    editable: true,
    fiscalYearStartMonth: 0,
    graphTooltip: 1,
    links: [],
    panels,
    refresh: "30s",
    schemaVersion: 39,
    tags: ["selfheal"],
    templating: {
      list: [
        {
          name: "datasource",
          label: "Data source",
          type: "datasource",
          query: "prometheus",
          current: {},
          hide: 0,
          includeAll: false,
          multi: false,
          options: [],
          refresh: 1,
          regex: "",
          skipUrlSync: false,
        },
        queryVariable("agent", "Agent", "label_values(selfheal_tool_calls_total, agent)"),
        queryVariable(
          "tool",
          "Tool",
          'label_values(selfheal_tool_calls_total{agent=~"$agent"}, tool)',
        ),
      ],
    },
    time: { from: "now-6h", to: "now" },
    timepicker: {},
    timezone: "browser",
    title: "selfheal overview",
    uid: DASHBOARD_UID,
    version: 1,
    weekStart: "",
  };
}
