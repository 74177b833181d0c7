import { describe, expect, it } from "vitest";
import {
  FAULT_KINDS,
  InjectedApiError,
  httpFault,
  thrownFault,
  type FaultKind,
} from "../../src/testing/index.js";
import { STREAM_ONLY_FAULTS } from "../../src/testing/faults.js";

const RATE_LIMIT_MESSAGE =
  "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500. Please try again later.";

/** Every HTTP fault: status, error type, code and the provider's message. */
const HTTP_FAULTS = [
  ["rate_limit", 429, "requests", "rate_limit_exceeded", RATE_LIMIT_MESSAGE, "RateLimitError"],
  [
    "http_500",
    500,
    "server_error",
    null,
    "The server had an error while processing your request.",
    "InternalServerError",
  ],
  ["http_502", 502, "server_error", null, "Bad gateway.", "InternalServerError"],
  [
    "http_503",
    503,
    "server_error",
    null,
    "The server is overloaded or not ready yet.",
    "InternalServerError",
  ],
  [
    "overloaded",
    503,
    "server_error",
    null,
    "The engine is currently overloaded, please try again later.",
    "InternalServerError",
  ],
  [
    "context_length",
    400,
    "invalid_request_error",
    "context_length_exceeded",
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
    "BadRequestError",
  ],
  [
    "content_policy",
    400,
    "invalid_request_error",
    "content_policy_violation",
    "Your request was rejected as a result of our safety system.",
    "BadRequestError",
  ],
  [
    "auth",
    401,
    "invalid_request_error",
    "invalid_api_key",
    "Incorrect API key provided: sk-abc12*****. You can find your API key at your dashboard.",
    "AuthenticationError",
  ],
] as const;

/** The error as an InjectedApiError, failing the test if it is not one. */
function apiError(error: Error): InjectedApiError {
  if (!(error instanceof InjectedApiError))
    throw new Error(`not an InjectedApiError: ${error.name}`);
  return error;
}

const NOT_HTTP: FaultKind[] = [
  "timeout",
  "hang",
  "empty",
  "connection_reset",
  "malformed_json",
  "finish_length",
  "slow_first_token",
  "stream_cut",
  "stream_stall",
  "malformed_event",
  "no_done",
  "stream_error",
];

describe("FAULT_KINDS and STREAM_ONLY_FAULTS", () => {
  it("list every fault, the stream-only ones last", () => {
    expect([...FAULT_KINDS]).toEqual([
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
    ]);
    expect([...STREAM_ONLY_FAULTS].sort()).toEqual(
      [
        "malformed_event",
        "no_done",
        "slow_first_token",
        "stream_cut",
        "stream_stall",
        "stream_error",
      ].sort(),
    );
  });
});

describe("httpFault", () => {
  it.each(HTTP_FAULTS)(
    "%s is served as %i with an OpenAI-style error body",
    (kind, status, type, code, message) => {
      expect(httpFault(kind)).toEqual({
        status,
        headers: {},
        body: { message, type, code, param: null },
      });
    },
  );

  it.each(HTTP_FAULTS)("%s takes an override of its message", (kind, status, type, code) => {
    expect(httpFault(kind, { message: "wording drift" })).toEqual({
      status,
      headers: {},
      body: { message: "wording drift", type, code, param: null },
    });
  });

  it.each([
    [undefined, {}],
    [0, { "retry-after": "0" }],
    [1, { "retry-after": "1" }],
    [2.5, { "retry-after": "2.5" }],
  ])("rate_limit with retryAfterSeconds %s sends headers %o", (retryAfterSeconds, headers) => {
    const options = retryAfterSeconds === undefined ? {} : { retryAfterSeconds };
    expect(httpFault("rate_limit", options)?.headers).toEqual(headers);
  });

  it("retryAfterSeconds only shapes a rate limit", () => {
    expect(httpFault("http_503", { retryAfterSeconds: 5 })?.headers).toEqual({});
  });

  it.each(NOT_HTTP)("%s is not an HTTP error", (kind) => {
    expect(httpFault(kind)).toBeUndefined();
    expect(httpFault(kind, { message: "x", retryAfterSeconds: 1 })).toBeUndefined();
  });
});

