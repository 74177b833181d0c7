/**
 * SelfHealMetrics on a real SDK MeterProvider, read back with a MetricReader's collect(): each
 * instrument's name, kind, unit, description and bucket boundaries, the series each label set
 * starts at 0, and the exact attributes and values every record function writes.
 */
import type { Attributes, Meter, MeterProvider as ApiMeterProvider } from "@opentelemetry/api";
import { createNoopMeter } from "@opentelemetry/api";
import {
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
} from "@opentelemetry/sdk-metrics";
import { afterEach, describe, expect, it } from "vitest";
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_TOKEN_TYPE,
  CALL_OUTCOMES,
  CIRCUIT_STATES,
  DURATION_BUCKETS_SECONDS,
  GEN_AI_DURATION_BUCKETS_SECONDS,
  HEALTH_STATUSES,
  INSTRUMENTATION_SCOPE,
  LABEL_AGENT,
  LABEL_CHANNEL,
  LABEL_DEPENDENCY,
  LABEL_EMPTY,
  LABEL_FROM,
  LABEL_MODEL,
  LABEL_OUTCOME,
  LABEL_PATTERN,
  LABEL_PROVIDER,
  LABEL_STRATEGY,
  LABEL_SUPPRESSED,
  LABEL_TO,
  LABEL_TOOL,
  METRIC_CIRCUIT_STATE,
  METRIC_DIAGNOSES,
  METRIC_ESCALATIONS,
  METRIC_FAILOVER_COST_DIFFERENTIAL,
  METRIC_GEN_AI_OPERATION_DURATION,
  METRIC_GEN_AI_TOKEN_USAGE,
  METRIC_HEALTH_STATUS,
  METRIC_INCIDENTS,
  METRIC_LLM_COST,
  METRIC_LLM_RESPONSES,
  METRIC_READ_ONLY,
  METRIC_RECOVERIES,
  METRIC_RECOVERY_COST,
  METRIC_RECOVERY_DURATION,
  METRIC_STORE_DEGRADED,
  METRIC_STREAM_FAILURES,
  METRIC_STREAM_FIRST_TOKEN,
  METRIC_TASKS,
  METRIC_TOOL_CALL_DURATION,
  METRIC_TOOL_CALLS,
  METRIC_WASTED_RETRIES,
  PATTERNS,
  RECOVERY_OUTCOMES,
  RECOVERY_STEP_OUTCOMES,
  STRATEGIES,
  TASK_OUTCOMES,
  TOKEN_BUCKETS,
  type HealthStatus,
  type Pattern,
} from "../../src/telemetry/conventions.js";
import { modelRequest, type ModelReport } from "../../src/telemetry/gen-ai.js";
import { SelfHealMetrics, type ModelAttempt } from "../../src/telemetry/metrics.js";

const AGENT = "agent-a";
const TOOL = "search";

/** A reader that exports nowhere: the test collects when it wants to. */
class Collector extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

type Circuit = [string, (typeof CIRCUIT_STATES)[number]];

/** A point's value: a number, or a histogram's count, sum and bucket boundaries. */
type Value = number | { count: number; sum: number; boundaries: number[] };

interface Point {
  attributes: Attributes;
  value: Value;
}

/** Attributes as a comparable key: a key holding `undefined` differs from an absent key. */
const key = (a: Attributes) =>
  JSON.stringify(
    Object.entries(a)
      .map(([k, v]) => [k, v === undefined ? "<undefined>" : v])
      .sort(([x], [y]) => String(x).localeCompare(String(y))),
  );

const providers: MeterProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.shutdown()));
});

