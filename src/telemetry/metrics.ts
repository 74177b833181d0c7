import type { Attributes, Counter, Histogram, MeterProvider } from "@opentelemetry/api";
import { createNoopMeter, metrics } from "@opentelemetry/api";
import {
  CALL_OUTCOMES,
  DURATION_BUCKETS_SECONDS,
  HEALTH_STATUSES,
  INSTRUMENTATION_SCOPE,
  CIRCUIT_STATES,
  LABEL_AGENT,
  LABEL_CHANNEL,
  LABEL_DEPENDENCY,
  LABEL_EMPTY,
  LABEL_FROM,
  LABEL_STRATEGY,
  LABEL_SUPPRESSED,
  LABEL_TO,
  LABEL_OUTCOME,
  LABEL_PATTERN,
  LABEL_PROVIDER,
  LABEL_TOOL,
  METRIC_CIRCUIT_STATE,
  METRIC_DIAGNOSES,
  METRIC_ESCALATIONS,
  METRIC_FAILOVER_COST_DIFFERENTIAL,
  METRIC_RECOVERIES,
  METRIC_RECOVERY_COST,
  METRIC_RECOVERY_DURATION,
  METRIC_WASTED_RETRIES,
  METRIC_HEALTH_STATUS,
  METRIC_READ_ONLY,
  METRIC_STORE_DEGRADED,
  METRIC_INCIDENTS,
  METRIC_LLM_RESPONSES,
  METRIC_TASKS,
  METRIC_TOOL_CALL_DURATION,
  METRIC_TOOL_CALLS,
  METRIC_STREAM_FAILURES,
  METRIC_STREAM_FIRST_TOKEN,
  METRIC_GEN_AI_OPERATION_DURATION,
  METRIC_GEN_AI_TOKEN_USAGE,
  METRIC_LLM_COST,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_TOKEN_TYPE,
  GEN_AI_DURATION_BUCKETS_SECONDS,
  GEN_AI_TOKEN_INPUT,
  GEN_AI_TOKEN_OUTPUT,
  LABEL_MODEL,
  TOKEN_BUCKETS,
  PATTERNS,
  RECOVERY_OUTCOMES,
  RECOVERY_STEP_OUTCOMES,
  STRATEGIES,
  TASK_OUTCOMES,
  type RecoveryOutcome,
  type RecoveryStepOutcome,
  type StrategyName,
  type CallOutcome,
  type HealthStatus,
  type Pattern,
  type TaskOutcome,
} from "./conventions.js";
import { requestAttributes, type ModelRequest } from "./gen-ai.js";

/** Label sets of one tool, built once at registration so a call allocates none. */
export interface ToolMetricLabels {
  outcome: Record<CallOutcome, Attributes>;
  duration: Attributes;
  /** Present for LLM tools: labels for empty=true / empty=false. */
  llm?: { empty: Attributes; nonEmpty: Attributes };
  /** Incident counter labels by pattern (METRIC_INCIDENTS). */
  incident: Record<Pattern, Attributes>;
  /** Recovery counter labels by strategy and step outcome (METRIC_RECOVERIES). */
  recovery: Record<StrategyName, Record<RecoveryStepOutcome, Attributes>>;
  /** MTTR histogram labels by recovery outcome (METRIC_RECOVERY_DURATION). */
  recoveryRun: Record<RecoveryOutcome, Attributes>;
  /** Present for streamed calls: failed-attempt labels by pattern (METRIC_STREAM_FAILURES). */
  stream?: Record<Pattern, Attributes>;
  /** The GenAI label sets of the model requests seen so far, by request (see `modelRequest`). */
  genAi?: Map<string, GenAiLabels>;
}

/** The label sets of one model request: its duration's, and its token usage's by type. */
interface GenAiLabels {
  readonly base: Attributes;
  readonly input: Attributes;
  readonly output: Attributes;
}

/** Distinct model requests whose label sets a tool keeps (a response's model is the server's). */
const MAX_GEN_AI_LABEL_SETS = 32;

/** A noop meter's instruments, by class: they never record (the metrics API has no proxy). */
const NOOP_METER = createNoopMeter();
const NOOP_HISTOGRAM: unknown = NOOP_METER.createHistogram("noop").constructor;
const NOOP_COUNTER: unknown = NOOP_METER.createCounter("noop").constructor;

/** One model request (an attempt of a model call), as the metrics record it. */
export interface ModelAttempt {
  readonly request: ModelRequest;
  /** From the request to its answer or failure, ms; undefined when nothing was sent. */
  readonly durationMs: number | undefined;
  /** `error.type` of a failed request; undefined for an answer (an empty one included). */
  readonly errorType: string | undefined;
  readonly usage: { inputTokens?: number; outputTokens?: number } | undefined;
  /** What it cost (reported, or priced from its route). */
  readonly usd: number;
  /** Its route (selfheal's provider name: the cost's `provider` label). */
  readonly route: string | undefined;
}

