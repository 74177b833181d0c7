/**
 * mcpFetch on its own: which refused responses it records for the attempt that sent them (a
 * `tools/call` of that attempt's tool, in one message or a batch), which headers it keeps, and
 * that the transport gets every response untouched.
 */
import { describe, expect, it } from "vitest";
import { inHttpAttempt, mcpFetch, type McpFetch } from "../../src/adapters/mcp/http.js";
import { callClient, requestOf, sdkLineOf } from "../../src/adapters/mcp/types.js";
import { configError } from "../helpers/engine.js";

const call = (name: string, id = 1) =>
  ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: {} } }) as const;

/** A fetch answering every request with `status` and `headers`; the requests it got. */
function answering(status: number, headers: Record<string, string> = {}) {
  const seen: (RequestInit | undefined)[] = [];
  const fetch: McpFetch = (_url, init) => {
    seen.push(init);
    return Promise.resolve(new Response("{}", { status, headers }));
  };
  return { fetch, seen };
}

async function attempt(tool: string, fetch: McpFetch, body: unknown) {
  const { result, failure } = inHttpAttempt(tool, () =>
    mcpFetch(fetch)("http://127.0.0.1/mcp", {
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
  );
  const response = await result;
  return { response, failure: failure() };
}

describe("mcpFetch", () => {
  it("records a refused tools/call of the attempt's tool: its status and rate-limit headers only", async () => {
    const headers = {
      "Retry-After": "7",
      "retry-after-ms": "7000",
      "X-RateLimit-Remaining": "0",
      ratelimit: "limit=10",
      "RateLimit-Reset": "30",
      "set-cookie": "session=secret",
      "content-type": "application/json",
    };
    const { fetch } = answering(429, headers);
    const { response, failure } = await attempt("search", fetch, call("search"));
    expect(response.status).toBe(429);
    expect(failure).toEqual({
      status: 429,
      headers: {
        "retry-after": "7",
        "retry-after-ms": "7000",
        "x-ratelimit-remaining": "0",
        ratelimit: "limit=10",
        "ratelimit-reset": "30",
      },
    });
  });

  it("finds the tool's call in a batch; records nothing for another tool, a list, or a bad body", async () => {
    const { fetch } = answering(503);
    expect(
      (await attempt("search", fetch, [call("other", 1), call("search", 2)])).failure?.status,
    ).toBe(503);
    for (const body of [
      call("other"),
      { jsonrpc: "2.0", id: 1, method: "tools/list", params: { name: "search" } },
      [null, 3],
      "{not json",
      "x".repeat(300 * 1024),
    ])
      expect((await attempt("search", fetch, body)).failure).toBeUndefined();
  });

  it("records nothing for an answered request, or outside an attempt", async () => {
    expect((await attempt("search", answering(200).fetch, call("search"))).failure).toBeUndefined();
    const response = await mcpFetch(answering(500).fetch)("http://127.0.0.1/mcp", {
      body: JSON.stringify(call("search")),
    });
    expect(response.status).toBe(500);
  });

  it("keeps at most 16 headers", async () => {
    const many = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [`x-ratelimit-h${i}`, String(i)]),
    );
    const { failure } = await attempt("search", answering(429, many).fetch, call("search"));
    expect(Object.keys(failure?.headers ?? {})).toHaveLength(16);
  });

  it("passes the request as it is; takes the global fetch by default; refuses a fetch that is not one", async () => {
    const { fetch, seen } = answering(200);
    const init = { method: "POST", body: "{}", headers: { a: "b" } };
    await mcpFetch(fetch)("http://127.0.0.1/mcp", init);
    expect(seen).toEqual([init]);
    const original = globalThis.fetch;
    globalThis.fetch = answering(418).fetch as typeof globalThis.fetch;
    try {
      expect((await mcpFetch()("http://127.0.0.1/mcp")).status).toBe(418);
    } finally {
      globalThis.fetch = original;
    }
    expect(configError(() => mcpFetch("fetch" as never)).field).toBe("mcpFetch(fetch)");
  });
});

describe("the SDK lines' callTool", () => {
  it("v2 has getNegotiatedProtocolVersion; 1.x takes a result schema before the options", async () => {
    const args: unknown[][] = [];
    const client = {
      callTool: (...a: unknown[]) => {
        args.push(a);
        return Promise.resolve({ content: [] });
      },
      listTools: () => Promise.resolve({ tools: [] }),
    };
    expect(sdkLineOf(client as never)).toBe("1.x");
    expect(sdkLineOf({ ...client, getNegotiatedProtocolVersion: () => "2025-06-18" })).toBe("v2");
    const options = { timeout: 5 };
    expect(requestOf("1.x", ["schema", options])).toEqual({ schema: "schema", options });
    expect(requestOf("1.x", ["schema", 5])).toEqual({ schema: "schema", options: undefined });
    expect(requestOf("v2", [options])).toEqual({ schema: undefined, options });
    expect(requestOf("v2", [null])).toEqual({ schema: undefined, options: undefined });
    const params = { name: "search", arguments: {} };
    await callClient(client, "1.x", params, "schema", options);
    await callClient(client, "v2", params, "schema", options);
    expect(args).toEqual([
      [params, "schema", options],
      [params, options],
    ]);
  });
});