/** SelfHealMetrics over a real MeterProvider, with the gauges' sources as mutable state. */
function setup() {
  const reader = new Collector();
  const meterProvider = new MeterProvider({ readers: [reader] });
  providers.push(meterProvider);
  const state = {
    health: undefined as HealthStatus | undefined,
    circuits: [] as Circuit[],
    readOnly: undefined as boolean | undefined,
    degraded: undefined as boolean | undefined,
  };
  const metrics = new SelfHealMetrics(
    AGENT,
    meterProvider,
    () => state.health,
    () => state.circuits,
    () => state.readOnly,
    () => state.degraded,
  );
  /** Every metric collected now, by name (cumulative). */
  const collect = async () => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const byName = new Map<string, MetricData>();
    for (const sm of resourceMetrics.scopeMetrics) {
      expect(sm.scope.name).toBe(INSTRUMENTATION_SCOPE);
      for (const m of sm.metrics) byName.set(m.descriptor.name, m);
    }
    const points = (name: string): Point[] => {
      const m = byName.get(name);
      if (!m) return [];
      if (m.dataPointType === DataPointType.HISTOGRAM) {
        return m.dataPoints.map((p) => ({
          attributes: p.attributes,
          value: {
            count: p.value.count,
            sum: p.value.sum ?? NaN,
            boundaries: p.value.buckets.boundaries,
          },
        }));
      }
      if (m.dataPointType === DataPointType.EXPONENTIAL_HISTOGRAM) throw new Error("unexpected");
      return m.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value }));
    };
    /** The value of the one point with exactly these attributes (undefined: no such point). */
    const value = (name: string, attributes: Attributes): Value | undefined => {
      const found = points(name).filter((p) => key(p.attributes) === key(attributes));
      expect(found.length).toBeLessThanOrEqual(1);
      return found[0]?.value;
    };
    /** The attribute sets of a metric's points, as keys, sorted. */
    const series = (name: string) =>
      points(name)
        .map((p) => key(p.attributes))
        .sort();
    return { byName, points, value, series };
  };
  return { metrics, state, collect };
}

const base = { [LABEL_AGENT]: AGENT, [LABEL_TOOL]: TOOL };
const keys = (sets: Attributes[]) => sets.map(key).sort();

/** Every instrument, as [name, point type, monotonic (sums), unit]. */
const INSTRUMENTS: [string, DataPointType, string][] = [
  [METRIC_TOOL_CALLS, DataPointType.SUM, ""],
  [METRIC_TOOL_CALL_DURATION, DataPointType.HISTOGRAM, "s"],
  [METRIC_LLM_RESPONSES, DataPointType.SUM, ""],
  [METRIC_TASKS, DataPointType.SUM, ""],
  [METRIC_HEALTH_STATUS, DataPointType.GAUGE, ""],
  [METRIC_READ_ONLY, DataPointType.GAUGE, ""],
  [METRIC_STORE_DEGRADED, DataPointType.GAUGE, ""],
  [METRIC_INCIDENTS, DataPointType.SUM, ""],
  [METRIC_DIAGNOSES, DataPointType.SUM, ""],
  [METRIC_RECOVERIES, DataPointType.SUM, ""],
  [METRIC_RECOVERY_DURATION, DataPointType.HISTOGRAM, "s"],
  [METRIC_RECOVERY_COST, DataPointType.SUM, ""],
  [METRIC_WASTED_RETRIES, DataPointType.SUM, ""],
  [METRIC_FAILOVER_COST_DIFFERENTIAL, DataPointType.SUM, ""],
  [METRIC_ESCALATIONS, DataPointType.SUM, ""],
  [METRIC_STREAM_FIRST_TOKEN, DataPointType.HISTOGRAM, "s"],
  [METRIC_STREAM_FAILURES, DataPointType.SUM, ""],
  [METRIC_GEN_AI_TOKEN_USAGE, DataPointType.HISTOGRAM, "{token}"],
  [METRIC_GEN_AI_OPERATION_DURATION, DataPointType.HISTOGRAM, "s"],
  [METRIC_LLM_COST, DataPointType.SUM, ""],
  [METRIC_CIRCUIT_STATE, DataPointType.GAUGE, ""],
];

/** A model request as an attempt settles it (answered, unless `errorType`). */
function attempt(
  route: string | undefined,
  report: ModelReport | undefined,
  more: Partial<ModelAttempt> = {},
): ModelAttempt {
  return {
    request: modelRequest(report, route, undefined),
    durationMs: 1_500,
    errorType: undefined,
    usage: undefined,
    usd: 0,
    route,
    ...more,
  };
}

/** Records once on every instrument, so each has a point to collect. */
function exerciseAll(s: ReturnType<typeof setup>) {
  s.state.health = "healthy";
  s.state.readOnly = false;
  s.state.degraded = false;
  s.state.circuits = [["db", "closed"]];
  const labels = s.metrics.registerTool(TOOL, "openai");
  s.metrics.registerStream(labels);
  s.metrics.toolCall(labels, "success", 10, false);
  s.metrics.task("completed");
  s.metrics.recoveryStep(labels, "retry_once", "success", 0.1);
  s.metrics.recovery(labels, "recovered", 20, 1);
  s.metrics.failoverDifferentialUsd("openai", "anthropic", 0.01);
  s.metrics.escalation("slack", false);
  s.metrics.diagnosis(labels, "TIMEOUT", true);
  s.metrics.streamFirstToken(labels, 30);
  s.metrics.modelRequest(
    labels,
    attempt(
      "openai",
      { requestModel: "gpt-4o" },
      {
        usage: { inputTokens: 5, outputTokens: 6 },
        usd: 0.2,
      },
    ),
  );
  return labels;
}

