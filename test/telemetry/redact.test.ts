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
    // Quoted values go whole; unquoted ones end at a delimiter.
    ["password='two words' ok", "password='[REDACTED]' ok"],
    ['{"secret": "a \\"quoted\\" one"}', '{"secret": "[REDACTED]"}'],
    ["token := `go style`", "token := `[REDACTED]`"],
    ["api_key=abc123 rest", "api_key=[REDACTED] rest"],
    ["user=bob;Password=p4ss;host=db", "user=bob;Password=[REDACTED];host=db"],
    ["headers {'Authorization': 'Bearer abc'}", "headers {'Authorization': '[REDACTED]'}"],
    ['an unclosed password="abc def', 'an unclosed password="[REDACTED]'],
    // A word of prose after "password:" stays; a value does not.
    ["password: must be longer", "password: must be longer"],
    ["password: letmein", "password: [REDACTED]"],
    // Cards: the longest run of groups passing Luhn goes, what follows stays.
    ["card 4111 1111 1111 1111 12 26", "card [REDACTED_CARD] 12 26"],
    ["id 4111111111111112", "id 4111111111111112"],
    // URLs: a user alone is not a secret; a long opaque user is a token.
    ["postgres://app@db/x", "postgres://app@db/x"],
    ["https://0123456789abcdefghij0123@git.example.com/x", "https://[REDACTED]@git.example.com/x"],
    // Long runs: random ones go, paths and identifiers stay.
    [
      "at /home/app/node_modules/some-package/dist/index.js:1:2",
      "at /home/app/node_modules/some-package/dist/index.js:1:2",
    ],
    [
      "call getUserAccountBalanceForCustomerId2WithRetries",
      "call getUserAccountBalanceForCustomerId2WithRetries",
    ],
    ["blob 7Hq2LmN9pX4vR8sT1wZ6yB3cD5fG0jK2mP9qS4uV", "blob [REDACTED_SECRET]"],
    // A private key cut off before its END line goes to the end of the text.
    ["-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B", "[REDACTED_PRIVATE_KEY]"],
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
      "a-".repeat(500_000),
      'password="'.repeat(100_000),
      "Cookie: ".repeat(125_000),
      "-----BEGIN PRIVATE KEY-----".repeat(40_000),
      "4 ".repeat(500_000),
      "\u001b[2J\r\n".repeat(150_000),
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
