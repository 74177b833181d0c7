/**
 * How the MCP adapter reads the SDKs' errors (1.x and v2, by their names, messages and v2's
 * cross-bundle brands, never `instanceof`), turns them into evidence the diagnoser reads, and
 * hands a failure back to the caller as the plain client would have.
 */
import { describe, expect, it } from "vitest";
import {
  abortedRequest,
  asMcpCallError,
  httpStatusOf,
  isMcpCallError,
  isServerRefusal,
  jsonRpcCodeOf,
  McpCallError,
  notConnected,
  REFUSAL_META_KEY,
  surfaced,
  toolResultError,
  type Surfacing,
} from "../../src/adapters/mcp/errors.js";
import { CircuitOpenError, HealthCheckFailedError, ToolTimeoutError } from "../../src/errors.js";

const BRANDS = Symbol.for("mcp.sdk.errorBrands");

/** An error as an SDK makes it: a name, fields, and (v2) the brands of its class chain. */
function sdkError(
  message: string,
  {
    name = "Error",
    brands,
    ...fields
  }: { name?: string; brands?: string[] } & Record<string, unknown> = {},
): Error {
  const error = Object.assign(new Error(message), fields);
  error.name = name;
  if (brands) Object.defineProperty(error, BRANDS, { value: new Set(brands), enumerable: false });
  return error;
}

describe("jsonRpcCodeOf: an error the server answered", () => {
  it("reads v2's ProtocolError (brand or name) and 1.x's McpError (name or message)", () => {
    expect(jsonRpcCodeOf(sdkError("x", { code: -32602, brands: ["mcp.ProtocolError"] }))).toBe(
      -32602,
    );
    expect(jsonRpcCodeOf(sdkError("x", { code: -32601, name: "ProtocolError" }))).toBe(-32601);
    expect(jsonRpcCodeOf(sdkError("x", { code: -32603, name: "McpError" }))).toBe(-32603);
    expect(jsonRpcCodeOf(sdkError("MCP error -32001: Request timed out", { code: -32001 }))).toBe(
      -32001,
    );
  });

  it("reads nothing else: a code alone, another message, a fractional or text code, no Error", () => {
    expect(jsonRpcCodeOf(sdkError("boom", { code: -32602 }))).toBeUndefined();
    expect(jsonRpcCodeOf(sdkError("MCP error -32001: x", { code: -32002 }))).toBeUndefined();
    expect(jsonRpcCodeOf(sdkError("x", { code: -32602.5, name: "McpError" }))).toBeUndefined();
    expect(jsonRpcCodeOf(sdkError("x", { code: "-32602", name: "McpError" }))).toBeUndefined();
    expect(
      jsonRpcCodeOf(sdkError("x", { code: -32602, brands: ["mcp.SdkError"] })),
    ).toBeUndefined();
    expect(jsonRpcCodeOf({ name: "McpError", code: -32602, message: "x" })).toBeUndefined();
    const hostile = sdkError("x", { name: "McpError" });
    Object.defineProperty(hostile, "code", {
      get() {
        throw new Error("no");
      },
    });
    expect(jsonRpcCodeOf(hostile)).toBeUndefined();
  });
});

