import { SpanStatusCode, type Attributes, type HrTime, type SpanStatus } from "@opentelemetry/api";
import type { Clock } from "../clock.js";
import {
  AI_SDK_MODEL_CALL_SPANS,
  AI_SDK_SPAN_TOOL_CALL,
  ATTR_AI_MODEL_ID,
  ATTR_AI_OPERATION_ID,
  ATTR_AI_TOOL_CALL_NAME,
  ATTR_AI_USAGE_COMPLETION_TOKENS,
  ATTR_AI_USAGE_OUTPUT_TOKENS,
  ATTR_CALL_OUTCOME,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_LLM_OPERATIONS,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  INSTRUMENTATION_SCOPE,
  SPAN_TOOL_CALL,
} from "../telemetry/conventions.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { CallRecord, SignalStore } from "./store.js";

/**
 * The fields of an SDK `ReadableSpan` this processor reads. Declared here so the core does not
 * import the SDK; any `@opentelemetry/sdk-trace-base` 2.x span fits.
 */
export interface FinishedSpan {
  readonly name: string;
  readonly attributes: Attributes;
  readonly status: SpanStatus;
  readonly duration: HrTime;
  /** Read to tell a framework's span that selfheal's own call span sits under (counted once). */
  spanContext?(): { readonly spanId: string };
  readonly parentSpanContext?: { readonly spanId: string } | undefined;
}

/** A foreign span read as a call: a tool's or a model's, and the scope it counts under. */
interface ForeignCall {
  isTool: boolean;
  name: string;
  outputTokens: unknown;
}

/** Parents of selfheal's own call spans remembered at most (a framework span ends after them). */
const MAX_REMEMBERED_PARENTS = 1024;

const nonEmpty = (value: unknown): string | undefined =>
  typeof value === "string" && value !== "" ? value : undefined;

/**
 * GenAI conventions: `gen_ai.operation.name` `execute_tool`, counted under `gen_ai.tool.name`, or a
 * model operation (`chat`, ...), counted under `gen_ai.request.model` as a healed model is (and as
 * the AI SDK's own spans are); the span's name where the attribute is missing.
 */
function genAiCall(span: FinishedSpan): ForeignCall | undefined {
  const attributes = span.attributes;
  const operation = attributes[ATTR_GEN_AI_OPERATION_NAME];
  if (typeof operation !== "string") return undefined;
  const isTool = operation === GEN_AI_OPERATION_EXECUTE_TOOL;
  if (!isTool && !GEN_AI_LLM_OPERATIONS.includes(operation)) return undefined;
  return {
    isTool,
    name:
      nonEmpty(attributes[isTool ? ATTR_GEN_AI_TOOL_NAME : ATTR_GEN_AI_REQUEST_MODEL]) ?? span.name,
    outputTokens: attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
  };
}

/**
 * The Vercel AI SDK's own shape (no `gen_ai.operation.name`): `ai.toolCall` spans are tool
 * calls, `ai.generateText.doGenerate` and its kin are model calls, counted under the model id.
 */
function aiSdkCall(span: FinishedSpan): ForeignCall | undefined {
  const attributes = span.attributes;
  const operation = nonEmpty(attributes[ATTR_AI_OPERATION_ID]) ?? span.name;
  if (operation === AI_SDK_SPAN_TOOL_CALL) {
    const name = nonEmpty(attributes[ATTR_AI_TOOL_CALL_NAME]) ?? span.name;
    return { isTool: true, name, outputTokens: undefined };
  }
  if (!AI_SDK_MODEL_CALL_SPANS.includes(operation)) return undefined;
  return {
    isTool: false,
    name: nonEmpty(attributes[ATTR_AI_MODEL_ID]) ?? span.name,
    outputTokens:
      attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS] ??
      attributes[ATTR_AI_USAGE_OUTPUT_TOKENS] ??
      attributes[ATTR_AI_USAGE_COMPLETION_TOKENS],
  };
}

/** What `onStart` reads of a span that has just started (an SDK span fits). */
export interface StartedSpan {
  readonly name?: string;
  readonly instrumentationScope?: { readonly name: string };
  spanContext?(): { readonly spanId: string };
}

