import {
  isCircuitOpenError,
  isHealthCheckFailedError,
  isHumanEscalationRequiredError,
  isInFlightElsewhereError,
  isReadOnlyModeError,
  isRecoveryBudgetExhaustedError,
  isToolTimeoutError,
  type SelfHealError,
} from "../../index.js";
import { MCP_ERROR_TYPE_TOOL_ERROR } from "../../telemetry/conventions.js";
import type { HttpFailure } from "./http.js";
import type { McpSdkLine, McpToolResult } from "./types.js";

/** Marker that survives duplicate copies of the package (guards never use `instanceof`). */
const MARKER = Symbol.for("selfheal:mcp-call-error");

/**
 * The v2 SDK's cross-bundle error brand: every v2 error instance carries, under this registry
 * symbol, the brand strings of its class chain, and `instanceof` on a v2 error class matches by
 * them (so an error made by one bundled copy of the SDK is an instance of another's class).
 */
const V2_BRANDS = Symbol.for("mcp.sdk.errorBrands");
const V2_SDK_ERROR = "mcp.SdkError";
const V2_HTTP_ERROR = "mcp.SdkHttpError";
const V2_PROTOCOL_ERROR = "mcp.ProtocolError";

/** v2's `SdkErrorCode` values the adapter reads or makes. */
const REQUEST_TIMEOUT = "REQUEST_TIMEOUT";

/** JSON-RPC -32001: the request timeout of 1.x SDKs and of proxies (not in the v2 enum). */
const JSON_RPC_REQUEST_TIMEOUT = -32001;
/** JSON-RPC -32000: 1.x's `ConnectionClosed`, made by the client itself (`Connection closed`). */
const JSON_RPC_CONNECTION_CLOSED = -32000;

/**
 * The canonical code (gRPC's names) each JSON-RPC error stands for: the default diagnosis rules
 * read these codes as structured evidence, as they do a cloud API's.
 */
const JSON_RPC_CODES: ReadonlyMap<number, string> = new Map([
  [-32700, "INVALID_ARGUMENT"], // parse error
  [-32600, "INVALID_ARGUMENT"], // invalid request
  [-32602, "INVALID_ARGUMENT"], // invalid params: bad arguments, an unknown tool
  [-32601, "NOT_FOUND"], // method not found
  [JSON_RPC_REQUEST_TIMEOUT, "DEADLINE_EXCEEDED"],
]);

/** The same for v2's local errors (`SdkErrorCode`): a timeout, or a connection that is gone. */
const SDK_CODES: ReadonlyMap<string, string> = new Map([
  [REQUEST_TIMEOUT, "DEADLINE_EXCEEDED"],
  ["CONNECTION_CLOSED", "UNAVAILABLE"],
  ["SEND_FAILED", "UNAVAILABLE"],
  ["NOT_CONNECTED", "UNAVAILABLE"],
]);

/** Longest tool text kept on an error (the diagnoser reads 4 KiB; spans are cut shorter). */
const MAX_TEXT = 4 * 1024;

/**
 * How the SDKs' `McpServer` answers arguments its input schema rejects, and (1.x) a tool it does
 * not have: an `isError` result (as MCP asks, so the model can correct them), not JSON-RPC
 * -32602. v2 words it `Input validation error: …`; 1.x puts its own -32602 in front (`MCP error
 * -32602: Input validation error: …`, `MCP error -32602: Tool x not found`). The same arguments
 * fail the same way: INVALID_ARGUMENT (BAD_REQUEST), never resent. Only this call is concerned.
 */
const INPUT_REJECTED = /^(?:Input validation error: |MCP error -32602: )/;

interface McpCallErrorInit {
  code?: string | undefined;
  status?: number | undefined;
  result?: McpToolResult | undefined;
  body?: Record<string, unknown> | undefined;
  headers?: Record<string, unknown> | undefined;
  cause?: unknown;
}

