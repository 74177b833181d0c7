import { SpanStatusCode, type Attributes, type HrTime, type SpanStatus } from "@opentelemetry/api";
import type { Clock } from "../clock.js";
import {
  ATTR_CALL_OUTCOME,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_LLM_OPERATIONS,
  GEN_AI_OPERATION_EXECUTE_TOOL,
} from "../telemetry/conventions.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { SignalStore } from "./store.js";

/**
 * The fields of an SDK `ReadableSpan` this processor reads. Declared here so the core does not
 * import the SDK; any `@opentelemetry/sdk-trace-base` 2.x span fits.
 */
export interface FinishedSpan {
  readonly name: string;
  readonly attributes: Attributes;
  readonly status: SpanStatus;
  readonly duration: HrTime;
}

export interface HealthSpanProcessorOptions {
  store: SignalStore;
  clock: Clock;
  /** Agent to count a span under when it has no `gen_ai.agent.name`. */
  defaultAgent: string;
  logger: { warn(message: string): void };
}

/**
 * A SpanProcessor that feeds health signals from spans made by other instrumentations
 * (the AI SDK, Mastra, OpenLLMetry, ...): `execute_tool` spans count as tool calls, and model
 * spans (`chat`, `text_completion`, `generate_content`) as LLM calls, empty when they report
 * zero output tokens. selfheal's own spans are skipped: they are already counted.
 */
export class HealthSpanProcessor {
  constructor(private readonly options: HealthSpanProcessorOptions) {}

  onStart(): void {
    // Nothing to do until the span ends.
  }

  onEnd(span: FinishedSpan): void {
    const attributes = span.attributes;
    if (attributes[ATTR_CALL_OUTCOME] !== undefined) return;
    const operation = attributes[ATTR_GEN_AI_OPERATION_NAME];
    if (typeof operation !== "string") return;
    const isTool = operation === GEN_AI_OPERATION_EXECUTE_TOOL;
    if (!isTool && !GEN_AI_LLM_OPERATIONS.includes(operation)) return;

    const agentName = attributes[ATTR_GEN_AI_AGENT_NAME];
    const toolName = attributes[ATTR_GEN_AI_TOOL_NAME];
    const outputTokens = attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS];
    const failed = span.status.code === SpanStatusCode.ERROR;
    try {
      this.options.store.recordCall(
        {
          agent:
            typeof agentName === "string" && agentName !== ""
              ? agentName
              : this.options.defaultAgent,
          tool: isTool && typeof toolName === "string" && toolName !== "" ? toolName : span.name,
          outcome: failed ? "error" : "success",
          durationMs: span.duration[0] * 1_000 + span.duration[1] / 1e6,
          empty:
            isTool || failed || typeof outputTokens !== "number" ? undefined : outputTokens === 0,
        },
        this.options.clock.now(),
      );
    } catch (error) {
      this.options.logger.warn(
        `selfheal: signal store failed to record a span: ${redact(describeThrown(error))}`,
      );
    }
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
