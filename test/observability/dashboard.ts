/**
 * The selfheal overview dashboard (Grafana classic JSON model, schema 42), built from the panel
 * list below and written to dashboards/selfheal-overview.json by `npx tsx
 * test/observability/generate.ts`; artifacts.test.ts fails when the file and this list disagree.
 * The model is typed with `@grafana/schema` (pinned to the Grafana release docker-compose.yml
 * runs), so the compiler checks it: panels, field config, variables, and each panel's options
 * against its plugin's own option types.
 *
 * Every query reads the raw metrics (never a recording rule), so the dashboard works against any
 * Prometheus that has the metrics, and the end-to-end test can run every query on backfilled data.
 * Besides selfheal's own metrics it reads the GenAI token usage histogram and the Collector's span
 * metrics (labels `agent` and `tool` after the Collector's rename, see span-metrics.ts); latency
 * panels ask for exemplars, and series link to their traces in Tempo.
 */
import {
  DashboardCursorSync,
  FieldColorModeId,
  GraphDrawStyle,
  GraphThresholdsStyleMode,
  AxisPlacement,
  HeatmapCellLayout,
  MappingType,
  ScaleDistribution,
  SortOrder,
  StackingMode,
  ThresholdsMode,
  TooltipDisplayMode,
  VariableRefresh,
  VariableSort,
  VisibilityMode,
  type Dashboard,
  type DataSourceRef,
  type FieldConfig,
  type Panel,
  type RowPanel,
  type ValueMapping,
  type VariableModel,
  type VizLegendOptions,
} from "@grafana/schema";
// The variables' `hide` is the raw schema's enum (the package root exports a look-alike).
import { VariableHide } from "@grafana/schema/dist/esm/raw/dashboard/x/Dashboard_types.gen";
import {
  HeatmapColorMode,
  HeatmapColorScale,
  type Options as HeatmapOptions,
  type FieldConfig as HeatmapFieldConfig,
} from "@grafana/schema/dist/esm/raw/composable/heatmap/panelcfg/x/HeatmapPanelCfg_types.gen";
import type {
  Options as StateTimelineOptions,
  FieldConfig as StateTimelineFieldConfig,
} from "@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen";
import type {
  Options as TimeSeriesOptions,
  FieldConfig as TimeSeriesFieldConfig,
} from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";

export const DASHBOARD_UID = "selfheal-overview";
export const DATASOURCE_UID = "selfheal-prometheus";
/** The Tempo data source (grafana/provisioning/datasources/tempo.yml). */
export const TEMPO_UID = "selfheal-tempo";
/** Grafana's dashboard schema version of the pinned @grafana/schema (Grafana 13). */
export const SCHEMA_VERSION = 42;