/**
 * A failed MCP tool call as selfheal records and diagnoses it. Callers of a healed client never
 * see it: they get the tool's `isError` result or the SDK's own error, as from the plain client.
 * It appears as the `cause` of a selfheal error (an escalation, a spent budget).
 */
export class McpCallError extends Error {
  readonly [MARKER] = true;
  /**
   * `error.type` on spans, as the MCP conventions spell it: `tool_error`, the JSON-RPC code
   * (`-32602`), the SDK's code (`request_timeout`, `connection_closed`) or the HTTP status.
   */
  override readonly name: string;
  /** The canonical code the diagnosis rules read (`DEADLINE_EXCEEDED`, `UNAVAILABLE`, ...). */
  readonly code: string | undefined;
  /** The HTTP status of a request the transport sent and the server refused (429, 503, 401). */
  readonly status: number | undefined;
  /** The tool's answer, when it was a result with `isError: true`. */
  readonly result: McpToolResult | undefined;
  /** That result's structured content, read like an HTTP error body (`status`, `code`). */
  readonly body: Record<string, unknown> | undefined;
  /**
   * Headers the structured content carries (`retry-after`), or the rate-limit headers of the
   * HTTP response that failed (seen through `mcpFetch`).
   */
  readonly headers: Record<string, unknown> | undefined;

  constructor(type: string, message: string, init: McpCallErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = type;
    this.code = init.code;
    this.status = init.status;
    this.result = init.result;
    this.body = init.body;
    this.headers = init.headers;
  }
}