describe("SelfHealMetrics: the instruments", () => {
  it("creates every instrument of the contract under its name, kind and unit, each described", async () => {
    const s = setup();
    exerciseAll(s);
    const { byName } = await s.collect();
    expect([...byName.keys()].sort()).toEqual(INSTRUMENTS.map(([name]) => name).sort());
    const descriptions = new Set<string>();
    for (const [name, type, unit] of INSTRUMENTS) {
      const m = byName.get(name);
      expect(m?.dataPointType, name).toBe(type);
      expect(m?.descriptor.unit, name).toBe(unit);
      const description = m?.descriptor.description ?? "";
      expect(description.length, name).toBeGreaterThan(10);
      descriptions.add(description);
      if (m?.dataPointType === DataPointType.SUM) expect(m.isMonotonic, name).toBe(true);
    }
    // One description each: none is a copy of another instrument's.
    expect(descriptions.size).toBe(INSTRUMENTS.length);
  });

  it("buckets durations in seconds from 10 ms to 10 min, GenAI's and tokens as the conventions advise", async () => {
    const s = setup();
    exerciseAll(s);
    const { points } = await s.collect();
    for (const name of [
      METRIC_TOOL_CALL_DURATION,
      METRIC_RECOVERY_DURATION,
      METRIC_STREAM_FIRST_TOKEN,
    ]) {
      const all = points(name);
      expect(all.length, name).toBeGreaterThan(0);
      for (const p of all) {
        expect(p.value, name).toMatchObject({ boundaries: [...DURATION_BUCKETS_SECONDS] });
      }
    }
    const tokens = points(METRIC_GEN_AI_TOKEN_USAGE);
    expect(tokens).toHaveLength(2);
    for (const p of tokens) expect(p.value).toMatchObject({ boundaries: [...TOKEN_BUCKETS] });
    expect(TOKEN_BUCKETS).toEqual([
      1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
    ]);
    // The GenAI conventions' advice for gen_ai.client.operation.duration: 10 ms doubling to 81.92 s.
    expect(points(METRIC_GEN_AI_OPERATION_DURATION)[0]?.value).toMatchObject({
      boundaries: [
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
      ],
    });
    expect(GEN_AI_DURATION_BUCKETS_SECONDS).toHaveLength(14);
  });
});

describe("SelfHealMetrics: model requests on a noop meter", () => {
  it("records them on a MeterProvider, and knows that the API's noop meter records nothing", () => {
    expect(setup().metrics.recordsModelRequests).toBe(true);
    const noop = new SelfHealMetrics(
      AGENT,
      { getMeter: () => createNoopMeter() }, // what the API gives while no SDK is registered
      () => undefined,
      () => [],
      () => undefined,
      () => undefined,
    );
    expect(noop.recordsModelRequests).toBe(false);
  });
});

