/**
 * readErrorFacts, field by field: which status, codes, names, headers, wait and text it takes
 * from each shape, the order it prefers them in, and where its bounds cut.
 */
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { MAX_MATCH_TEXT, parseDuration, readErrorFacts } from "../../src/diagnosis/error-facts.js";

const NOW = Date.UTC(2026, 0, 1);
const facts = (error: unknown) => readErrorFacts(error, NOW);
/** An error body as a provider sends it, as JSON text. */
const json = (code: string) => JSON.stringify({ error: { code, message: code } });
const coded = (code: string) => Object.assign(new Error(code), { code });
const wrap = (inner: unknown, times: number) => {
  let error = inner;
  for (let i = 0; i < times; i++) error = new Error("wrapped", { cause: error });
  return error;
};

describe("HTTP status", () => {
  it.each([
    ["a number", { status: 429 }, 429],
    ["three digits as text", { status: "429" }, 429],
    ["text with a leading space", { status: " 429" }, undefined],
    ["text with a trailing space", { status: "429 " }, undefined],
    ["four digits as text", { status: "4290" }, undefined],
    ["words", { status: "abc" }, undefined],
    ["the lowest status", { status: 100 }, 100],
    ["the highest status", { status: 599 }, 599],
    ["below the range", { status: 99 }, undefined],
    ["far below the range", { status: 50 }, undefined],
    ["above the range", { status: 600 }, undefined],
    ["a fraction", { status: 429.5 }, undefined],
    ["statusCode", { statusCode: 503 }, 503],
    ["axios/ky response.status", { response: { status: 502 } }, 502],
    ["got response.statusCode", { response: { statusCode: 504 } }, 504],
    ["AWS $metadata", { $metadata: { httpStatusCode: 503 } }, 503],
    ["a Google body's numeric code", { error: { code: 429, message: "x" } }, 429],
    ["a body's numeric status", { error: { status: 503 } }, 503],
    ["the error's own, over the body's code", { status: 429, error: { code: 500 } }, 429],
    ["the error's own, over the body's status", { status: 429, error: { status: 502 } }, 429],
  ])("%s", (_, error, status) => {
    expect(facts(error).status).toBe(status);
  });
});

describe("codes and names", () => {
  it("reads the error's code, type and errorCode, then the body's, lower-cased, in order", () => {
    const anthropic = {
      status: 400,
      code: "E_OUTER",
      type: "invalid_request_error",
      errorCode: "Outer_Detail",
      error: {
        type: "error",
        error_code: "Body_Code",
        error: {
          type: "invalid_request_error",
          status: "FAILED_PRECONDITION",
          message: "x",
          details: { error_code: "credit_balance_low" },
        },
      },
    };
    expect(facts(anthropic).codes).toEqual([
      "e_outer",
      "invalid_request_error",
      "outer_detail",
      "error",
      "body_code",
      "failed_precondition",
      "invalid_request_error",
      "credit_balance_low",
    ]);
  });

  it.each([
    ["an empty code", "", []],
    ["a 128-character code", "c".repeat(128), ["c".repeat(128)]],
    ["a 129-character code", "c".repeat(129), []],
  ])("%s", (_, code, codes) => {
    expect(facts({ code }).codes).toEqual(codes);
  });

  it("a code that is not a string is skipped and the rest is still read", () => {
    expect(facts({ code: ["ECONNRESET"], message: "socket hang up" })).toMatchObject({
      codes: [],
      text: "socket hang up",
    });
  });

  it("names: the error's name and its class, never Object", () => {
    class RateLimitError extends Error {}
    expect(facts(new RateLimitError("x")).names).toEqual(["error", "ratelimiterror"]);
    expect(facts({ name: "AbortError", message: "x" }).names).toEqual(["aborterror"]);
    expect(facts(Object.assign(Object.create(null) as object, { name: "Bare" })).names).toEqual([
      "bare",
    ]);
  });

  it("a value that is not an error object gives no facts", () => {
    const none = {
      status: undefined,
      codes: [],
      names: [],
      headers: [],
      retryAfterMs: undefined,
      text: "",
    };
    expect(facts(42)).toEqual(none);
    expect(facts(null)).toEqual(none);
    expect(facts("upstream said no")).toEqual({ ...none, text: "upstream said no" });
  });
});

describe("text", () => {
  it("messages of the error and its body, joined in order, empty ones skipped", () => {
    expect(facts({ message: "boom", error: { message: "detail" } }).text).toBe("boom | detail");
    expect(facts({ message: "", error: { message: "detail" } }).text).toBe("detail");
    expect(facts(new Error("outer", { cause: new Error("inner") })).text).toBe("outer | inner");
  });

  it("a body whose error is a sentence is read as text", () => {
    expect(facts({ status: 429, error: { error: "Rate limit exceeded" } }).text).toBe(
      "Rate limit exceeded",
    );
  });

  it("is cut to MAX_MATCH_TEXT; once the budget is spent, later texts are not added", () => {
    const a = "a".repeat(MAX_MATCH_TEXT - 3);
    expect(facts({ message: a, error: { message: "zzz" } }).text).toBe(a);
    const text = facts({ message: "a".repeat(4000), error: { message: "b".repeat(1000) } }).text;
    expect(text).toBe(`${"a".repeat(4000)} | ${"b".repeat(MAX_MATCH_TEXT - 4003)}`);
    expect(facts(new Error("x".repeat(10_000))).text).toBe("x".repeat(MAX_MATCH_TEXT));
  });
});

