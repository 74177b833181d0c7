import { SelfHealConfigError } from "../../errors.js";
import type { ToolOptions } from "../../index.js";
import {
  knownKeys,
  object,
  optionalFunction,
  show,
  type Plain,
} from "../../engine/options/validate.js";

/**
 * selfheal options for one Mastra tool, by its name in the agent's `tools`: those of `sh.tool`
 * except what the adapter sets (`readOnly` comes from the `readOnly` option, `kind` is `tool`,
 * each call has its own `agent.tool_call` span). `idempotencyKey` and `cannedAnswer` receive the
 * tool's input.
 */
export type MastraToolOptions = Omit<ToolOptions, "readOnly" | "kind" | "isEmpty" | "span">;

/** Options of `healTools`. */
export interface HealToolsOptions {
  /**
   * The tools that only read, by their names in the agent's `tools`: a list, or a predicate.
   * Every other tool is a write, refused while the agent is critical (a tool is never guessed
   * to read, not even from its MCP `readOnlyHint`).
   */
  readOnly?: readonly string[] | ((toolName: string) => boolean);
  /** selfheal options per tool name (timeoutMs, deadlineMs, plans, idempotencyKey, providers, ...). */
  tools?: Readonly<Record<string, MastraToolOptions>>;
}

const KEYS = ["readOnly", "tools"] as const satisfies readonly (keyof HealToolsOptions)[];

/** What the adapter sets itself; a per-tool value would silently change the tool's safety. */
const SET_BY_ADAPTER: Readonly<Record<string, string>> = {
  readOnly: "list read-only tools in the readOnly option of healTools",
  kind: "Mastra tools are `tool`; model calls go through healModel",
  isEmpty: "empty answers are judged on model calls (healModel), not tools",
  span: "each Mastra tool call opens its own agent.tool_call span",
};

/** Validates healTools' arguments; names in `readOnly` and `tools` must be tools of the set. */
export function checkToolsOptions(tools: unknown, input: unknown): HealToolsOptions {
  const set = object(tools, "healTools(tools)");
  const field = "healTools.options";
  const o = input === undefined ? {} : object(input, field);
  knownKeys(o, KEYS, field);
  checkReadOnly(o.readOnly, set, `${field}.readOnly`);
  if (o.tools !== undefined) {
    const overrides = object(o.tools, `${field}.tools`);
    for (const [name, value] of Object.entries(overrides))
      checkToolOverrides(name, value, set, `${field}.tools.${name}`);
  }
  return o;
}

function checkReadOnly(value: unknown, tools: Plain, field: string): void {
  if (value === undefined || typeof value === "function") return;
  if (!Array.isArray(value))
    throw new SelfHealConfigError(field, "expected a list of tool names or a function");
  for (const name of value as unknown[]) {
    if (typeof name !== "string" || !Object.hasOwn(tools, name)) {
      throw new SelfHealConfigError(
        field,
        `${show(name)} is not a tool of this set (its names are the keys of the agent's tools): a misspelt read would be treated as a write`,
      );
    }
  }
}

function checkToolOverrides(name: string, value: unknown, tools: Plain, field: string): void {
  if (!Object.hasOwn(tools, name))
    throw new SelfHealConfigError(field, "no tool of this name in the set (a typo?)");
  const o = object(value, field);
  for (const [key, why] of Object.entries(SET_BY_ADAPTER)) {
    if (o[key] !== undefined) throw new SelfHealConfigError(`${field}.${key}`, why);
  }
  // Wrapped to receive the input: checked here so a bad one fails now, not at the first call.
  optionalFunction(o.idempotencyKey, `${field}.idempotencyKey`);
  optionalFunction(o.cannedAnswer, `${field}.cannedAnswer`);
}

/** Read-only only when declared: a tool it does not name is a write (refused while critical). */
export function isReadOnly(name: string, declared: HealToolsOptions["readOnly"]): boolean {
  if (declared === undefined) return false;
  return typeof declared === "function" ? declared(name) : declared.includes(name);
}
