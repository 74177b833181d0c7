import { context, trace } from "@opentelemetry/api";
import type { ToolSpanMode } from "../../index.js";
import {
  AI_SDK_MODEL_CALL_SPANS,
  AI_SDK_SPAN_TOOL_CALL,
  GEN_AI_LLM_OPERATIONS,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  genAiSpanName,
} from "../../telemetry/conventions.js";

/**
 * The AI SDK's span around the execution of tool `name`, when its telemetry is on: AI SDK 6's
 * `ai.toolCall`, or AI SDK 7's with `@ai-sdk/otel` registered, `execute_tool {name}`.
 */
export const toolSpans = (name: string): readonly string[] => [
  AI_SDK_SPAN_TOOL_CALL,
  genAiSpanName(GEN_AI_OPERATION_EXECUTE_TOOL, name),
];

/**
 * The AI SDK's spans around a call of model `modelId`: AI SDK 6's `ai.*.doGenerate` / `doStream`,
 * or `@ai-sdk/otel`'s `chat {modelId}` (AI SDK 7).
 */
export const modelSpans = (modelId: string): readonly string[] => [
  ...AI_SDK_MODEL_CALL_SPANS,
  ...GEN_AI_LLM_OPERATIONS.map((operation) => genAiSpanName(operation, modelId)),
];

/**
 * Runs `start` (a selfheal call) so that `attach` writes on the AI SDK's own span and nowhere
 * else. With the SDK's telemetry off there is no such span: the active one is the caller's (a
 * request span), and attaching would write tool attributes on it. Then the active span is
 * shown to selfheal as a non-recording copy (same trace and span id), so the call opens its own
 * the tool-call span under it, as with `child`. A span whose name cannot be read (not the
 * OpenTelemetry JS SDK's) is treated the same way: a second span at worst, never a wrong one.
 */
export function inFrameworkSpan<T>(
  mode: ToolSpanMode | undefined,
  frameworkSpans: readonly string[],
  start: () => T,
): T {
  if (mode !== "attach") return start();
  const active = trace.getActiveSpan();
  if (!active) return start();
  const name = "name" in active ? active.name : undefined;
  if (typeof name === "string" && frameworkSpans.includes(name)) return start();
  const shown = trace.wrapSpanContext(active.spanContext());
  return context.with(trace.setSpan(context.active(), shown), start);
}
