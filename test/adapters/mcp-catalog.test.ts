/**
 * The MCP adapter's tool catalog (where a tool's readOnlyHint comes from), the connection
 * attributes and trace context a call carries, and the span `attach` writes on, on their own.
 */
import { context, propagation, trace, type Span } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { afterEach, describe, expect, it } from "vitest";
import { catalogOf, ToolCatalog } from "../../src/adapters/mcp/catalog.js";
import type { McpToolInfo } from "../../src/adapters/mcp/types.js";
import { inMcpCallSpan } from "../../src/adapters/mcp/spans.js";
import { connectionAttributes, withTraceContext } from "../../src/adapters/mcp/telemetry.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider(); // and the context manager: context.with activates a context

const tool = (name: string, readOnlyHint?: unknown): McpToolInfo =>
  ({
    name,
    inputSchema: { type: "object" },
    ...(readOnlyHint !== undefined && { annotations: { readOnlyHint } }),
  }) as unknown as McpToolInfo;

describe("ToolCatalog", () => {
  it("lists once for a tool nobody listed, however many wait; then answers from memory", async () => {
    let listings = 0;
    let release!: () => void;
    const catalog = new ToolCatalog(async () => {
      listings++;
      await new Promise<void>((r) => (release = r));
      return {
        tools: [tool("search", true), tool("charge", false), tool("odd", "yes"), tool("bare")],
      };
    });
    const waiting = [catalog.readOnlyHint("search"), catalog.readOnlyHint("charge")];
    release();
    expect(await Promise.all(waiting)).toEqual([true, false]);
    expect(await catalog.readOnlyHint("odd")).toBeUndefined();
    expect(await catalog.readOnlyHint("bare")).toBeUndefined();
    expect(listings).toBe(1);
    const unknown = catalog.readOnlyHint("missing");
    release();
    expect(await unknown).toBeUndefined();
    expect(listings).toBe(2);
  });

  it("remembers what listTools() through the client showed, and forgets it on request", async () => {
    let listings = 0;
    const catalog = new ToolCatalog(() => {
      listings++;
      return Promise.resolve({ tools: [tool("search", false)] });
    });
    catalog.remember([tool("search", true)]);
    expect(await catalog.readOnlyHint("search")).toBe(true);
    expect(listings).toBe(0);
    catalog.forget();
    expect(await catalog.readOnlyHint("search")).toBe(false);
    expect(listings).toBe(1);
  });

  it("a server that cannot list its tools answers nothing; a failure on the way rejects", async () => {
    const refusal = Object.assign(new Error("MCP error -32601: Method not found"), {
      code: -32601,
      name: "McpError",
    });
    expect(await new ToolCatalog(() => Promise.reject(refusal)).readOnlyHint("x")).toBeUndefined();
    const broken = new Error("EPIPE");
    await expect(new ToolCatalog(() => Promise.reject(broken)).readOnlyHint("x")).rejects.toBe(
      broken,
    );
    const timeout = Object.assign(new Error("MCP error -32001: Request timed out"), {
      code: -32001,
    });
    await expect(new ToolCatalog(() => Promise.reject(timeout)).readOnlyHint("x")).rejects.toBe(
      timeout,
    );
  });

  it("a caller's signal ends its own wait, not the listing", async () => {
    let release!: () => void;
    const catalog = new ToolCatalog(async () => {
      await new Promise<void>((r) => (release = r));
      return { tools: [tool("search", true)] };
    });
    const gone = new AbortController();
    const reason = new Error("caller left");
    const mine = catalog.readOnlyHint("search", gone.signal);
    const other = catalog.readOnlyHint("search");
    gone.abort(reason);
    await expect(mine).rejects.toBe(reason);
    release();
    expect(await other).toBe(true);
    await expect(catalog.readOnlyHint("new", AbortSignal.abort(reason))).rejects.toBe(reason);
  });
});

describe("catalogOf", () => {
  it("one catalog per client; a client not yet connected is Not connected", async () => {
    const client = {
      callTool: () => Promise.resolve({}),
      listTools: () => Promise.resolve({ tools: [tool("search", true)] }),
    };
    const catalog = catalogOf(client);
    expect(catalogOf(client as never)).toBe(catalog);
    await expect(catalog.readOnlyHint("search")).rejects.toThrow("Not connected");
    const handshaking = { ...client, transport: {}, getServerCapabilities: () => undefined };
    await expect(catalogOf(handshaking as never).readOnlyHint("search")).rejects.toThrow(
      "Not connected",
    );
    const connected = { ...client, transport: {}, getServerCapabilities: () => ({ tools: {} }) };
    expect(await catalogOf(connected as never).readOnlyHint("search")).toBe(true);
    const resumed = {
      ...client,
      transport: { sessionId: "s-1" },
      getServerCapabilities: () => undefined,
    };
    expect(await catalogOf(resumed as never).readOnlyHint("search")).toBe(true);
  });

  it("forgets the list on tools/list_changed, and still calls the application's handler", async () => {
    let listings = 0;
    const seen: string[] = [];
    const client = {
      transport: {},
      getServerCapabilities: () => ({ tools: {} }),
      callTool: () => Promise.resolve({}),
      listTools: () => {
        listings++;
        return Promise.resolve({ tools: [tool("search", listings === 1)] });
      },
      fallbackNotificationHandler: (n: { method: string }) => {
        seen.push(n.method);
        return Promise.resolve();
      },
    };
    const catalog = catalogOf(client);
    expect(await catalog.readOnlyHint("search")).toBe(true);
    await client.fallbackNotificationHandler({ method: "notifications/message" });
    expect(await catalog.readOnlyHint("search")).toBe(true);
    await client.fallbackNotificationHandler({ method: "notifications/tools/list_changed" });
    expect(await catalog.readOnlyHint("search")).toBe(false);
    expect(seen).toEqual(["notifications/message", "notifications/tools/list_changed"]);
    expect(listings).toBe(2);
  });
});

