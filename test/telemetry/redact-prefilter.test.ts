/**
 * redact's first look (mayHoldSecret): text it passes over must be text the full redaction
 * leaves alone. Each shape at its shortest is caught, and so is every text a seeded generator
 * builds from secrets (whole, cut, glued to words) that the full redaction changes.
 */
import { describe, expect, it } from "vitest";
import { mayHoldSecret, redact, redactSecrets } from "../../src/telemetry/redact.js";
import { seededRandom } from "../../src/testing/random.js";

/** Each shape redactSecrets replaces, at its shortest or near it. */
const SHORTEST = [
  "-----BEGIN PRIVATE KEY-----\nabc",
  "hooks.slack.com/services/T0000000",
  "discord.com/api/webhooks/12345/abcdefgh",
  "sk-abcdefghijklmnop",
  "AIzaabcdefghijklmnopqrstuvwxyz0123",
  "xoxb-abcdefghij",
  "ghp_abcdefghijklmnopqrstuvwxyz0123",
  "AKIAABCDEFGHIJKLMNOP",
  "rk_live_abcdefghij",
  "hf_abcdefghijklmnopqrstuvwxyz0123",
  "SG.abcdefghijklmnop.abcdefghijklmnop",
  "npm_abcdefghijklmnop",
  "key-0123456789abcdef0123456789abcdef",
  "12345678:AAabcdefghijklmnopqrstuvwxyz0123",
  "eyJabcdefgh.abcdefgh",
  "https://user:pw@host",
  "bearer abcd1234",
  "Bot abcd1234",
  "password=x",
  "a@b.co",
  "4111111111111111",
  "4111 1111 1111 1111",
  "4222 2222 22222",
  "0123456789abcdef0123456789abcdef",
  "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kM9n",
];

/** Words of error text that hold no secret. */
const WORDS = [
  "timeout",
  "from provider after",
  " ",
  "30000 ms",
  "rebalancing",
  "req_7f39cx9",
  "(code 36)",
  "shard-12",
  '"gpt-4"',
  "\u001b[31m",
  "é",
  "-",
  "/",
  "_",
  "4111",
  "abcdefgh",
];

describe("redact: the first look", () => {
  it.each(SHORTEST)("sees %j and the full redaction changes it", (text) => {
    expect(redactSecrets(text)).not.toBe(text);
    expect(mayHoldSecret(text)).toBe(true);
  });

  it.each([
    "timeout from provider after 30000 ms",
    "backend shard-12 is rebalancing, request req_7f39cx9 dropped",
    'model "gpt-4" is warming up',
    // 14 key characters in a row, 12 digits: one short of each limit.
    "abcdefghijklmn 123456789012",
  ])("passes over %j, and redact gives it back as it was", (text) => {
    expect(mayHoldSecret(text)).toBe(false);
    expect(redact(text)).toBe(text);
  });

  it("still escapes control characters and cuts text it passes over", () => {
    expect(redact("timeout\u001b[2J after 5 s")).toBe("timeout\\x1b[2J after 5 s");
    expect(redact("x ".repeat(600), 100)).toHaveLength(100);
  });

  it("passes over no generated text that the full redaction changes", () => {
    const random = seededRandom(7);
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)] as T;
    let passed = 0;
    let caught = 0;
    for (let n = 0; n < 20_000; n++) {
      let text = "";
      const parts = 1 + Math.floor(random() * 5);
      for (let p = 0; p < parts; p++) {
        const r = random();
        if (r < 0.5) text += pick(WORDS);
        else {
          // A secret, whole or cut at both ends: what survives a cut must still be seen.
          const s = pick(SHORTEST);
          const from = r < 0.75 ? 0 : Math.floor(random() * s.length);
          text += s.slice(from, from + Math.floor(random() * (s.length + 1)));
        }
      }
      if (mayHoldSecret(text)) caught++;
      else {
        passed++;
        expect(redactSecrets(text), text).toBe(text);
      }
    }
    // Both ways taken, many times each: the property was tried, not skipped.
    expect(passed).toBeGreaterThan(1000);
    expect(caught).toBeGreaterThan(1000);
  });
});
