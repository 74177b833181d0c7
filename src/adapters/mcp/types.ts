/**
 * What selfheal/mcp reads of an MCP client, as both MCP TypeScript SDKs shape it: the 1.x line
 * (`@modelcontextprotocol/sdk`, `Client` from `@modelcontextprotocol/sdk/client/index.js`) and
 * the v2 split packages (`@modelcontextprotocol/client`). Structural: nothing here (nor anywhere
 * in the adapter) imports either SDK, not even its types, so `selfheal/mcp` loads and type-checks
 * with whichever one is installed.
 */

/** The arguments of one MCP tool call, as `client.callTool(params)` takes them (both SDKs). */
export interface McpToolCall {
  name: string;
  arguments?: Record<string, unknown> | undefined;
  _meta?: Record<string, unknown> | undefined;
}

/** One part of a tool result's `content` (only text parts are read). */
export interface McpContentPart {
  type: string;
  text?: string | undefined;
}

/** A `tools/call` result, as both SDKs give it (1.x may answer a result without `content`). */
export interface McpToolResult {
  content?: readonly McpContentPart[] | undefined;
  isError?: boolean | undefined;
  structuredContent?: Record<string, unknown> | undefined;
  _meta?: Record<string, unknown> | undefined;
}

/**
 * An MCP client of either SDK: what `healMcpClient` accepts. The healed client keeps the type
 * of the client it was given.
 */
export interface McpClient {
  callTool(params: McpToolCall, ...rest: never[]): Promise<unknown>;
  listTools(...args: never[]): Promise<unknown>;
}

/** A tool as `tools/list` describes it (only the read-only hint is read). */
export interface McpToolInfo {
  name: string;
  annotations?: { readOnlyHint?: boolean | undefined } | undefined;
}

/** The request options both SDKs take on `callTool` (others pass through untouched). */
export interface McpRequestOptions {
  signal?: AbortSignal | undefined;
  timeout?: number | undefined;
  resetTimeoutOnProgress?: boolean | undefined;
}

/** A client transport, as far as the span attributes read it. */
export interface McpTransportShape {
  sessionId?: string | undefined;
  protocolVersion?: string | undefined;
}

/** The client as the adapter calls it (methods present on both SDKs' `Client` unless marked). */
export interface McpClientShape {
  callTool(params: McpToolCall, ...rest: unknown[]): Promise<McpToolResult>;
  listTools(params?: unknown, options?: unknown): Promise<{ tools: readonly McpToolInfo[] }>;
  getServerCapabilities?(): unknown;
  /** v2 only. */
  getNegotiatedProtocolVersion?(): string | undefined;
  readonly transport?: McpTransportShape | undefined;
  fallbackNotificationHandler?:
    ((notification: { method: string }) => Promise<void> | void) | undefined;
}

/**
 * Which SDK line a client is of: they differ in `callTool`'s signature (1.x: `(params,
 * resultSchema?, options?)`; v2: `(params, options?)`) and in the errors they throw. Told by
 * `getNegotiatedProtocolVersion`, which every v2 `Client` has and no 1.x `Client` has.
 */
export type McpSdkLine = "1.x" | "v2";

export function sdkLineOf(client: McpClientShape): McpSdkLine {
  return typeof client.getNegotiatedProtocolVersion === "function" ? "v2" : "1.x";
}

/** One `callTool` request's extra arguments, by SDK line. */
export interface McpRequest {
  /** The 1.x result schema (the second argument there); never set for v2. */
  schema: unknown;
  options: McpRequestOptions | undefined;
}

function asOptions(value: unknown): McpRequestOptions | undefined {
  return typeof value === "object" && value !== null ? value : undefined;
}

/** The extra arguments of a `callTool` call as the client's SDK line reads them. */
export function requestOf(line: McpSdkLine, rest: readonly unknown[]): McpRequest {
  return line === "1.x"
    ? { schema: rest[0], options: asOptions(rest[1]) }
    : { schema: undefined, options: asOptions(rest[0]) };
}

/** Calls the client's own `callTool` with the arguments in its SDK line's order. */
export function callClient(
  client: McpClientShape,
  line: McpSdkLine,
  params: McpToolCall,
  schema: unknown,
  options: Record<string, unknown>,
): Promise<McpToolResult> {
  return line === "1.x"
    ? client.callTool(params, schema, options)
    : client.callTool(params, options);
}
