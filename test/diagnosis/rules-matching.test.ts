import { describe, expect, it } from "vitest";
import { virtualInstance } from "../helpers/engine.js";

const { sh } = virtualInstance({
  diagnosis: {
    rules: [
      {
        name: "scoped-throttle",
        pattern: "RATE_LIMIT",
        confidence: 0.9,
        match: { header: ["Retry-After", "X-RateLimit-Scope"] },
      },
    ],
  },
});

const withHeaders = (headers: unknown) => Object.assign(new Error("request refused"), { headers });

describe("header matchers", () => {
  it.each([
    ["a plain object", { "retry-after": "1", "x-ratelimit-scope": "org" }],
    ["a plain object, other case", { "Retry-After": "1", "X-RATELIMIT-SCOPE": "org" }],
    ["a Headers", new Headers({ "retry-after": "1", "x-ratelimit-scope": "org", other: "x" })],
  ])("match when every named header is present (%s), whatever its case", async (_, headers) => {
    expect(await sh.diagnose(withHeaders(headers), { tool: "t" })).toMatchObject({
      rule: "scoped-throttle",
      pattern: "RATE_LIMIT",
      evidence: "structured",
      retryAfterMs: 1_000,
    });
  });

  it.each([
    ["one of the two headers", { "retry-after": "1" }],
    ["other headers", { "x-request-id": "abc" }],
    ["no headers", undefined],
  ])("do not match an error with %s", async (_, headers) => {
    expect(await sh.diagnose(withHeaders(headers), { tool: "t" })).toMatchObject({
      rule: "none",
      pattern: "UNKNOWN",
    });
  });
});
