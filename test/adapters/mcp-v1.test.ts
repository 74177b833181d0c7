/**
 * selfheal/mcp with the 1.x MCP TypeScript SDK (`@modelcontextprotocol/sdk`, what most servers
 * and clients run): its `Client` over the in-memory transport, over stdio (the 1.x fixture
 * server as a child process) and over Streamable HTTP (the 1.x server transport on 127.0.0.1,
 * behind a front that answers 429/401/503 as a gateway does). The same cases as the v2 tests.
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { context, propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  isToolTimeoutError,
  type SelfHealing,
  type SelfHealingOptions,
} from "../../src/index.js";
import {
  healMcpClient,
  isMcpCallError,
  mcpFetch,
  REFUSAL_META_KEY,
  type HealMcpOptions,
} from "../../src/adapters/mcp.js";
import { builtJs, CHILD_HANG_MS } from "../helpers/built-js.js";
import { configError, NO_RECOVERY, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import { startFixtureHttpServer, type FixtureHttpServer } from "../fixtures/adapters/mcp-http.js";
import { createV1FixtureServer } from "../fixtures/adapters/mcp-server-v1.js";

const otel = recordingProvider();
const ROOT = resolve(import.meta.dirname, "../..");
/** The 1.x fixture server as built JS on dist/ (test/helpers/built-js.ts: no tsx at run time). */
const FIXTURE = builtJs("test/fixtures/adapters/mcp-server-v1.ts");

/** The text of a tool result (1.x types a result loosely: `content` is read as it comes). */
const textOf = (result: unknown) =>
  ((result as CallToolResult).content as { type: string; text?: string }[])
    .map((part) => (part.type === "text" ? (part.text ?? "") : ""))
    .join("");

const metaOf = (result: unknown) => (result as CallToolResult)._meta;
const attributesOf = (name: string, i = 0) => otel.named(name)[i]?.attributes ?? {};
const sleep = (ms: number) =>
  new Promise((done) => {
    setTimeout(done, ms);
  });

/** An instance on the real clock (a child process or a socket answers in real time), no jitter. */
function realInstance(agent: string, options: Partial<SelfHealingOptions> = {}): SelfHealing {
  return createSelfHealing({
    agent,
    tracerProvider: otel.provider,
    logger: { warn: () => undefined },
    recovery: { random: () => 0 },
    ...options,
  });
}

/** Critical after four failures, health read afresh on every call, no recovery (fast). */
function fragileInstance(agent: string): SelfHealing {
  return realInstance(agent, {
    health: { cacheMs: 0, successRate: { minSamples: 4 } },
    recovery: NO_RECOVERY,
  });
}

const open: { close(): Promise<void> }[] = [];

/** A 1.x fixture server and a 1.x client connected to it in process, healed. */
async function inMemory(sh: SelfHealing, options?: HealMcpOptions) {
  const { server, counts } = createV1FixtureServer();
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "selfheal-test", version: "1.0.0" });
  await client.connect(clientSide);
  open.push(client, server);
  return { server, counts, client, clientSide, healed: healMcpClient(sh, client, options) };
}

beforeAll(() => {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});

