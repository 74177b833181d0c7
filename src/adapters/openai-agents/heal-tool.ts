import {
  getCurrentSpan,
  invokeFunctionTool,
  ModelBehaviorError,
  type FunctionTool,
  type RunContext,
  type Tool,
  type ToolInputParameters,
} from "@openai/agents";
import {
  SelfHealConfigError,
  type CallOptions,
  type SelfHealing,
  type ToolOptions,
  type WrappedTool,
} from "../../index.js";
import { markHealed } from "./healed-spans.js";
import {
  failureOutput,
  HiddenToolError,
  SDK_DEFAULT_TOOL_ERROR,
  ToolInputRejectedError,
} from "./tool-output.js";
import {
  isReadOnly,
  validateHealOptions,
  type HealToolOptions,
  type ToolCallDetails,
} from "./options.js";

/**
 * One call of a healed tool as selfheal's wrapper receives it: the model's arguments, and one
 * attempt of the tool the call came through, so one registration serves every copy of a tool
 * name (tools built per run, closing over the run, share their name and health).
 */
class Invocation {
  constructor(
    readonly input: string,
    readonly attempt: (signal: AbortSignal) => Promise<unknown>,
  ) {}

  /** What `recordArguments` puts on the span: the model's arguments, not the run context. */
  toJSON(): string {
    return this.input;
  }
}

/** A tool name's selfheal tool, with the read-only verdict it was registered under. */
interface Registration {
  readonly readOnly: boolean;
  readonly call: WrappedTool<Invocation, unknown>;
}

/**
 * Any Agents SDK tool (`Tool<C>` of @openai/agents spells its members with `any`, which the
 * lint rules rightly refuse to pass on): every tool has a `type`.
 */
type ToolLike = Pick<Tool, "type">;

/** A function tool of any context and schema (the SDK's own `Tool` type spells it with any). */
type AnyFunctionTool = FunctionTool<never, ToolInputParameters>;

/** Healed tools by instance and original: healing a tool again returns its first copy. */
const healedByInstance = new WeakMap<SelfHealing, WeakMap<object, object>>();
/** The selfheal tool of each tool name, per instance: `sh.tool` takes a name once. */
const registrations = new WeakMap<SelfHealing, Map<string, Registration>>();
/** Every healed tool: healing one again returns it unchanged. */
const healedTools = new WeakSet<object>();

/**
 * Heals one Agents SDK function tool: a copy with the same name, schema and settings whose
 * `invoke` runs through `sh.tool` (span, health, diagnosis, recovery, read-only guard). What
 * recovery cannot fix becomes the tool's output (see `errorFunction`), as the SDK does. Healing
 * the same tool again returns the first copy.
 */
export function healTool<C, P extends ToolInputParameters, R>(
  sh: SelfHealing,
  tool: FunctionTool<C, P, R>,
  options?: HealToolOptions,
): FunctionTool<C, P, R> {
  if (healedTools.has(tool)) return tool;
  if (!isFunctionTool(tool)) {
    throw new SelfHealConfigError(
      "healTool(tool)",
      "expected a function tool (made with tool() from @openai/agents)",
    );
  }
  const field = `healTool("${tool.name}").options`;
  const o = validateHealOptions(options, field);
  return once(sh, tool, () => wrap(sh, tool, o, readOnlyOf(o, tool.name, field), field));
}

/**
 * Heals every function tool of a list (`new Agent({ tools: healTools(sh, [...]) })`); hosted,
 * computer, shell and patch tools pass through unchanged. `readOnly` names the tools that only
 * read: every other tool is a write, refused while the agent is critical.
 */
export function healTools<T extends ToolLike>(
  sh: SelfHealing,
  tools: readonly T[],
  options?: HealToolOptions,
): T[] {
  // Not Array.isArray on the list itself: it narrows a readonly T[] to any[].
  if (!isList(tools))
    throw new SelfHealConfigError("healTools(tools)", "expected a list of Agents SDK tools");
  const names = tools.flatMap((t) => (isFunctionTool(t) ? [t.name] : []));
  const o = validateHealOptions(options, "healTools(options)", names);
  return tools.map((t) => healListed(sh, t, o, "healTools(options)"));
}

function isList(value: unknown): boolean {
  return Array.isArray(value);
}

function isFunctionTool(tool: unknown): tool is AnyFunctionTool {
  return (
    typeof tool === "object" &&
    tool !== null &&
    (tool as { type?: unknown }).type === "function" &&
    typeof (tool as { invoke?: unknown }).invoke === "function"
  );
}

/** A tool of a list, healed when it is a function tool not healed yet. */
function healListed<T>(sh: SelfHealing, tool: T, o: HealToolOptions, field: string): T {
  if (!isFunctionTool(tool) || healedTools.has(tool)) return tool;
  return once(sh, tool, () => wrap(sh, tool, o, readOnlyOf(o, tool.name, field), field));
}

/** The `readOnly` verdict for one tool; a predicate must answer with a boolean. */
function readOnlyOf(o: HealToolOptions, name: string, field: string): boolean {
  const verdict: unknown = isReadOnly(o.readOnly, name);
  if (typeof verdict !== "boolean") {
    throw new SelfHealConfigError(
      `${field}.readOnly`,
      `expected true or false for tool "${name}", got ${typeof verdict}`,
    );
  }
  return verdict;
}

/** The healed copy of `tool` for `sh`, made on first use. */
function once<T extends object>(sh: SelfHealing, tool: T, make: () => object): T {
  let byTool = healedByInstance.get(sh);
  if (!byTool) {
    byTool = new WeakMap();
    healedByInstance.set(sh, byTool);
  }
  const known = byTool.get(tool) as T | undefined;
  if (known) return known;
  // A copy of the same tool: only invoke and timeoutMs differ.
  const healed = make() as T;
  byTool.set(tool, healed);
  healedTools.add(healed);
  return healed;
}