export interface HealthSpanProcessorOptions {
  store: SignalStore;
  clock: Clock;
  /** Agent to count a span under when it has no `gen_ai.agent.name`. */
  defaultAgent: string;
  logger: { warn(message: string): void };
  /** Told each call recorded, at its `now` (the instance's status and event log count it too). */
  onRecord?: (record: CallRecord, now: number) => void;
}

/**
 * A SpanProcessor that feeds health signals from spans made by other instrumentations
 * (the AI SDK, Mastra, OpenLLMetry, ...): `execute_tool` spans count as tool calls, and model
 * spans (`chat`, `text_completion`, `generate_content`) as LLM calls, empty when they report
 * zero output tokens; the AI SDK's own `ai.toolCall` and `ai.*.doGenerate` / `doStream` spans
 * alike. selfheal's own spans are skipped: they are already counted, and so is a foreign span
 * that a selfheal call span sits under (a wrapped tool inside the framework's tool span).
 */
export class HealthSpanProcessor {
  constructor(private readonly options: HealthSpanProcessorOptions) {}

  /** Span ids of the parents of selfheal's own call spans, oldest first. */
  private readonly countedParents = new Set<string>();
  /** Span ids of selfheal's own call spans in flight: a GenAI span under one is counted by it. */
  private readonly openCalls = new Set<string>();

  onStart(span: StartedSpan): void {
    // Spans opened under a selfheal call span (a model instrumentation's `chat` inside a healed
    // model call) are that call, counted once.
    if (span.name !== SPAN_TOOL_CALL || span.instrumentationScope?.name !== INSTRUMENTATION_SCOPE)
      return;
    const id = span.spanContext?.().spanId;
    if (id === undefined) return;
    if (this.openCalls.size >= MAX_REMEMBERED_PARENTS) this.openCalls.clear(); // ends missed
    this.openCalls.add(id);
  }

  onEnd(span: FinishedSpan): void {
    const attributes = span.attributes;
    if (attributes[ATTR_CALL_OUTCOME] !== undefined) {
      const id = span.spanContext?.().spanId;
      if (id !== undefined) this.openCalls.delete(id);
      this.rememberParent(span);
      return;
    }
    const call = genAiCall(span) ?? aiSdkCall(span);
    if (!call || this.countedAlready(span) || this.underCall(span)) return;
    const { isTool, outputTokens } = call;

    const agentName = attributes[ATTR_GEN_AI_AGENT_NAME];
    // Some instrumentations set the stable `error.type` without an ERROR status.
    const failed =
      span.status.code === SpanStatusCode.ERROR ||
      nonEmpty(attributes[ATTR_ERROR_TYPE]) !== undefined;
    try {
      const record: CallRecord = {
        agent:
          typeof agentName === "string" && agentName !== "" ? agentName : this.options.defaultAgent,
        tool: call.name,
        outcome: failed ? "error" : "success",
        durationMs: span.duration[0] * 1_000 + span.duration[1] / 1e6,
        empty:
          isTool || failed || typeof outputTokens !== "number" ? undefined : outputTokens === 0,
      };
      const now = this.options.clock.now();
      this.options.store.recordCall(record, now);
      this.options.onRecord?.(record, now);
    } catch (error) {
      this.options.logger.warn(
        `selfheal: signal store failed to record a span: ${redact(describeThrown(error))}`,
      );
    }
  }

  /** A selfheal call span ended: its parent, if a framework's call span, is counted through it. */
  private rememberParent(span: FinishedSpan): void {
    const parent = span.parentSpanContext?.spanId;
    if (parent === undefined) return;
    if (this.countedParents.size >= MAX_REMEMBERED_PARENTS) {
      const oldest = this.countedParents.values().next().value;
      if (oldest !== undefined) this.countedParents.delete(oldest);
    }
    this.countedParents.add(parent);
  }

  private underCall(span: FinishedSpan): boolean {
    const parent = span.parentSpanContext?.spanId;
    return parent !== undefined && this.openCalls.has(parent);
  }

  private countedAlready(span: FinishedSpan): boolean {
    const id = span.spanContext?.().spanId;
    return id !== undefined && this.countedParents.delete(id);
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
