import { context, propagation, type Attributes } from "@opentelemetry/api";
import {
  InMemoryTransport,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type Client,
  type Transport,
} from "@modelcontextprotocol/client";
import {
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_NETWORK_TRANSPORT,
  MCP_METHOD_TOOLS_CALL,
} from "../../telemetry/conventions.js";
import type { McpToolCall } from "./options.js";

/**
 * `network.transport` of a client transport: `pipe` for stdio (told as the SDK tells it, by its
 * child process: no import of the Node-only stdio entry), `tcp` for HTTP, `memory` in process
 * (no convention value fits; "other values may be used").
 */
function networkTransport(transport: Transport | undefined): string | undefined {
  if (transport === undefined) return undefined;
  if (transport instanceof InMemoryTransport) return "memory";
  if ("stderr" in transport && "pid" in transport) return "pipe";
  if (transport instanceof StreamableHTTPClientTransport) return "tcp";
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- servers still serve it; only recognised here
  if (transport instanceof SSEClientTransport) return "tcp";
  return undefined;
}

/** The MCP attributes of a tool call on this client's connection, as known now. */
export function connectionAttributes(client: Client): Attributes {
  const attributes: Attributes = { [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL };
  const transport = client.transport;
  const session = transport?.sessionId;
  const version = client.getNegotiatedProtocolVersion();
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
