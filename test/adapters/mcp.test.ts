import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { context, propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  Client,
  InMemoryTransport,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  type CallToolResult,
} from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import {
  createSelfHealing,
  HttpResponseError,
  isHealthCheckFailedError,
  isSelfHealConfigError,
  isToolTimeoutError,
  type SelfHealing,
} from "../../src/index.js";
import {
  healMcpClient,
  IDEMPOTENCY_META_KEY,
  REFUSAL_META_KEY,
  type HealMcpOptions,
} from "../../src/adapters/mcp.js";
import { builtJs, CHILD_HANG_MS } from "../helpers/built-js.js";
import { configError, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import { createFixtureServer } from "../fixtures/adapters/mcp-server.js";

const otel = recordingProvider();
const ROOT = resolve(import.meta.dirname, "../..");
/** The fixture server as built JS on dist/ (test/helpers/built-js.ts: no tsx at run time). */
const FIXTURE = builtJs("test/fixtures/adapters/mcp-server.ts");

/** The text of a tool result. */
const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part.type === "text" ? part.text : "")).join("");

const attributesOf = (name: string, i = 0) => otel.named(name)[i]?.attributes ?? {};

/** A fixture server and a client connected to it in process. */
async function connected() {
  const { server, counts } = createFixtureServer();
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "selfheal-test", version: "1.0.0" });
  await client.connect(clientSide);
  return { server, counts, client, clientSide };
}

const open: { close(): Promise<void> }[] = [];

/** A healed in-process client; its server is closed after the test. */
async function inMemory(
  sh: SelfHealing,
  options?: HealMcpOptions,
): Promise<Awaited<ReturnType<typeof connected>> & { healed: Client }> {
  const c = await connected();
  open.push(c.client, c.server);
  return { ...c, healed: healMcpClient(sh, c.client, options) };
}

