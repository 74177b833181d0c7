import { SpanStatusCode, type Attributes, type HrTime } from "@opentelemetry/api";
import type { Span, SpanData, TracingProcessor } from "@openai/agents";
import type { FinishedSpan, HealthSpanProcessor, SelfHealing } from "../../index.js";
import { knownKeys, object, optionalBoolean } from "../../engine/options/validate.js";
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_LLM_OPERATIONS,
  GEN_AI_OPERATION_EXECUTE_TOOL,
} from "../../telemetry/conventions.js";
import { countedBy } from "./healed-spans.js";

/** Options of `healthTraceProcessor`. */
export interface HealthTraceProcessorOptions {
  /**
   * Count model calls (`generation` and `response` spans) as LLM calls: success rate, and empty
   * answers from zero output tokens where a span reports usage. Default true.
   */
  models?: boolean;
}

/** `gen_ai.operation.name` a model span is counted under (the first of the LLM operations). */
const CHAT = GEN_AI_LLM_OPERATIONS[0] ?? "chat";

/**
 * A tracing processor for the Agents SDK (`addTraceProcessor(healthTraceProcessor(sh))`) that
 * feeds `sh`'s health from the SDK's own spans: each function span is a tool call (failed when
 * the SDK marked it with an error, as it does for a tool error turned into text), each model
 * span an LLM call. Calls of tools healed by `sh` are skipped: selfheal counted them already.
 * The SDK's spans are not OpenTelemetry spans; this reads them as `sh.spanProcessor()` reads
 * foreign GenAI spans, and counts them under `sh`'s agent.
 */
export function healthTraceProcessor(
  sh: SelfHealing,
  options?: HealthTraceProcessorOptions,
): TracingProcessor {
  const o = validateProcessorOptions(options);
  return new HealthTraceProcessor(sh, o.models ?? true);
}

class HealthTraceProcessor implements TracingProcessor {
  private readonly health: HealthSpanProcessor;

  constructor(
    private readonly sh: SelfHealing,
    private readonly models: boolean,
  ) {
    this.health = sh.spanProcessor();
  }

  onTraceStart(): Promise<void> {
    return Promise.resolve();
  }

  onTraceEnd(): Promise<void> {
    return Promise.resolve();
  }

  onSpanStart(): Promise<void> {
    return Promise.resolve();
  }

  onSpanEnd(span: Span<SpanData>): Promise<void> {
    const finished = this.finished(span);
    if (finished) this.health.onEnd(finished);
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  /** The span as the health processor reads it, or undefined when it is not a call to count. */
  private finished(span: Span<SpanData>): FinishedSpan | undefined {
    const data = span.spanData;
    if (data.type === "function") {
      if (countedBy(span, this.sh)) return undefined;
      return toFinished(span, data.name, {
        [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
        [ATTR_GEN_AI_TOOL_NAME]: data.name,
      });
    }
    if (!this.models) return undefined;
    if (data.type === "generation") return modelCall(span, data.model, data.usage?.output_tokens);
    if (data.type === "response") {
      const response = data._response as
        { model?: unknown; usage?: { output_tokens?: unknown } } | undefined;
      const model = typeof response?.model === "string" ? response.model : undefined;
      return modelCall(span, model, response?.usage?.output_tokens);
    }
    return undefined;
  }
}

/**
 * A model span: every one is a call, with or without usage. The SDK's Chat Completions model puts
 * usage on a span only when the call fails, and the Responses model its response only when
 * tracing includes data: counting only spans with usage or an error would count the failures
 * and drop the successes. Without usage the call says nothing about empty answers.
 */
function modelCall(
  span: Span<SpanData>,
  model: string | undefined,
  outputTokens: unknown,
): FinishedSpan {
  const tokens = typeof outputTokens === "number" ? outputTokens : undefined;
  const attributes: Attributes = { [ATTR_GEN_AI_OPERATION_NAME]: CHAT };
  if (tokens !== undefined) attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS] = tokens;
  return toFinished(span, model ?? span.spanData.type, attributes);
}

function toFinished(span: Span<SpanData>, name: string, attributes: Attributes): FinishedSpan {
  return {
    name,
    attributes,
    status: { code: span.error === null ? SpanStatusCode.UNSET : SpanStatusCode.ERROR },
    duration: durationOf(span.startedAt, span.endedAt),
  };
}

/** The span's duration from its ISO timestamps; zero when either is missing. */
function durationOf(startedAt: string | null, endedAt: string | null): HrTime {
  const ms = startedAt && endedAt ? Math.max(0, Date.parse(endedAt) - Date.parse(startedAt)) : 0;
  const safe = Number.isFinite(ms) ? ms : 0;
  return [Math.floor(safe / 1_000), (safe % 1_000) * 1e6];
}

function validateProcessorOptions(input: unknown): HealthTraceProcessorOptions {
  if (input === undefined) return {};
  const field = "healthTraceProcessor(options)";
  const o = object(input, field);
  knownKeys(o, ["models"], field);
  optionalBoolean(o.models, `${field}.models`);
  return o;
}
