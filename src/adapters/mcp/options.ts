import { SPAN_MODES } from "../../engine/options/tool.js";
import { SelfHealConfigError, type ToolOptions, type ToolSpanMode } from "../../index.js";
import {
  knownKeys,
  object,
  optionalBoolean,
  optionalChoice,
  optionalFunction,
  withMethods,
  type Plain,
} from "../../engine/options/validate.js";
import type { RefusalMode } from "./errors.js";
import type { McpToolCall, McpToolResult } from "./types.js";

/** selfheal's options for the MCP tools: all but what the adapter decides (readOnly, span). */
export type McpToolOptions = Pick<
  ToolOptions<McpToolCall, McpToolResult>,
  | "timeoutMs"
  | "deadlineMs"
  | "idempotencyKey"
  | "plans"
  | "cannedAnswer"
  | "provider"
  | "providers"
  | "type"
>;

export interface HealMcpOptions {
  /**
   * Read-only tools where the server gives no `annotations.readOnlyHint`: a list of MCP tool
   * names or a predicate. A tool neither annotated nor listed here is a write (refused while
   * the agent is critical).
   */
  readOnly?: readonly string[] | ((toolName: string) => boolean);
  /**
   * Whether a server's `readOnlyHint` decides (default true). Annotations are the server's
   * word: set false for a server you do not trust, and `readOnly` alone decides.
   */
  trustAnnotations?: boolean;
  /** selfheal tool options for all MCP tools, or per MCP tool name. */
  toolOptions?: McpToolOptions | ((toolName: string) => McpToolOptions | undefined);
  /**
   * The selfheal tool name (health scope, breaker, metric label) of an MCP tool; default its
   * MCP name. Give each server its own when two servers of one agent share a tool name.
   */
  toolName?: (toolName: string) => string;
  /**
   * `attach` when another instrumentation already opens a span for each MCP call: selfheal's
   * attributes go on it, with no second tool-call span. Only on a span that is that call's own
   * (named `tools/call <tool>`, or with `mcp.method.name` `tools/call` and `gen_ai.tool.name`
   * `<tool>`, and not attached to by an earlier call); under any other span the call opens its
   * own, as with `child`. Default `child`.
   */
  spans?: ToolSpanMode;
  /**
   * How a refusal (a write refused while critical, an open circuit, an escalation) reaches the
   * caller: `result` (default), an `isError` result the model can read, as MCP reports a tool's
   * failure (its `_meta["selfheal/refusal"]` names the error); or `throw`, the selfheal error.
   */
  refusals?: RefusalMode;
  /** Put the call's trace context in `params._meta` (`traceparent`), default true. */
  propagateContext?: boolean;
}

/** The options with their defaults, read once. */
export interface McpSettings {
  readOnly: (toolName: string) => boolean;
  trustAnnotations: boolean;
  toolOptions: (toolName: string) => McpToolOptions | undefined;
  toolName: (toolName: string) => string;
  spans: ToolSpanMode | undefined;
  refusals: RefusalMode;
  propagateContext: boolean;
}

const FIELD = "healMcpClient(options)";
const KEYS = [
  "readOnly",
  "trustAnnotations",
  "toolOptions",
  "toolName",
  "spans",
  "refusals",
  "propagateContext",
] as const satisfies readonly (keyof HealMcpOptions)[];
const REFUSAL_MODES: readonly RefusalMode[] = ["result", "throw"];
/** Tool options the adapter sets itself: from the server's annotations, and `spans`. */
const ADAPTER_OWNED = ["readOnly", "span", "kind", "isEmpty"];

/** `readOnly`: a list of tool names, or a predicate. */
function readOnlyRule(value: unknown): (toolName: string) => boolean {
  if (value === undefined) return () => false;
  if (typeof value === "function")
    return (name) => (value as (n: string) => unknown)(name) === true;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) {
    const names = new Set<string>(value);
    return (name) => names.has(name);
  }
  throw new SelfHealConfigError(
    `${FIELD}.readOnly`,
    "expected a list of MCP tool names or a function (toolName) => boolean",
  );
}

/** A tool options object: the adapter's own options are refused by name. */
function checkToolOptions(value: unknown, field: string): McpToolOptions | undefined {
  if (value === undefined) return undefined;
  const o = object(value, field);
  for (const key of ADAPTER_OWNED) {
    if (o[key] !== undefined) {
      throw new SelfHealConfigError(
        `${field}.${key}`,
        "set by the adapter (readOnly from the tool's annotations or the readOnly option, span from spans)",
      );
    }
  }
  return o;
}

function toolOptionsRule(value: unknown): McpSettings["toolOptions"] {
  const field = `${FIELD}.toolOptions`;
  if (typeof value !== "function") {
    const shared = checkToolOptions(value, field);
    return () => shared;
  }
  const perTool = value as (toolName: string) => unknown;
  return (name) => checkToolOptions(perTool(name), `${field}("${name}")`);
}

/** Validates the adapter's arguments once; a bad one throws SelfHealConfigError naming it. */
export function resolveSettings(sh: unknown, client: unknown, input: unknown): McpSettings {
  withMethods(sh, "healMcpClient(sh)", ["tool"]);
  withMethods(client, "healMcpClient(client)", ["callTool", "listTools"]);
  const o: Plain = input === undefined ? {} : object(input, FIELD);
  knownKeys(o, KEYS, FIELD);
  optionalBoolean(o.trustAnnotations, `${FIELD}.trustAnnotations`);
  optionalFunction(o.toolName, `${FIELD}.toolName`);
  optionalBoolean(o.propagateContext, `${FIELD}.propagateContext`);
  const toolName = o.toolName as ((n: string) => string) | undefined;
  return {
    readOnly: readOnlyRule(o.readOnly),
    trustAnnotations: o.trustAnnotations !== false,
    toolOptions: toolOptionsRule(o.toolOptions),
    toolName: toolName ?? ((name) => name),
    spans: optionalChoice(o.spans, SPAN_MODES, `${FIELD}.spans`),
    refusals: optionalChoice(o.refusals, REFUSAL_MODES, `${FIELD}.refusals`) ?? "result",
    propagateContext: o.propagateContext !== false,
  };
}