describe("SelfHealMetrics: series started at 0", () => {
  it("at construction: tasks by outcome and diagnoses by pattern, for the agent; no gauge yet", async () => {
    const s = setup();
    const { series, value, points } = await s.collect();
    expect(series(METRIC_TASKS)).toEqual(
      keys(TASK_OUTCOMES.map((o) => ({ [LABEL_AGENT]: AGENT, [LABEL_OUTCOME]: o }))),
    );
    for (const o of TASK_OUTCOMES) {
      expect(value(METRIC_TASKS, { [LABEL_AGENT]: AGENT, [LABEL_OUTCOME]: o })).toBe(0);
    }
    expect(series(METRIC_DIAGNOSES)).toEqual(
      keys(PATTERNS.map((p) => ({ [LABEL_AGENT]: AGENT, [LABEL_PATTERN]: p }))),
    );
    expect(points(METRIC_DIAGNOSES).every((p) => p.value === 0)).toBe(true);
    const silent = [
      // Sources that know nothing yet (undefined, no circuits) observe nothing.
      METRIC_HEALTH_STATUS,
      METRIC_READ_ONLY,
      METRIC_STORE_DEGRADED,
      METRIC_CIRCUIT_STATE,
      // Per-tool series wait for a tool.
      METRIC_TOOL_CALLS,
      METRIC_INCIDENTS,
      METRIC_RECOVERIES,
      METRIC_LLM_RESPONSES,
    ];
    for (const name of silent) expect(points(name), name).toEqual([]);
  });

  it("registerTool: calls by outcome, incidents by pattern, recoveries by strategy and outcome, cost and waste", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    const { series, points, value } = await s.collect();
    expect(series(METRIC_TOOL_CALLS)).toEqual(
      keys(CALL_OUTCOMES.map((o) => ({ ...base, [LABEL_OUTCOME]: o }))),
    );
    expect(series(METRIC_INCIDENTS)).toEqual(
      keys(PATTERNS.map((p) => ({ ...base, [LABEL_PATTERN]: p }))),
    );
    expect(series(METRIC_RECOVERIES)).toEqual(
      keys(
        STRATEGIES.flatMap((strategy) =>
          RECOVERY_STEP_OUTCOMES.map((o) => ({
            ...base,
            [LABEL_STRATEGY]: strategy,
            [LABEL_OUTCOME]: o,
          })),
        ),
      ),
    );
    for (const name of [METRIC_TOOL_CALLS, METRIC_INCIDENTS, METRIC_RECOVERIES]) {
      expect(
        points(name).every((p) => p.value === 0),
        name,
      ).toBe(true);
    }
    expect(series(METRIC_RECOVERY_COST)).toEqual(keys([base]));
    expect(value(METRIC_RECOVERY_COST, base)).toBe(0);
    expect(series(METRIC_WASTED_RETRIES)).toEqual(keys([base]));
    expect(value(METRIC_WASTED_RETRIES, base)).toBe(0);
    // Not an LLM tool: no response series, no LLM labels.
    expect(points(METRIC_LLM_RESPONSES)).toEqual([]);
    expect(labels.llm).toBeUndefined();
    expect(labels.stream).toBeUndefined();
    // No stream failures until the tool is marked streamed.
    expect(points(METRIC_STREAM_FAILURES)).toEqual([]);
  });

  it("registerTool returns the label sets each record function uses", () => {
    const { metrics } = setup();
    const labels = metrics.registerTool(TOOL, "openai");
    expect(labels.duration).toStrictEqual(base);
    for (const o of CALL_OUTCOMES) {
      expect(labels.outcome[o]).toStrictEqual({ ...base, [LABEL_OUTCOME]: o });
    }
    for (const p of PATTERNS) {
      expect(labels.incident[p]).toStrictEqual({ ...base, [LABEL_PATTERN]: p });
    }
    for (const strategy of STRATEGIES) {
      for (const o of RECOVERY_STEP_OUTCOMES) {
        expect(labels.recovery[strategy][o]).toStrictEqual({
          ...base,
          [LABEL_STRATEGY]: strategy,
          [LABEL_OUTCOME]: o,
        });
      }
    }
    for (const o of RECOVERY_OUTCOMES) {
      expect(labels.recoveryRun[o]).toStrictEqual({ ...base, [LABEL_OUTCOME]: o });
    }
    const llm = { [LABEL_AGENT]: AGENT, [LABEL_PROVIDER]: "openai" };
    expect(labels.llm).toStrictEqual({
      empty: { ...llm, [LABEL_EMPTY]: "true" },
      nonEmpty: { ...llm, [LABEL_EMPTY]: "false" },
    });
  });

  it("an LLM tool: empty and non-empty responses by agent and provider, both at 0", async () => {
    const s = setup();
    s.metrics.registerTool(TOOL, "openai");
    const { series, value } = await s.collect();
    const llm = { [LABEL_AGENT]: AGENT, [LABEL_PROVIDER]: "openai" };
    expect(series(METRIC_LLM_RESPONSES)).toEqual(
      keys([
        { ...llm, [LABEL_EMPTY]: "true" },
        { ...llm, [LABEL_EMPTY]: "false" },
      ]),
    );
    expect(value(METRIC_LLM_RESPONSES, { ...llm, [LABEL_EMPTY]: "true" })).toBe(0);
    expect(value(METRIC_LLM_RESPONSES, { ...llm, [LABEL_EMPTY]: "false" })).toBe(0);
  });

  it("registerStream: the tool's stream failures by pattern, at 0", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.registerStream(labels);
    const { series, points } = await s.collect();
    expect(series(METRIC_STREAM_FAILURES)).toEqual(
      keys(PATTERNS.map((p) => ({ ...base, [LABEL_PATTERN]: p }))),
    );
    expect(points(METRIC_STREAM_FAILURES).every((p) => p.value === 0)).toBe(true);
    for (const p of PATTERNS) {
      expect(labels.stream?.[p]).toStrictEqual({ ...base, [LABEL_PATTERN]: p });
    }
  });
});