describe("InjectedApiError", () => {
  it.each(HTTP_FAULTS)(
    "thrownFault(%s) is shaped as the OpenAI SDK's error for %i",
    (kind, status, type, code, message, name) => {
      const error = thrownFault(kind);
      expect(error).toBeInstanceOf(InjectedApiError);
      expect(error).toBeInstanceOf(Error);
      expect(error).toMatchObject({
        name,
        status,
        type,
        code,
        param: null,
        message: `${status} ${message}`,
        error: { message, type, code, param: null },
      });
      expect(apiError(error).headers).toBeInstanceOf(Headers);
      expect([...apiError(error).headers.keys()]).toEqual([]);
    },
  );

  it("carries Retry-After and an overridden message", () => {
    const error = thrownFault("rate_limit", { retryAfterSeconds: 7, message: "slow down" });
    expect(error).toMatchObject({ message: "429 slow down", error: { message: "slow down" } });
    expect(apiError(error).headers.get("retry-after")).toBe("7");
  });

  it.each([
    [400, "BadRequestError"],
    [401, "AuthenticationError"],
    [429, "RateLimitError"],
    [404, "APIError"],
    [499, "APIError"],
    [500, "InternalServerError"],
    [501, "InternalServerError"],
    [599, "InternalServerError"],
  ])("status %i is named %s", (status, name) => {
    const error = new InjectedApiError({
      status,
      headers: { "x-request-id": "req_1" },
      body: { message: "m", type: "t", code: "c", param: "p" },
    });
    expect(error).toMatchObject({ name, status, code: "c", type: "t", param: "p" });
    expect(error.message).toBe(`${status} m`);
    expect(error.headers.get("x-request-id")).toBe("req_1");
  });
});

describe("thrownFault: network and parse errors", () => {
  it("timeout: the SDK's connection timeout error", () => {
    const error = thrownFault("timeout");
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({
      name: "APIConnectionTimeoutError",
      code: "ETIMEDOUT",
      message: "Request timed out.",
    });
    expect(thrownFault("timeout", { message: "too slow" }).message).toBe("too slow");
  });

  it("connection_reset: fetch's TypeError with the socket's ECONNRESET as cause", () => {
    const error = thrownFault("connection_reset");
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe("fetch failed");
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.cause).toMatchObject({
      message: "read ECONNRESET",
      code: "ECONNRESET",
      errno: -104,
      syscall: "read",
    });
    const custom = thrownFault("connection_reset", { message: "socket hang up" });
    expect(custom.message).toBe("fetch failed");
    expect(custom.cause).toMatchObject({ message: "socket hang up", code: "ECONNRESET" });
  });

  it("malformed_json: the SyntaxError JSON.parse throws on a cut body", () => {
    const error = thrownFault("malformed_json");
    expect(error).toBeInstanceOf(SyntaxError);
    expect(error.message).toBe("Unexpected end of JSON input");
    expect(thrownFault("malformed_json", { message: "Unexpected token" }).message).toBe(
      "Unexpected token",
    );
  });

  it.each(["hang", "empty"] as const)("%s is not an error: thrownFault throws", (kind) => {
    expect(() => thrownFault(kind)).toThrow(new Error(`fault ${kind} is not an error`));
  });

  it("finish_length is a truncated answer: thrownFault names the fake provider", () => {
    expect(() => thrownFault("finish_length")).toThrow(
      new Error(
        "fault finish_length is not an error but a truncated answer: serve it with startFakeProvider",
      ),
    );
  });

  it.each([...STREAM_ONLY_FAULTS])("%s: thrownFault names the fake provider", (kind) => {
    expect(() => thrownFault(kind, { message: "ignored" })).toThrow(
      new Error(
        `fault ${kind} only exists over HTTP streams: serve it with startFakeProvider to a request with "stream": true`,
      ),
    );
  });
});