beforeAll(() => {
  // W3C trace context, as a Node SDK registers it: the adapter injects it into params._meta.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});

beforeEach(() => {
  otel.reset();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

describe("selfheal/mcp over the in-memory transport", () => {
  it("a call is one agent.tool_call span with the MCP attributes; the answer is the server's", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, client } = await inMemory(sh);

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "refunds" } });

    expect(textOf(result)).toBe("3 hits for refunds");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    const span = attributesOf("agent.tool_call");
    expect(span).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search_docs",
      "mcp.method.name": "tools/call",
      "mcp.protocol.version": client.getNegotiatedProtocolVersion(),
      "network.transport": "memory",
      "selfheal.call.outcome": "success",
    });
    expect(span["mcp.protocol.version"]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(span).not.toHaveProperty("mcp.session.id"); // the in-memory transport has none
    // Everything else is the client itself.
    expect(healed).toBeInstanceOf(Client);
    expect(healed.getServerVersion()?.name).toBe("selfheal-fixture");
  });

  it("read-only comes from readOnlyHint (false included), else the readOnly option, else the tool is a write", async () => {
    const readOnlyOf = async (options: HealMcpOptions | undefined, tool: string) => {
      otel.reset();
      const { sh } = virtualInstance({ tracerProvider: otel.provider });
      const { healed } = await inMemory(sh, options);
      await healed.callTool({ name: tool, arguments: { q: "x", title: "x" } });
      const span = attributesOf("agent.tool_call");
      expect(span["selfheal.call.outcome"]).toBe("success");
      // Write tools' spans say so; read-only tools' carry no flag.
      return span["selfheal.tool.read_only"] !== false;
    };
    expect(await readOnlyOf(undefined, "search_docs")).toBe(true); // annotated
    expect(await readOnlyOf(undefined, "create_ticket")).toBe(false); // not annotated: a write
    expect(await readOnlyOf({ readOnly: ["create_ticket"] }, "create_ticket")).toBe(true);
    expect(
      await readOnlyOf({ readOnly: (name) => name === "create_ticket" }, "create_ticket"),
    ).toBe(true);
    // A server not trusted: its hints are ignored.
    expect(await readOnlyOf({ trustAnnotations: false }, "search_docs")).toBe(false);
    // The server says it writes (readOnlyHint: false): naming it read-only does not make it one.
    expect(await readOnlyOf({ readOnly: ["archive_ticket"] }, "archive_ticket")).toBe(false);
    expect(await readOnlyOf({ readOnly: () => true }, "archive_ticket")).toBe(false);
    expect(
      await readOnlyOf({ trustAnnotations: false, readOnly: ["archive_ticket"] }, "archive_ticket"),
    ).toBe(true);
  });

  it("an isError result that says 429 in words is diagnosed by its words and recovered by one quick retry", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const evidence: string[] = [];
    sh.on("diagnosis", (d) => evidence.push(d.evidence));
    const { healed } = await inMemory(sh);

    const result = await clock.run(healed.callTool({ name: "quota_search" }), { stepMs: 50 });

    expect(textOf(result)).toBe("quota search: 1 hit");
    expect(result.isError).toBeUndefined();
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    expect(attributesOf("agent.tool_call.error")["error.type"]).toBe("tool_error");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.rule": "rate-limit-wording",
    });
    expect(evidence).toEqual(["wording"]); // shapes this call's retry, nothing beyond it
    expect(attributesOf("agent.diagnosis")).not.toHaveProperty("http.response.status_code");
    expect(attributesOf("agent.recovery")).toMatchObject({
      "selfheal.recovery.strategy": "retry_once",
      "selfheal.recovery.outcome": "success",
    });
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  it("a status and Retry-After in the result's structured content are structured evidence: the retry waits 2 s", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const evidence: string[] = [];
    sh.on("diagnosis", (d) => evidence.push(d.evidence));
    const { healed } = await inMemory(sh);

    const result = await clock.run(healed.callTool({ name: "structured_quota" }), { stepMs: 50 });

    expect(textOf(result)).toBe("structured search: 1 hit");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.rule": "http-429",
      "selfheal.diagnosis.retry_after_ms": 2_000,
    });
    expect(evidence).toEqual(["structured"]);
    expect(attributesOf("agent.recovery")["selfheal.recovery.wait_ms"]).toBeGreaterThanOrEqual(
      2_000,
    );
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  it("a 429 with Retry-After thrown by the transport is honoured, and the call recovers", async () => {
    const { sh, clock, events } = recoveryInstance(otel.provider);
    const { healed, clientSide } = await inMemory(sh);
    // An HTTP front that throttles the first tools/call (what a Streamable HTTP gateway does).
    const send = clientSide.send.bind(clientSide);
    let throttled = false;
    clientSide.send = (message, options) => {
      if (!throttled && "method" in message && message.method === "tools/call") {
        throttled = true;
        const headers = new Headers({ "retry-after": "3" });
        return Promise.reject(
          new HttpResponseError(429, headers, '{"error":{"message":"slow down"}}', "https://mcp"),
        );
      }
      return send(message, options);
    };

    const result = await clock.run(
      healed.callTool({ name: "search_docs", arguments: { q: "refunds" } }),
      { stepMs: 100 },
    );

    expect(textOf(result)).toBe("3 hits for refunds");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "RATE_LIMIT",
      "selfheal.diagnosis.rule": "http-429",
      "selfheal.diagnosis.retry_after_ms": 3_000,
    });
    expect(attributesOf("agent.tool_call.error")["error.type"]).toBe("HttpResponseError");
    expect(attributesOf("agent.recovery")["selfheal.recovery.wait_ms"]).toBeGreaterThanOrEqual(
      3_000,
    );
    expect(events.map((e) => e.outcome)).toEqual(["recovered"]);
  });

  it("a tool that throws reaches the caller as its isError result, diagnosed with error.type tool_error", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh);

    const result = await healed.callTool({ name: "explode" });

    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe("database exploded");
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis"] },
    ]);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "error.type": "tool_error",
      "selfheal.call.outcome": "error",
    });
    expect(otel.named("agent.tool_call")[0]?.status.message).toBe("database exploded");
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.pattern"]).toBe("UNKNOWN");
  });

  it("JSON-RPC invalid params (an unknown tool, -32602) is BAD_REQUEST; the caller gets the SDK's ProtocolError", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh);

    const thrown = await healed.callTool({ name: "no_such_tool" }).catch((e: unknown) => e);

    expect(thrown).toBeInstanceOf(ProtocolError);
    expect((thrown as ProtocolError).code).toBe(-32602);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("-32602");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "BAD_REQUEST",
      "selfheal.diagnosis.rule": "http-400",
    });
  });

  it("the SDK's request timeout is TIMEOUT and a closed connection SERVICE_DOWN; the caller gets the SDK's errors", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, server } = await inMemory(sh);

    const timedOut = await healed
      .callTool({ name: "slow", arguments: { ms: 2_000 } }, { timeout: 30 })
      .catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(SdkError);
    expect((timedOut as SdkError).code).toBe(SdkErrorCode.RequestTimeout);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("request_timeout");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "TIMEOUT",
      "selfheal.diagnosis.rule": "timeout",
    });

    otel.reset();
    await server.close();
    const closed = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);
    expect((closed as Error).message).toBe("Not connected");
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("not_connected");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "SERVICE_DOWN",
      "selfheal.diagnosis.rule": "http-5xx-unavailable",
    });
  });

  it("while the agent is critical a write (no readOnlyHint) is refused as an isError result; reads still run", async () => {
    const { sh, clock } = virtualInstance({
      tracerProvider: otel.provider,
      health: { successRate: { minSamples: 4 } },
    });
    const { healed, client, counts } = await inMemory(sh);
    for (let i = 0; i < 4; i++) await healed.callTool({ name: "explode" });
    await clock.advance(5_000); // past the status cache
    otel.reset();

    const refused = await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });

    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(
      /write tool "create_ticket" refused: the agent's health is critical/,
    );
    expect(refused._meta?.[REFUSAL_META_KEY]).toEqual({
      code: "SELFHEAL_HEALTH_CHECK_FAILED",
      name: "HealthCheckFailedError",
    });
    expect(counts.tickets).toBe(0); // nothing reached the server
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "gen_ai.tool.name": "create_ticket",
      "selfheal.tool.read_only": false,
      "selfheal.call.outcome": "blocked",
      "selfheal.health.status": "critical",
      "mcp.method.name": "tools/call", // a refused call is still described
    });
    const read = await healed.callTool({ name: "search_docs", arguments: { q: "status" } });
    expect(textOf(read)).toBe("3 hits for status");

    // A second view of the same client shares the tools; this one throws refusals.
    const throwing = healMcpClient(sh, client, { refusals: "throw" });
    const thrown = await throwing
      .callTool({ name: "create_ticket", arguments: { title: "t" } })
      .catch((e: unknown) => e);
    expect(isHealthCheckFailedError(thrown)).toBe(true);
    expect(counts.tickets).toBe(0);
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

  it("spans: attach writes on the span another instrumentation opened, with no second tool-call span", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { spans: "attach" });
    const tracer = otel.provider.getTracer("other-mcp-instrumentation");

    const owner = tracer.startSpan("tools/call search_docs");
    await context.with(trace.setSpan(context.active(), owner), () =>
      healed.callTool({ name: "search_docs", arguments: { q: "x" } }),
    );
    owner.end();

    expect(tree(otel.spans())).toEqual(["tools/call search_docs"]);
    expect(attributesOf("tools/call search_docs")).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "mcp.method.name": "tools/call",
      "network.transport": "memory",
      "selfheal.call.outcome": "success",
    });
  });

  it("spans: attach never writes on the application's span: two calls under one request span each open their own", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { spans: "attach" });
    const tracer = otel.provider.getTracer("app");

    const request = tracer.startSpan("POST /chat");
    await context.with(trace.setSpan(context.active(), request), async () => {
      await healed.callTool({ name: "search_docs", arguments: { q: "a" } });
      await healed.callTool({ name: "create_ticket", arguments: { title: "b" } });
    });
    request.end();

    expect(tree(otel.spans())).toEqual([{ "POST /chat": ["agent.tool_call", "agent.tool_call"] }]);
    expect(attributesOf("POST /chat")).toEqual({});
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.name"])).toEqual([
      "search_docs",
      "create_ticket",
    ]);
  });

  it("spans: attach writes on an MCP span once: a second call under it, or a call of another tool, opens its own", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { spans: "attach" });
    const tracer = otel.provider.getTracer("other-mcp-instrumentation");

    const owner = tracer.startSpan("tools/call search_docs");
    await context.with(trace.setSpan(context.active(), owner), async () => {
      await healed.callTool({ name: "search_docs", arguments: { q: "first" } });
      await healed.callTool({ name: "search_docs", arguments: { q: "second" } });
      await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });
    });
    owner.end();

    expect(tree(otel.spans())).toEqual([
      { "tools/call search_docs": ["agent.tool_call", "agent.tool_call"] },
    ]);
    expect(attributesOf("tools/call search_docs")["selfheal.call.outcome"]).toBe("success");
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.name"])).toEqual([
      "search_docs",
      "create_ticket",
    ]);
  });

  it("reads a tool's hint again after the server announces its list changed", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, server } = await inMemory(sh);
    const deploy = server.registerTool(
      "deploy",
      { description: "Deploys", annotations: { readOnlyHint: true } },
      () => ({ content: [{ type: "text", text: "deployed" }] }),
    );
    await healed.listTools(); // the catalog now says deploy only reads

    deploy.update({ annotations: { readOnlyHint: false } }); // notifications/tools/list_changed
    await new Promise((done) => setTimeout(done, 20));
    await healed.callTool({ name: "deploy" });

    expect(attributesOf("agent.tool_call")["selfheal.tool.read_only"]).toBe(false);
  });

  it("bad options throw SelfHealConfigError naming the field", async () => {
    const { sh } = virtualInstance();
    const { client } = await connected();
    open.push(client);
    const heal = (options: unknown) => () => healMcpClient(sh, client, options as HealMcpOptions);
    expect(configError(heal({ readOnly: "search_docs" })).field).toBe(
      "healMcpClient(options).readOnly",
    );
    expect(configError(heal({ spans: "both" })).field).toBe("healMcpClient(options).spans");
    expect(configError(heal({ refusal: "throw" })).field).toBe("healMcpClient(options).refusal");
    expect(configError(heal({ toolOptions: { readOnly: true } })).field).toBe(
      "healMcpClient(options).toolOptions.readOnly",
    );
    expect(
      configError(() => healMcpClient(sh, { callTool: () => undefined } as unknown as Client))
        .field,
    ).toBe("healMcpClient(client)");
  });
});