describe("SelfHealMetrics: the gauges", () => {
  it("health status: the severity index, for the agent", async () => {
    const s = setup();
    for (const status of HEALTH_STATUSES) {
      s.state.health = status;
      const { points } = await s.collect();
      expect(points(METRIC_HEALTH_STATUS)).toStrictEqual([
        { attributes: { [LABEL_AGENT]: AGENT }, value: HEALTH_STATUSES.indexOf(status) },
      ]);
    }
    expect(HEALTH_STATUSES.indexOf("critical")).toBe(2);
  });

  it("read-only and store degraded: 1 while true, 0 while false", async () => {
    const s = setup();
    const agent = { [LABEL_AGENT]: AGENT };
    s.state.readOnly = true;
    s.state.degraded = false;
    let c = await s.collect();
    expect(c.points(METRIC_READ_ONLY)).toStrictEqual([{ attributes: agent, value: 1 }]);
    expect(c.points(METRIC_STORE_DEGRADED)).toStrictEqual([{ attributes: agent, value: 0 }]);
    s.state.readOnly = false;
    s.state.degraded = true;
    c = await s.collect();
    expect(c.points(METRIC_READ_ONLY)).toStrictEqual([{ attributes: agent, value: 0 }]);
    expect(c.points(METRIC_STORE_DEGRADED)).toStrictEqual([{ attributes: agent, value: 1 }]);
  });

  it("circuit state: one point per dependency, 0 closed, 1 half-open, 2 open", async () => {
    const s = setup();
    s.state.circuits = [
      ["db", "open"],
      ["api", "half_open"],
      ["cache", "closed"],
    ];
    const { points } = await s.collect();
    const dep = (d: string) => ({ [LABEL_AGENT]: AGENT, [LABEL_DEPENDENCY]: d });
    expect(
      points(METRIC_CIRCUIT_STATE).sort((a, b) =>
        key(a.attributes).localeCompare(key(b.attributes)),
      ),
    ).toStrictEqual(
      [
        { attributes: dep("db"), value: 2 },
        { attributes: dep("api"), value: 1 },
        { attributes: dep("cache"), value: 0 },
      ].sort((a, b) => key(a.attributes).localeCompare(key(b.attributes))),
    );
  });
});

