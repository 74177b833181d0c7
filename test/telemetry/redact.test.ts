import { describe, expect, it, vi } from "vitest";
import { describeThrown, redact } from "../../src/telemetry/redact.js";

describe("redact", () => {
  it.each([
    [
      "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlLXZhbHVl",
      "Authorization: Bearer [REDACTED]",
    ],
    ["invalid key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "invalid key [REDACTED_KEY]"],
    ["anthropic sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "anthropic [REDACTED_KEY]"],
    ["google key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "google key=[REDACTED_KEY]"],
    ["slack xoxb-123456789012-abcdefghijkl", "slack [REDACTED_KEY]"],
    ["gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh [REDACTED_KEY]"],
    ["aws AKIAIOSFODNN7EXAMPLE in use", "aws [REDACTED_KEY] in use"],
    ["stripe sk_live_abcdefghij1234567890", "stripe [REDACTED_KEY]"],
    ["jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlLXZhbHVl", "jwt [REDACTED_JWT]"],
    ['{"api_key": "abcd1234efgh"}', '{"api_key": "[REDACTED]"}'],
    ["503 (api_key=sk-live-do-not-log-me-123456)", "503 (api_key=[REDACTED_KEY])"],
    ["failed (password=hunter22)", "failed (password=[REDACTED])"],
    ["https://user:hunter2@db.internal:5432/x", "https://[REDACTED]@db.internal:5432/x"],
    ["mail ops.team+alerts@example.co.uk now", "mail [REDACTED_EMAIL] now"],
    ["sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha [REDACTED_HEX]"],
    ["blob QWxhZGRpbjpPcGVuU2VzYW1lQWxhZGRpbjpPcGVuU2VzYW1l==", "blob [REDACTED_SECRET]"],
    [
      "HTTP 429 Too Many Requests: rate limit reached for gpt-4o",
      "HTTP 429 Too Many Requests: rate limit reached for gpt-4o",
    ],
  ])("%s", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });

  it("cuts to the limit without leaking a secret that straddles the cut", () => {
    const text = `${"a ".repeat(500)}sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv`;
    const out = redact(text, 1010);
    expect(out).not.toContain("sk-proj");
    expect(out.length).toBeLessThanOrEqual(1010);
  });

  it("does the same work on 1 MB of hostile input as on its first 2 KB: the rest is never scanned", () => {
    /** Redacts `text` and counts the characters every pattern was run over: a measure of work. */
    const scan = (text: string) => {
      const spy = vi.spyOn(RegExp.prototype, Symbol.replace);
      try {
        const out = redact(text);
        const scanned = spy.mock.calls.reduce((sum, [input]) => sum + input.length, 0);
        return { out, scanned, runs: spy.mock.calls.length };
      } finally {
        spy.mockRestore();
      }
    };
    for (const hostile of [
      "a".repeat(1_000_000),
      `${"a".repeat(1_000_000)}@`,
      "Bearer ".repeat(150_000),
      "=".repeat(1_000_000),
      `${"x ".repeat(500_000)}sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv`,
    ]) {
      const whole = scan(hostile);
      const head = scan(hostile.slice(0, 2_048));
      expect(whole.runs).toBeGreaterThan(0); // the measure sees the patterns run
      expect(whole.out).toBe(head.out);
      expect(whole.scanned).toBe(head.scanned);
      // Each pattern runs over at most the cut input (1024 + a lookahead shorter than 1024).
      expect(whole.scanned).toBeLessThan(whole.runs * 2_048);
      expect(whole.out.length).toBeLessThanOrEqual(1024);
    }
  });
});

describe("describeThrown", () => {
  it("renders any thrown value", () => {
    expect(describeThrown(new Error("boom"))).toBe("boom");
    expect(describeThrown(new RangeError(""))).toBe("RangeError");
    expect(describeThrown("text")).toBe("text");
    expect(describeThrown(undefined)).toBe("undefined was thrown");
    expect(describeThrown(null)).toBe("null was thrown");
    expect(describeThrown(7n)).toBe("7");
    expect(describeThrown(Symbol("s"))).toBe("Symbol(s)");
    expect(describeThrown({ status: 500 })).toBe('{"status":500}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(describeThrown(cyclic)).toBe("[object Object]");
  });
});
