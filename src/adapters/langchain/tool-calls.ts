import { ToolMessage, type MessageContent } from "@langchain/core/messages";
import type { WrapToolCallHook } from "langchain";
import {
  isSelfHealError,
  type SelfHealing,
  type ToolOptions,
  type WrappedTool,
} from "../../index.js";
import { describeThrown, oneLine, redact } from "../../telemetry/redact.js";
import {
  Invocation,
  passesToolError,
  passing,
  settled,
  toolCallIdOption,
  withSignal,
  type Outcome,
} from "./invocation.js";
import type { LangChainToolSettings, OnToolFailure, ToolArgs } from "./options.js";
import { LinkedSignal } from "./linked-signal.js";
import { registeredTool } from "./registry.js";

type ToolCallRequest = Parameters<WrapToolCallHook>[0];
type ToolCallHandler = Parameters<WrapToolCallHook>[1];

/** What a tool call answers in LangChain: a ToolMessage, or a Command. */
export type ToolAnswer = Awaited<ReturnType<ToolCallHandler>>;

/** Marks a tool `healTool` already wrapped: the middleware passes it straight on. */
export const HEALED = Symbol.for("selfheal:langchain:healed");

export const isHealed = (tool: unknown): boolean =>
  typeof tool === "object" && tool !== null && (tool as Record<symbol, unknown>)[HEALED] === true;

/** Longest error text an error ToolMessage shows the model (redacted first). */
const MAX_ERROR_TEXT = 500;

/** The selfheal tool options of one LangChain tool. */
export function toolOptions<R>(
  readOnly: boolean,
  settings: LangChainToolSettings | undefined,
  span: ToolOptions["span"],
): ToolOptions<Invocation<R>, Outcome<R>> {
  const { idempotencyKey, ...rest } = settings ?? {};
  return {
    ...rest,
    readOnly,
    ...(idempotencyKey && {
      idempotencyKey: (call: Invocation<R>) => idempotencyKey(call.args as ToolArgs),
    }),
    ...(span !== undefined && { span }),
  };
}

type HealedToolCall = WrappedTool<Invocation<ToolAnswer>, Outcome<ToolAnswer>>;

/** The middleware's tool side: each call through its selfheal tool, failures as LangChain shows them. */
export class ToolCalls {
  /**
   * The selfheal tool of each name this middleware has called, so `optionsOf` (and with it the
   * user's `readOnly` test) is asked once per name. Only names of the agent's tools get here.
   */
  private readonly byName = new Map<string, HealedToolCall>();

  constructor(
    private readonly sh: SelfHealing,
    private readonly optionsOf: (
      name: string,
    ) => ToolOptions<Invocation<ToolAnswer>, Outcome<ToolAnswer>>,
    private readonly onFailure: OnToolFailure,
  ) {}

  /** Registers a tool now, so its settings are checked when the middleware is made. */
  register(name: string): HealedToolCall {
    let tool = this.byName.get(name);
    if (!tool) {
      tool = registeredTool(this.sh, name, this.optionsOf(name));
      this.byName.set(name, tool);
    }
    return tool;
  }

  async wrap(request: ToolCallRequest, handler: ToolCallHandler): Promise<ToolAnswer> {
    // A healed tool heals itself; a name no tool answers to is LangChain's to report (and a
    // model inventing names must not register a selfheal tool for each).
    if (!request.tool || isHealed(request.tool)) return handler(request);
    const name = toolName(request);
    const tool = this.register(name);
    // The call's own signal (see `LinkedSignal`): aborted by the run's signal (`runtime.signal`)
    // and by the signal ToolNode hands the tool, which also carries createAgent's `signal` option
    // (not in `runtime`). So a run stopped either way is a cancelled call (not diagnosed, not
    // retried, not a health failure) rather than the tool's failure.
    const cancel = new LinkedSignal(request.runtime.signal);
    const invocation = new Invocation(request.toolCall.args, (ctx) =>
      passing(async () => handler(withToolSignal(request, ctx.signal, cancel)), passesToolError),
    );
    try {
      return settled(
        await tool(invocation, {
          ...toolCallIdOption(request.toolCall.id),
          signal: cancel.signal,
        }),
      );
    } catch (error) {
      return await this.failed(error, request, name, cancel.signal);
    } finally {
      cancel.release();
    }
  }

  /** A call selfheal could not heal, as `onFailure` says; an aborted run always rethrows. */
  private async failed(
    error: unknown,
    request: ToolCallRequest,
    name: string,
    cancelled: AbortSignal,
  ): Promise<ToolAnswer> {
    if (cancelled.aborted || passesToolError(error)) throw error;
    const { onFailure } = this;
    if (onFailure === "error") throw error;
    const content: MessageContent | undefined =
      typeof onFailure === "function" ? await onFailure(error, request) : failureText(error, name);
    if (content === undefined) throw error;
    return new ToolMessage({
      content,
      tool_call_id: request.toolCall.id ?? "",
      name,
      status: "error",
    });
  }
}

/** The tool's own name, else the name the model called it by. */
function toolName(request: ToolCallRequest): string {
  const name = request.tool?.name;
  return typeof name === "string" ? name : request.toolCall.name;
}

/**
 * What the model reads about a failure: selfheal's own errors say what happened and that
 * nothing was sent (they carry names, never data); another error shows its type and its
 * message redacted, as LangChain's `${error}` would.
 */
export function failureText(error: unknown, name: string): string {
  if (isSelfHealError(error)) return error.message;
  const text = oneLine(redact(describeThrown(error), MAX_ERROR_TEXT));
  return `Tool '${name}' failed: ${errorName(error)}: ${text}`;
}

/** An error's name for a message: one line, at most 80 characters, `Error` when it has none. */
export function errorName(error: unknown): string {
  try {
    const name = (error as { name?: unknown } | null)?.name;
    return typeof name === "string" && name !== "" ? oneLine(name.slice(0, 80)) : "Error";
  } catch {
    return "Error";
  }
}

/**
 * The request with its tool given the attempt's signal: LangChain's ToolNode passes the run's
 * signal only, so without this a selfheal timeout would leave the tool running. The signal
 * ToolNode passes is followed by the call (see `wrap`).
 */
function withToolSignal(
  request: ToolCallRequest,
  signal: AbortSignal,
  cancel: LinkedSignal,
): ToolCallRequest {
  const { tool } = request;
  return isInvokable(tool) ? { ...request, tool: signalled(tool, signal, cancel) } : request;
}

interface Invokable {
  invoke(input: unknown, config?: { signal?: AbortSignal }): Promise<unknown>;
}

function isInvokable<T>(tool: T): tool is T & Invokable {
  return typeof (tool as { invoke?: unknown } | undefined)?.invoke === "function";
}

/** The tool itself (name, schema, prototype) as prototype, its `invoke` joined to `signal`. */
function signalled<T extends Invokable>(tool: T, signal: AbortSignal, cancel: LinkedSignal): T {
  const invoke: Invokable["invoke"] = (input, config) => {
    cancel.follow(config?.signal);
    return tool.invoke(input, withSignal(config, signal));
  };
  return Object.assign(Object.create(tool) as T, { invoke });
}
