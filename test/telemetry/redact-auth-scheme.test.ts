/**
 * Redaction edges left after the earlier suites: an authorization scheme in free text (no key
 * before it), where the value alone decides (a credential's characters, or 16 letters and more),
 * and keys that only start like a session id.
 */
import { describe, expect, it } from "vitest";
import { redact } from "../../src/telemetry/redact.js";

describe("redact: an authorization scheme in free text", () => {
  it.each([
    // Digits or symbols: a credential, whatever its length.
    ["call failed: Bearer abc123def456 rejected", "call failed: Bearer [REDACTED] rejected"],
    ["upstream said Basic dXNlcjpwYXNz is wrong", "upstream said Basic [REDACTED] is wrong"],
    // Inner capitals, no digit: still a credential (under 16 characters).
    ["retry with Token abcDEFghiJKL now", "retry with Token [REDACTED] now"],
    // Letters only: 16 and more read as a token, fewer as a word of prose.
    ["sent token abcdefghijklmnop upstream", "sent token [REDACTED] upstream"],
    ["sent token abcdefghijklmnopq upstream", "sent token [REDACTED] upstream"],
    ["sent token abcdefghijklmno upstream", "sent token abcdefghijklmno upstream"],
    ["Bearer authentication failed", "Bearer authentication failed"],
    ["the bot mentioned somebody", "the bot mentioned somebody"],
  ])("%s", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });
});

describe("redact: keys that only start like a session id", () => {
  it.each([
    ["session_mode=abc123 rest", "session_mode=abc123 rest"],
    ["sessionState=abc123 rest", "sessionState=abc123 rest"],
    ["session_id=abc123 rest", "session_id=[REDACTED] rest"],
    ["user_id=abc123 rest", "user_id=abc123 rest"],
  ])("%s", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });
});