describe("connectionAttributes", () => {
  it("method, session, protocol version (the client's, else the transport's) and transport kind", () => {
    class InMemoryTransport {
      readonly started = false;
      static createLinkedPair() {
        return [];
      }
    }
    const base = { callTool: () => undefined, listTools: () => undefined };
    expect(connectionAttributes(base as never)).toEqual({ "mcp.method.name": "tools/call" });
    expect(
      connectionAttributes({
        ...base,
        transport: { sessionId: "s-1", protocolVersion: "2025-03-26", finishAuth: () => undefined },
        getNegotiatedProtocolVersion: () => "2025-06-18",
      } as never),
    ).toEqual({
      "mcp.method.name": "tools/call",
      "mcp.session.id": "s-1",
      "mcp.protocol.version": "2025-06-18",
      "network.transport": "tcp",
    });
    const cases: [object, string | undefined][] = [
      [new InMemoryTransport(), "memory"],
      [{ pid: 7, stderr: null }, "pipe"],
      [{ pid: 7 }, undefined],
      [{ terminateSession: () => undefined }, "tcp"],
      [{ _url: new URL("ws://127.0.0.1/") }, "tcp"],
      [{ _url: "ws://127.0.0.1/" }, undefined],
      [{ finishAuth: "later" }, undefined],
      [
        Object.defineProperty({}, "finishAuth", {
          get() {
            throw new Error("no");
          },
        }),
        undefined,
      ],
    ];
    for (const [transport, kind] of cases)
      expect(connectionAttributes({ ...base, transport } as never)["network.transport"]).toBe(kind);
    expect(
      connectionAttributes({ ...base, transport: { protocolVersion: "2025-03-26" } } as never)[
        "mcp.protocol.version"
      ],
    ).toBe("2025-03-26");
    const hostile = Object.defineProperty({}, "sessionId", {
      get() {
        throw new Error("no");
      },
    });
    expect(
      connectionAttributes({ ...base, transport: hostile } as never)["mcp.session.id"],
    ).toBeUndefined();
    expect(
      connectionAttributes({ ...base, transport: { sessionId: 5 } } as never)["mcp.session.id"],
    ).toBeUndefined();
  });
});

describe("withTraceContext", () => {
  afterEach(() => {
    propagation.disable();
  });

  it("adds the active trace context to _meta, the caller's keys winning; nothing without a propagator", () => {
    const params = {
      name: "search",
      arguments: {},
      _meta: { traceparent: "mine", progressToken: 1 },
    };
    const active = trace.setSpanContext(context.active(), {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: 1,
    });
    expect(context.with(active, () => withTraceContext({ name: "search" }))).toEqual({
      name: "search",
    });
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const bare = context.with(active, () => withTraceContext({ name: "search" }));
    expect(bare._meta).toEqual({
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    });
    const kept = context.with(active, () => withTraceContext(params));
    expect(kept._meta).toEqual({ traceparent: "mine", progressToken: 1 });
  });
});

describe("inMcpCallSpan: which active span attach may write on", () => {
  const tracer = otel.provider.getTracer("mcp-instrumentation");
  /** What `start` sees as the active span, run under `active` (or none). */
  const seenUnder = (mode: "attach" | "child" | undefined, tool: string, active?: Span) => {
    const run = () => inMcpCallSpan(mode, tool, () => trace.getActiveSpan());
    return active ? context.with(trace.setSpan(context.active(), active), run) : run();
  };

  it("another instrumentation's span of this very call: by its name, or by its MCP attributes; once", () => {
    const byName = tracer.startSpan("tools/call search");
    expect(seenUnder("attach", "search", byName)).toBe(byName);
    // A second call under the same span does not write on it again.
    const again = seenUnder("attach", "search", byName);
    expect(again).not.toBe(byName);
    expect(again?.spanContext().spanId).toBe(byName.spanContext().spanId);
    const byAttributes = tracer.startSpan("rpc", {
      attributes: { "mcp.method.name": "tools/call", "gen_ai.tool.name": "search" },
    });
    expect(seenUnder("attach", "search", byAttributes)).toBe(byAttributes);
  });

  it("any other span is shown as a non-recording copy: the call opens its own under it", () => {
    const cases = [
      tracer.startSpan("tools/call other"),
      tracer.startSpan("rpc", {
        attributes: { "mcp.method.name": "tools/call", "gen_ai.tool.name": "other" },
      }),
      tracer.startSpan("rpc", {
        attributes: { "mcp.method.name": "tools/list", "gen_ai.tool.name": "search" },
      }),
      tracer.startSpan("GET /orders"),
      trace.wrapSpanContext({
        traceId: "0af7651916cd43dd8448eb211c80319c",
        spanId: "b7ad6b7169203331",
        traceFlags: 1,
      }),
    ];
    for (const active of cases) {
      const seen = seenUnder("attach", "search", active);
      expect(seen).not.toBe(active);
      expect(seen?.isRecording()).toBe(false);
      expect(seen?.spanContext().spanId).toBe(active.spanContext().spanId);
    }
  });

  it("child (or no mode) runs under the active span as it is; no active span, nothing to attach to", () => {
    const request = tracer.startSpan("tools/call search");
    expect(seenUnder("child", "search", request)).toBe(request);
    expect(seenUnder(undefined, "search", request)).toBe(request);
    expect(seenUnder("attach", "search")).toBeUndefined();
  });
});
