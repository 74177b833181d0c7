/**
 * `selfheal/mcp`: one line heals an MCP client's tool calls, of either MCP TypeScript SDK: the
 * 1.x line (`@modelcontextprotocol/sdk`) or the v2 split packages (`@modelcontextprotocol/client`).
 *
 * ```ts
 * const client = healMcpClient(sh, new Client({ name: "agent", version: "1.0.0" }));
 * ```
 *
 * Each `callTool` becomes a selfheal tool call (one selfheal tool per MCP tool name, made on its
 * first call): a tool-call span with the MCP attributes, a health signal, a diagnosis
 * of `isError` results and JSON-RPC / HTTP / SDK errors, recovery, and read-only mode for the
 * tools that write (from the server's `readOnlyHint`, else the `readOnly` option, else a write).
 * Neither SDK is imported: the client's SDK line is told by its shape (see `sdkLineOf`).
 */
import { MAX_TIMER_MS } from "../engine/options.js";
import {
  SelfHealConfigError,
  type CallContext,
  type CallOptions,
  type SelfHealing,
  type ToolSpanMode,
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
import { inHttpAttempt } from "./mcp/http.js";
import { resolveSettings, type McpSettings } from "./mcp/options.js";
import type { HealMcpOptions } from "./mcp/options.js";
import { inMcpCallSpan } from "./mcp/spans.js";
import { connectionAttributes, withTraceContext } from "./mcp/telemetry.js";
import {
  callClient,
  requestOf,
  sdkLineOf,
  type McpClient,
  type McpClientShape,
  type McpRequest,
  type McpRequestOptions,
  type McpSdkLine,
  type McpToolCall,
  type McpToolResult,
} from "./mcp/types.js";

export {
  IDEMPOTENCY_META_KEY,
  isMcpCallError,
  McpCallError,
  REFUSAL_META_KEY,
} from "./mcp/errors.js";
export type { RefusalMode } from "./mcp/errors.js";
export { mcpFetch } from "./mcp/http.js";
export type { McpFetch } from "./mcp/http.js";
export type { HealMcpOptions, McpToolOptions } from "./mcp/options.js";
export type { McpClient, McpContentPart, McpToolCall, McpToolResult } from "./mcp/types.js";

type McpTool = WrappedTool<McpToolCall, McpToolResult>;

/**
 * A selfheal tool made for an MCP tool, with the read-only verdict and the span mode it was
 * registered under (the first view to call it sets both).
 */
interface Registration {
  readonly tool: McpTool;
  readonly readOnly: boolean;
  readonly spans: ToolSpanMode | undefined;
}

/** What one call needs that its (shared, once-registered) selfheal tool cannot hold. */
interface PendingCall {
  readonly client: McpClientShape;
  readonly line: McpSdkLine;
  readonly request: McpRequest;
  readonly propagateContext: boolean;
  /** The client's `callTool` of the latest attempt, and that attempt's signal. */
  attempt: Promise<McpToolResult> | undefined;
  attemptSignal: AbortSignal | undefined;
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
 * Heals an MCP client of either SDK: returns a view of it whose `callTool` runs through selfheal
 * and whose `listTools` also feeds the read-only hints; everything else is the client itself.
 * What a caller gets back is what the plain client gives (a result, `isError` included, or the
 * SDK's own error), plus selfheal's refusals as `isError` results (see `refusals`). `callTool`
 * takes the arguments of the client's SDK: `(params, options?)` for v2, `(params,
 * resultSchema?, options?)` for 1.x.
 */
export function healMcpClient<C extends McpClient>(
  sh: SelfHealing,
  client: C,
  options?: HealMcpOptions,
): C {
  const settings = resolveSettings(sh, client, options);
  const target = client as unknown as McpClientShape;
  const line = sdkLineOf(target);
  const catalog = catalogOf(target);
  const registrations = toolsByInstance.get(sh) ?? new Map<string, Registration>();
  toolsByInstance.set(sh, registrations);
  /** This view's selfheal tool per MCP tool name, once its verdict is taken. */
  const resolved = new Map<string, Registration>();

  const toolFor = async (name: string, signal: AbortSignal | undefined): Promise<Registration> => {
    const known = resolved.get(name);
    if (known) return known;
    const readOnly = await readOnlyOf(name, settings, catalog, signal);
    const registration = register(sh, registrations, name, readOnly, settings);
    resolved.set(name, registration);
    return registration;
  };

  const callTool = async (params: McpToolCall, ...rest: unknown[]): Promise<McpToolResult> => {
    const request = requestOf(line, rest);
    const signal = request.options?.signal;
    let registration: Registration;
    try {
      registration = await toolFor(params.name, signal);
    } catch (error) {
      // The listing that reads the hint was aborted, or failed on the way: nothing was sent.
      throw signal?.aborted && error === signal.reason ? abortedRequest(line, error) : error;
    }
    // A copy per call: its identity keys this call's client and options (the params object a
    // caller reuses across calls must not mix them).
    const args: McpToolCall = { ...params };
    const call: PendingCall = {
      client: target,
      line,
      request,
      propagateContext: settings.propagateContext,
      attempt: undefined,
      attemptSignal: undefined,
    };
    pending.set(args, call);
    try {
      // The tool's span mode, as registered: `attach` only onto this call's own MCP span.
      return await inMcpCallSpan(registration.spans, params.name, () =>
        registration.tool(args, callOptions(target, request.options)),
      );
    } catch (error) {
      return await surfaced(error, {
        refusals: settings.refusals,
        signal,
        line,
        own: (reason) => abortedAttemptError(call, reason),
      });
    } finally {
      pending.delete(args);
    }
  };

  const listTools = async (params?: unknown, listOptions?: unknown): Promise<unknown> => {
    const result = await target.listTools(params, listOptions);
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
): Registration {
  const id = settings.toolName(name);
  const existing = registrations.get(id);
  if (existing) {
    // A write shared as a write is safe either way; a write run as a read is not.
    if (!existing.readOnly || readOnly) return existing;
    const what = (r: boolean) => (r ? "only reads" : "writes");
    throw new SelfHealConfigError(
      "healMcpClient(options).toolName",
      `the selfheal tool "${id}" ${what(existing.readOnly)}, but MCP tool "${name}" of this client ${what(readOnly)}: give the tools of each server their own names (toolName: (name) => \`server.\${name}\`)`,
    );
  }
  const tool = sh.tool<McpToolCall, McpToolResult>(
    id,
    {
      ...settings.toolOptions(name),
      readOnly,
      ...(settings.spans !== undefined && { span: settings.spans }),
    },
    runMcpCall,
  );
  const registration: Registration = { tool, readOnly, spans: settings.spans };
  registrations.set(id, registration);
  return registration;
}