describe("SelfHealMetrics: what each record function writes", () => {
  it("toolCall: the outcome's count and the duration in seconds; a blocked call has no duration", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.toolCall(labels, "success", 1_500);
    s.metrics.toolCall(labels, "error", 250);
    s.metrics.toolCall(labels, "blocked", 9_000);
    s.metrics.toolCall(labels, "blocked", 9_000);
    const { value, points } = await s.collect();
    const outcome = (o: string) => ({ ...base, [LABEL_OUTCOME]: o });
    expect(value(METRIC_TOOL_CALLS, outcome("success"))).toBe(1);
    expect(value(METRIC_TOOL_CALLS, outcome("error"))).toBe(1);
    expect(value(METRIC_TOOL_CALLS, outcome("blocked"))).toBe(2);
    expect(value(METRIC_TOOL_CALLS, outcome("recovered"))).toBe(0);
    expect(points(METRIC_TOOL_CALL_DURATION)).toHaveLength(1);
    expect(value(METRIC_TOOL_CALL_DURATION, base)).toMatchObject({ count: 2, sum: 1.75 });
    // A non-LLM tool's call records no LLM response, whatever it says of emptiness.
    expect(points(METRIC_LLM_RESPONSES)).toEqual([]);
  });

  it("toolCall on an LLM tool: empty or not when told, nothing when not", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, "openai");
    const plain = s.metrics.registerTool("lookup", undefined);
    s.metrics.toolCall(labels, "success", 10, true);
    s.metrics.toolCall(labels, "success", 10, false);
    s.metrics.toolCall(labels, "success", 10, false);
    s.metrics.toolCall(labels, "error", 10);
    s.metrics.toolCall(labels, "blocked", 10, true); // blocked: no answer to judge
    expect(() => {
      s.metrics.toolCall(plain, "success", 10, true);
    }).not.toThrow();
    const { value, series } = await s.collect();
    const llm = { [LABEL_AGENT]: AGENT, [LABEL_PROVIDER]: "openai" };
    expect(value(METRIC_LLM_RESPONSES, { ...llm, [LABEL_EMPTY]: "true" })).toBe(1);
    expect(value(METRIC_LLM_RESPONSES, { ...llm, [LABEL_EMPTY]: "false" })).toBe(2);
    expect(series(METRIC_LLM_RESPONSES)).toHaveLength(2);
  });

  it("task: one per outcome", async () => {
    const s = setup();
    s.metrics.task("failed");
    s.metrics.task("failed");
    s.metrics.task("completed");
    const { value } = await s.collect();
    expect(value(METRIC_TASKS, { [LABEL_AGENT]: AGENT, [LABEL_OUTCOME]: "failed" })).toBe(2);
    expect(value(METRIC_TASKS, { [LABEL_AGENT]: AGENT, [LABEL_OUTCOME]: "completed" })).toBe(1);
  });

  it("recoveryStep: the step by strategy and outcome, and its spend when above 0", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.recoveryStep(labels, "failover_to_secondary", "success", 0.25);
    s.metrics.recoveryStep(labels, "retry_once", "failure", 0);
    s.metrics.recoveryStep(labels, "retry_once", "failure", 0.5);
    s.metrics.recoveryStep(labels, "circuit_break", "skipped", -1);
    const { value, points } = await s.collect();
    const step = (strategy: string, o: string) => ({
      ...base,
      [LABEL_STRATEGY]: strategy,
      [LABEL_OUTCOME]: o,
    });
    expect(value(METRIC_RECOVERIES, step("failover_to_secondary", "success"))).toBe(1);
    expect(value(METRIC_RECOVERIES, step("retry_once", "failure"))).toBe(2);
    expect(value(METRIC_RECOVERIES, step("circuit_break", "skipped"))).toBe(1);
    expect(value(METRIC_RECOVERIES, step("retry_once", "success"))).toBe(0);
    expect(points(METRIC_RECOVERY_COST)).toHaveLength(1);
    expect(value(METRIC_RECOVERY_COST, base)).toBeCloseTo(0.75, 10);
  });

  it("recovery: MTTR in seconds by outcome, and the wasted attempts when any", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.recovery(labels, "recovered", 2_500, 0);
    s.metrics.recovery(labels, "failed", 4_000, 3);
    s.metrics.recovery(labels, "failed", 1_000, 1);
    const { value, points } = await s.collect();
    const run = (o: string) => ({ ...base, [LABEL_OUTCOME]: o });
    expect(points(METRIC_RECOVERY_DURATION)).toHaveLength(2);
    expect(value(METRIC_RECOVERY_DURATION, run("recovered"))).toMatchObject({ count: 1, sum: 2.5 });
    expect(value(METRIC_RECOVERY_DURATION, run("failed"))).toMatchObject({ count: 2, sum: 5 });
    expect(points(METRIC_WASTED_RETRIES)).toHaveLength(1);
    expect(value(METRIC_WASTED_RETRIES, base)).toBe(4);
  });

  it("failoverDifferentialUsd: the extra spend by agent, from and to", async () => {
    const s = setup();
    s.metrics.failoverDifferentialUsd("openai", "anthropic", 0.02);
    s.metrics.failoverDifferentialUsd("openai", "anthropic", 0.03);
    s.metrics.failoverDifferentialUsd("anthropic", "openai", 0.5);
    const { points, value } = await s.collect();
    const pair = (from: string, to: string) => ({
      [LABEL_AGENT]: AGENT,
      [LABEL_FROM]: from,
      [LABEL_TO]: to,
    });
    expect(points(METRIC_FAILOVER_COST_DIFFERENTIAL)).toHaveLength(2);
    expect(value(METRIC_FAILOVER_COST_DIFFERENTIAL, pair("openai", "anthropic"))).toBeCloseTo(
      0.05,
      10,
    );
    expect(value(METRIC_FAILOVER_COST_DIFFERENTIAL, pair("anthropic", "openai"))).toBe(0.5);
  });

  it("escalation: one per alert, by agent, channel and whether it was suppressed", async () => {
    const s = setup();
    s.metrics.escalation("slack", false);
    s.metrics.escalation("slack", true);
    s.metrics.escalation("slack", true);
    s.metrics.escalation("pagerduty", false);
    const { points, value } = await s.collect();
    const alert = (channel: string, suppressed: string) => ({
      [LABEL_AGENT]: AGENT,
      [LABEL_CHANNEL]: channel,
      [LABEL_SUPPRESSED]: suppressed,
    });
    expect(points(METRIC_ESCALATIONS)).toHaveLength(3);
    expect(value(METRIC_ESCALATIONS, alert("slack", "false"))).toBe(1);
    expect(value(METRIC_ESCALATIONS, alert("slack", "true"))).toBe(2);
    expect(value(METRIC_ESCALATIONS, alert("pagerduty", "false"))).toBe(1);
  });

  it("diagnosis: every diagnosis by pattern; an incident only for a call's first; stream failures for streamed tools", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    const streamed = s.metrics.registerTool("answer", undefined);
    s.metrics.registerStream(streamed);
    s.metrics.diagnosis(labels, "TIMEOUT", true);
    s.metrics.diagnosis(labels, "TIMEOUT", false);
    s.metrics.diagnosis(labels, "RATE_LIMIT", false);
    s.metrics.diagnosis(streamed, "STREAM_STALLED", false);
    const { value, points } = await s.collect();
    const diag = (p: Pattern) => ({ [LABEL_AGENT]: AGENT, [LABEL_PATTERN]: p });
    expect(value(METRIC_DIAGNOSES, diag("TIMEOUT"))).toBe(2);
    expect(value(METRIC_DIAGNOSES, diag("RATE_LIMIT"))).toBe(1);
    expect(value(METRIC_DIAGNOSES, diag("STREAM_STALLED"))).toBe(1);
    expect(value(METRIC_DIAGNOSES, diag("UNKNOWN"))).toBe(0);
    const incident = (tool: string, p: Pattern) => ({
      [LABEL_AGENT]: AGENT,
      [LABEL_TOOL]: tool,
      [LABEL_PATTERN]: p,
    });
    expect(value(METRIC_INCIDENTS, incident(TOOL, "TIMEOUT"))).toBe(1);
    expect(value(METRIC_INCIDENTS, incident(TOOL, "RATE_LIMIT"))).toBe(0);
    expect(value(METRIC_INCIDENTS, incident("answer", "STREAM_STALLED"))).toBe(0);
    // Only the streamed tool has stream failures, counted for every attempt's diagnosis.
    expect(points(METRIC_STREAM_FAILURES).every((p) => p.attributes[LABEL_TOOL] === "answer")).toBe(
      true,
    );
    expect(value(METRIC_STREAM_FAILURES, incident("answer", "STREAM_STALLED"))).toBe(1);
    expect(value(METRIC_STREAM_FAILURES, incident("answer", "TIMEOUT"))).toBe(0);
  });

  it("streamFirstToken: the time to first token in seconds, by agent and tool", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.streamFirstToken(labels, 1_500);
    s.metrics.streamFirstToken(labels, 500);
    const { points, value } = await s.collect();
    expect(points(METRIC_STREAM_FIRST_TOKEN)).toHaveLength(1);
    expect(value(METRIC_STREAM_FIRST_TOKEN, base)).toMatchObject({ count: 2, sum: 2 });
  });
});

