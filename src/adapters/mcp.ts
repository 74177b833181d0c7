/**
 * `selfheal/mcp`: one line heals an MCP client's tool calls.
 *
 * ```ts
 * const client = healMcpClient(sh, new Client({ name: "agent", version: "1.0.0" }));
 * ```
 *
 * Each `callTool` becomes a selfheal tool call (one selfheal tool per MCP tool name, made on its
 * first call): a tool-call span with the MCP attributes, a health signal, a diagnosis
 * of `isError` results and JSON-RPC / SDK errors, recovery, and read-only mode for the tools
 * that write (from the server's `readOnlyHint`, else the `readOnly` option, else a write).
 */
import type {
  CallToolRequestOptions,
  CallToolResult,
  Client,
  ListToolsRequest,
  ListToolsResult,
} from "@modelcontextprotocol/client";
import { MAX_TIMER_MS } from "../engine/options.js";
import {
  SelfHealConfigError,
  type CallContext,
  type CallOptions,
  type SelfHealing,
  type WrappedTool,
} from "../index.js";
import { catalogOf, type ToolCatalog } from "./mcp/catalog.js";
import {
  abortedRequest,
  asMcpCallError,
  IDEMPOTENCY_META_KEY,
  surfaced,
  toolResultError,
} from "./mcp/errors.js";
import { resolveSettings, type McpSettings } from "./mcp/options.js";
import type { HealMcpOptions, McpToolCall } from "./mcp/options.js";
import { connectionAttributes, withTraceContext } from "./mcp/telemetry.js";

export {
  IDEMPOTENCY_META_KEY,
  isMcpCallError,
  McpCallError,
  REFUSAL_META_KEY,
} from "./mcp/errors.js";
export type { RefusalMode } from "./mcp/errors.js";
export type { HealMcpOptions, McpToolCall, McpToolOptions } from "./mcp/options.js";

type McpTool = WrappedTool<McpToolCall, CallToolResult>;

/** A selfheal tool made for an MCP tool, with the read-only verdict it was registered under. */
interface Registration {
  readonly tool: McpTool;
  readonly readOnly: boolean;
}

/** What one call needs that its (shared, once-registered) selfheal tool cannot hold. */
interface PendingCall {
  client: Client;
  options: CallToolRequestOptions | undefined;
  propagateContext: boolean;
}

/**
 * The selfheal tools made for MCP tools, per instance: `sh.tool()` takes a name once, and two
 * healed clients of one server (or one client healed twice) share a tool's health and breaker.
 * Two that disagree on whether it writes are refused (see `register`).
 */
const toolsByInstance = new WeakMap<SelfHealing, Map<string, Registration>>();

/** Each call's client and options, by the params object the engine hands back to the tool. */
const pending = new WeakMap<McpToolCall, PendingCall>();

/**
 * Heals an MCP client: returns a view of it whose `callTool` runs through selfheal and whose
 * `listTools` also feeds the read-only hints; everything else is the client itself. What a
 * caller gets back is what the plain client gives (a result, `isError` included, or the SDK's
 * own error), plus selfheal's refusals as `isError` results (see `refusals`).
 */
export function healMcpClient<C extends Client>(
  sh: SelfHealing,
  client: C,
  options?: HealMcpOptions,
): C {
  const settings = resolveSettings(sh, client, options);
  const catalog = catalogOf(client);
  const registrations = toolsByInstance.get(sh) ?? new Map<string, Registration>();
  toolsByInstance.set(sh, registrations);
  /** This view's selfheal tool per MCP tool name, once its verdict is taken. */
  const resolved = new Map<string, McpTool>();

  const toolFor = async (name: string, signal: AbortSignal | undefined): Promise<McpTool> => {
    const known = resolved.get(name);
    if (known) return known;
    const readOnly = await readOnlyOf(name, settings, catalog, signal);
    const tool = register(sh, registrations, name, readOnly, settings);
    resolved.set(name, tool);
    return tool;
  };

  const callTool = async (
    params: McpToolCall,
    requestOptions?: CallToolRequestOptions,
  ): Promise<CallToolResult> => {
    const signal = requestOptions?.signal;
    let tool: McpTool;
    try {
      tool = await toolFor(params.name, signal);
    } catch (error) {
      // The listing that reads the hint was aborted, or failed on the way: nothing was sent.
      throw signal?.aborted && error === signal.reason ? abortedRequest(error) : error;
    }
    // A copy per call: its identity keys this call's client and options (the params object a
    // caller reuses across calls must not mix them).
    const args: McpToolCall = { ...params };
    pending.set(args, {
      client,
      options: requestOptions,
      propagateContext: settings.propagateContext,
    });
    try {
      return await tool(args, callOptions(client, requestOptions));
    } catch (error) {
      return surfaced(error, settings.refusals, signal);
    } finally {
      pending.delete(args);
    }
  };

  const listTools = async (
    params?: ListToolsRequest["params"],
    listOptions?: Parameters<Client["listTools"]>[1],
  ): Promise<ListToolsResult> => {
    const result = await client.listTools(params, listOptions);
    catalog.remember(result.tools);
    return result;
  };

  return healedView(client, { callTool, listTools });
}