describe("httpStatusOf: a request the server refused", () => {
  it("reads v2's SdkHttpError: its status, else its data's", () => {
    expect(httpStatusOf(sdkError("x", { brands: ["mcp.SdkHttpError"], status: 429 }))).toBe(429);
    expect(httpStatusOf(sdkError("x", { name: "SdkHttpError", data: { status: 503 } }))).toBe(503);
    expect(httpStatusOf(sdkError("x", { name: "SdkHttpError", data: "503" }))).toBeUndefined();
    expect(httpStatusOf(sdkError("x", { name: "SdkHttpError", status: 99 }))).toBeUndefined();
  });

  it("reads 1.x's StreamableHTTPError and SseError by message or class, the status in code", () => {
    expect(httpStatusOf(sdkError("Streamable HTTP error: Error POSTing", { code: 401 }))).toBe(401);
    expect(httpStatusOf(sdkError("SSE error: Non-200 status code (503)", { code: 503 }))).toBe(503);
    class StreamableHTTPError extends Error {
      constructor(readonly code: number) {
        super("other wording");
      }
    }
    class SseError extends Error {
      constructor(readonly code: number) {
        super("other wording");
      }
    }
    expect(httpStatusOf(new StreamableHTTPError(502))).toBe(502);
    expect(httpStatusOf(new SseError(429))).toBe(429);
  });

  it("reads nothing else: a status-like code on another error, out of range, not an integer", () => {
    expect(httpStatusOf(sdkError("ECONNRESET", { code: 503 }))).toBeUndefined();
    expect(httpStatusOf(sdkError("Streamable HTTP error: x", { code: 600 }))).toBeUndefined();
    expect(httpStatusOf(sdkError("Streamable HTTP error: x", { code: 99 }))).toBeUndefined();
    expect(httpStatusOf(sdkError("Streamable HTTP error: x", { code: 503.5 }))).toBeUndefined();
    expect(httpStatusOf(sdkError("SSE error: x", { code: "503" }))).toBeUndefined();
    expect(httpStatusOf({ message: "SSE error: x", code: 503 })).toBeUndefined();
  });
});

describe("toolResultError: an isError result", () => {
  it("is wording only: its text, joined and cut; no text says so", () => {
    const error = toolResultError({
      isError: true,
      content: [
        { type: "text", text: "429 Too Many" },
        { type: "image" },
        { type: "text", text: "Requests" },
      ],
    });
    expect(error.message).toBe("429 Too Many Requests");
    expect(error.name).toBe("tool_error");
    expect(error.status).toBeUndefined();
    expect(error.code).toBeUndefined();
    expect(error.body).toBeUndefined();
    expect(toolResultError({ isError: true, content: [] }).message).toBe(
      "the MCP tool answered isError without text",
    );
    expect(toolResultError({ isError: true }).message).toBe(
      "the MCP tool answered isError without text",
    );
    expect(
      toolResultError({ isError: true, content: [{ type: "text", text: "x".repeat(10_000) }] })
        .message,
    ).toHaveLength(4096);
  });

  it("arguments the server's schema rejected are INVALID_ARGUMENT (both SDKs' wordings)", () => {
    for (const text of [
      "Input validation error: Invalid arguments for tool lookup",
      "MCP error -32602: Tool lookup not found",
    ])
      expect(toolResultError({ isError: true, content: [{ type: "text", text }] }).code).toBe(
        "INVALID_ARGUMENT",
      );
    expect(
      toolResultError({
        isError: true,
        content: [{ type: "text", text: "x Input validation error: " }],
      }).code,
    ).toBeUndefined();
  });

  it("its structured content is read as a body, its headers as headers", () => {
    const structuredContent = { status: 429, headers: { "retry-after": "3" } };
    const error = toolResultError({ isError: true, content: [], structuredContent });
    expect(error.body).toBe(structuredContent);
    expect(error.headers).toEqual({ "retry-after": "3" });
    expect(
      toolResultError({ isError: true, structuredContent: [1] as never }).body,
    ).toBeUndefined();
    expect(
      toolResultError({ isError: true, structuredContent: { headers: "retry-after: 3" } }).headers,
    ).toBeUndefined();
  });
});

