import { checkToolSetOptions, type ReadOnlyTools, type ToolSetToolOptions } from "../tool-set.js";

/**
 * selfheal options for one Mastra tool, by its name in the agent's `tools` (see ToolSetToolOptions:
 * each call has its own tool-call span).
 */
export type MastraToolOptions = ToolSetToolOptions;

/** Options of `healTools`. */
export interface HealToolsOptions {
  /**
   * The tools that only read, by their names in the agent's `tools`: a list, or a predicate.
   * Every other tool is a write, refused while the agent is critical (a tool is never guessed
   * to read, not even from its MCP `readOnlyHint`).
   */
  readOnly?: ReadOnlyTools;
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
  return checkToolSetOptions(tools, input, {
    keys: KEYS,
    setByAdapter: SET_BY_ADAPTER,
    notATool:
      "is not a tool of this set (its names are the keys of the agent's tools): a misspelt read would be treated as a write",
  });
}