type Unit = string;
interface Target {
  expr: string;
  legend: string;
}
interface Threshold {
  value: number;
  color: string;
}
/** A link from a panel's series to their traces: a TraceQL search in Explore, on Tempo. */
interface TraceLink {
  title: string;
  /** TraceQL; `${__field.labels.x}` is the clicked series' label x, `${agent:regex}` the variable. */
  query: string;
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
  /** Ask Prometheus for exemplars too (latency and duration panels): dots that open a trace. */
  exemplars?: boolean;
  /** Data links from a clicked series to its traces. */
  traces?: TraceLink[];
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

/**
 * The Collector's span metrics (spanmetricsconnector, namespace traces.span.metrics, through
 * Prometheus's OTLP receiver): `span_name`, `status_code` (STATUS_CODE_ERROR ...) and the
 * configured dimensions, with selfheal.agent.name renamed `agent` and selfheal.tool.name (else
 * gen_ai.tool.name, a tool's call span) renamed `tool`.
 */
const SPAN_CALLS = "traces_span_metrics_calls_total";
const SPAN_DURATION_BUCKETS = "traces_span_metrics_duration_seconds_bucket";
const toolSpans = `span_name="agent.tool_call",${AT}`;

/** GenAI semantic conventions' token usage histogram (gen_ai.client.token.usage, {token}). */
const TOKENS = "gen_ai_client_token_usage";
/** GenAI semantic conventions' request duration (gen_ai.client.operation.duration, s). */
const MODEL_DURATION_BUCKETS = "gen_ai_client_operation_duration_seconds_bucket";

// TraceQL of the links (names from conventions.ts): every selfheal span names its agent
// selfheal.agent.name; the tool is selfheal.tool.name on the children and a model call's span,
// gen_ai.tool.name on a tool's own call span (the GenAI conventions' execute_tool span).
const traceql = (...conditions: string[]) => `{ ${conditions.join(" && ")} }`;
const TOOL_CALL = 'name = "agent.tool_call"';
/** A call span of tool `name` (a TraceQL string): a tool's or a model call's. */
const callOf = (name: string) =>
  `(span.gen_ai.tool.name = "${name}" || span.selfheal.tool.name = "${name}")`;
const seriesAgent = 'span.selfheal.agent.name = "${__field.labels.agent}"';
const seriesTool = callOf("${__field.labels.tool}");
const chosenAgents = 'span.selfheal.agent.name =~ "${agent:regex}"';
const chosenTools = 'span.selfheal.tool.name =~ "${tool:regex}"';
const ERROR = "status = error";
const callTraces: TraceLink = {
  title: "Traces of ${__field.labels.agent} ${__field.labels.tool}",
  query: traceql(TOOL_CALL, seriesAgent, seriesTool),
};
const failedCallTraces: TraceLink = {
  title: "Failed calls of ${__field.labels.agent} ${__field.labels.tool}",
  query: traceql(TOOL_CALL, seriesAgent, seriesTool, ERROR),
};
/** A series' label as a data link interpolates it: `${__field.labels.<name>}`. */
const label = (name: string) => "${__field.labels." + name + "}";
/** Diagnosis spans of the clicked series' pattern, of the agents and tools chosen above. */
const diagnosisTraces = (patternLabel: string): TraceLink => ({
  title: `Diagnoses ${label(patternLabel)}`,
  query: traceql(
    'name = "agent.diagnosis"',
    `span.selfheal.diagnosis.pattern = "${label(patternLabel)}"`,
    chosenAgents,
    chosenTools,
  ),
});
/** Recovery spans of the clicked series' strategy, of the agents and tools chosen above. */
const recoveryTraces = (strategyLabel: string): TraceLink => ({
  title: `Recoveries by ${label(strategyLabel)}`,
  query: traceql(
    'name = "agent.recovery"',
    `span.selfheal.recovery.strategy = "${label(strategyLabel)}"`,
    chosenAgents,
    chosenTools,
  ),
});
/**
 * Incidents of the clicked series' tool, of the agents chosen above: its calls whose first attempt
 * failed (a call span with an error span right under it), recovered or not.
 */
const incidentTraces: TraceLink = {
  title: `Incidents of ${label("tool")}`,
  query: `${traceql(TOOL_CALL, chosenAgents, callOf(label("tool")))} > ${traceql('name = "agent.tool_call.error"')}`,
};
/** Calls that went to the clicked series' provider: first attempts, and recovery attempts. */
const providerTraces = (providerLabel: string): TraceLink => ({
  title: `Calls to ${label(providerLabel)}`,
  query: traceql(
    `(span.gen_ai.provider.name = "${label(providerLabel)}" || span.selfheal.recovery.provider = "${label(providerLabel)}")`,
  ),
});

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
        traces: [failedCallTraces],
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
        exemplars: true,
        traces: [callTraces],
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
        traces: [incidentTraces],
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
        traces: [diagnosisTraces("pattern")],
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
        traces: [recoveryTraces("strategy")],
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
        exemplars: true,
      },
    ],
  },
  {
    row: "Recovery cost",
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
          "Tiers the watchdog ran, per hour, by outcome (selfheal_watchdog_recoveries): recovered = the run's step moved and it stayed healthy to the end of the tier's proof period. gave_up is a restart (a context reset's or a rotation) refused by the restart intensity: it fires SelfhealWatchdogGaveUp.",
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
        exemplars: true,
        traces: [callTraces],
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
        traces: [diagnosisTraces("pattern")],
      },
    ],
  },
  {
    row: "Traces (span metrics)",
    panels: [
      {
        title: "Tool calls per minute (from spans)",
        description:
          "agent.tool_call spans per minute by agent and tool, counted by the Collector's span_metrics connector from every span before sampling (traces_span_metrics_calls_total). The dots are exemplars: each opens one call's trace in Tempo (a healthy call's trace may have been sampled out).",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (agent, tool) (${rate(`${SPAN_CALLS}{${toolSpans}}`)}) * 60`,
            legend: "{{agent}} {{tool}}",
          },
        ],
        stacked: true,
        min: 0,
        exemplars: true,
        traces: [callTraces],
      },
      {
        title: "Tool-call error rate (from spans)",
        description:
          "Share of agent.tool_call spans with status ERROR (the call failed after recovery, or was refused), from the span metrics. The lines mirror health's success-rate thresholds (warning over 20% failing, critical over 50%). Click a series for its failed calls' traces.",
        type: "timeseries",
        unit: "percentunit",
        targets: [
          {
            expr: `(sum by (agent, tool) (${rate(`${SPAN_CALLS}{${toolSpans},status_code="STATUS_CODE_ERROR"}`)}) or 0 * sum by (agent, tool) (${rate(`${SPAN_CALLS}{${toolSpans}}`)})) / sum by (agent, tool) (${rate(`${SPAN_CALLS}{${toolSpans}}`)})`,
            legend: "{{agent}} {{tool}}",
          },
        ],
        thresholds: [
          { value: 0.2, color: "yellow" },
          { value: 0.5, color: "red" },
        ],
        min: 0,
        max: 1,
        traces: [failedCallTraces],
      },
      {
        title: "P95 tool-call duration (from spans)",
        description:
          "95th percentile of agent.tool_call span durations (traces_span_metrics_duration_seconds, the buckets of selfheal's own histogram). Exemplars open the traces of calls at that latency.",
        type: "timeseries",
        unit: "s",
        targets: [
          {
            expr: `histogram_quantile(0.95, sum by (agent, tool, le) (${rate(`${SPAN_DURATION_BUCKETS}{${toolSpans}}`)}))`,
            legend: "{{agent}} {{tool}}",
          },
        ],
        min: 0,
        exemplars: true,
        traces: [callTraces],
        width: 24,
      },
      {
        title: "Diagnosis spans per minute by pattern",
        description:
          "agent.diagnosis spans per minute by selfheal.diagnosis.pattern, from the span metrics; exemplars and the series' link open diagnosed calls' traces. Each span names its agent and tool (selfheal.agent.name, selfheal.tool.name): the filters apply.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (selfheal_diagnosis_pattern) (${rate(`${SPAN_CALLS}{span_name="agent.diagnosis",${AT}}`)}) * 60`,
            legend: "{{selfheal_diagnosis_pattern}}",
          },
        ],
        stacked: true,
        min: 0,
        exemplars: true,
        traces: [diagnosisTraces("selfheal_diagnosis_pattern")],
      },
      {
        title: "Recovery spans per minute by strategy",
        description:
          "agent.recovery spans per minute (each strategy step and each attempt) by selfheal.recovery.strategy, from the span metrics; exemplars and the series' link open recoveries' traces. Each span names its agent and tool (selfheal.agent.name, selfheal.tool.name): the filters apply.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (selfheal_recovery_strategy) (${rate(`${SPAN_CALLS}{span_name="agent.recovery",${AT}}`)}) * 60`,
            legend: "{{selfheal_recovery_strategy}}",
          },
        ],
        stacked: true,
        min: 0,
        exemplars: true,
        traces: [recoveryTraces("selfheal_recovery_strategy")],
      },
    ],
  },
  {
    row: "Tokens and cost",
    panels: [
      {
        title: "Tokens per minute by model",
        description:
          "Input and output tokens per minute by provider and model (gen_ai.client.token.usage, the OpenTelemetry GenAI conventions' histogram), as the model calls reported them, recovery attempts included.",
        type: "timeseries",
        unit: "suffix: tokens/min",
        targets: [
          {
            expr: `sum by (gen_ai_provider_name, gen_ai_request_model, gen_ai_token_type) (${rate(`${TOKENS}_sum{${AT}}`)}) * 60`,
            legend: "{{gen_ai_provider_name}} {{gen_ai_request_model}} {{gen_ai_token_type}}",
          },
        ],
        stacked: true,
        min: 0,
        traces: [providerTraces("gen_ai_provider_name")],
      },
      {
        title: "Model cost per hour by model",
        description:
          "Spend of model calls per hour, USD, by provider and model (selfheal_llm_cost_usd: reported by the call, or its provider's price), every attempt included.",
        type: "timeseries",
        unit: "currencyUSD",
        targets: [
          {
            expr: `sum by (provider, model) (${rate(`selfheal_llm_cost_usd_total{${AT}}`)}) * 3600`,
            legend: "{{provider}} {{model}}",
          },
        ],
        stacked: true,
        min: 0,
        traces: [providerTraces("provider")],
      },
      {
        title: "Model request duration (P95) by model",
        description:
          "P95 duration of one model request (each attempt, failed ones included; a stream until it completes), by provider and model: gen_ai.client.operation.duration, the OpenTelemetry GenAI conventions' histogram.",
        type: "timeseries",
        unit: "s",
        targets: [
          {
            expr: `histogram_quantile(0.95, sum by (gen_ai_provider_name, gen_ai_request_model, le) (${rate(`${MODEL_DURATION_BUCKETS}{${AT}}`)}))`,
            legend: "{{gen_ai_provider_name}} {{gen_ai_request_model}}",
          },
        ],
        min: 0,
        exemplars: true,
        traces: [providerTraces("gen_ai_provider_name")],
      },
      {
        title: "Model request errors by type",
        description:
          "Failed model requests per minute by error.type (the error's class: a rate limit, a timeout, a cut stream), from gen_ai.client.operation.duration; recovery attempts included.",
        type: "timeseries",
        unit: "suffix:/min",
        targets: [
          {
            expr: `sum by (error_type) (${rate(`gen_ai_client_operation_duration_seconds_count{${AT},error_type!=""}`)}) * 60`,
            legend: "{{error_type}}",
          },
        ],
        stacked: true,
        min: 0,
      },
      {
        title: "Tokens per model call (mean)",
        description:
          "Mean input and output tokens of one model call, by model: the token usage histogram's sum over its count. A rise in input tokens is a growing prompt or context.",
        type: "timeseries",
        unit: "short",
        targets: [
          {
            expr: `sum by (gen_ai_request_model, gen_ai_token_type) (${rate(`${TOKENS}_sum{${AT}}`)}) / sum by (gen_ai_request_model, gen_ai_token_type) (${rate(`${TOKENS}_count{${AT}}`)})`,
            legend: "{{gen_ai_request_model}} {{gen_ai_token_type}}",
          },
        ],
        min: 0,
        width: 24,
      },
    ],
  },
];

