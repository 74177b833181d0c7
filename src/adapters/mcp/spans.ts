import { context, trace, type Span } from "@opentelemetry/api";
import type { ToolSpanMode } from "../../index.js";
import {
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_MCP_METHOD_NAME,
  MCP_METHOD_TOOLS_CALL,
} from "../../telemetry/conventions.js";

/** Spans a healed call has attached to: one MCP call's span is that call's, not the next's. */
const claimed = new WeakSet<Span>();

/**
 * Whether `span` is another instrumentation's span of one MCP call of `tool`: named as the MCP
 * conventions name a client call (`tools/call <tool>`), or carrying `mcp.method.name`
 * `tools/call` and `gen_ai.tool.name` `<tool>`. Read from the OpenTelemetry JS SDK's spans
 * (`name`, `attributes`); a span that shows neither is not one.
 */
function isCallSpanOf(span: Span, tool: string): boolean {
  const name = "name" in span ? span.name : undefined;
  if (name === `${MCP_METHOD_TOOLS_CALL} ${tool}`) return true;
  const attributes = "attributes" in span ? span.attributes : undefined;
  if (typeof attributes !== "object" || attributes === null) return false;
  const a = attributes as Record<string, unknown>;
  return a[ATTR_MCP_METHOD_NAME] === MCP_METHOD_TOOLS_CALL && a[ATTR_GEN_AI_TOOL_NAME] === tool;
}

/**
 * Runs `start` (one healed call of `tool`) so that `spans: "attach"` writes on the span of this
 * MCP call that another instrumentation opened, and nowhere else. Any other active span (the
 * application's request span, a selfheal span, an MCP span of another tool, or one a previous
 * call attached to) is shown to selfheal as a non-recording copy (same trace and span id), so
 * the call opens its own tool-call span under it, as with `child`: a second span at worst,
 * never a wrong one.
 */
export function inMcpCallSpan<T>(mode: ToolSpanMode | undefined, tool: string, start: () => T): T {
  if (mode !== "attach") return start();
  const active = trace.getActiveSpan();
  if (!active) return start();
  if (isCallSpanOf(active, tool) && !claimed.has(active)) {
    claimed.add(active);
    return start();
  }
  const shown = trace.wrapSpanContext(active.spanContext());
  return context.with(trace.setSpan(context.active(), shown), start);
}