describe("SelfHealMetrics.modelRequest", () => {
  const chat = (more: Record<string, string> = {}) => ({
    ...base,
    [ATTR_GEN_AI_OPERATION_NAME]: "chat",
    ...more,
  });

  it("a duration point and a point per reported token type, with the GenAI attributes; the cost by route and model", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, "openai");
    s.metrics.modelRequest(
      labels,
      attempt(
        "primary",
        { provider: "openai", requestModel: "gpt-4o", responseModel: "gpt-4o-2024-08-06" },
        { usage: { inputTokens: 1_200, outputTokens: 300 }, usd: 0.03 },
      ),
    );
    const { points, value } = await s.collect();
    const model = chat({
      [ATTR_GEN_AI_PROVIDER_NAME]: "openai",
      [ATTR_GEN_AI_REQUEST_MODEL]: "gpt-4o",
      [ATTR_GEN_AI_RESPONSE_MODEL]: "gpt-4o-2024-08-06",
    });
    expect(points(METRIC_GEN_AI_OPERATION_DURATION)).toHaveLength(1);
    expect(value(METRIC_GEN_AI_OPERATION_DURATION, model)).toMatchObject({ count: 1, sum: 1.5 });
    expect(points(METRIC_GEN_AI_TOKEN_USAGE)).toHaveLength(2);
    expect(
      value(METRIC_GEN_AI_TOKEN_USAGE, { ...model, [ATTR_GEN_AI_TOKEN_TYPE]: "input" }),
    ).toMatchObject({ count: 1, sum: 1_200 });
    expect(
      value(METRIC_GEN_AI_TOKEN_USAGE, { ...model, [ATTR_GEN_AI_TOKEN_TYPE]: "output" }),
    ).toMatchObject({ count: 1, sum: 300 });
    // The cost stays selfheal's: by route (the provider label of every selfheal metric) and model.
    expect(points(METRIC_LLM_COST)).toStrictEqual([
      {
        attributes: { ...base, [LABEL_PROVIDER]: "primary", [LABEL_MODEL]: "gpt-4o" },
        value: 0.03,
      },
    ]);
  });

  it("a failed request: its duration with error.type, and no other point", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, "openai");
    s.metrics.modelRequest(labels, attempt("openai", undefined, { errorType: "RateLimitError" }));
    const { points } = await s.collect();
    expect(points(METRIC_GEN_AI_OPERATION_DURATION)).toStrictEqual([
      {
        attributes: chat({
          [ATTR_GEN_AI_PROVIDER_NAME]: "openai",
          [ATTR_ERROR_TYPE]: "RateLimitError",
        }),
        value: expect.objectContaining({ count: 1, sum: 1.5 }) as unknown,
      },
    ]);
    expect(points(METRIC_GEN_AI_TOKEN_USAGE)).toEqual([]);
  });

  it("nothing sent (aborted before the tool ran): no duration point", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, "openai");
    s.metrics.modelRequest(labels, attempt("openai", undefined, { durationMs: undefined }));
    const { points } = await s.collect();
    expect(points(METRIC_GEN_AI_OPERATION_DURATION)).toEqual([]);
  });

  it("no route and no report: the provider and models absent, the operation chat; the cost's labels empty", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.modelRequest(
      labels,
      attempt(undefined, undefined, { usage: { outputTokens: 40 }, usd: 0.5 }),
    );
    const { points } = await s.collect();
    expect(points(METRIC_GEN_AI_TOKEN_USAGE).map((p) => p.attributes)).toStrictEqual([
      chat({ [ATTR_GEN_AI_TOKEN_TYPE]: "output" }),
    ]);
    expect(points(METRIC_GEN_AI_OPERATION_DURATION).map((p) => p.attributes)).toStrictEqual([
      chat(),
    ]);
    expect(points(METRIC_LLM_COST)).toStrictEqual([
      { attributes: { ...base, [LABEL_PROVIDER]: "", [LABEL_MODEL]: "" }, value: 0.5 },
    ]);
  });

  it("the reported operation wins (generate_content), as does the reported provider over the route", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, undefined);
    s.metrics.modelRequest(
      labels,
      attempt(
        "gemini-east",
        { operation: "generate_content", provider: "gcp.gemini" },
        {
          usage: { inputTokens: 7 },
        },
      ),
    );
    const { points } = await s.collect();
    expect(points(METRIC_GEN_AI_TOKEN_USAGE).map((p) => p.attributes)).toStrictEqual([
      {
        ...base,
        [ATTR_GEN_AI_OPERATION_NAME]: "generate_content",
        [ATTR_GEN_AI_PROVIDER_NAME]: "gcp.gemini",
        [ATTR_GEN_AI_TOKEN_TYPE]: "input",
      },
    ]);
  });

  it("a spend of 0 is no cost point; empty usage no token point", async () => {
    const s = setup();
    const labels = s.metrics.registerTool(TOOL, "openai");
    s.metrics.modelRequest(labels, attempt("openai", undefined, { usage: {} }));
    const { points } = await s.collect();
    expect(points(METRIC_GEN_AI_TOKEN_USAGE)).toEqual([]);
    expect(points(METRIC_LLM_COST)).toEqual([]);
  });
});