describe("headers", () => {
  it("a header set that is text, not an object, is not read", () => {
    expect(facts({ status: 429, headers: "retry-after: 5" })).toMatchObject({
      headers: [],
      retryAfterMs: undefined,
    });
  });

  it("inherited properties of a plain object are not headers", () => {
    const headers = Object.assign(Object.create({ "retry-after": "5" }) as object, {
      "x-request-id": "r",
    });
    expect(facts({ status: 429, headers })).toMatchObject({
      headers: ["x-request-id"],
      retryAfterMs: undefined,
    });
  });

  it("Map entries with non-string keys are skipped, the others read", () => {
    const headers = new Map<unknown, string>([
      [1, "x"],
      ["Retry-After", "5"],
    ]);
    expect(facts({ status: 429, headers, message: "hi" })).toMatchObject({
      headers: ["retry-after"],
      retryAfterMs: 5_000,
      text: "hi",
    });
  });

  it("number values are read as text, list values are kept by name only", () => {
    expect(facts({ status: 429, headers: { "retry-after": 5 } }).retryAfterMs).toBe(5_000);
    expect(facts({ status: 429, headers: { "retry-after": ["5"] } })).toMatchObject({
      headers: ["retry-after"],
      retryAfterMs: undefined,
    });
  });

  it("at most 128 headers are kept from a Map or Headers", () => {
    const entries = Array.from({ length: 200 }, (_, i): [string, string] => [`h${i}`, "v"]);
    expect(facts({ headers: new Map(entries) }).headers).toHaveLength(128);
    expect(facts({ headers: new Headers(entries) }).headers).toHaveLength(128);
  });

  it("values are cut to their first 64 characters", () => {
    const headers = { "retry-after": `2${" ".repeat(63)}garbage` };
    expect(facts({ status: 503, headers }).retryAfterMs).toBe(2_000);
  });
});

describe("the wait the server asked for", () => {
  const wait = (headers: Record<string, unknown>, status = 429) =>
    facts({ status, headers }).retryAfterMs;

  it.each([
    ["retry-after-ms with spaces", { "retry-after-ms": " 250 " }, 250],
    ["retry-after with spaces", { "retry-after": " 3 " }, 3_000],
    [
      "an unreadable retry-after-ms, then retry-after",
      { "retry-after-ms": "soon", "retry-after": "3" },
      3_000,
    ],
    ["an empty retry-after", { "retry-after": "" }, undefined],
    ["an HTTP date", { "retry-after": new Date(NOW + 7_000).toUTCString() }, 7_000],
    ["an HTTP date in the past", { "retry-after": new Date(NOW - 7_000).toUTCString() }, 0],
  ])("%s", (_, headers, ms) => {
    expect(wait(headers)).toBe(ms);
  });

  it("x-ratelimit-reset-*: a limit with no remaining count counts as spent", () => {
    const headers = {
      "x-ratelimit-reset-requests": "20ms",
      "x-ratelimit-reset-tokens": "6m0s",
      "x-ratelimit-remaining-tokens": "1000",
    };
    expect(wait(headers)).toBe(20);
  });

  it("x-ratelimit-reset-*: an unreadable remaining count is not taken as room left", () => {
    const headers = {
      "x-ratelimit-reset-requests": "1s",
      "x-ratelimit-remaining-requests": ["5"],
      "x-ratelimit-reset-tokens": "2s",
      "x-ratelimit-remaining-tokens": "10",
    };
    expect(wait(headers)).toBe(1_000);
  });

  describe("Google RetryInfo", () => {
    const retryInfo = { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "5s" };
    const google = (details: unknown[]) =>
      facts({ status: 429, error: { code: 429, status: "RESOURCE_EXHAUSTED", details } });

    it("only a RetryInfo's retryDelay is a wait; reasons are codes", () => {
      const errorInfo = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        reason: "RATE_LIMIT_EXCEEDED",
        retryDelay: "9s",
      };
      expect(google([errorInfo])).toMatchObject({
        retryAfterMs: undefined,
        codes: ["resource_exhausted", "rate_limit_exceeded"],
      });
      expect(google([{ reason: "UNTYPED" }, retryInfo])).toMatchObject({
        retryAfterMs: 5_000,
        codes: ["resource_exhausted", "untyped"],
      });
    });

    it("at most 8 details are read", () => {
      const filler = Array.from({ length: 7 }, () => ({ reason: "r" }));
      expect(google([...filler, retryInfo]).retryAfterMs).toBe(5_000);
      expect(google([...filler, { reason: "r" }, retryInfo]).retryAfterMs).toBeUndefined();
    });
  });
});