describe("asMcpCallError: what the client threw, made readable", () => {
  it("a JSON-RPC error: its code as the type, the canonical code beside it, the original as cause", () => {
    const cases: [number, string, string | undefined][] = [
      [-32700, "parse", "INVALID_ARGUMENT"],
      [-32600, "invalid", "INVALID_ARGUMENT"],
      [-32602, "params", "INVALID_ARGUMENT"],
      [-32601, "method", "NOT_FOUND"],
      [-32001, "Request timed out", "DEADLINE_EXCEEDED"],
      [-32000, "Connection closed", "UNAVAILABLE"],
      [-32000, "Server busy", undefined],
      [-32603, "internal", undefined],
    ];
    for (const [code, text, canonical] of cases) {
      const original = sdkError(`MCP error ${code}: ${text}`, { code });
      const error = asMcpCallError(original) as McpCallError;
      expect([code, text, error.name, error.code, error.cause]).toEqual([
        code,
        text,
        String(code),
        canonical,
        original,
      ]);
      expect(error.message).toBe(original.message);
    }
  });

  it("an HTTP error: its status, with the failed response's headers when the status matches", () => {
    const original = sdkError("Streamable HTTP error: Error POSTing", { code: 429 });
    const headers = { "retry-after": "7" };
    const seen = asMcpCallError(original, { status: 429, headers }) as McpCallError;
    expect([seen.name, seen.status, seen.headers, seen.cause]).toEqual([
      "429",
      429,
      headers,
      original,
    ]);
    const other = asMcpCallError(original, { status: 503, headers }) as McpCallError;
    expect(other.headers).toBeUndefined();
    expect((asMcpCallError(original) as McpCallError).headers).toBeUndefined();
  });

  it("a v2 SdkError: its code lowercased as the type, the canonical code for the known ones", () => {
    const cases: [string, string | undefined][] = [
      ["REQUEST_TIMEOUT", "DEADLINE_EXCEEDED"],
      ["CONNECTION_CLOSED", "UNAVAILABLE"],
      ["SEND_FAILED", "UNAVAILABLE"],
      ["NOT_CONNECTED", "UNAVAILABLE"],
      ["CAPABILITY_NOT_SUPPORTED", undefined],
    ];
    for (const [code, canonical] of cases) {
      for (const original of [
        sdkError("x", { code, brands: ["mcp.SdkError"] }),
        sdkError("x", { code, name: "SdkError" }),
      ]) {
        const error = asMcpCallError(original) as McpCallError;
        expect([code, error.name, error.code, error.cause]).toEqual([
          code,
          code.toLowerCase(),
          canonical,
          original,
        ]);
      }
    }
    const numeric = sdkError("x", { code: 5, name: "SdkError" });
    expect(asMcpCallError(numeric)).toBe(numeric);
  });

  it("'Not connected' (a plain Error) is UNAVAILABLE; anything else passes as it is", () => {
    const error = asMcpCallError(notConnected()) as McpCallError;
    expect([error.name, error.code, error.message]).toEqual([
      "not_connected",
      "UNAVAILABLE",
      "Not connected",
    ]);
    class Custom extends Error {}
    for (const other of [
      new Custom("Not connected"),
      new Error("not connected"),
      "Not connected",
      null,
    ]) {
      expect(asMcpCallError(other)).toBe(other);
    }
  });

  it("an McpCallError is told from any copy of selfheal by its marker, not its class", () => {
    expect(isMcpCallError(new McpCallError("tool_error", "x"))).toBe(true);
    expect(isMcpCallError({ [Symbol.for("selfheal:mcp-call-error")]: true })).toBe(true);
    expect(isMcpCallError(new Error("x"))).toBe(false);
    expect(isMcpCallError(null)).toBe(false);
    expect(isMcpCallError("tool_error")).toBe(false);
    expect(new McpCallError("t", "m").cause).toBeUndefined();
  });
});

describe("isServerRefusal: the server's own answer to a listing", () => {
  it("a JSON-RPC error, but not 1.x's own timeout and closed connection", () => {
    expect(isServerRefusal(sdkError("x", { code: -32601, name: "McpError" }))).toBe(true);
    expect(isServerRefusal(sdkError("x", { code: -32603, name: "McpError" }))).toBe(true);
    expect(isServerRefusal(sdkError("x", { code: -32001, name: "McpError" }))).toBe(false);
    expect(isServerRefusal(sdkError("x", { code: -32000, name: "McpError" }))).toBe(false);
    expect(isServerRefusal(new Error("ECONNREFUSED"))).toBe(false);
  });
});