describe("SelfHealMetrics: what reaches the API", () => {
  /**
   * A meter that logs every add and record as the API receives it: the SDK drops a non-number
   * and an add of 0 leaves a started series as it was, but another SDK or a bridge may not.
   */
  function spying() {
    const calls: [string, unknown][] = [];
    const meter = {
      createCounter: (name: string) => ({
        add: (value: unknown) => calls.push([name, value]),
      }),
      createHistogram: (name: string) => ({
        record: (value: unknown) => calls.push([name, value]),
      }),
      createObservableGauge: () => ({ addCallback: () => undefined }),
    } as unknown as Meter;
    const meterProvider: ApiMeterProvider = { getMeter: () => meter };
    const metrics = new SelfHealMetrics(
      AGENT,
      meterProvider,
      () => undefined,
      () => [],
      () => undefined,
      () => undefined,
    );
    return { metrics, calls };
  }

  it("no zero spend or zero waste added, and no point for a token type never reported", () => {
    const { metrics, calls } = spying();
    const labels = metrics.registerTool(TOOL, "openai");
    calls.length = 0; // the series started at 0
    metrics.recoveryStep(labels, "retry_once", "failure", 0);
    metrics.recovery(labels, "failed", 1_000, 0);
    metrics.modelRequest(labels, attempt("openai", undefined, { usage: { outputTokens: 3 } }));
    metrics.modelRequest(
      labels,
      attempt("openai", undefined, { usage: { inputTokens: 4 }, durationMs: undefined }),
    );
    expect(calls).toEqual([
      [METRIC_RECOVERIES, 1],
      [METRIC_RECOVERY_DURATION, 1],
      [METRIC_GEN_AI_OPERATION_DURATION, 1.5],
      [METRIC_GEN_AI_TOKEN_USAGE, 3],
      [METRIC_GEN_AI_TOKEN_USAGE, 4],
    ]);
  });
});