beforeEach(() => {
  otel.reset();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

describe("selfheal/mcp with the 1.x SDK over the in-memory transport", () => {
  it("a call is one agent.tool_call span with the MCP attributes; the healed client is still the 1.x Client", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh);

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "refunds" } });

    expect(textOf(result)).toBe("3 hits for refunds");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "mcp.method.name": "tools/call",
      "network.transport": "memory",
      "selfheal.call.outcome": "success",
    });
    // 1.x keeps the negotiated version nowhere a client can read it, but on HTTP transports.
    expect(attributesOf("agent.tool_call")).not.toHaveProperty("mcp.protocol.version");
    expect(healed).toBeInstanceOf(Client);
    expect(healed.getServerVersion()?.name).toBe("selfheal-fixture-v1");
  });

  it("a 429 with Retry-After in the result's structured content is recovered after the server's 1 s", async () => {
    const { sh, clock, events } = recoveryInstance(otel.provider);
    const { healed } = await inMemory(sh);

    const result = await clock.run(healed.callTool({ name: "structured_quota" }), { stepMs: 50 });

    expect(textOf(result)).toBe("structured search: 1 hit");
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.rule": "http-429",
      "selfheal.diagnosis.retry_after_ms": 1_000,
    });
    expect(attributesOf("agent.recovery")["selfheal.recovery.wait_ms"]).toBeGreaterThanOrEqual(
      1_000,
    );
    expect(events.map((e) => e.outcome)).toEqual(["recovered"]);
  });

  it("a 401 is sent once: AUTH is never retried on the same server", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const { healed, counts } = await inMemory(sh);

    const result = await clock.run(healed.callTool({ name: "needs_auth" }), { stepMs: 50 });

    expect(counts.auth).toBe(1);
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "AUTH",
      "selfheal.diagnosis.rule": "auth",
    });
    // Recovery escalates: the model reads why, as an isError result.
    expect(result.isError).toBe(true);
    expect(metaOf(result)?.[REFUSAL_META_KEY]).toMatchObject({ code: "SELFHEAL_ESCALATED" });
  });

  it("while the agent is critical a write (no readOnlyHint) is refused as an isError result; reads still run", async () => {
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { successRate: { minSamples: 4 } },
    });
    const { healed, counts } = await inMemory(sh);
    for (let i = 0; i < 4; i++) await healed.callTool({ name: "explode" });
    await clock.advance(5_000); // past the status cache
    otel.reset();

    const refused = await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });

    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(
      /write tool "create_ticket" refused: the agent's health is critical/,
    );
    expect(metaOf(refused)?.[REFUSAL_META_KEY]).toEqual({
      code: "SELFHEAL_HEALTH_CHECK_FAILED",
      name: "HealthCheckFailedError",
    });
    expect(counts.tickets).toBe(0);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "selfheal.tool.read_only": false,
      "selfheal.call.outcome": "blocked",
      "mcp.method.name": "tools/call",
    });
    const read = await healed.callTool({ name: "search_docs", arguments: { q: "status" } });
    expect(textOf(read)).toBe("3 hits for status");
  });

  it("read-only: the server's readOnlyHint decides, false included; the readOnly option only fills a missing hint", async () => {
    const readOnlyOf = async (options: HealMcpOptions | undefined, tool: string) => {
      otel.reset();
      const { sh } = virtualInstance({ tracerProvider: otel.provider });
      const { healed } = await inMemory(sh, options);
      await healed.callTool({ name: tool, arguments: { q: "x", title: "x" } });
      expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("success");
      return attributesOf("agent.tool_call")["selfheal.tool.read_only"] !== false;
    };
    expect(await readOnlyOf(undefined, "search_docs")).toBe(true); // readOnlyHint: true
    expect(await readOnlyOf(undefined, "create_ticket")).toBe(false); // no hint: a write
    expect(await readOnlyOf({ readOnly: ["create_ticket"] }, "create_ticket")).toBe(true);
    // The server says it writes: naming it read-only does not make it one.
    expect(await readOnlyOf({ readOnly: ["archive_ticket"] }, "archive_ticket")).toBe(false);
    expect(await readOnlyOf({ readOnly: () => true }, "archive_ticket")).toBe(false);
    // A server not trusted: its hints are ignored, the option decides.
    expect(
      await readOnlyOf({ trustAnnotations: false, readOnly: ["archive_ticket"] }, "archive_ticket"),
    ).toBe(true);
    expect(await readOnlyOf({ trustAnnotations: false }, "search_docs")).toBe(false);
  });

  it("arguments the schema rejects and an unknown tool (1.x answers `MCP error -32602: …` as isError results) are BAD_REQUEST, sent once", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const { healed, clientSide } = await inMemory(sh);
    let calls = 0;
    const send = clientSide.send.bind(clientSide);
    clientSide.send = (message, options) => {
      if ("method" in message && message.method === "tools/call") calls++;
      return send(message, options);
    };

    const bad = await clock.run(healed.callTool({ name: "search_docs", arguments: { q: 42 } }), {
      stepMs: 50,
    });
    const unknown = await clock.run(healed.callTool({ name: "no_such_tool" }), { stepMs: 50 });

    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/^MCP error -32602: Input validation error: /);
    expect(textOf(unknown)).toBe("MCP error -32602: Tool no_such_tool not found");
    expect(calls).toBe(2);
    expect(
      otel.named("agent.diagnosis").map((s) => s.attributes["selfheal.diagnosis.pattern"]),
    ).toEqual(["BAD_REQUEST", "BAD_REQUEST"]);
  });

  it("takes 1.x's callTool(params, resultSchema, options): the schema reaches the client, the timeout is the attempt's", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, client } = await inMemory(sh);
    const seen: unknown[][] = [];
    const callTool = client.callTool.bind(client);
    client.callTool = (...args: Parameters<Client["callTool"]>) => {
      seen.push(args);
      return callTool(...args);
    };

    const result = await healed.callTool(
      { name: "search_docs", arguments: { q: "x" } },
      CallToolResultSchema,
      { timeout: 4_000 },
    );

    expect(textOf(result)).toBe("3 hits for x");
    expect(seen[0]?.[1]).toBe(CallToolResultSchema);
    expect(seen[0]?.[2]).toMatchObject({ timeout: 4_000 });
    expect(attributesOf("agent.tool_call")["selfheal.call.timeout_ms"]).toBe(4_000);
  });

  it("selfheal's attempt timeout and the caller's abort reach the caller as the 1.x client reports them (McpError RequestTimeout)", async () => {
    const { sh, clock } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { toolOptions: { timeoutMs: 1_000 } });

    const timedOut = await clock
      .run(healed.callTool({ name: "slow", arguments: { ms: 5_000 } }), { stepMs: 100 })
      .catch((e: unknown) => e);

    expect(timedOut).toBeInstanceOf(McpError);
    expect((timedOut as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect(isToolTimeoutError((timedOut as Error).cause)).toBe(true);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("ToolTimeoutError");

    const controller = new AbortController();
    const call = healed
      .callTool({ name: "slow", arguments: { ms: 5_000 } }, undefined, {
        signal: controller.signal,
      })
      .catch((e: unknown) => e);
    await sleep(20);
    controller.abort(new Error("user cancelled"));
    const aborted = await call;
    expect(aborted).toBeInstanceOf(McpError);
    expect((aborted as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect((aborted as Error).message).toContain("user cancelled");

    // Aborted before anything was sent: 1.x rejects with the reason itself.
    const reason = new Error("too late");
    const early = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } }, undefined, {
        signal: AbortSignal.abort(reason),
      })
      .catch((e: unknown) => e);
    expect(early).toBe(reason);
  });

  it("the SDK's request timeout (McpError -32001) is TIMEOUT; the caller gets the McpError", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh);

    const thrown = await healed
      .callTool({ name: "slow", arguments: { ms: 2_000 } }, undefined, { timeout: 30 })
      .catch((e: unknown) => e);

    expect(thrown).toBeInstanceOf(McpError);
    expect((thrown as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("-32001");
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.pattern"]).toBe("TIMEOUT");
  });

  it("puts the call's trace context in params._meta: the server sees the tool-call span as its parent", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh);

    const result = await healed.callTool({ name: "echo_meta", _meta: { "example.com/x": "kept" } });

    const meta = JSON.parse(textOf(result)) as Record<string, string>;
    const span = otel.named("agent.tool_call")[0] as ReadableSpan;
    const { traceId, spanId } = span.spanContext();
    expect(meta.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    expect(meta["example.com/x"]).toBe("kept");
  });

  it("spans: attach never writes on the application's span: two calls under one request span each open their own", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, client } = await inMemory(sh, { spans: "attach" });
    // A second view of the client, without `spans`: the tools it shares keep their mode.
    const plain = healMcpClient(sh, client);
    const tracer = otel.provider.getTracer("app");

    const request = tracer.startSpan("POST /chat");
    await context.with(trace.setSpan(context.active(), request), async () => {
      await healed.callTool({ name: "search_docs", arguments: { q: "a" } });
      await healed.callTool({ name: "create_ticket", arguments: { title: "b" } });
      await plain.callTool({ name: "search_docs", arguments: { q: "c" } });
    });
    request.end();

    expect(tree(otel.spans())).toEqual([
      { "POST /chat": ["agent.tool_call", "agent.tool_call", "agent.tool_call"] },
    ]);
    expect(attributesOf("POST /chat")).toEqual({});
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.name"])).toEqual([
      "search_docs",
      "create_ticket",
      "search_docs",
    ]);
  });

  it("spans: attach writes on the MCP span of this call only: once, and only for its tool", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { spans: "attach" });
    const tracer = otel.provider.getTracer("other-mcp-instrumentation");

    const owner = tracer.startSpan("tools/call search_docs");
    await context.with(trace.setSpan(context.active(), owner), async () => {
      await healed.callTool({ name: "search_docs", arguments: { q: "first" } });
      await healed.callTool({ name: "search_docs", arguments: { q: "second" } }); // not its span
      await healed.callTool({ name: "create_ticket", arguments: { title: "t" } }); // another tool
    });
    owner.end();
    // Told by attributes too, as the MCP conventions set them.
    const byAttributes = tracer.startSpan("mcp client call", {
      attributes: { "mcp.method.name": "tools/call", "gen_ai.tool.name": "search_docs" },
    });
    await context.with(trace.setSpan(context.active(), byAttributes), () =>
      healed.callTool({ name: "search_docs", arguments: { q: "third" } }),
    );
    byAttributes.end();

    expect(tree(otel.spans())).toEqual([
      { "tools/call search_docs": ["agent.tool_call", "agent.tool_call"] },
      "mcp client call",
    ]);
    expect(attributesOf("tools/call search_docs")).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "selfheal.call.outcome": "success",
      "network.transport": "memory",
    });
    expect(attributesOf("mcp client call")["selfheal.call.outcome"]).toBe("success");
  });
});