/**
 * The caller's request `timeout`, when selfheal can own it: it is then the attempt's timeout
 * (a retry with a longer timeout gets the longer time, the deadline counts it). Not with
 * `resetTimeoutOnProgress` (a timer progress resets is the SDK's to keep), nor out of range.
 */
function ownedTimeout(options: McpRequestOptions | undefined): number | undefined {
  const timeout = options?.timeout;
  if (timeout === undefined || options?.resetTimeoutOnProgress === true) return undefined;
  return Number.isInteger(timeout) && timeout >= 1 && timeout <= MAX_TIMER_MS ? timeout : undefined;
}

/**
 * The connection's `mcp.*` attributes go on the call's span as it opens (a refused call has them
 * too); the caller's abort reaches selfheal, which aborts the attempt's signal in turn.
 */
function callOptions(client: McpClientShape, options: McpRequestOptions | undefined): CallOptions {
  const timeoutMs = ownedTimeout(options);
  return {
    attributes: connectionAttributes(client),
    ...(options?.signal && { signal: options.signal }),
    ...(timeoutMs !== undefined && { timeoutMs }),
  };
}

/** Longest wait for an aborted request's own rejection (both SDKs reject at once on abort). */
const OWN_ERROR_WAIT_MS = 50;

/**
 * The client's own rejection of the latest attempt, when `reason` (the caller's abort, or
 * selfheal's timeout) is what aborted it: both SDKs reject a request in flight as soon as its
 * signal aborts (v2 with an SdkError `REQUEST_TIMEOUT`, 1.x with an McpError -32001), so the
 * caller gets the error the plain client would have given. Undefined when no attempt was
 * aborted by it (a call aborted before its request, or between attempts).
 */
async function abortedAttemptError(call: PendingCall, reason: unknown): Promise<unknown> {
  const { attempt, attemptSignal } = call;
  if (attempt === undefined || attemptSignal?.aborted !== true || attemptSignal.reason !== reason)
    return undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      resolve(undefined);
    }, OWN_ERROR_WAIT_MS);
  });
  try {
    return await Promise.race([
      attempt.then(
        () => undefined,
        (error: unknown) => error,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One attempt of one call: `isError: true` and the client's errors become failures the
 * diagnoser can read. The SDK's request timeout follows the attempt's budget (the caller's own
 * `timeout` is that budget, see `ownedTimeout`), so its 60 s default never cuts a longer selfheal
 * timeout short. Run as an HTTP attempt, so that `mcpFetch` can tell the response that refused it.
 */
async function runMcpCall(args: McpToolCall, ctx: CallContext): Promise<McpToolResult> {
  const call = pending.get(args);
  if (!call) throw new Error(`selfheal/mcp: no pending call for tool "${args.name}"`);
  const params = withIdempotencyKey(
    call.propagateContext ? withTraceContext(args) : args,
    ctx.idempotencyKey,
  );
  const { schema, options } = call.request;
  const timeout =
    ownedTimeout(options) === undefined ? (options?.timeout ?? ctx.timeoutMs) : ctx.timeoutMs;
  const requestOptions = {
    ...options,
    signal: ctx.signal,
    ...(timeout !== undefined && { timeout }),
  };
  const http = inHttpAttempt(args.name, () =>
    callClient(call.client, call.line, params, schema, requestOptions),
  );
  call.attempt = http.result;
  call.attemptSignal = ctx.signal;
  let result: McpToolResult;
  try {
    result = await http.result;
  } catch (error) {
    throw asMcpCallError(error, http.failure());
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
function healedView<C extends McpClient>(
  client: C,
  healed: {
    callTool: (params: McpToolCall, ...rest: unknown[]) => Promise<McpToolResult>;
    listTools: (params?: unknown, options?: unknown) => Promise<unknown>;
  },
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
