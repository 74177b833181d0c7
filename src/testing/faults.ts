/**
 * Faults as providers deliver them: errors shaped like those the official OpenAI SDK throws
 * (`status`, `headers`, the parsed `error` body, `code`, `type`), and Node network errors.
 */

export const FAULT_KINDS = [
  "rate_limit",
  "timeout",
  "hang",
  "empty",
  "http_500",
  "http_502",
  "http_503",
  "overloaded",
  "connection_reset",
  "malformed_json",
  "context_length",
  "content_policy",
  "auth",
  "finish_length",
  "slow_first_token",
  "stream_cut",
  "stream_stall",
  "malformed_event",
  "no_done",
  "stream_error",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Faults that only exist in a streamed answer (a request with `"stream": true` to the fake
 * provider). A request that is not streamed is answered normally; `thrownFault` refuses them.
 */
export const STREAM_ONLY_FAULTS: ReadonlySet<FaultKind> = new Set<FaultKind>([
  "slow_first_token",
  "stream_cut",
  "stream_stall",
  "malformed_event",
  "no_done",
  "stream_error",
]);

export interface FaultOptions {
  /** rate_limit: send `Retry-After` with this many seconds (none when omitted). */
  retryAfterSeconds?: number;
  /**
   * timeout: how long before the timeout error is thrown (HTTP: before answering), ms.
   * slow_first_token: the wait between the role chunk and the first token, ms (default 20 000).
   */
  delayMs?: number;
  /**
   * stream_cut, stream_stall, stream_error: tokens streamed before the cut, the silence or the
   * error event; finish_length: the
   * tokens the truncated answer keeps (default two thirds of the answer's tokens, rounded down;
   * more than the answer has means after the last token).
   */
  afterTokens?: number;
  /** stream_stall: how long the stream stays silent, connection open, ms (default 30 000). */
  silentMs?: number;
  /**
   * malformed_event: the invalid event is sent just before this token, counted from 1
   * (default 1); past the last token, just before the finish chunk. It is an extra event.
   */
  atToken?: number;
  /** Override the error message (e.g. to test wording drift). */
  message?: string;
}

/** The parsed error body of an OpenAI-compatible API. */
export interface ApiErrorBody {
  message: string;
  type: string;
  code: string | null;
  param: string | null;
}

/** An HTTP fault's status, headers and OpenAI-style error body. */
export interface HttpFault {
  status: number;
  headers: Record<string, string>;
  body: ApiErrorBody;
}

/** The HTTP response a fault is served as; undefined for faults that are not HTTP errors. */
export function httpFault(kind: FaultKind, options: FaultOptions = {}): HttpFault | undefined {
  const body = (message: string, type: string, code: string | null): ApiErrorBody => ({
    message: options.message ?? message,
    type,
    code,
    param: null,
  });
  switch (kind) {
    case "rate_limit":
      return {
        status: 429,
        headers:
          options.retryAfterSeconds === undefined
            ? {}
            : { "retry-after": String(options.retryAfterSeconds) },
        body: body(
          "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500. Please try again later.",
          "requests",
          "rate_limit_exceeded",
        ),
      };
    case "http_500":
      return {
        status: 500,
        headers: {},
        body: body("The server had an error while processing your request.", "server_error", null),
      };
    case "http_502":
      return { status: 502, headers: {}, body: body("Bad gateway.", "server_error", null) };
    case "http_503":
      return {
        status: 503,
        headers: {},
        body: body("The server is overloaded or not ready yet.", "server_error", null),
      };
    case "overloaded":
      return {
        status: 503,
        headers: {},
        body: body(
          "The engine is currently overloaded, please try again later.",
          "server_error",
          null,
        ),
      };
    case "context_length":
      return {
        status: 400,
        headers: {},
        body: body(
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
          "invalid_request_error",
          "context_length_exceeded",
        ),
      };
    case "content_policy":
      return {
        status: 400,
        headers: {},
        body: body(
          "Your request was rejected as a result of our safety system.",
          "invalid_request_error",
          "content_policy_violation",
        ),
      };
    case "auth":
      return {
        status: 401,
        headers: {},
        body: body(
          "Incorrect API key provided: sk-abc12*****. You can find your API key at your dashboard.",
          "invalid_request_error",
          "invalid_api_key",
        ),
      };
    default:
      return undefined;
  }
}

const NAMES: Record<number, string> = {
  400: "BadRequestError",
  401: "AuthenticationError",
  429: "RateLimitError",
};

/** An error shaped like the OpenAI SDK's `APIError` subclasses. */
export class InjectedApiError extends Error {
  readonly status: number;
  readonly headers: Headers;
  readonly error: ApiErrorBody;
  readonly code: string | null;
  readonly type: string;
  readonly param: string | null;

  constructor(fault: HttpFault) {
    super(`${fault.status} ${fault.body.message}`);
    this.name = NAMES[fault.status] ?? (fault.status >= 500 ? "InternalServerError" : "APIError");
    this.status = fault.status;
    this.headers = new Headers(fault.headers);
    this.error = fault.body;
    this.code = fault.body.code;
    this.type = fault.body.type;
    this.param = fault.body.param;
  }
}

/**
 * The error an in-process fault throws, shaped as the OpenAI SDK or Node throw it. Throws for
 * faults that are not errors (`hang`, `empty`) and for the stream-only ones
 * (`STREAM_ONLY_FAULTS`), which exist only over HTTP: serve those with `startFakeProvider`.
 */
export function thrownFault(kind: FaultKind, options: FaultOptions = {}): Error {
  if (STREAM_ONLY_FAULTS.has(kind))
    throw new Error(
      `fault ${kind} only exists over HTTP streams: serve it with startFakeProvider to a request with "stream": true`,
    );
  if (kind === "finish_length")
    throw new Error(
      "fault finish_length is not an error but a truncated answer: serve it with startFakeProvider",
    );
  const http = httpFault(kind, options);
  if (http) return new InjectedApiError(http);
  switch (kind) {
    case "timeout":
      return Object.assign(new Error(options.message ?? "Request timed out."), {
        name: "APIConnectionTimeoutError",
        code: "ETIMEDOUT",
      });
    case "connection_reset":
      return Object.assign(new TypeError("fetch failed"), {
        cause: Object.assign(new Error(options.message ?? "read ECONNRESET"), {
          code: "ECONNRESET",
          errno: -104,
          syscall: "read",
        }),
      });
    case "malformed_json":
      // What JSON.parse throws on a body cut short.
      return new SyntaxError(options.message ?? "Unexpected end of JSON input");
    default:
      throw new Error(`fault ${kind} is not an error`);
  }
}