describe("selfheal/mcp: review findings", () => {
  /** Counts the tools/call requests sent, and lets a test fail or hold the next tools/list. */
  function wire(clientSide: InMemoryTransport) {
    const send = clientSide.send.bind(clientSide);
    const seen = { calls: 0, metas: [] as unknown[], listing: "pass" as "pass" | "fail" | "hang" };
    clientSide.send = (message, options) => {
      if ("method" in message && message.method === "tools/call") {
        seen.calls++;
        seen.metas.push((message.params as { _meta?: unknown } | undefined)?._meta);
      }
      if ("method" in message && message.method === "tools/list" && seen.listing !== "pass") {
        if (seen.listing === "hang") return Promise.resolve(); // sent, never answered
        seen.listing = "pass";
        return Promise.reject(new SdkError(SdkErrorCode.SendFailed, "pipe broke"));
      }
      return send(message, options);
    };
    return seen;
  }

  it("the healed view reads the client's function-valued fields as they are now, not as first read", async () => {
    const { sh } = virtualInstance();
    const { healed, client } = await inMemory(sh);
    const seen: string[] = [];

    healed.onerror = () => seen.push("first");
    healed.onerror(new Error("x"));
    healed.onerror = () => seen.push("second");
    healed.onerror(new Error("y"));
    client.onerror = () => seen.push("set on the client");
    healed.onerror(new Error("z"));

    expect(seen).toEqual(["first", "second", "set on the client"]);
  });

  it("healing one client again adds no second list_changed watcher (healing per request does not grow a chain)", async () => {
    const { sh } = virtualInstance();
    const { client } = await inMemory(sh);
    const watcher = client.fallbackNotificationHandler;

    for (let i = 0; i < 3; i++) healMcpClient(sh, client);
    healMcpClient(virtualInstance().sh, client);

    expect(client.fallbackNotificationHandler).toBe(watcher);
  });

  it("a tools/list that fails in transit settles no read-only verdict: the annotated read stays read-only", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { healed, clientSide } = await inMemory(sh);
    const seen = wire(clientSide);
    seen.listing = "fail";

    const first = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);
    // The call fails as the plain client's would on a broken pipe; nothing was sent for it.
    expect(first).toBeInstanceOf(SdkError);
    expect(seen.calls).toBe(0);

    await healed.callTool({ name: "search_docs", arguments: { q: "x" } });
    const calls = otel.named("agent.tool_call");
    expect(calls.at(-1)?.attributes).not.toHaveProperty("selfheal.tool.read_only"); // a read
  });

  it("a call before the client is connected settles no read-only verdict either", async () => {
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const { server } = createFixtureServer();
    const client = new Client({ name: "selfheal-test", version: "1.0.0" });
    open.push(client, server);
    const healed = healMcpClient(sh, client);

    const early = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);
    expect((early as Error).message).toBe("Not connected");

    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    await client.connect(clientSide);
    await healed.callTool({ name: "search_docs", arguments: { q: "x" } });
    const calls = otel.named("agent.tool_call");
    expect(calls.at(-1)?.attributes).not.toHaveProperty("selfheal.tool.read_only"); // a read
  });

  it("the caller's abort ends a first call still waiting for tools/list", async () => {
    const { sh } = virtualInstance();
    const { healed, clientSide } = await inMemory(sh);
    wire(clientSide).listing = "hang";
    const controller = new AbortController();

    const call = healed
      .callTool({ name: "search_docs", arguments: { q: "x" } }, { signal: controller.signal })
      .catch((e: unknown) => e);
    setTimeout(() => {
      controller.abort(new Error("user cancelled"));
    }, 20);
    const outcome = await Promise.race([
      call,
      new Promise((done) => {
        setTimeout(() => {
          done("still waiting");
        }, 1_000);
      }),
    ]);

    // As the plain client reports an aborted request.
    expect(outcome).toBeInstanceOf(SdkError);
    expect((outcome as SdkError).code).toBe(SdkErrorCode.RequestTimeout);
    expect((outcome as Error).message).toContain("user cancelled");

    // The same for an abort while the call itself runs.
    const { sh: other } = virtualInstance();
    const running = new AbortController();
    const slow = (await inMemory(other)).healed
      .callTool({ name: "slow", arguments: { ms: 5_000 } }, { signal: running.signal })
      .catch((e: unknown) => e);
    setTimeout(() => {
      running.abort(new Error("user cancelled"));
    }, 20);
    const aborted = await slow;
    expect(aborted).toBeInstanceOf(SdkError);
    expect((aborted as SdkError).code).toBe(SdkErrorCode.RequestTimeout);
  });

  it("arguments the server's schema rejects (an isError result, as MCP servers report them) are BAD_REQUEST, never resent", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const { healed, clientSide } = await inMemory(sh);
    const seen = wire(clientSide);

    const result = await clock.run(healed.callTool({ name: "search_docs", arguments: { q: 42 } }), {
      stepMs: 50,
    });

    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Input validation error: /);
    expect(seen.calls).toBe(1);
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.pattern"]).toBe("BAD_REQUEST");
  });

  it("one selfheal tool name that reads on one server and writes on another is refused, not shared", async () => {
    const { sh } = virtualInstance();
    const { healed } = await inMemory(sh);
    const other = new McpServer({ name: "other", version: "1.0.0" });
    let writes = 0;
    // The same name, no readOnlyHint: a write on this server.
    other.registerTool("search_docs", { inputSchema: z.object({ q: z.string() }) }, ({ q }) => {
      writes++;
      return { content: [{ type: "text", text: `indexed ${q}` }] };
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await other.connect(serverSide);
    const otherClient = new Client({ name: "selfheal-test", version: "1.0.0" });
    await otherClient.connect(clientSide);
    open.push(otherClient, other);

    await healed.callTool({ name: "search_docs", arguments: { q: "x" } });
    const thrown = await healMcpClient(sh, otherClient)
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);

    expect(isSelfHealConfigError(thrown) && thrown.field).toBe("healMcpClient(options).toolName");
    expect(writes).toBe(0);
    // Named apart, each is its own tool.
    const apart = healMcpClient(sh, otherClient, { toolName: (n) => `other.${n}` });
    expect(textOf(await apart.callTool({ name: "search_docs", arguments: { q: "x" } }))).toBe(
      "indexed x",
    );
  });

  it("a retried write carries its idempotency key to the server in params._meta, the same on every attempt", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const { healed, clientSide } = await inMemory(sh, {
      toolOptions: {
        idempotencyKey: (call) => `ticket-${String(call.arguments?.title)}`,
        plans: { UNKNOWN: ["retry_once"] },
      },
    });
    const seen = wire(clientSide);
    const send = clientSide.send.bind(clientSide);
    let failed = false;
    clientSide.send = (message, options) => {
      if (!failed && "method" in message && message.method === "tools/call") {
        failed = true;
        void send(message, options); // the write reaches the server; its answer is lost
        return Promise.reject(new Error("socket hang up"));
      }
      return send(message, options);
    };

    await clock.run(healed.callTool({ name: "create_ticket", arguments: { title: "t" } }), {
      stepMs: 50,
    });

    expect(seen.calls).toBe(2);
    expect(seen.metas.map((m) => (m as Record<string, unknown>)[IDEMPOTENCY_META_KEY])).toEqual([
      "ticket-t",
      "ticket-t",
    ]);
  });

  it("the caller's request timeout is the attempt's: a retry with a longer timeout gets the longer time", async () => {
    // The real clock: the SDK's timers run in real time.
    const sh = createSelfHealing({
      agent: "timeout-agent",
      tracerProvider: otel.provider,
      logger: { warn: () => undefined },
      recovery: { random: () => 0 },
    });
    const { healed, clientSide } = await inMemory(sh);
    const seen = wire(clientSide);

    const result = await healed.callTool(
      { name: "slow", arguments: { ms: 150 } },
      { timeout: 100 },
    );

    expect(textOf(result)).toBe("slept 150 ms");
    expect(seen.calls).toBe(2);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "selfheal.call.timeout_ms": 100,
      "selfheal.call.outcome": "recovered",
    });
    expect(
      otel.named("agent.recovery").map((span) => span.attributes["selfheal.recovery.strategy"]),
    ).toContain("retry_with_longer_timeout");
  });

  it("selfheal's own attempt timeout reaches the caller as the SDK's request timeout", async () => {
    const { sh, clock } = virtualInstance({ tracerProvider: otel.provider });
    const { healed } = await inMemory(sh, { toolOptions: { timeoutMs: 1_000 } });

    const thrown = await clock
      .run(healed.callTool({ name: "slow", arguments: { ms: 5_000 } }), { stepMs: 100 })
      .catch((e: unknown) => e);

    expect(thrown).toBeInstanceOf(SdkError);
    expect((thrown as SdkError).code).toBe(SdkErrorCode.RequestTimeout);
    expect(isToolTimeoutError((thrown as Error).cause)).toBe(true);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("ToolTimeoutError");
  });
});