/**
 * The rows top to bottom. Panel ids follow ROWS (new rows are appended there), so a panel keeps
 * its id, and its links (`viewPanel=`), wherever its row is shown.
 */
const LAYOUT = [
  "Health",
  "Tokens and cost",
  "Incidents and diagnosis",
  "Recovery",
  "Traces (span metrics)",
  "Recovery cost",
  "Breakers and read-only mode",
  "Long runs (watchdog)",
  "Streams",
];

const datasource: DataSourceRef = { type: "prometheus", uid: "${datasource}" };

/** A Grafana data link (the data-link model of @grafana/data; field config keeps them unknown). */
interface DataLink {
  title: string;
  url: string;
  internal: {
    datasourceUid: string;
    datasourceName: string;
    query: {
      refId: string;
      queryType: "traceql";
      query: string;
      limit: number;
      tableType: "traces";
    };
  };
}

/** Opens Explore on Tempo with the link's TraceQL, over the panel's time range. */
const traceLink = (t: TraceLink): DataLink => ({
  title: t.title,
  url: "",
  internal: {
    datasourceUid: TEMPO_UID,
    datasourceName: "Tempo",
    query: { refId: "A", queryType: "traceql", query: t.query, limit: 20, tableType: "traces" },
  },
});

const HIDE_NONE = { legend: false, tooltip: false, viz: false };

