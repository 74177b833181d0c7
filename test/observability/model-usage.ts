/**
 * Token usage and model cost for the end-to-end backfill, where a run's own metrics lack them.
 * selfheal records `gen_ai.client.token.usage` and `selfheal_llm_cost_usd` from what a model call
 * reports (`ctx.reportUsage`, a provider's price); a simulator run whose calls report no tokens
 * records none. For such a run these are made from its calls instead: every request of an LLM
 * call (`onCall`, the world's own record of each attempt) gets tokens and its price, recorded on a
 * real SDK MeterProvider under selfheal's instrument names and attributes, so the series look
 * exactly like selfheal's. `UsageBackfill.collections()` then gives a family only where the run's
 * real collections had no data point of it: real series always win.
 */
import { DataPointType, type MetricData, type ResourceMetrics } from "@opentelemetry/sdk-metrics";
import type { CallRecord } from "../../src/sim/world.js";
import {
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOKEN_TYPE,
  LABEL_AGENT,
  LABEL_MODEL,
  LABEL_PROVIDER,
  LABEL_TOOL,
  METRIC_GEN_AI_TOKEN_USAGE,
  METRIC_LLM_COST,
  TOKEN_BUCKETS,
} from "../../src/telemetry/conventions.js";
import { collectingMeterProvider } from "./openmetrics.js";

/** The model each simulated provider stands for. */
export const MODEL_OF: Readonly<Record<string, string>> = {
  openai: "gpt-4.1-mini",
  anthropic: "claude-haiku-4-5",
};

/** A stable pseudo-random integer in [min, max) from a text (FNV-1a). */
function spread(text: string, min: number, max: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return min + ((h >>> 0) % (max - min));
}

const FAMILIES = [METRIC_GEN_AI_TOKEN_USAGE, METRIC_LLM_COST];

/** Metric names (of the two) that have at least one data point in a collection. */
export function usageMetricsIn(rm: ResourceMetrics): Set<string> {
  const found = new Set<string>();
  for (const scope of rm.scopeMetrics)
    for (const m of scope.metrics)
      if (FAMILIES.includes(m.descriptor.name) && m.dataPoints.length > 0)
        found.add(m.descriptor.name);
  return found;
}

/** One run's stand-in token usage and cost, and what the run really recorded. */
export class UsageBackfill {
  private readonly provider = collectingMeterProvider();
  private readonly meter = this.provider.meterProvider.getMeter("selfheal");
  private readonly tokens = this.meter.createHistogram(METRIC_GEN_AI_TOKEN_USAGE, {
    description: "Number of input and output tokens used by a model call.",
    unit: "{token}",
    advice: { explicitBucketBoundaries: [...TOKEN_BUCKETS] },
  });
  private readonly cost = this.meter.createCounter(METRIC_LLM_COST, {
    description: "Spend of model calls (every attempt), USD, by provider and model.",
  });
  private readonly stamped: { rm: ResourceMetrics; atMs: number }[] = [];
  /** Families the run's own metrics had data for. */
  readonly real = new Set<string>();

  constructor(
    private readonly agent: string,
    /** The LLM providers of the run (other dependencies are not model calls). */
    private readonly llm: ReadonlySet<string>,
  ) {}

  /** The simulator's `onCall`: each request of an LLM call used tokens and cost its price. */
  onCall = (call: CallRecord): void => {
    if (call.op !== "complete") return;
    call.attempts.forEach((attempt, i) => {
      if (!this.llm.has(attempt.dependency)) return;
      const provider = attempt.dependency;
      const model = MODEL_OF[provider] ?? provider;
      const base = {
        [LABEL_AGENT]: this.agent,
        [LABEL_TOOL]: call.op,
        [ATTR_GEN_AI_PROVIDER_NAME]: provider,
        [ATTR_GEN_AI_REQUEST_MODEL]: model,
      };
      // Usage comes with an answer (an empty one has no output); a failed request reports none.
      if (attempt.result === "ok" || attempt.result === "empty") {
        const key = `${call.id}#${i}`;
        this.tokens.record(spread(key, 300, 1_800), { ...base, [ATTR_GEN_AI_TOKEN_TYPE]: "input" });
        const output = attempt.result === "ok" ? spread(`${key}out`, 40, 600) : 0;
        this.tokens.record(output, { ...base, [ATTR_GEN_AI_TOKEN_TYPE]: "output" });
      }
      if (attempt.usd > 0)
        this.cost.add(attempt.usd, {
          [LABEL_AGENT]: this.agent,
          [LABEL_TOOL]: call.op,
          [LABEL_PROVIDER]: provider,
          [LABEL_MODEL]: model,
        });
    });
  };

  /** After each virtual minute: notes what the run's own collection had, and stamps the stand-ins. */
  async minute(real: ResourceMetrics, atMs: number): Promise<void> {
    for (const name of usageMetricsIn(real)) this.real.add(name);
    this.stamped.push({ rm: await this.provider.collect(), atMs });
  }

  /** The stand-in collections, each without the families the run recorded for real. */
  collections(): { rm: ResourceMetrics; atMs: number }[] {
    const keep = (m: MetricData) =>
      !this.real.has(m.descriptor.name) &&
      (m.dataPointType !== DataPointType.HISTOGRAM || m.dataPoints.length > 0);
    return this.stamped.map(({ rm, atMs }) => ({
      atMs,
      rm: {
        resource: rm.resource,
        scopeMetrics: rm.scopeMetrics.map((s) => ({ ...s, metrics: s.metrics.filter(keep) })),
      },
    }));
  }

  async shutdown(): Promise<void> {
    await this.provider.meterProvider.shutdown();
  }
}
