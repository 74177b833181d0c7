/**
 * selfheal/mcp with the v2 client (`@modelcontextprotocol/client`) over Streamable HTTP: a real
 * server on 127.0.0.1 (the 1.x SDK's server transport, what most servers run) behind a front
 * that answers 429/401/503 as a gateway does, so the v2 client throws its real `SdkHttpError`.
 */
import { Client, SdkHttpError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSelfHealing, type SelfHealing, type SelfHealingOptions } from "../../src/index.js";
import {
  healMcpClient,
  mcpFetch,
  REFUSAL_META_KEY,
  type HealMcpOptions,
} from "../../src/adapters/mcp.js";
import { NO_RECOVERY } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import { startFixtureHttpServer, type FixtureHttpServer } from "../fixtures/adapters/mcp-http.js";

const otel = recordingProvider();

const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
const attributesOf = (name: string, i = 0) => otel.named(name)[i]?.attributes ?? {};

/** An instance on the real clock (a socket answers in real time), no jitter. */
function realInstance(agent: string, options: Partial<SelfHealingOptions> = {}): SelfHealing {
  return createSelfHealing({
    agent,
    tracerProvider: otel.provider,
    logger: { warn: () => undefined },
    recovery: { random: () => 0 },
    ...options,
  });
}

describe("selfheal/mcp with the v2 client over Streamable HTTP (a real server on 127.0.0.1)", () => {
  let server: FixtureHttpServer;
  const open: Client[] = [];

  beforeEach(async () => {
    otel.reset();
    server = await startFixtureHttpServer();
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
    await server.close();
  });

  /** A v2 client on the fixture endpoint, healed; `fetch: mcpFetch()` unless told otherwise. */
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

  it("a call is one agent.tool_call span with network.transport tcp, the session id and the negotiated version", async () => {
    const { healed, client, transport } = await overHttp(realInstance("v2-http-spans"));

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "http" } });

    expect(textOf(result)).toBe("3 hits for http");
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    expect(attributesOf("agent.tool_call")).toMatchObject({
      "mcp.method.name": "tools/call",
      "mcp.session.id": transport.sessionId,
      "mcp.protocol.version": client.getNegotiatedProtocolVersion(),
      "network.transport": "tcp",
      "selfheal.call.outcome": "success",
    });
  });

  it("a real 429 with Retry-After: 1 (v2's SdkHttpError) is retried after the server's 1 s, through mcpFetch", async () => {
    const sh = realInstance("v2-http-429");
    const waits: (number | undefined)[] = [];
    sh.on("diagnosis", (d) => waits.push(d.retryAfterMs));
    const { healed } = await overHttp(sh);
    server.fail({ status: 429, headers: { "retry-after": "1" } });
    const started = Date.now();

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "x" } });

    const took = Date.now() - started;
    expect(textOf(result)).toBe("3 hits for x");
    expect(took).toBeGreaterThanOrEqual(1_000);
    expect(server.posts.map((p) => p.status)).toEqual([429, 200]);
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
      "selfheal.diagnosis.rule": "http-429",
      "selfheal.diagnosis.retry_after_ms": 1_000,
    });
  });

  it("without mcpFetch the 429 is RATE_LIMIT from its status with no Retry-After; the caller gets the SdkHttpError", async () => {
    const sh = realInstance("v2-http-429-bare");
    const waits: (number | undefined)[] = [];
    sh.on("diagnosis", (d) => waits.push(d.retryAfterMs));
    const { healed } = await overHttp(sh, { toolOptions: { plans: { RATE_LIMIT: [] } } }, false);
    server.fail({ status: 429, headers: { "retry-after": "1" } });

    const thrown = await healed
      .callTool({ name: "search_docs", arguments: { q: "x" } })
      .catch((e: unknown) => e);

    expect(thrown).toBeInstanceOf(SdkHttpError);
    expect((thrown as SdkHttpError).status).toBe(429);
    expect(attributesOf("agent.diagnosis")["selfheal.diagnosis.rule"]).toBe("http-429");
    expect(waits).toEqual([undefined]);
  });

  it("a real 401 is sent once: AUTH, never retried", async () => {
    const { healed } = await overHttp(realInstance("v2-http-401"));
    server.fail({ status: 401 });

    const result = await healed.callTool({ name: "search_docs", arguments: { q: "x" } });

    expect(server.posts).toEqual([{ tool: "search_docs", status: 401 }]);
    expect(attributesOf("agent.tool_call.error")["error.type"]).toBe("401");
    expect(attributesOf("agent.diagnosis")).toMatchObject({
      "selfheal.diagnosis.pattern": "AUTH",
      "selfheal.diagnosis.rule": "auth",
    });
    expect(result._meta?.[REFUSAL_META_KEY]).toMatchObject({ code: "SELFHEAL_ESCALATED" });
  });

  it("a real 503 is SERVICE_DOWN and retried once", async () => {
    const { healed } = await overHttp(realInstance("v2-http-503"));
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
    const sh = realInstance("v2-http-critical", {
      health: { cacheMs: 0, successRate: { minSamples: 4 } },
      recovery: NO_RECOVERY,
    });
    const { healed } = await overHttp(sh);
    for (let i = 0; i < 4; i++) await healed.callTool({ name: "explode" });

    const refused = await healed.callTool({ name: "create_ticket", arguments: { title: "t" } });

    expect(refused.isError).toBe(true);
    expect(refused._meta?.[REFUSAL_META_KEY]).toMatchObject({
      code: "SELFHEAL_HEALTH_CHECK_FAILED",
    });
    expect(server.posts.filter((p) => p.tool === "create_ticket")).toEqual([]);
    expect(server.counts.tickets).toBe(0);
  });
});