function custom(p: PanelSpec): Record<string, unknown> {
  switch (p.type) {
    case "timeseries":
      return {
        drawStyle: GraphDrawStyle.Line,
        lineWidth: 1,
        fillOpacity: p.stacked ? 40 : 10,
        showPoints: VisibilityMode.Never,
        spanNulls: false,
        stacking: { mode: p.stacked ? StackingMode.Normal : StackingMode.None, group: "A" },
        thresholdsStyle: {
          mode: p.thresholds ? GraphThresholdsStyleMode.Line : GraphThresholdsStyleMode.Off,
        },
        hideFrom: HIDE_NONE,
      } satisfies TimeSeriesFieldConfig;
    case "state-timeline":
      return {
        fillOpacity: 80,
        lineWidth: 0,
        hideFrom: HIDE_NONE,
      } satisfies StateTimelineFieldConfig;
    case "heatmap":
      return {
        scaleDistribution: { type: ScaleDistribution.Linear },
        hideFrom: HIDE_NONE,
      } satisfies HeatmapFieldConfig;
  }
}

function fieldConfig(p: PanelSpec): { defaults: FieldConfig; overrides: [] } {
  const mappings: ValueMapping[] = p.states
    ? [
        {
          type: MappingType.ValueToText,
          options: Object.fromEntries(
            p.states.map((s, index) => [String(s.value), { text: s.text, color: s.color, index }]),
          ),
        },
      ]
    : [];
  const steps = p.states
    ? p.states.map((s, i) => ({ color: s.color, value: i === 0 ? null : s.value }))
    : [{ color: p.base ?? "green", value: null }, ...(p.thresholds ?? [])];
  return {
    defaults: {
      unit: p.unit,
      ...(p.min !== undefined && { min: p.min }),
      ...(p.max !== undefined && { max: p.max }),
      thresholds: { mode: ThresholdsMode.Absolute, steps },
      color: {
        mode:
          p.type === "state-timeline"
            ? FieldColorModeId.Thresholds
            : FieldColorModeId.PaletteClassic,
      },
      ...(mappings.length > 0 && { mappings }),
      ...(p.traces && { links: p.traces.map(traceLink) }),
      custom: custom(p),
    },
    overrides: [],
  };
}