describe("abortedRequest: what the plain client rejects an aborted call with", () => {
  it("1.x: the reason itself; v2: an SdkError REQUEST_TIMEOUT, unless the reason is one", () => {
    const reason = new Error("user left");
    expect(abortedRequest("1.x", reason)).toBe(reason);
    const v2 = abortedRequest("v2", reason) as Error & { code: string; data: unknown };
    expect([v2.name, v2.code, v2.message, v2.data]).toEqual([
      "SdkError",
      "REQUEST_TIMEOUT",
      "Error: user left",
      undefined,
    ]);
    expect((v2 as unknown as Record<symbol, Set<string>>)[BRANDS]).toEqual(
      new Set(["mcp.SdkError"]),
    );
    expect(Object.keys(v2)).not.toContain(String(BRANDS));
    const already = sdkError("x", { code: "REQUEST_TIMEOUT", name: "SdkError" });
    expect(abortedRequest("v2", already)).toBe(already);
  });
});

describe("surfaced: a healed call's failure, as the plain client reports it", () => {
  const how = (over: Partial<Surfacing> = {}): Surfacing => ({
    refusals: "result",
    signal: undefined,
    line: "v2",
    own: () => Promise.resolve(undefined),
    ...over,
  });

  it("a tool failure is its isError result; a protocol failure the SDK's own error", async () => {
    const result = { isError: true, content: [{ type: "text", text: "no such order" }] };
    expect(await surfaced(toolResultError(result), how())).toBe(result);
    const original = sdkError("MCP error -32601: x", { code: -32601 });
    await expect(surfaced(asMcpCallError(original), how())).rejects.toBe(original);
  });

  it("the caller's abort: the client's own rejection, else what the client would make", async () => {
    const caller = new AbortController();
    caller.abort(new Error("user left"));
    const own = new Error("client's own");
    await expect(
      surfaced(
        caller.signal.reason,
        how({ signal: caller.signal, own: () => Promise.resolve(own) }),
      ),
    ).rejects.toBe(own);
    await expect(
      surfaced(caller.signal.reason, how({ signal: caller.signal, line: "1.x" })),
    ).rejects.toBe(caller.signal.reason);
    await expect(
      surfaced(caller.signal.reason, how({ signal: caller.signal })),
    ).rejects.toMatchObject({
      name: "SdkError",
      code: "REQUEST_TIMEOUT",
    });
    // Another error while the signal is aborted is not the abort.
    const other = new Error("other");
    await expect(surfaced(other, how({ signal: caller.signal, refusals: "throw" }))).rejects.toBe(
      other,
    );
  });

  it("selfheal's timeout: the client's rejection with it as cause; else 1.x its own, v2 an SdkError", async () => {
    const timeout = new ToolTimeoutError("lookup", 5_000);
    const own = new Error("client timed out");
    await expect(surfaced(timeout, how({ own: () => Promise.resolve(own) }))).rejects.toBe(own);
    expect(own.cause).toBe(timeout);
    const ownWithCause = Object.assign(new Error("x"), { cause: "earlier" });
    await expect(surfaced(timeout, how({ own: () => Promise.resolve(ownWithCause) }))).rejects.toBe(
      ownWithCause,
    );
    expect(ownWithCause.cause).toBe("earlier");
    await expect(
      surfaced(timeout, how({ own: () => Promise.resolve(timeout) })),
    ).rejects.toMatchObject({
      code: "REQUEST_TIMEOUT",
    });
    await expect(surfaced(timeout, how({ line: "1.x" }))).rejects.toBe(timeout);
    const v2 = (await surfaced(timeout, how()).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error & { data: unknown };
    expect([v2.name, v2.message, v2.data, v2.cause]).toEqual([
      "SdkError",
      "Request timed out",
      { timeout: 5_000 },
      timeout,
    ]);
  });

  it("a refusal is an isError result naming it, or thrown when refusals throw", async () => {
    const refusals = [
      new HealthCheckFailedError("charge", "critical"),
      new CircuitOpenError("payments", 30_000),
    ];
    for (const refusal of refusals) {
      const result = await surfaced(refusal, how());
      expect(result).toEqual({
        content: [{ type: "text", text: refusal.message }],
        isError: true,
        _meta: { [REFUSAL_META_KEY]: { code: refusal.code, name: refusal.name } },
      });
      await expect(surfaced(refusal, how({ refusals: "throw" }))).rejects.toBe(refusal);
    }
    const plain = new Error("bug");
    await expect(surfaced(plain, how())).rejects.toBe(plain);
  });
});