function wrap<C, P extends ToolInputParameters, R>(
  sh: SelfHealing,
  tool: FunctionTool<C, P, R>,
  o: HealToolOptions,
  readOnly: boolean,
  field: string,
): FunctionTool<C, P, R> {
  const logger = o.logger ?? console;
  let warned = false;
  const onHidden = () => {
    if (warned) return;
    warned = true;
    logger.warn(`selfheal: ${new HiddenToolError(tool.name).message}`);
  };
  const { call } = register(sh, tool, o, readOnly, field);
  // The original with its own timer off however it is invoked (the SDK's invokeFunctionTool
  // tells the tool so): selfheal times each attempt.
  const untimed = copyWith(tool, { timeoutMs: undefined });
  const invoke: FunctionTool<C, P, R>["invoke"] = async (runContext, input, details) => {
    // The SDK's function span of this call: the trace processor must not count it again.
    const span = getCurrentSpan();
    if (span) markHealed(span, sh);
    const inv = new Invocation(input, (signal) =>
      attempt(untimed, runContext, input, withSignal(details, signal), onHidden),
    );
    try {
      return (await call(inv, callOptions(details))) as string | R;
    } catch (error) {
      return (await failureOutput(tool, o, { runContext, details, span }, error)) as string | R;
    }
  };
  // The SDK's timeout would wrap the whole healed call, recovery included; selfheal enforces it
  // per attempt instead (toolOptions).
  return copyWith(tool, { invoke, timeoutMs: undefined });
}

/**
 * The selfheal tool of `tool`'s name on `sh`, registered on first use with these options. A later
 * copy of the same name (a tool built per run) shares it, and must agree on `readOnly`.
 */
function register<C, P extends ToolInputParameters, R>(
  sh: SelfHealing,
  tool: FunctionTool<C, P, R>,
  o: HealToolOptions,
  readOnly: boolean,
  field: string,
): Registration {
  let byName = registrations.get(sh);
  if (!byName) registrations.set(sh, (byName = new Map<string, Registration>()));
  const existing = byName.get(tool.name);
  if (existing) {
    if (existing.readOnly === readOnly) return existing;
    throw new SelfHealConfigError(
      `${field}.readOnly`,
      `tool "${tool.name}" was healed before as ${existing.readOnly ? "read-only" : "a write"}; a tool name is one tool on an instance, declare it the same way everywhere`,
    );
  }
  const call = sh.tool<Invocation, unknown>(tool.name, toolOptions(tool, o, readOnly), (inv, ctx) =>
    inv.attempt(ctx.signal),
  );
  const registration = { readOnly, call };
  byName.set(tool.name, registration);
  return registration;
}

/**
 * One attempt: the original tool, its own timer off, under selfheal's signal (its timeout, the
 * caller's abort). A failure the SDK hid behind its default text and the model's bad arguments
 * become errors selfheal can read (UNKNOWN and BAD_REQUEST).
 */
async function attempt<C, P extends ToolInputParameters, R>(
  untimed: FunctionTool<C, P, R>,
  runContext: RunContext<C>,
  input: string,
  details: NonNullable<ToolCallDetails>,
  onHidden: () => void,
): Promise<unknown> {
  let output: unknown;
  try {
    output = await invokeFunctionTool({ tool: untimed, runContext, input, details });
  } catch (error) {
    if (error instanceof ModelBehaviorError)
      throw new ToolInputRejectedError(untimed.name, { cause: error });
    throw error;
  }
  if (output !== SDK_DEFAULT_TOOL_ERROR) return output;
  onHidden();
  throw new HiddenToolError(untimed.name);
}

function toolOptions<C, P extends ToolInputParameters, R>(
  tool: FunctionTool<C, P, R>,
  o: HealToolOptions,
  readOnly: boolean,
): ToolOptions<Invocation> {
  const timeoutMs = o.timeoutMs ?? tool.timeoutMs;
  const key = o.idempotencyKey;
  return {
    readOnly,
    kind: "tool",
    type: "function",
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(o.deadlineMs !== undefined && { deadlineMs: o.deadlineMs }),
    ...(o.provider !== undefined && { provider: o.provider }),
    ...(o.plans !== undefined && { plans: o.plans }),
    ...(o.spans !== undefined && { span: o.spans }),
    ...(key && {
      idempotencyKey: (inv: Invocation) => key(parseArguments(inv.input), tool.name),
    }),
  };
}

function callOptions(details: ToolCallDetails): CallOptions {
  const options: CallOptions = {};
  const id = details?.toolCall?.callId;
  if (typeof id === "string" && id !== "") options.toolCallId = id;
  if (details?.signal) options.signal = details.signal;
  return options;
}

/**
 * The details with another signal. Copied with their descriptors: the runner keeps its state
 * (usage recorder, parent span, trace policy, timeout flag) in non-enumerable symbol keys.
 */
function withSignal(details: ToolCallDetails, signal: AbortSignal): NonNullable<ToolCallDetails> {
  return details ? copyWith(details, { signal }) : { signal };
}

/** A copy of `value` (prototype and every own property, symbols included) with `overrides`. */
function copyWith<T extends object>(value: T, overrides: Record<string, unknown>): T {
  const copy = Object.create(
    Object.getPrototypeOf(value) as object | null,
    Object.getOwnPropertyDescriptors(value),
  ) as T;
  for (const [key, v] of Object.entries(overrides)) {
    Object.defineProperty(copy, key, {
      value: v,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}

function parseArguments(input: string): unknown {
  try {
    return JSON.parse(input) as unknown;
  } catch {
    return input;
  }
}