const legend = {
  calcs: [],
  placement: "bottom",
  showLegend: true,
} satisfies VizLegendOptions;

function options(p: PanelSpec): Record<string, unknown> {
  switch (p.type) {
    case "timeseries":
      return {
        legend,
        tooltip: { mode: TooltipDisplayMode.Multi, sort: SortOrder.Descending },
      } satisfies TimeSeriesOptions;
    case "state-timeline":
      return {
        legend,
        tooltip: { mode: TooltipDisplayMode.Single, sort: SortOrder.None },
        mergeValues: true,
        showValue: VisibilityMode.Auto,
        alignValue: "left",
        rowHeight: 0.9,
      } satisfies StateTimelineOptions;
    case "heatmap":
      return {
        calculate: false,
        cellGap: 1,
        color: {
          mode: HeatmapColorMode.Scheme,
          scheme: "Oranges",
          scale: HeatmapColorScale.Exponential,
          exponent: 0.5,
          fill: "dark-orange",
          reverse: false,
          steps: 64,
        },
        exemplars: { color: "rgba(255,0,255,0.7)" },
        legend: { show: true },
        rowsFrame: { layout: HeatmapCellLayout.auto },
        showValue: VisibilityMode.Never,
        tooltip: { mode: TooltipDisplayMode.Single, yHistogram: true },
        yAxis: { axisPlacement: AxisPlacement.Left, unit: p.unit },
        cellValues: { unit: "short" },
      } satisfies HeatmapOptions;
  }
}