/**
 * The foundation's instruments. Without a registered MeterProvider every call is a no-op.
 * Each label value an alert divides by is initialised to 0 when its series is first known.
 */
export class SelfHealMetrics {
  private readonly toolCalls: Counter;
  private readonly duration: Histogram;
  private readonly llmResponses: Counter;
  private readonly tasks: Counter;
  private readonly taskLabels: Record<TaskOutcome, Attributes>;
  private readonly incidents: Counter;
  private readonly diagnoses: Counter;
  private readonly diagnosisLabels: Record<Pattern, Attributes>;
  private readonly recoveries: Counter;
  private readonly recoveryDuration: Histogram;
  private readonly recoveryCost: Counter;
  private readonly wasted: Counter;
  private readonly failoverDifferential: Counter;
  private readonly escalations: Counter;
  private readonly firstToken: Histogram;
  private readonly streamFailures: Counter;
  private readonly tokenUsage: Histogram;
  private readonly operationDuration: Histogram;
  private readonly llmCost: Counter;
  /**
   * Whether the model request instruments record: false on the API's noop meter (no metrics SDK
   * registered when selfheal started, which the metrics API never changes afterwards), so a
   * call skips building their labels.
   */
  readonly recordsModelRequests: boolean;

  // Long on purpose: every instrument of the telemetry contract, created once.
  constructor(
    private readonly agent: string,
    meterProvider: MeterProvider | undefined,
    healthStatus: () => HealthStatus | undefined,
    circuits: () => [string, (typeof CIRCUIT_STATES)[number]][],
    readOnly: () => boolean | undefined,
    storeDegraded: () => boolean | undefined,
  ) {
    const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE);
    this.toolCalls = meter.createCounter(METRIC_TOOL_CALLS, {
      description: "Tool calls by outcome (success, error, blocked, recovered).",
    });
    const seconds = (name: string, description: string) =>
      meter.createHistogram(name, {
        description,
        unit: "s",
        advice: { explicitBucketBoundaries: [...DURATION_BUCKETS_SECONDS] },
      });
    this.duration = seconds(METRIC_TOOL_CALL_DURATION, "Duration of tool calls.");
    this.llmResponses = meter.createCounter(METRIC_LLM_RESPONSES, {
      description: "LLM responses, by whether they were empty.",
    });
    this.tasks = meter.createCounter(METRIC_TASKS, {
      description: "Agent tasks by outcome (completed, failed).",
    });
    meter
      .createObservableGauge(METRIC_HEALTH_STATUS, {
        description: "Agent health: 0 healthy, 1 warning, 2 critical.",
      })
      .addCallback((result) => {
        const status = healthStatus();
        if (status) result.observe(HEALTH_STATUSES.indexOf(status), { [LABEL_AGENT]: agent });
      });
    meter
      .createObservableGauge(METRIC_READ_ONLY, {
        description: "1 while the agent's write tools are refused (critical or read-only mode).",
      })
      .addCallback((result) => {
        const refused = readOnly();
        if (refused !== undefined) result.observe(refused ? 1 : 0, { [LABEL_AGENT]: agent });
      });
    meter
      .createObservableGauge(METRIC_STORE_DEGRADED, {
        description: "1 while the shared signal store is away and this worker uses local memory.",
      })
      .addCallback((result) => {
        const degraded = storeDegraded();
        if (degraded !== undefined) result.observe(degraded ? 1 : 0, { [LABEL_AGENT]: agent });
      });
    this.taskLabels = {
      completed: { [LABEL_AGENT]: agent, [LABEL_OUTCOME]: "completed" },
      failed: { [LABEL_AGENT]: agent, [LABEL_OUTCOME]: "failed" },
    };
    for (const outcome of TASK_OUTCOMES) this.tasks.add(0, this.taskLabels[outcome]);
    this.incidents = meter.createCounter(METRIC_INCIDENTS, {
      description: "Failed tool calls (incidents), by diagnosed pattern.",
    });
    this.diagnoses = meter.createCounter(METRIC_DIAGNOSES, {
      description: "Diagnoses by pattern; the UNKNOWN share shows error-wording drift.",
    });
    this.diagnosisLabels = byPattern({ [LABEL_AGENT]: agent });
    for (const p of PATTERNS) this.diagnoses.add(0, this.diagnosisLabels[p]);
    this.recoveries = meter.createCounter(METRIC_RECOVERIES, {
      description: "Recovery steps and attempts by strategy and outcome.",
    });
    this.recoveryDuration = seconds(
      METRIC_RECOVERY_DURATION,
      "Time from a call's first error to its recovered (or final) answer: MTTR.",
    );
    this.recoveryCost = meter.createCounter(METRIC_RECOVERY_COST, {
      description: "Spend of recovery attempts, USD.",
    });
    this.wasted = meter.createCounter(METRIC_WASTED_RETRIES, {
      description:
        "Recovery attempts that could not help: those of a call left without a real answer.",
    });
    this.failoverDifferential = meter.createCounter(METRIC_FAILOVER_COST_DIFFERENTIAL, {
      description: "Extra spend of failover attempts over the primary's price, USD.",
    });
    this.escalations = meter.createCounter(METRIC_ESCALATIONS, {
      description: "Alerts to humans by channel; suppressed=true when throttled.",
    });
    this.firstToken = seconds(
      METRIC_STREAM_FIRST_TOKEN,
      "Time from a streamed attempt's start to its first token.",
    );
    this.streamFailures = meter.createCounter(METRIC_STREAM_FAILURES, {
      description: "Failed attempts of streamed calls, by diagnosed pattern.",
    });
    this.tokenUsage = meter.createHistogram(METRIC_GEN_AI_TOKEN_USAGE, {
      description: "Number of input and output tokens used.",
      unit: "{token}",
      advice: { explicitBucketBoundaries: [...TOKEN_BUCKETS] },
    });
    this.operationDuration = meter.createHistogram(METRIC_GEN_AI_OPERATION_DURATION, {
      description: "GenAI operation duration.",
      unit: "s",
      advice: { explicitBucketBoundaries: [...GEN_AI_DURATION_BUCKETS_SECONDS] },
    });
    this.llmCost = meter.createCounter(METRIC_LLM_COST, {
      description: "Spend of model calls (every attempt), USD, by provider and model.",
    });
    this.recordsModelRequests =
      this.operationDuration.constructor !== NOOP_HISTOGRAM ||
      this.tokenUsage.constructor !== NOOP_HISTOGRAM ||
      this.llmCost.constructor !== NOOP_COUNTER;
    meter
      .createObservableGauge(METRIC_CIRCUIT_STATE, {
        description: "Circuit breaker state per dependency: 0 closed, 1 half-open, 2 open.",
      })
      .addCallback((result) => {
        for (const [dependency, state] of circuits()) {
          result.observe(CIRCUIT_STATES.indexOf(state), {
            [LABEL_AGENT]: agent,
            [LABEL_DEPENDENCY]: dependency,
          });
        }
      });
  }

  /** Builds the label sets of a tool and starts its series at 0. */
  registerTool(tool: string, llmProvider: string | undefined): ToolMetricLabels {
    const base = { [LABEL_AGENT]: this.agent, [LABEL_TOOL]: tool };
    const outcome = {} as Record<CallOutcome, Attributes>;
    for (const o of CALL_OUTCOMES) outcome[o] = { ...base, [LABEL_OUTCOME]: o };
    for (const o of CALL_OUTCOMES) this.toolCalls.add(0, outcome[o]);
    const incident = byPattern(base);
    for (const p of PATTERNS) this.incidents.add(0, incident[p]);
    const recovery = {} as ToolMetricLabels["recovery"];
    for (const strategy of STRATEGIES) {
      recovery[strategy] = {} as Record<RecoveryStepOutcome, Attributes>;
      for (const o of RECOVERY_STEP_OUTCOMES) {
        recovery[strategy][o] = { ...base, [LABEL_STRATEGY]: strategy, [LABEL_OUTCOME]: o };
        this.recoveries.add(0, recovery[strategy][o]);
      }
    }
    const recoveryRun = {} as Record<RecoveryOutcome, Attributes>;
    for (const o of RECOVERY_OUTCOMES) recoveryRun[o] = { ...base, [LABEL_OUTCOME]: o };
    this.recoveryCost.add(0, base);
    this.wasted.add(0, base);
    const labels: ToolMetricLabels = { outcome, duration: base, incident, recovery, recoveryRun };
    if (llmProvider !== undefined) {
      const llm = { [LABEL_AGENT]: this.agent, [LABEL_PROVIDER]: llmProvider };
      labels.llm = {
        empty: { ...llm, [LABEL_EMPTY]: "true" },
        nonEmpty: { ...llm, [LABEL_EMPTY]: "false" },
      };
      this.llmResponses.add(0, labels.llm.empty);
      this.llmResponses.add(0, labels.llm.nonEmpty);
    }
    return labels;
  }

  /** Marks a tool as streamed: its failure series by pattern start at 0. */
  registerStream(labels: ToolMetricLabels): void {
    labels.stream = byPattern(labels.duration);
    for (const p of PATTERNS) this.streamFailures.add(0, labels.stream[p]);
  }

  /**
   * One model request (an attempt: the conventions' operation is one request, so recovery's
   * show too): its duration, with `error.type` when it failed; a point per token type it
   * reported; its cost when above 0. Each carries the tool's `agent` and `tool` labels.
   */
  modelRequest(labels: ToolMetricLabels, attempt: ModelAttempt): void {
    const { request, durationMs, errorType, usage, usd } = attempt;
    const gen = genAiLabels(labels, request);
    if (durationMs !== undefined) {
      this.operationDuration.record(
        durationMs / 1000,
        errorType === undefined ? gen.base : { ...gen.base, [ATTR_ERROR_TYPE]: errorType },
      );
    }
    if (usage?.inputTokens !== undefined) this.tokenUsage.record(usage.inputTokens, gen.input);
    if (usage?.outputTokens !== undefined) this.tokenUsage.record(usage.outputTokens, gen.output);
    if (usd > 0)
      this.llmCost.add(usd, {
        ...labels.duration,
        [LABEL_PROVIDER]: attempt.route ?? "",
        [LABEL_MODEL]: request.requestModel ?? "",
      });
  }

  /** A streamed attempt's first token, ms after the attempt started. */
  streamFirstToken(labels: ToolMetricLabels, ms: number): void {
    this.firstToken.record(ms / 1000, labels.duration);
  }

  toolCall(
    labels: ToolMetricLabels,
    outcome: CallOutcome,
    durationMs: number,
    empty?: boolean,
  ): void {
    this.toolCalls.add(1, labels.outcome[outcome]);
    if (outcome === "blocked") return;
    this.duration.record(durationMs / 1000, labels.duration);
    if (empty !== undefined && labels.llm) {
      this.llmResponses.add(1, empty ? labels.llm.empty : labels.llm.nonEmpty);
    }
  }

  task(outcome: TaskOutcome): void {
    this.tasks.add(1, this.taskLabels[outcome]);
  }

  recoveryStep(
    labels: ToolMetricLabels,
    strategy: StrategyName,
    outcome: RecoveryStepOutcome,
    costUsd: number,
  ): void {
    this.recoveries.add(1, labels.recovery[strategy][outcome]);
    if (costUsd > 0) this.recoveryCost.add(costUsd, labels.duration);
  }

  /** A whole recovery: its duration (MTTR) by outcome, and the attempts that could not help. */
  recovery(
    labels: ToolMetricLabels,
    outcome: RecoveryOutcome,
    durationMs: number,
    wastedRetries: number,
  ): void {
    this.recoveryDuration.record(durationMs / 1000, labels.recoveryRun[outcome]);
    if (wastedRetries > 0) this.wasted.add(wastedRetries, labels.duration);
  }

  failoverDifferentialUsd(from: string, to: string, usd: number): void {
    this.failoverDifferential.add(usd, {
      [LABEL_AGENT]: this.agent,
      [LABEL_FROM]: from,
      [LABEL_TO]: to,
    });
  }

  escalation(channel: string, suppressed: boolean): void {
    this.escalations.add(1, {
      [LABEL_AGENT]: this.agent,
      [LABEL_CHANNEL]: channel,
      [LABEL_SUPPRESSED]: String(suppressed),
    });
  }

  /** One diagnosis; `incident` when it is the first of a failed call (not a recovery attempt). */
  diagnosis(labels: ToolMetricLabels, pattern: Pattern, incident: boolean): void {
    this.diagnoses.add(1, this.diagnosisLabels[pattern]);
    if (incident) this.incidents.add(1, labels.incident[pattern]);
    if (labels.stream) this.streamFailures.add(1, labels.stream[pattern]);
  }
}

