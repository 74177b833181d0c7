import type { CallContext, CallOptions, SelfHealing } from "../../index.js";
import {
  checkSameSafety,
  inputToolOptions,
  isReadOnly,
  ToolRegistry,
  type Registration,
} from "../tool-set.js";
import { checkToolsOptions, type HealToolsOptions } from "./options.js";
import type { Tool, ToolContext, ToolsInput } from "./types.js";

/** A tool's `execute` as the adapter calls it: the input and Mastra's context, passed on. */
type Execute = (input: unknown, context: ToolContext | undefined) => unknown;

/**
 * One execution as selfheal sees it: the input (all that a span may show, see `toJSON`), and the
 * tool's own `execute` with Mastra's context, so one registration serves every copy of a tool
 * (tools built per request, `tools: ({ requestContext }) => ...`, share their name and health).
 */
class Execution {
  constructor(
    readonly input: unknown,
    readonly execute: Execute,
    readonly owner: Tool,
    readonly context: ToolContext | undefined,
  ) {}

  /** `recordArguments` shows the input, not the request context or the conversation. */
  toJSON(): unknown {
    return this.input;
  }
}

/** The selfheal tool of each Mastra tool, per instance and name. */
const registry = new ToolRegistry<Execution>();

/**
 * The `execute` functions `healTools` made, with the instance and registration they call. A tool
 * whose `execute` is one of them (a healed set healed again, a copy of a healed tool) is passed
 * through: healing it twice would nest two selfheal calls for one execution.
 */
const healedExecutes = new WeakMap<
  Execute,
  { sh: SelfHealing; registration: Registration<Execution> }
>();

/**
 * The selfheal call context of each attempt, by the abort signal selfheal gave it. Mastra's
 * Tool copies the context it is handed before the tool's own `execute` sees it, but keeps its
 * `abortSignal`: the signal, made per attempt, is what finds the attempt again.
 */
const contexts = new WeakMap<AbortSignal, CallContext>();

/**
 * The selfheal call context of this attempt, from inside a healed tool's `execute` (its second
 * argument, Mastra's ToolExecutionContext): pass `idempotencyKey` to the API a write calls, read
 * `attempt`, `provider`, `mode`. Undefined when the tool was not called through `healTools`.
 */
export function callContextOf(context: {
  readonly abortSignal?: AbortSignal | undefined;
}): CallContext | undefined {
  const signal = context.abortSignal;
  return signal === undefined ? undefined : contexts.get(signal);
}

/**
 * Heals the tools of a Mastra agent (the record given to `new Agent({ tools })`, or returned by
 * its `tools` function): each tool's `execute` becomes a selfheal call (span, health, diagnosis,
 * recovery, writes refused while the agent is critical). Mastra tools (`createTool`) and AI SDK
 * tools alike; tools without `execute` pass as they are. Returns a new record of the same type,
 * each healed tool a copy of the original (same class, schemas, approval, MCP settings). A tool
 * name is registered on the instance once: call it per request or once.
 *
 * What recovery cannot fix is thrown from `execute`, as a failing tool does: Mastra turns it into
 * the tool's error result, and the model reads the error's message.
 */
export function healTools<TOOLS extends ToolsInput>(
  sh: SelfHealing,
  tools: TOOLS,
  options?: HealToolsOptions,
): TOOLS {
  const checked = checkToolsOptions(tools, options);
  const healed: Record<string, Tool> = {};
  for (const [name, tool] of Object.entries(tools)) {
    healed[name] =
      typeof tool.execute === "function"
        ? healTool(sh, name, tool, tool.execute as Execute, checked)
        : tool;
  }
  return healed as TOOLS;
}

function healTool(
  sh: SelfHealing,
  name: string,
  tool: Tool,
  execute: Execute,
  options: HealToolsOptions,
): Tool {
  const readOnly = isReadOnly(name, options.readOnly);
  const healed = healedExecutes.get(execute);
  if (healed?.sh === sh) {
    checkSameSafety(name, healed.registration.readOnly, readOnly);
    return tool;
  }
  const registration = registry.register(
    sh,
    name,
    inputToolOptions<Execution>(readOnly, options.tools?.[name]),
    runExecution,
  );
  const healedExecute: Execute = (input, context) =>
    registration.call(new Execution(input, execute, tool, context), callOptions(context));
  healedExecutes.set(healedExecute, { sh, registration });
  return copyWith(tool, "execute", healedExecute);
}

/** The run's abort signal and the model's tool call id (a Mastra tool's, or an AI SDK tool's). */
function callOptions(context: ToolContext | undefined): CallOptions {
  const id = context?.agent?.toolCallId ?? context?.toolCallId;
  const signal = context?.abortSignal;
  return {
    // A blank id (a provider that sends none, a tool run outside an agent) is left out.
    ...(typeof id === "string" && id.trim() !== "" && { toolCallId: id }),
    ...(signal !== undefined && { signal }),
  };
}

/**
 * One attempt: the tool's own `execute` (for a Mastra tool, the Tool's, which validates the input
 * and the output against its schemas) with Mastra's context, its `abortSignal` selfheal's (aborted
 * on timeout, the deadline or the run's abort).
 */
function runExecution(e: Execution, ctx: CallContext): unknown {
  const signal = ctx.signal;
  contexts.set(signal, ctx);
  return e.execute.call(e.owner, e.input, { ...e.context, abortSignal: signal });
}

/**
 * A copy of `tool` (its prototype and every own property, symbols included: Mastra knows its
 * tools by a symbol-keyed marker) with `key` set to `value`.
 */
function copyWith<T extends object>(tool: T, key: string, value: unknown): T {
  const copy = Object.create(
    Object.getPrototypeOf(tool) as object | null,
    Object.getOwnPropertyDescriptors(tool),
  ) as T;
  Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}