describe("selfheal/mcp with the 1.x SDK over stdio (the 1.x fixture server as a child process)", () => {
  let client: Client;

  /** What the server process did, asked through the healed-free client. */
  const serverCounts = async () =>
    JSON.parse(textOf(await client.callTool({ name: "counts" }))) as Record<string, number>;

  /** A server process of its own, and a client connected to it. */
  async function startServer() {
    const t = new StdioClientTransport({
      command: process.execPath,
      args: [FIXTURE],
      cwd: ROOT,
      stderr: "pipe",
    });
    const c = new Client({ name: "selfheal-test", version: "1.0.0" });
    await c.connect(t);
    return { client: c, transport: t };
  }

  beforeAll(async () => {
    ({ client } = await startServer());
  }, 150_000);

  afterAll(async () => {
    await client.close();
  });

  it("a call over a pipe is one agent.tool_call span with network.transport pipe", async () => {
    const healed = healMcpClient(realInstance("stdio-spans"), client);
    const result = await healed.callTool({ name: "search_docs", arguments: { q: "pipes" } });

    expect(textOf(result)).toBe("3 hits for pipes");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "mcp.method.name": "tools/call",
      "network.transport": "pipe",
      "selfheal.call.outcome": "success",
    });
  });

  it("a 429 with Retry-After: 1 in structured content is recovered after 1 s", async () => {
    const healed = healMcpClient(realInstance("stdio-429"), client);
    const started = Date.now();

    const result = await healed.callTool({ name: "structured_quota" });

    expect(textOf(result)).toBe("structured search: 1 hit");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.retry_after_ms"]).toBe(1_000);
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  it("a 401 is sent once", async () => {
    const healed = healMcpClient(realInstance("stdio-401"), client);
    const before = (await serverCounts()).auth ?? 0;

    const result = await healed.callTool({ name: "needs_auth" });

    expect(result.isError).toBe(true);
    expect((await serverCounts()).auth).toBe(before + 1);
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.pattern"]).toBe("AUTH");
  });

  it("while the agent is critical a write is refused and never reaches the server process", async () => {
    const healed = healMcpClient(fragileInstance("stdio-critical"), client);
    for (let i = 0; i < 4; i++) await healed.callTool({ name: "explode" });

    const refused = await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });

    expect(refused.isError).toBe(true);
    expect(metaOf(refused)?.[REFUSAL_META_KEY]).toMatchObject({
      code: "SELFHEAL_HEALTH_CHECK_FAILED",
    });
    expect((await serverCounts()).tickets).toBe(0);
  });

  // A server of its own to kill: the other cases of this block share theirs, in any order.
  it("the server process dying mid-call is SERVICE_DOWN; the caller gets 1.x's McpError ConnectionClosed", async () => {
    const doomed = await startServer();
    const healed = healMcpClient(realInstance("stdio-dies"), doomed.client, {
      toolOptions: { plans: { SERVICE_DOWN: [] } }, // see the diagnosis, not the recovery
    });
    const call = healed
      .callTool({ name: "slow", arguments: { ms: 10_000 } })
      .catch((e: unknown) => e);
    await sleep(100);
    process.kill(doomed.transport.pid as number);

    const thrown = await call;
    expect(thrown).toBeInstanceOf(McpError);
    expect((thrown as McpError).code).toBe(ErrorCode.ConnectionClosed);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("-32000");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "SERVICE_DOWN",
      "selfheal.diagnosis.rule": "http-5xx-unavailable",
    });
  });
});

