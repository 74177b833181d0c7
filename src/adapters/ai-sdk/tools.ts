import type { CallContext, CallOptions, SelfHealing } from "../../index.js";
import {
  checkSameSafety,
  inputToolOptions,
  isReadOnly,
  ToolRegistry,
  type Registration,
} from "../tool-set.js";
import { checkToolsOptions, type HealToolsOptions } from "./options.js";
import { inFrameworkSpan, toolSpans } from "./spans.js";
import type { Tool, ToolCallOptions, ToolSet } from "./types.js";

/** A tool's `execute` as the adapter calls it: the SDK's input and options, passed on. */
type Execute = (input: unknown, options: ToolCallOptions) => unknown;

/**
 * One execution as selfheal sees it: the input (all that a span may show, see `toJSON`), and the
 * tool's own `execute` with the SDK's options, so one registration serves every copy of a tool
 * (tools built per request, closing over the request, share their name and health).
 */
class Execution {
  constructor(
    readonly input: unknown,
    readonly execute: Execute,
    readonly owner: Tool,
    readonly options: ToolCallOptions,
  ) {}

  /** `recordArguments` shows the input, not the conversation in `options.messages`. */
  toJSON(): unknown {
    return this.input;
  }
}

/** The selfheal tool of each AI SDK tool, per instance and name. */
const registry = new ToolRegistry<Execution>();

/**
 * The `execute` functions `healTools` made, with the instance and registration they call. A tool
 * whose `execute` is one of them (a healed set healed again, or a copy of a healed tool) is
 * passed through: healing it twice would nest two selfheal calls, two spans, two health samples
 * and two recovery loops for one execution.
 */
const healedExecutes = new WeakMap<
  Execute,
  { sh: SelfHealing; registration: Registration<Execution> }
>();

/** The selfheal call context of an execution, by the options object its `execute` received. */
const contexts = new WeakMap<ToolCallOptions, CallContext>();

/**
 * The selfheal call context of this attempt, from inside a healed tool's `execute`: pass
 * `idempotencyKey` to the API a write calls, read `attempt`, `provider`, `mode`. Undefined when
 * the tool was not called through `healTools`.
 */
export function callContextOf(options: ToolCallOptions): CallContext | undefined {
  return contexts.get(options);
}

/**
 * Heals the tools of an AI SDK ToolSet: each tool's `execute` becomes a selfheal call (span,
 * health, diagnosis, recovery, writes refused while critical). Returns a new set of the same
 * shape; tools without `execute` are passed as they are. Call it per request or once: a tool
 * name is registered on the instance once, and its options are those of the first call.
 */
export function healTools<TOOLS extends ToolSet>(
  sh: SelfHealing,
  tools: TOOLS,
  options?: HealToolsOptions,
): TOOLS {
  const checked = checkToolsOptions(tools, options);
  const healed: Record<string, Tool> = {};
  for (const [name, tool] of Object.entries(tools)) {
    healed[name] = tool.execute ? healTool(sh, name, tool, tool.execute as Execute, checked) : tool;
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
    {
      ...inputToolOptions<Execution>(readOnly, options.tools?.[name]),
      ...(options.spans !== undefined && { span: options.spans }),
    },
    runExecution,
  );
  const sdkSpans = toolSpans(name);
  const healedExecute = (input: unknown, sdk: ToolCallOptions): Promise<unknown> =>
    inFrameworkSpan(options.spans, sdkSpans, () =>
      registration.call(new Execution(input, execute, tool, sdk), callOptions(sdk)),
    );
  healedExecutes.set(healedExecute, { sh, registration });
  return { ...tool, execute: healedExecute };
}

/** The SDK's abort signal and tool call id, as the call's options. */
function callOptions(sdk: ToolCallOptions): CallOptions {
  return {
    // A blank id (a provider that sends none) is left out: selfheal rejects an empty one.
    ...(sdk.toolCallId.trim() !== "" && { toolCallId: sdk.toolCallId }),
    ...(sdk.abortSignal !== undefined && { signal: sdk.abortSignal }),
  };
}

/**
 * One attempt: the tool's `execute` with selfheal's signal (aborted on timeout or the SDK's
 * abort). A streaming tool (an async iterable) is read to its last value, its final output.
 */
async function runExecution(e: Execution, ctx: CallContext): Promise<unknown> {
  const options: ToolCallOptions = { ...e.options, abortSignal: ctx.signal };
  contexts.set(options, ctx);
  const output: unknown = await e.execute.call(e.owner, e.input, options);
  return isAsyncIterable(output) ? lastOf(output, ctx.signal) : output;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] === "function"
  );
}

/**
 * The last value of a streaming tool. Once the attempt is over (timed out, aborted) nothing more
 * is pulled and the iterator is closed: a generator that ignores its signal would otherwise run
 * on beside the retry, its late output dropped anyway.
 */
async function lastOf(outputs: AsyncIterable<unknown>, signal: AbortSignal): Promise<unknown> {
  let last: unknown;
  for await (const output of outputs) {
    if (signal.aborted) break;
    last = output;
  }
  return last;
}