describe("selfheal/mcp over stdio (the fixture server as a child process)", () => {
  let client: Client;
  let sh: SelfHealing;

  /** A server process of its own, and a client connected to it. */
  async function startServer() {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [FIXTURE],
      cwd: ROOT,
      stderr: "pipe",
    });
    const c = new Client({ name: "selfheal-test", version: "1.0.0" });
    await c.connect(transport);
    return { client: c, transport };
  }

  beforeAll(async () => {
    ({ client } = await startServer());
    // The real clock: a child process answers in real time. No jitter: the quick retry waits 250 ms.
    sh = createSelfHealing({
      agent: "stdio-agent",
      tracerProvider: otel.provider,
      logger: { warn: () => undefined },
      recovery: { random: () => 0 },
    });
  }, 150_000);

  afterAll(async () => {
    await client.close();
  });

  it("a call over a pipe carries network.transport pipe and the negotiated protocol version", async () => {
    const healed = healMcpClient(sh, client);
    const result = await healed.callTool({ name: "search_docs", arguments: { q: "pipes" } });

    expect(textOf(result)).toBe("3 hits for pipes");
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "gen_ai.tool.name": "search_docs",
      "mcp.method.name": "tools/call",
      "mcp.protocol.version": client.getNegotiatedProtocolVersion(),
      "network.transport": "pipe",
      "selfheal.call.outcome": "success",
    });
  });

  it("a throttled answer is retried once and recovered", async () => {
    const healed = healMcpClient(sh, client);
    const result = await healed.callTool({ name: "quota_search" });

    expect(textOf(result)).toBe("quota search: 1 hit");
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    expect(attributesOf("agent.tool_call")["selfheal.call.outcome"]).toBe("recovered");
  });

  // A server of its own to kill: the other cases of this block share theirs, in any order.
  it("the server process dying mid-call is SERVICE_DOWN; the caller gets the SDK's ConnectionClosed", async () => {
    const doomed = await startServer();
    const healed = healMcpClient(sh, doomed.client, {
      toolOptions: { plans: { SERVICE_DOWN: [] } }, // see the diagnosis, not the recovery
    });
    const call = healed
      .callTool({ name: "slow", arguments: { ms: 10_000 } })
      .catch((e: unknown) => e);
    await new Promise((done) => setTimeout(done, 100));
    process.kill(doomed.transport.pid as number);

    const thrown = await call;
    expect(thrown).toBeInstanceOf(SdkError);
    expect((thrown as SdkError).code).toBe(SdkErrorCode.ConnectionClosed);
    expect(attributesOf("agent.tool_call")["error.type"]).toBe("connection_closed");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "SERVICE_DOWN",
      "selfheal.diagnosis.rule": "http-5xx-unavailable",
    });
  });
});

describe("examples/mcp.ts (against the built package, as a user runs it)", () => {
  it("prints the spans, the recovery from a 429 and the refused write", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [builtJs("examples/mcp.ts")], {
      cwd: ROOT,
      timeout: CHILD_HANG_MS,
    });
    expect(stdout).toContain(
      "span agent.tool_call  tool=search_docs outcome=success  mcp.method.name=tools/call network.transport=memory",
    );
    expect(stdout).toContain(
      "diagnosis quota_search: RATE_LIMIT (rule rate-limit-wording, evidence wording)",
    );
    expect(stdout).toContain("recovery quota_search: retry_once => recovered");
    expect(stdout).toContain("span agent.tool_call  tool=quota_search outcome=recovered");
    expect(stdout).toContain("quota_search answered: quota search: 1 hit");
    expect(stdout).toContain("status: critical");
    expect(stdout).toContain("span agent.tool_call  tool=create_ticket outcome=blocked");
    expect(stdout).toMatch(
      /create_ticket refused \(isError\): selfheal: write tool "create_ticket"/,
    );
  }, 150_000);
});
