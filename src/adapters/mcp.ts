/**
 * `selfheal/mcp`: one line heals an MCP client's tool calls.
 *
 * ```ts
 * const client = healMcpClient(sh, new Client({ name: "agent", version: "1.0.0" }));
 * ```
 *
 * Each `callTool` becomes a selfheal tool call (one selfheal tool per MCP tool name, made on its
 * first call): an `agent.tool_call` span with the MCP attributes, a health signal, a diagnosis
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
import type { CallContext, CallOptions, SelfHealing, WrappedTool } from "../index.js";
import { ToolCatalog } from "./mcp/catalog.js";
import { asMcpCallError, surfaced, toolResultError } from "./mcp/errors.js";
import { resolveSettings, type McpSettings } from "./mcp/options.js";
import type { HealMcpOptions, McpToolCall } from "./mcp/options.js";
import { connectionAttributes, withTraceContext } from "./mcp/telemetry.js";

export { isMcpCallError, McpCallError, REFUSAL_META_KEY } from "./mcp/errors.js";
export type { RefusalMode } from "./mcp/errors.js";
export type { HealMcpOptions, McpToolCall, McpToolOptions } from "./mcp/options.js";

type McpTool = WrappedTool<McpToolCall, CallToolResult>;

/** What one call needs that its (shared, once-registered) selfheal tool cannot hold. */
interface PendingCall {
  client: Client;
  options: CallToolRequestOptions | undefined;
  propagateContext: boolean;
}

/**
 * The selfheal tools made for MCP tools, per instance: `sh.tool()` takes a name once, and two
 * healed clients of one server (or one client healed twice) share a tool's health and breaker.
 */
const toolsByInstance = new WeakMap<SelfHealing, Map<string, McpTool>>();

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
  const catalog = new ToolCatalog(() => client.listTools());
  catalog.watch(client);
  const tools = toolsByInstance.get(sh) ?? new Map<string, McpTool>();
  toolsByInstance.set(sh, tools);

  const toolFor = async (name: string): Promise<McpTool> => {
    const id = settings.toolName(name);
    const known = tools.get(id);
    if (known) return known;
    const readOnly = await readOnlyOf(name, settings, catalog);
    // Another first call may have registered it while the hint was read.
    const tool = tools.get(id) ?? registerTool(sh, id, name, readOnly, settings);
    tools.set(id, tool);
    return tool;
  };

  const callTool = async (
    params: McpToolCall,
    requestOptions?: CallToolRequestOptions,
  ): Promise<CallToolResult> => {
    const tool = await toolFor(params.name);
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
      return surfaced(error, settings.refusals);
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
): Promise<boolean> {
  const hint = settings.trustAnnotations ? await catalog.readOnlyHint(name) : undefined;
  return hint ?? settings.readOnly(name);
}

function registerTool(
  sh: SelfHealing,
  id: string,
  name: string,
  readOnly: boolean,
  settings: McpSettings,
): McpTool {
  return sh.tool<McpToolCall, CallToolResult>(
    id,
    {
      ...settings.toolOptions(name),
      readOnly,
      ...(settings.spans !== undefined && { span: settings.spans }),
    },
    runMcpCall,
  );
}

/**
 * The connection's `mcp.*` attributes go on the call's span as it opens (a refused call has them
 * too); the caller's abort reaches selfheal, which aborts the attempt's signal in turn.
 */
function callOptions(client: Client, options: CallToolRequestOptions | undefined): CallOptions {
  return {
    attributes: connectionAttributes(client),
    ...(options?.signal && { signal: options.signal }),
  };
}

/**
 * One attempt of one call: `isError: true` and the client's errors become failures the
 * diagnoser can read. The SDK's request timeout follows the attempt's budget unless the caller
 * set one, so its 60 s default never cuts a longer selfheal timeout short.
 */
async function runMcpCall(args: McpToolCall, ctx: CallContext): Promise<CallToolResult> {
  const call = pending.get(args);
  if (!call) throw new Error(`selfheal/mcp: no pending call for tool "${args.name}"`);
  const params = call.propagateContext ? withTraceContext(args) : args;
  const timeout = call.options?.timeout ?? ctx.timeoutMs;
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

/**
 * The client with `callTool` and `listTools` replaced. Its other methods run on the client
 * itself (bound once, so they reach its private state), and it stays an `instanceof Client`.
 */
function healedView<C extends Client>(
  client: C,
  healed: Pick<Client, "callTool" | "listTools">,
): C {
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(client, {
    get(target, key) {
      if (key === "callTool") return healed.callTool;
      if (key === "listTools") return healed.listTools;
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function" || key === "constructor") return value;
      if (!bound.has(key)) bound.set(key, (value as (...a: unknown[]) => unknown).bind(target));
      return bound.get(key);
    },
  });
}
