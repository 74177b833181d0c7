import { context, propagation, type Attributes } from "@opentelemetry/api";
import {
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_NETWORK_TRANSPORT,
  MCP_METHOD_TOOLS_CALL,
} from "../../telemetry/conventions.js";
import type { McpClientShape, McpToolCall, McpTransportShape } from "./types.js";

/** Whether `value[key]` is a function (a getter that throws reads as no). */
function hasMethod(value: object, key: string): boolean {
  try {
    return typeof (value as Record<string, unknown>)[key] === "function";
  } catch {
    return false;
  }
}

/**
 * `network.transport` of a client transport, told by its shape as both SDKs build them (no
 * import of either, nor of the Node-only stdio entry): `memory` in process (the in-memory
 * transport's class makes linked pairs; no convention value fits, "other values may be used"),
 * `pipe` for stdio (a child process: `pid` and `stderr`), `tcp` for HTTP (Streamable HTTP and
 * SSE complete OAuth with `finishAuth`) and other URL transports (1.x WebSocket).
 */
function networkTransport(transport: McpTransportShape | undefined): string | undefined {
  if (typeof transport !== "object") return undefined;
  const ctor = (transport as { constructor?: unknown }).constructor;
  if (typeof ctor === "function" && hasMethod(ctor, "createLinkedPair")) return "memory";
  if ("stderr" in transport && "pid" in transport) return "pipe";
  if (hasMethod(transport, "finishAuth") || hasMethod(transport, "terminateSession")) return "tcp";
  if ((transport as { _url?: unknown })._url instanceof URL) return "tcp";
  return undefined;
}

function readString(read: () => unknown): string | undefined {
  try {
    const value = read();
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The MCP attributes of a tool call on this client's connection, as known now. The protocol
 * version is the client's (v2: `getNegotiatedProtocolVersion()`), else its transport's (1.x
 * HTTP transports keep it; 1.x over stdio or in memory tells it nowhere, so it is left out).
 */
export function connectionAttributes(client: McpClientShape): Attributes {
  const attributes: Attributes = { [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL };
  const transport = client.transport;
  const session = readString(() => transport?.sessionId);
  const version =
    readString(() => client.getNegotiatedProtocolVersion?.()) ??
    readString(() => transport?.protocolVersion);
  const network = networkTransport(transport);
  if (session !== undefined) attributes[ATTR_MCP_SESSION_ID] = session;
  if (version !== undefined) attributes[ATTR_MCP_PROTOCOL_VERSION] = version;
  if (network !== undefined) attributes[ATTR_NETWORK_TRANSPORT] = network;
  return attributes;
}

/**
 * The call's params with the active trace context in `_meta` (`traceparent`, `tracestate`,
 * `baggage`, unprefixed as the MCP conventions ask), so the server's spans join the agent's
 * trace. Keys the caller set win; without a propagator nothing is added.
 */
export function withTraceContext(params: McpToolCall): McpToolCall {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (Object.keys(carrier).length === 0) return params;
  return { ...params, _meta: { ...carrier, ...params._meta } };
}