/** A panel of the spec, with its id and place. */
function panel(
  p: PanelSpec,
  id: number,
  gridPos: { h: number; w: number; x: number; y: number },
): Panel {
  return {
    id,
    type: p.type,
    title: p.title,
    description: p.description,
    datasource,
    gridPos,
    fieldConfig: fieldConfig(p),
    options: options(p),
    targets: p.targets.map((t, i) => ({
      refId: String.fromCharCode(65 + i),
      datasource,
      editorMode: "code",
      expr: t.expr,
      legendFormat: t.legend,
      range: true,
      ...(p.exemplars && { exemplar: true }),
      ...(p.type === "heatmap" && { format: "heatmap" }),
    })),
  };
}

/** A Prometheus query variable over all values (`.*` when All is chosen). */
const queryVariable = (name: string, label: string, query: string): VariableModel => ({
  name,
  label,
  type: "query",
  datasource,
  query: { query, refId: "PrometheusVariableQueryEditor-VariableQuery", qryType: 1 },
  includeAll: true,
  multi: true,
  allValue: ".*",
  current: { selected: true, text: ["All"], value: ["$__all"] },
  options: [],
  refresh: VariableRefresh.onTimeRangeChanged,
  regex: "",
  sort: VariableSort.alphabeticalAsc,
  hide: VariableHide.dontHide,
  skipUrlSync: false,
});

/** The dashboard model, as Grafana's JSON export would write it. */
export function buildDashboard(): Dashboard {
  // Ids in ROWS order, so they stay put when LAYOUT moves a row.
  const ids = new Map<PanelSpec | RowSpec, number>();
  let next = 1;
  for (const row of ROWS) {
    ids.set(row, next++);
    for (const p of row.panels) ids.set(p, next++);
  }
  const idOf = (spec: PanelSpec | RowSpec) => ids.get(spec) ?? 0;
  const rowOf = (title: string) => {
    const row = ROWS.find((r) => r.row === title);
    if (!row) throw new Error(`LAYOUT names no row of ROWS: ${title}`);
    return row;
  };
  if (LAYOUT.length !== ROWS.length) throw new Error("LAYOUT must name every row once");

  const panels: (Panel | RowPanel)[] = [];
  let y = 0;
  for (const row of LAYOUT.map(rowOf)) {
    panels.push({
      id: idOf(row),
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
      panels.push(panel(p, idOf(p), { h: 8, w, x, y }));
      x += w;
    }
    y += 8;
  }

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
      "selfheal: agent health, tokens and cost, diagnosis, recovery, traces, breakers and long runs, from the selfheal_* metrics, the GenAI token usage and the Collector's span metrics.",
    editable: true,
    fiscalYearStartMonth: 0,
    graphTooltip: DashboardCursorSync.Crosshair,
    links: [],
    panels,
    refresh: "30s",
    schemaVersion: SCHEMA_VERSION,
    tags: ["selfheal"],
    templating: {
      list: [
        {
          name: "datasource",
          label: "Data source",
          type: "datasource",
          query: "prometheus",
          // The provisioned Prometheus (grafana/provisioning/datasources/prometheus.yml).
          current: { selected: true, text: "Prometheus", value: DATASOURCE_UID },
          hide: VariableHide.dontHide,
          includeAll: false,
          multi: false,
          options: [],
          refresh: VariableRefresh.onDashboardLoad,
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