describe("parseDuration, bounds", () => {
  it.each([
    [{}, 0],
    [{ seconds: 0, nanos: 0 }, 0],
    [{ seconds: -1 }, undefined],
    [{ nanos: -5 }, undefined],
    [{ seconds: "abc" }, undefined],
    [`${" ".repeat(62)}7s`, 7_000],
    [`${" ".repeat(63)}7s`, undefined],
  ])("%j -> %s", (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });
});

describe("bodies", () => {
  const axios = (data: unknown, extra: object = {}) => ({
    status: 400,
    message: "Request failed with status code 400",
    response: { status: 400, headers: {}, data },
    ...extra,
  });

  it("the body's own error is followed two levels down, no further", () => {
    const body = {
      code: "one",
      error: { code: "two", error: { code: "three", error: { code: "four" } } },
    };
    expect(facts({ error: body }).codes).toEqual(["one", "two", "three"]);
  });

  it.each([
    ["JSON after whitespace", `\n  ${json("padded")}`, ["padded"]],
    ["JSON after a byte-order mark", `\uFEFF${json("bom")}`, ["bom"]],
    ["a JSON list", '[{"code":"listed"}]', []],
    ["a JSON string", '"quoted"', []],
  ])("text body: %s", (_, data, codes) => {
    expect(facts(axios(data)).codes).toEqual(codes);
  });

  it("text that is not a JSON object is kept as text", () => {
    expect(facts(axios("Service Unavailable")).text).toContain("Service Unavailable");
    expect(facts(axios('[{"code":"listed"}]')).text).toContain('[{"code":"listed"}]');
  });

  it("a JSON body is parsed up to 16 KiB", () => {
    const sized = (length: number) => {
      const body = (pad: string) => JSON.stringify({ error: { code: "big", message: "", pad } });
      return body("x".repeat(length - body("").length));
    };
    expect(sized(16 * 1024)).toHaveLength(16 * 1024);
    expect(facts(axios(sized(16 * 1024))).codes).toEqual(["big"]);
    expect(facts(axios(sized(16 * 1024 + 1))).codes).toEqual([]);
  });

  it.each([
    ["a Node stream", Object.assign(new Readable(), { code: "from_stream" })],
    ["a web stream", Object.assign(new ReadableStream(), { code: "from_stream" })],
    ["anything with pipe()", { pipe: () => undefined, code: "from_stream" }],
    ["anything with getReader()", { getReader: () => undefined, code: "from_stream" }],
  ])("%s is not read as a body", (_, data) => {
    expect(facts(axios(data)).codes).toEqual([]);
  });

  it("ky's error.data and a fetch wrapper's error.body", () => {
    expect(facts({ status: 400, data: { error: { code: "ky_code" } } }).codes).toEqual(["ky_code"]);
    expect(facts({ status: 500, message: "HTTP 500", body: json("from_body") }).codes).toEqual([
      "from_body",
    ]);
  });

  it("error.body is read only when no other body was found", () => {
    const both = { status: 500, error: { code: "from_error" }, body: json("from_body") };
    expect(facts(both).codes).toEqual(["from_error"]);
  });

  describe("the message is parsed as JSON only when no body was found", () => {
    const message = json("from_message");
    it.each([
      ["an object body", axios({ error: { code: "from_data" } }, { message }), ["from_data"]],
      ["a JSON text body", axios(json("from_data"), { message }), ["from_data"]],
      ["a fetch wrapper's body", { status: 400, message, body: json("from_body") }, ["from_body"]],
      ["a text body that is not JSON", axios("Bad Request", { message }), ["from_message"]],
      ["a stream body", axios({ pipe: () => undefined }, { message }), ["from_message"]],
    ])("%s", (_, error, codes) => {
      expect(facts(error).codes).toEqual(codes);
    });
  });
});

describe("causes and AggregateError members", () => {
  it("an error that is its own cause is read once", () => {
    const looped = coded("ECONNRESET") as Error & { cause?: unknown };
    looped.cause = looped;
    expect(facts(looped).codes).toEqual(["econnreset"]);
  });

  it("causes are read 4 deep, not 5", () => {
    expect(facts(wrap(coded("DEPTH_FOUR"), 4)).codes).toEqual(["depth_four"]);
    expect(facts(wrap(coded("DEPTH_FIVE"), 5)).codes).toEqual([]);
  });

  it("the first 4 members of an AggregateError are read", () => {
    const members = ["m1", "m2", "m3", "m4", "m5"].map(coded);
    expect(facts(new AggregateError(members, "all failed")).codes).toEqual([
      "m1",
      "m2",
      "m3",
      "m4",
    ]);
  });

  it("12 errors are read in all, breadth first; null and undefined members do not count", () => {
    const group = (name: string, members: unknown[]) => new AggregateError(members, name);
    const first = group("c1", [coded("TWELFTH"), coded("THIRTEENTH")]);
    const m1 = group("m1", [first, coded("C2"), coded("C3"), coded("C4")]);
    const m2 = group("m2", [coded("D1"), coded("D2"), coded("D3"), coded("D4")]);
    const codes = facts(group("root", [undefined, null, m1, m2])).codes;
    expect(codes).toEqual(["c2", "c3", "c4", "d1", "d2", "d3", "d4", "twelfth"]);
  });
});