/** Annotations first (when trusted), then the `readOnly` option, else a write. */
async function readOnlyOf(
  name: string,
  settings: McpSettings,
  catalog: ToolCatalog,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const hint = settings.trustAnnotations ? await catalog.readOnlyHint(name, signal) : undefined;
  return hint ?? settings.readOnly(name);
}

/**
 * The selfheal tool of an MCP tool, registered on first use. One name is one tool: a second
 * client (another server) or view that calls a tool of that name a write while the tool was
 * registered read-only is refused, since sharing would run the write while the agent is critical
 * and retry it without a key. The other way round the write verdict stands (safe, if strict).
 */
function register(
  sh: SelfHealing,
  registrations: Map<string, Registration>,
  name: string,
  readOnly: boolean,
  settings: McpSettings,
): McpTool {
  const id = settings.toolName(name);
  const existing = registrations.get(id);
  if (existing) {
    // A write shared as a write is safe either way; a write run as a read is not.
    if (!existing.readOnly || readOnly) return existing.tool;
    const what = (r: boolean) => (r ? "only reads" : "writes");
    throw new SelfHealConfigError(
      "healMcpClient(options).toolName",
      `the selfheal tool "${id}" ${what(existing.readOnly)}, but MCP tool "${name}" of this client ${what(readOnly)}: give the tools of each server their own names (toolName: (name) => \`server.\${name}\`)`,
    );
  }
  const tool = sh.tool<McpToolCall, CallToolResult>(
    id,
    {
      ...settings.toolOptions(name),
      readOnly,
      ...(settings.spans !== undefined && { span: settings.spans }),
    },
    runMcpCall,
  );
  registrations.set(id, { tool, readOnly });
  return tool;
}

/**
 * The caller's request `timeout`, when selfheal can own it: it is then the attempt's timeout
 * (a retry with a longer timeout gets the longer time, the deadline counts it). Not with
 * `resetTimeoutOnProgress` (a timer progress resets is the SDK's to keep), nor out of range.
 */
function ownedTimeout(options: CallToolRequestOptions | undefined): number | undefined {
  const timeout = options?.timeout;
  if (timeout === undefined || options?.resetTimeoutOnProgress === true) return undefined;
  return Number.isInteger(timeout) && timeout >= 1 && timeout <= MAX_TIMER_MS ? timeout : undefined;
}

/**
 * The connection's `mcp.*` attributes go on the call's span as it opens (a refused call has them
 * too); the caller's abort reaches selfheal, which aborts the attempt's signal in turn.
 */
function callOptions(client: Client, options: CallToolRequestOptions | undefined): CallOptions {
  const timeoutMs = ownedTimeout(options);
  return {
    attributes: connectionAttributes(client),
    ...(options?.signal && { signal: options.signal }),
    ...(timeoutMs !== undefined && { timeoutMs }),
  };
}

/**
 * One attempt of one call: `isError: true` and the client's errors become failures the
 * diagnoser can read. The SDK's request timeout follows the attempt's budget (the caller's own
 * `timeout` is that budget, see `ownedTimeout`), so its 60 s default never cuts a longer selfheal
 * timeout short.
 */
async function runMcpCall(args: McpToolCall, ctx: CallContext): Promise<CallToolResult> {
  const call = pending.get(args);
  if (!call) throw new Error(`selfheal/mcp: no pending call for tool "${args.name}"`);
  const params = withIdempotencyKey(
    call.propagateContext ? withTraceContext(args) : args,
    ctx.idempotencyKey,
  );
  const timeout =
    ownedTimeout(call.options) === undefined
      ? (call.options?.timeout ?? ctx.timeoutMs)
      : ctx.timeoutMs;
  let result: CallToolResult;
  try {
    result = await call.client.callTool(params, {
      ...call.options,
      signal: ctx.signal,
      ...(timeout !== undefined && { timeout }),
    });
  } catch (error) {
    throw asMcpCallError(error);
  }
  if (result.isError === true) throw toolResultError(result);
  return result;
}

/** The call's idempotency key in `_meta` (a key the caller set there wins). */
function withIdempotencyKey(params: McpToolCall, key: string | undefined): McpToolCall {
  if (key === undefined) return params;
  return { ...params, _meta: { [IDEMPOTENCY_META_KEY]: key, ...params._meta } };
}

/**
 * The client with `callTool` and `listTools` replaced. Its other methods run on the client
 * itself (bound once, so they reach its private state), and it stays an `instanceof Client`.
 */
function healedView<C extends Client>(
  client: C,
  healed: Pick<Client, "callTool" | "listTools">,
): C {
  // By function, not by name: a field the application sets again (onclose, onerror, a
  // handler) is read as it is now.
  const bound = new WeakMap<object, unknown>();
  return new Proxy(client, {
    get(target, key) {
      if (key === "callTool") return healed.callTool;
      if (key === "listTools") return healed.listTools;
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function" || key === "constructor") return value;
      let method = bound.get(value);
      if (method === undefined) {
        method = (value as (...a: unknown[]) => unknown).bind(target);
        bound.set(value, method);
      }
      return method;
    },
  });
}