/** True for an McpCallError from any copy of selfheal. */
export function isMcpCallError(e: unknown): e is McpCallError {
  return typeof e === "object" && e !== null && (e as Record<symbol, unknown>)[MARKER] === true;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** One property of an error, or undefined (a getter that throws reads as nothing). */
function field(error: object, key: string): unknown {
  try {
    return (error as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** Whether a v2 error carries `brand` (see V2_BRANDS). */
function hasBrand(error: object, brand: string): boolean {
  try {
    if (!Object.hasOwn(error, V2_BRANDS)) return false;
    const brands = (error as Record<symbol, unknown>)[V2_BRANDS];
    return brands instanceof Set && brands.has(brand);
  } catch {
    return false;
  }
}

function asStatus(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 100 && value <= 599
    ? value
    : undefined;
}

/**
 * The JSON-RPC code of an error the server answered (or, in 1.x, the client made in that shape):
 * v2's `ProtocolError` (its brand or name), 1.x's `McpError` (its name, or its message, `MCP
 * error <code>: …`, which a subclass keeps).
 */
export function jsonRpcCodeOf(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = field(error, "code");
  if (typeof code !== "number" || !Number.isInteger(code)) return undefined;
  const known =
    hasBrand(error, V2_PROTOCOL_ERROR) ||
    error.name === "ProtocolError" ||
    error.name === "McpError" ||
    error.message.startsWith(`MCP error ${code}: `);
  return known ? code : undefined;
}

/**
 * The HTTP status of a request the transport sent and the server refused: v2's `SdkHttpError`
 * (`status`, from its `data`), 1.x's `StreamableHTTPError` and `SseError` (the status is their
 * numeric `code`; told by their message, `Streamable HTTP error: …` / `SSE error: …`, or class).
 */
export function httpStatusOf(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  if (hasBrand(error, V2_HTTP_ERROR) || error.name === "SdkHttpError") {
    const data = field(error, "data");
    return asStatus(field(error, "status")) ?? (isRecord(data) ? asStatus(data.status) : undefined);
  }
  const status = asStatus(field(error, "code"));
  if (status === undefined) return undefined;
  const ctor = field(error, "constructor");
  const className = typeof ctor === "function" ? ctor.name : "";
  const v1Http =
    error.message.startsWith("Streamable HTTP error: ") ||
    error.message.startsWith("SSE error: ") ||
    className === "StreamableHTTPError" ||
    className === "SseError";
  return v1Http ? status : undefined;
}

/** The code (`REQUEST_TIMEOUT`, `CONNECTION_CLOSED`) of a v2 `SdkError`, by its brand or name. */
function sdkErrorCodeOf(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = field(error, "code");
  if (typeof code !== "string") return undefined;
  return hasBrand(error, V2_SDK_ERROR) || error.name === "SdkError" || error.name === "SdkHttpError"
    ? code
    : undefined;
}

/** The text parts of a result, joined and cut. */
function textOf(result: McpToolResult): string {
  const texts = (result.content ?? []).flatMap((part) =>
    part.type === "text" && typeof part.text === "string" ? [part.text] : [],
  );
  const text = texts.join(" ").slice(0, MAX_TEXT);
  return text === "" ? "the MCP tool answered isError without text" : text;
}

/**
 * An `isError: true` result as an error. Its text is wording only ("429 Too Many Requests" is
 * read as words, never as a status: the text may echo anything); a status counts as structured
 * evidence only when the result's structured content carries one.
 */
export function toolResultError(result: McpToolResult): McpCallError {
  const body = isRecord(result.structuredContent) ? result.structuredContent : undefined;
  const headers = isRecord(body?.headers) ? body.headers : undefined;
  const text = textOf(result);
  const code = INPUT_REJECTED.test(text) ? "INVALID_ARGUMENT" : undefined;
  return new McpCallError(MCP_ERROR_TYPE_TOOL_ERROR, text, { code, result, body, headers });
}

/** Both SDKs' "Not connected" (a plain Error, thrown before anything is sent). */
function isNotConnected(error: unknown): error is Error {
  return error instanceof Error && error.constructor === Error && error.message === "Not connected";
}

/** The SDKs' `Not connected`, as their `request()` rejects with it: a plain Error. */
export function notConnected(): Error {
  return new Error("Not connected");
}

/**
 * What the client threw, made readable to the diagnoser: JSON-RPC, HTTP and SDK errors become an
 * McpCallError with a canonical code or status (the original is its `cause`); anything else
 * passes as is. `http` is the failed response of this attempt seen by `mcpFetch`: its rate-limit
 * headers join an HTTP error of the same status (the SDKs' errors keep no headers).
 */
export function asMcpCallError(error: unknown, http?: HttpFailure): unknown {
  const rpc = jsonRpcCodeOf(error);
  if (rpc !== undefined) {
    const message = (error as Error).message;
    const closed = rpc === JSON_RPC_CONNECTION_CLOSED && message.endsWith(": Connection closed");
    const code = closed ? "UNAVAILABLE" : JSON_RPC_CODES.get(rpc);
    return new McpCallError(String(rpc), message, { code, cause: error });
  }
  const status = httpStatusOf(error);
  if (status !== undefined) {
    const headers = http?.status === status ? http.headers : undefined;
    return new McpCallError(String(status), (error as Error).message, {
      status,
      headers,
      cause: error,
    });
  }
  const sdk = sdkErrorCodeOf(error);
  if (sdk !== undefined) {
    const code = SDK_CODES.get(sdk);
    return new McpCallError(sdk.toLowerCase(), (error as Error).message, { code, cause: error });
  }
  if (isNotConnected(error))
    return new McpCallError("not_connected", error.message, { code: "UNAVAILABLE", cause: error });
  return error;
}

/**
 * A listing failure that is the server's answer (a JSON-RPC error: it cannot list its tools), not
 * a failure on the way. 1.x reports its own timeout and closed connection as JSON-RPC-shaped
 * errors too (-32001, -32000): those are failures on the way.
 */
export function isServerRefusal(error: unknown): boolean {
  const code = jsonRpcCodeOf(error);
  return (
    code !== undefined && code !== JSON_RPC_REQUEST_TIMEOUT && code !== JSON_RPC_CONNECTION_CLOSED
  );
}

/** `_meta` key of a refusal result: `{ code, name }` of the selfheal error behind it. */
export const REFUSAL_META_KEY = "selfheal/refusal";

/**
 * `params._meta` key of a call's idempotency key (from `toolOptions.idempotencyKey`), the same on
 * every attempt: what a server needs to apply a retried write once.
 */
export const IDEMPOTENCY_META_KEY = "selfheal/idempotency-key";

/**
 * An error a v2 caller tests as `instanceof SdkError` (the v2 class matches by brand, as it
 * matches an SdkError made by another bundled copy of the SDK): a plain Error with the fields of
 * one (`code`, `data`, name `SdkError`), for the few times the adapter reports what the v2
 * client would without the client having made it.
 */
function v2SdkError(code: string, message: string, data?: Record<string, unknown>): Error {
  const error = new Error(message) as Error & { code: string; data: unknown };
  error.name = "SdkError";
  error.code = code;
  error.data = data;
  Object.defineProperty(error, V2_BRANDS, {
    value: new Set([V2_SDK_ERROR]),
    enumerable: false,
    configurable: true,
  });
  return error;
}

/**
 * What the plain client rejects with when a call is aborted before its request is in flight
 * (in flight, the client's own rejection is used): v2 wraps the reason in an SdkError
 * `REQUEST_TIMEOUT`; 1.x rejects with the reason itself.
 */
export function abortedRequest(line: McpSdkLine, reason: unknown): unknown {
  if (line === "1.x" || sdkErrorCodeOf(reason) !== undefined) return reason;
  return v2SdkError(REQUEST_TIMEOUT, String(reason));
}

/** selfheal refused the call or gave up on it: nothing more will be sent for it. */
function isRefusal(error: unknown): error is SelfHealError {
  return (
    isHealthCheckFailedError(error) ||
    isReadOnlyModeError(error) ||
    isCircuitOpenError(error) ||
    isRecoveryBudgetExhaustedError(error) ||
    isHumanEscalationRequiredError(error) ||
    isInFlightElsewhereError(error)
  );
}

/** How a refusal reaches the caller: as MCP reports a tool's failure, or thrown. */
export type RefusalMode = "result" | "throw";

/** What `surfaced` needs to know of the call beyond its error. */
export interface Surfacing {
  refusals: RefusalMode;
  signal: AbortSignal | undefined;
  line: McpSdkLine;
  /**
   * The client's own rejection of the attempt `reason` aborted (the caller's abort, selfheal's
   * timeout), when that attempt's request was in flight; else undefined.
   */
  own: (reason: unknown) => Promise<unknown>;
}

/**
 * The healed call's failure as the plain client would report it: a tool failure is its
 * `isError` result, a protocol, HTTP or SDK failure the SDK's own error, the caller's abort or a
 * timeout (selfheal's own included) what the client rejected the aborted request with (v2: an
 * SdkError `REQUEST_TIMEOUT`; 1.x: an McpError -32001 `RequestTimeout`), with selfheal's
 * ToolTimeoutError as its `cause`; a refusal (a write refused while critical, an open circuit,
 * an escalation) an `isError` result the model can read, unless refusals are thrown. Everything
 * else is thrown unchanged.
 */
export async function surfaced(error: unknown, how: Surfacing): Promise<McpToolResult> {
  if (isMcpCallError(error)) {
    if (error.result) return error.result;
    throw error.cause;
  }
  if (how.signal?.aborted && error === how.signal.reason)
    throw (await how.own(error)) ?? abortedRequest(how.line, error);
  if (isToolTimeoutError(error)) {
    const own = await how.own(error);
    if (own instanceof Error && own !== error) {
      own.cause ??= error;
      throw own;
    }
    if (how.line === "1.x") throw error; // no request in flight: selfheal's own error
    const timedOut = v2SdkError(REQUEST_TIMEOUT, "Request timed out", { timeout: error.timeoutMs });
    timedOut.cause = error;
    throw timedOut;
  }
  if (how.refusals === "result" && isRefusal(error)) {
    return {
      content: [{ type: "text", text: error.message }],
      isError: true,
      _meta: { [REFUSAL_META_KEY]: { code: error.code, name: error.name } },
    };
  }
  throw error;
}