describe("selfheal/mcp with the 1.x SDK over Streamable HTTP (a real server on 127.0.0.1)", () => {
  let server: FixtureHttpServer;

  beforeEach(async () => {
    server = await startFixtureHttpServer();
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
    await server.close();
  });

  /** A 1.x client on the fixture endpoint, healed; `fetch: mcpFetch()` unless told otherwise. */
  async function overHttp(sh: SelfHealing, options?: HealMcpOptions, withMcpFetch = true) {
    const transport = new StreamableHTTPClientTransport(
      server.url,
      withMcpFetch ? { fetch: mcpFetch() } : {},
    );
    const client = new Client({ name: "selfheal-test", version: "1.0.0" });
    await client.connect(transport);
    open.push(client);
    return { client, transport, healed: healMcpClient(sh, client, options) };
  }

  it("a call is one agent.tool_call span with network.transport tcp, the session id and the protocol version", async () => {
    const { healed, transport } = await overHttp(realInstance("http-spans"));

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "http" } });

    expect(textOf(result)).toBe("3 hits for http");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "mcp.method.name": "tools/call",
      "mcp.session.id": transport.sessionId,
      "mcp.protocol.version": transport.protocolVersion,
      "network.transport": "tcp",
      "selfheal.call.outcome": "success",
    });
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("a real 429 with Retry-After: 1 (1.x's StreamableHTTPError) is retried after the server's 1 s, through mcpFetch", async () => {
    const sh = realInstance("http-429");
    const waits: (number | undefined)[] = [];
    sh.on("diagnosis", (d) => waits.push(d.retryAfterMs));
    const { healed } = await overHttp(sh);
    server.fail({ status: 429, headers: { "retry-after": "1" } });
    const started = Date.now();

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "x" } });

    const took = Date.now() - started;
    expect(textOf(result)).toBe("3 hits for x");
    expect(took).toBeGreaterThanOrEqual(1_000);
    expect(server.posts).toEqual([
      { tool: "search_docs", status: 429 },
      { tool: "search_docs", status: 200 },
    ]);
    expect(waits).toEqual([1_000]);
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    expect(attributesOf("agent.tool_call.error")["error.type"]).toBe("429");
    // The server's wait, not selfheal's default (5 s without the Retry-After).
    const waited = attributesOf("agent.recovery")["selfheal.recovery.wait_ms"] as number;
    expect(waited).toBeGreaterThanOrEqual(1_000);
    expect(waited).toBeLessThan(2_000);
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.rule": "http-429",
      "selfheal.diagnosis.retry_after_ms": 1_000,
    });
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  it("without mcpFetch the 429 is still RATE_LIMIT from its status, but its Retry-After is lost; the caller gets the StreamableHTTPError", async () => {
    const sh = realInstance("http-429-bare");
    const waits: (number | undefined)[] = [];
    sh.on("diagnosis", (d) => waits.push(d.retryAfterMs));
    const { healed } = await overHttp(sh, { toolOptions: { plans: { RATE_LIMIT: [] } } }, false);
    server.fail({ status: 429, headers: { "retry-after": "1" } });

    const thrown = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);

    expect(thrown).toBeInstanceOf(StreamableHTTPError);
    expect((thrown as StreamableHTTPError).code).toBe(429);
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.rule"]).toBe("http-429");
    expect(waits).toEqual([undefined]);
  });

  it("mcpFetch keeps the rate-limit headers of the refused tools/call only", async () => {
    const sh = realInstance("http-headers");
    const { healed } = await overHttp(sh, {
      refusals: "throw",
      toolOptions: { plans: { RATE_LIMIT: ["escalate_to_human"] } },
    });
    server.fail({
      status: 429,
      headers: { "retry-after": "7", "x-ratelimit-remaining-requests": "0", "set-cookie": "s=1" },
    });

    const thrown = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);

    expect(isHumanEscalationRequiredError(thrown)).toBe(true);
    const failure = (thrown as Error).cause;
    expect(isMcpCallError(failure)).toBe(true);
    expect(failure).toMatchObject({
      name: "429",
      status: 429,
      headers: { "retry-after": "7", "x-ratelimit-remaining-requests": "0" },
    });
    expect((failure as { headers: object }).headers).not.toHaveProperty("set-cookie");
    expect(configError(() => mcpFetch("fetch" as never)).field).toBe("mcpFetch(fetch)");
  });

  it("a real 401 is sent once: AUTH, never retried", async () => {
    const { healed } = await overHttp(realInstance("http-401"));
    server.fail({ status: 401, headers: { "www-authenticate": 'Bearer error="invalid_token"' } });

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "x" } });

    expect(server.posts).toEqual([{ tool: "search_docs", status: 401 }]);
    expect(attributesOf("agent.tool_call.error")["error.type"]).toBe("401");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "AUTH",
      "selfheal.diagnosis.rule": "auth",
    });
    expect(metaOf(result)?.[REFUSAL_META_KEY]).toMatchObject({ code: "SELFHEAL_ESCALATED" });
  });

  it("a real 503 is SERVICE_DOWN and retried once", async () => {
    const { healed } = await overHttp(realInstance("http-503"));
    server.fail({ status: 503 });

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "x" } });

    expect(textOf(result)).toBe("3 hits for x");
    expect(server.posts.map((p) => p.status)).toEqual([503, 200]);
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "SERVICE_DOWN",
      "selfheal.diagnosis.rule": "http-5xx-unavailable",
    });
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  it("while the agent is critical a write is refused and no tools/call for it reaches the server", async () => {
    const { healed } = await overHttp(fragileInstance("http-critical"));
    for (let i = 0; i < 4; i++) await healed.callTool({ name: "explode" });

    const refused = await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });

    expect(refused.isError).toBe(true);
    expect(metaOf(refused)?.[REFUSAL_META_KEY]).toMatchObject({
      code: "SELFHEAL_HEALTH_CHECK_FAILED",
    });
    expect(server.posts.filter((p) => p.tool === "create_ticket")).toEqual([]);
    expect(server.counts.tickets).toBe(0);
  });
});

describe("selfheal/mcp loads without either MCP SDK", () => {
  it("imports nothing from @modelcontextprotocol/* at runtime", async () => {
    // A resolve hook that fails any import of an MCP SDK package, then the adapter's entry.
    const hooks = `export async function resolve(s, c, next) { if (s.startsWith("@modelcontextprotocol/")) throw new Error("imported " + s); return next(s, c); }`;
    const register = `import { register } from "node:module"; register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hooks)}));`;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "--import",
        `data:text/javascript,${encodeURIComponent(register)}`,
        "--input-type=module",
        "-e",
        // The built entry (npm run build), as a user loads it: no tsx at run time (issue 27).
        `const m = await import("./dist/adapters/mcp.js"); console.log(Object.keys(m).sort().join(" "));`,
      ],
      { cwd: ROOT, timeout: CHILD_HANG_MS },
    );
    expect(stdout.trim()).toBe(
      "IDEMPOTENCY_META_KEY McpCallError REFUSAL_META_KEY healMcpClient isMcpCallError mcpFetch",
    );
  }, 150_000);
});