/**
 * The label sets of a model request, kept per tool for the requests it makes again (most calls
 * ask the same model of the same provider): no label set is built per attempt.
 */
function genAiLabels(labels: ToolMetricLabels, request: ModelRequest): GenAiLabels {
  const key =
    keyPart(request.operation) +
    keyPart(request.provider) +
    keyPart(request.requestModel) +
    keyPart(request.responseModel);
  const known = labels.genAi?.get(key);
  if (known) return known;
  const base = requestAttributes(labels.duration, request);
  const made: GenAiLabels = {
    base,
    input: { ...base, [ATTR_GEN_AI_TOKEN_TYPE]: GEN_AI_TOKEN_INPUT },
    output: { ...base, [ATTR_GEN_AI_TOKEN_TYPE]: GEN_AI_TOKEN_OUTPUT },
  };
  labels.genAi ??= new Map();
  if (labels.genAi.size < MAX_GEN_AI_LABEL_SETS) labels.genAi.set(key, made);
  return made;
}

/** One field of a request's key, unambiguous whatever its text. */
const keyPart = (value: string | undefined): string =>
  value === undefined ? "-" : `${value.length}:${value}`;

function byPattern(base: Attributes): Record<Pattern, Attributes> {
  const out = {} as Record<Pattern, Attributes>;
  for (const p of PATTERNS) out[p] = { ...base, [LABEL_PATTERN]: p };
  return out;
}
