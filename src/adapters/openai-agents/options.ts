import { SPAN_MODES } from "../../engine/options/tool.js";
import type { FunctionTool, RunContext } from "@openai/agents";
import { SelfHealConfigError, type Plans, type ToolOptions } from "../../index.js";
import {
  knownKeys,
  object,
  optionalChoice,
  optionalFunction,
  show,
  withMethods,
} from "../../engine/options/validate.js";

/** The details the Agents SDK hands a tool's `invoke` (its type is not exported by name). */
export type ToolCallDetails = Parameters<FunctionTool["invoke"]>[2];

/**
 * Which tools only read: a list of names, a predicate, or (for one tool) a boolean. A tool it
 * does not name is a write, refused while the agent is critical: never guessed from a name.
 */
export type ReadOnlySpec = boolean | readonly string[] | ((toolName: string) => boolean);

/** Options of `healTool` and `healTools`. */
export interface HealToolOptions {
  /** The tools that only read. Default: none (every tool is a write). */
  readOnly?: ReadOnlySpec;
  /**
   * Per-attempt timeout, ms. Default: the tool's own `timeoutMs`, which selfheal then enforces
   * per attempt (the SDK's timeout would otherwise cut recovery short).
   */
  timeoutMs?: number;
  /** The longest a call may take, recovery included, ms (default `recovery.deadlineMs`). */
  deadlineMs?: number;
  /**
   * Key that makes a write safe to retry, from the model's parsed arguments. A write without
   * one is never retried (it may have been applied). Use the same key in the tool's request.
   */
  idempotencyKey?: (input: unknown, toolName: string) => string | undefined;
  /** `gen_ai.provider.name` of the service behind the tools. */
  provider?: string;
  /** Recovery chains by pattern for these tools. */
  plans?: Plans;
  /**
   * `child` (default): each call is a tool-call span under the active OpenTelemetry
   * span. `attach`: selfheal writes on the active span instead; only when an OpenTelemetry
   * bridge makes the Agents SDK's function span active (the SDK's own spans are not
   * OpenTelemetry spans).
   */
  spans?: ToolSpan;
  /**
   * What the model reads when recovery gives up: the signature of the SDK's `errorFunction`, so
   * an existing one can be passed as is (a method, so a function typed for your run context
   * fits). Default: `defaultToolErrorMessage`.
   */
  errorFunction?(runContext: RunContext, error: unknown, details?: ToolCallDetails): unknown;
  /** Where adapter warnings go (a tool whose errors selfheal cannot see). Default `console`. */
  logger?: { warn(message: string): void };
}

export type ToolSpan = NonNullable<ToolOptions["span"]>;

const KEYS = [
  "readOnly",
  "timeoutMs",
  "deadlineMs",
  "idempotencyKey",
  "provider",
  "plans",
  "spans",
  "errorFunction",
  "logger",
] as const satisfies readonly (keyof HealToolOptions)[];

/**
 * Checks the adapter's own options; those passed through to `sh.tool` (timeouts, plans,
 * provider) are checked there. `toolNames`, when known, catches a read-only name that matches
 * no tool (a typo would silently turn a read into a write).
 */
export function validateHealOptions(
  input: unknown,
  field: string,
  toolNames?: readonly string[],
): HealToolOptions {
  if (input === undefined) return {};
  const o = object(input, field);
  knownKeys(o, KEYS, field);
  checkReadOnly(o.readOnly, `${field}.readOnly`, toolNames);
  optionalFunction(o.idempotencyKey, `${field}.idempotencyKey`);
  optionalFunction(o.errorFunction, `${field}.errorFunction`);
  optionalChoice(o.spans, SPAN_MODES, `${field}.spans`);
  if (o.logger !== undefined) withMethods(o.logger, `${field}.logger`, ["warn"]);
  return o;
}

function checkReadOnly(value: unknown, field: string, toolNames?: readonly string[]): void {
  if (value === undefined || typeof value === "boolean" || typeof value === "function") return;
  if (!Array.isArray(value)) {
    throw new SelfHealConfigError(
      field,
      `expected a list of tool names, a function (toolName) => boolean or a boolean, got ${show(value)}`,
    );
  }
  for (const name of value as unknown[]) {
    if (typeof name !== "string")
      throw new SelfHealConfigError(field, `expected tool names, got ${show(name)}`);
    if (toolNames && !toolNames.includes(name)) {
      throw new SelfHealConfigError(
        field,
        `"${name}" is not one of the tools (${toolNames.join(", ")}): a misspelt read would be treated as a write`,
      );
    }
  }
}

/** Whether a tool only reads, by the spec; what it does not name is a write. */
export function isReadOnly(spec: ReadOnlySpec | undefined, toolName: string): boolean {
  if (spec === undefined) return false;
  if (typeof spec === "boolean") return spec;
  if (typeof spec === "function") return spec(toolName);
  return spec.includes(toolName);
}
