import {
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  type CallToolResult,
} from "@modelcontextprotocol/client";
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

/** Marker that survives duplicate copies of the package (guards never use `instanceof`). */
const MARKER = Symbol.for("selfheal:mcp-call-error");

/** JSON-RPC -32001: the request timeout of v1 SDKs and of proxies (not in the v2 enum). */
const JSON_RPC_REQUEST_TIMEOUT = -32001;

/**
 * The canonical code (gRPC's names) each JSON-RPC error stands for: the default diagnosis rules
 * read these codes as structured evidence, as they do a cloud API's.
 */
const JSON_RPC_CODES: ReadonlyMap<number, string> = new Map([
  [ProtocolErrorCode.ParseError, "INVALID_ARGUMENT"],
  [ProtocolErrorCode.InvalidRequest, "INVALID_ARGUMENT"],
  [ProtocolErrorCode.InvalidParams, "INVALID_ARGUMENT"], // bad arguments, an unknown tool
  [ProtocolErrorCode.MethodNotFound, "NOT_FOUND"],
  [JSON_RPC_REQUEST_TIMEOUT, "DEADLINE_EXCEEDED"],
]);

/** The same for the SDK's local errors: a timeout, or a connection that is gone. */
const SDK_CODES: ReadonlyMap<string, string> = new Map([
  [SdkErrorCode.RequestTimeout, "DEADLINE_EXCEEDED"],
  [SdkErrorCode.ConnectionClosed, "UNAVAILABLE"],
  [SdkErrorCode.SendFailed, "UNAVAILABLE"],
  [SdkErrorCode.NotConnected, "UNAVAILABLE"],
]);

/** Longest tool text kept on an error (the diagnoser reads 4 KiB; spans are cut shorter). */
const MAX_TEXT = 4 * 1024;

/**
 * How the SDK's `McpServer` answers arguments its input schema rejects: an `isError` result (as
 * MCP asks, so the model can correct them), not JSON-RPC -32602. The same arguments fail the same
 * way: INVALID_ARGUMENT (BAD_REQUEST), never resent. Only this call is concerned.
 */
const INPUT_REJECTED = /^Input validation error: /;

interface McpCallErrorInit {
  code?: string | undefined;
  result?: CallToolResult | undefined;
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
  /** The tool's answer, when it was a result with `isError: true`. */
  readonly result: CallToolResult | undefined;
  /** That result's structured content, read like an HTTP error body (`status`, `code`). */
  readonly body: Record<string, unknown> | undefined;
  /** Headers the structured content carries (`retry-after`). */
  readonly headers: Record<string, unknown> | undefined;

  constructor(type: string, message: string, init: McpCallErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = type;
    this.code = init.code;
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

/** The text parts of a result, joined and cut. */
function textOf(result: CallToolResult): string {
  const texts = result.content.flatMap((part) => (part.type === "text" ? [part.text] : []));
  const text = texts.join(" ").slice(0, MAX_TEXT);
  return text === "" ? "the MCP tool answered isError without text" : text;
}

/**
 * An `isError: true` result as an error. Its text is wording only ("429 Too Many Requests" is
 * read as words, never as a status: the text may echo anything); a status counts as structured
 * evidence only when the result's structured content carries one.
 */
export function toolResultError(result: CallToolResult): McpCallError {
  const body = isRecord(result.structuredContent) ? result.structuredContent : undefined;
  const headers = isRecord(body?.headers) ? body.headers : undefined;
  const text = textOf(result);
  const code = INPUT_REJECTED.test(text) ? "INVALID_ARGUMENT" : undefined;
  return new McpCallError(MCP_ERROR_TYPE_TOOL_ERROR, text, { code, result, body, headers });
}

/** The SDK's own "Not connected" (a plain Error, thrown before anything is sent). */
function isNotConnected(error: unknown): error is Error {
  return error instanceof Error && error.constructor === Error && error.message === "Not connected";
}

/**
 * What the client threw, made readable to the diagnoser: JSON-RPC and SDK errors become an
 * McpCallError with a canonical code (the original is its `cause`); anything else passes as is.
 */
export function asMcpCallError(error: unknown): unknown {
  if (error instanceof ProtocolError) {
    const code = JSON_RPC_CODES.get(error.code);
    return new McpCallError(String(error.code), error.message, { code, cause: error });
  }
  // Its status (a 429, a 503) is read from the cause.
  if (error instanceof SdkHttpError)
    return new McpCallError(String(error.status), error.message, { cause: error });
  if (error instanceof SdkError) {
    const code = SDK_CODES.get(error.code);
    return new McpCallError(error.code.toLowerCase(), error.message, { code, cause: error });
  }
  if (isNotConnected(error))
    return new McpCallError("not_connected", error.message, { code: "UNAVAILABLE", cause: error });
  return error;
}

/** `_meta` key of a refusal result: `{ code, name }` of the selfheal error behind it. */
export const REFUSAL_META_KEY = "selfheal/refusal";

/**
 * `params._meta` key of a call's idempotency key (from `toolOptions.idempotencyKey`), the same on
 * every attempt: what a server needs to apply a retried write once.
 */
export const IDEMPOTENCY_META_KEY = "selfheal/idempotency-key";

/** What the plain client rejects with when a request is aborted: the reason, as an SdkError. */
export function abortedRequest(reason: unknown): SdkError {
  return reason instanceof SdkError
    ? reason
    : new SdkError(SdkErrorCode.RequestTimeout, String(reason));
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

/**
 * The healed call's failure as the plain client would report it: a tool failure is its
 * `isError` result, a protocol or SDK failure the SDK's own error, a timeout (selfheal's own
 * included) or the caller's abort the SDK's request timeout; a refusal (a write refused while
 * critical, an open circuit, an escalation) an `isError` result the model can read, unless
 * refusals are thrown. Everything else is thrown unchanged.
 */
export function surfaced(
  error: unknown,
  refusals: RefusalMode,
  signal: AbortSignal | undefined,
): CallToolResult {
  if (isMcpCallError(error)) {
    if (error.result) return error.result;
    throw error.cause;
  }
  if (signal?.aborted && error === signal.reason) throw abortedRequest(error);
  if (isToolTimeoutError(error)) {
    const timedOut = new SdkError(SdkErrorCode.RequestTimeout, "Request timed out", {
      timeout: error.timeoutMs,
    });
    timedOut.cause = error;
    throw timedOut;
  }
  if (refusals === "result" && isRefusal(error)) {
    return {
      content: [{ type: "text", text: error.message }],
      isError: true,
      _meta: { [REFUSAL_META_KEY]: { code: error.code, name: error.name } },
    };
  }
  throw error;
}
