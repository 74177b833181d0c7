/**
 * Near misses and boundaries of redaction: which keys say secret, where a value ends (quotes,
 * brackets, headers, prose), card prefixes and lengths, what makes a long run look random, and
 * the length limits. Each case pairs what must go with the closest text that must stay.
 */
import { describe, expect, it } from "vitest";
import {
  boundedJson,
  DEFAULT_MAX_TEXT_LENGTH,
  describeThrown,
  isError,
  redact,
} from "../../src/telemetry/redact.js";

describe("redact: which keys are secret", () => {
  it.each([
    // The last word decides; separators around it do not count as words.
    ["api_key_=abc123 rest", "api_key_=[REDACTED] rest"],
    ["password_=hunter22 rest", "password_=[REDACTED] rest"],
    // `<owner> id` is secret only for a session.
    ["session_id=abc123 rest", "session_id=[REDACTED] rest"],
    ["sessionId=abc123 rest", "sessionId=[REDACTED] rest"],
    ["auth_id=42 rest", "auth_id=42 rest"],
    ["secret_id=42 rest", "secret_id=42 rest"],
    // A key owner before a word that is neither `key` nor `id` is not enough.
    ["auth_mode=oauth2 rest", "auth_mode=oauth2 rest"],
    ["api_key=abc123 rest", "api_key=[REDACTED] rest"],
    ["monkey=abc123 rest", "monkey=abc123 rest"],
  ])("%s", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });
});

describe("redact: where a secret value ends", () => {
  it.each([
    // Bracketed values go to their matching close, nested ones included; what follows stays.
    ["password=[a b] rest", "password=[REDACTED] rest"],
    ["secret={a b} rest", "secret=[REDACTED] rest"],
    ['secret={"a": {"b": 1}} rest', "secret=[REDACTED] rest"],
    ["password=[[1,2],[3]] rest", "password=[REDACTED] rest"],
    ["password=[1] [2] rest", "password=[REDACTED] [2] rest"],
    ["secret={1} {2} rest", "secret=[REDACTED] {2} rest"],
    ["secret={[1]} rest", "secret=[REDACTED] rest"],
    ["password=[{1}] rest", "password=[REDACTED] rest"],
    // An unclosed bracket runs to the end of its line, not further.
    ["secret=[1, 2\nnext line", "secret=[REDACTED]\nnext line"],
    ["secret={1, 2\r\nnext line", "secret=[REDACTED]\nnext line"],
    // An empty value is nothing to hide.
    ["password=&user=x", "password=&user=x"],
    ['{"password": ""}', '{"password": ""}'],
    ["password=; user=x", "password=; user=x"],
    // After a scheme, the rest of the header line goes, even past a redacted token.
    ["Authorization: Bearer abc.def-ghi-jkl more words", "Authorization: Bearer [REDACTED]"],
    ["Authorization: Bearer [REDACTED]", "Authorization: Bearer [REDACTED]"],
  ])("%j", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });

  it("closes a JSON-in-JSON string whose value ends with an escaped backslash at its quote", () => {
    const text = JSON.stringify(JSON.stringify({ password: "ab\\", user: "bob" }));
    expect(redact(text)).toBe(
      JSON.stringify(JSON.stringify({ password: "[REDACTED]", user: "bob" })),
    );
  });

  it("finds the close of a bracketed value up to 1024 characters on, not further", () => {
    const within = `secret=[${"x".repeat(1022)}] rest`; // the value is 1024 characters
    const beyond = `secret=[${"x".repeat(1023)}] rest`; // 1025: the close is out of reach
    expect(redact(within, 4096)).toBe("secret=[REDACTED] rest");
    expect(redact(beyond, 4096)).toBe("secret=[REDACTED]");
  });

  it.each([
    // A run of plain words after `key: ` is prose.
    ["password: must be longer", "password: must be longer"],
    ["password:  must be longer", "password:  must be longer"],
    // `=` always introduces a value, spaced or not.
    ["password= must be longer", "password= [REDACTED] be longer"],
    ["password = must be longer", "password = [REDACTED] be longer"],
    // Without a space after the colon, the word is a value.
    ["password:must be longer", "password:[REDACTED] be longer"],
    // A single word, or a word not followed by another word, is a value.
    ["password: letmein", "password: [REDACTED]"],
    ["password: letmein, then", "password: [REDACTED], then"],
    ["password: letmein 42", "password: [REDACTED] 42"],
    ["password: letmein  more", "password: [REDACTED]  more"],
    // A value with a digit or symbol is never prose.
    ["password: hunter2 is wrong", "password: [REDACTED] is wrong"],
  ])("%j", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });
});

describe("redact: card numbers", () => {
  it.each([
    // Mastercard's 2-series: 2221 to 2720 only (all four numbers pass Luhn).
    ["card 2220000000000000 ok", "card 2220000000000000 ok"],
    ["card 2221000000000009 ok", "card [REDACTED_CARD] ok"],
    ["card 2720000000000005 ok", "card [REDACTED_CARD] ok"],
    ["card 2721000000000004 ok", "card 2721000000000004 ok"],
    // 3 to 6: Amex/Diners, Visa, Mastercard, Discover.
    ["card 3000000000000004 ok", "card [REDACTED_CARD] ok"],
    ["card 378282246310005 ok", "card [REDACTED_CARD] ok"],
    ["card 5555555555554444 ok", "card [REDACTED_CARD] ok"],
    ["card 6011000000000004 ok", "card [REDACTED_CARD] ok"],
    ["card 6011 0000 0000 0004 ok", "card [REDACTED_CARD] ok"],
    // 13 and 19 digits are card lengths.
    ["card 4222222222222 ok", "card [REDACTED_CARD] ok"],
    ["card 4000000000000000006 ok", "card [REDACTED_CARD] ok"],
    // A Luhn-valid prefix shorter than 13 digits is not a card.
    ["ref 4111 1111 112 35", "ref 4111 1111 112 35"],
    // Luhn decides.
    ["card 6011000000000005 ok", "card 6011000000000005 ok"],
    // The longest passing run of groups goes; the trailing groups stay.
    ["card 6011-0000-0000-0004-12-26", "card [REDACTED_CARD]-12-26"],
  ])("%s", (input, expected) => {
    expect(redact(input)).toBe(expected);
  });
});

describe("redact: long runs that look random", () => {
  const redacted = "blob [REDACTED_SECRET] end";
  const kept = (run: string) => `blob ${run} end`;

  it.each([
    // Random runs with every class: upper, lower and digits at the edges of their ranges.
    ["upper case only A", "k3Ab9mA2x7qA4w8zA5p6rA1s0tA9uvc4dA7ef2gh"],
    ["upper case only Z", "k3Zb9mZ2x7qZ4w8zZ5p6rZ1s0tZ9uvc4dZ7ef2gh"],
    ["lower case only a", "K3aB9MaQ2X7aW4R8aZ5P6aT1S0aU9VC4aD7EF2GH"],
    ["lower case only z", "K3zB9MzQ2X7zW4R8zZ5P6zT1S0zU9VC4zD7EF2GH"],
    ["digit only 0", "Kq0Bw0MjQ0xRt0WnR0aZp0PyT0sS0uU0vCf0DgEh"],
    ["digit only 9", "Kq9Bw9MjQ9xRt9WnR9aZp9PyT9sS9uU9vCf9DgEh"],
    // One upper case letter in four not at a word start is enough.
    ["1 of 4 capitals not at a word start", "K1q3bw7mjQrq0xrt5wnr2zpMo8py1sPu4u9vcf6dgeh"],
    // Slashes alone do not make a path.
    ["random segments", "K7fQ2xLp/Z9mWc3Rv8Tn/B4yHdQ1sJ5gN0eUw6Vb"],
    ["one-letter segments", "a/b/K7fQ2xLpZ9mWc3Rv8TnB4yHdQ1sJ5gN0eUw6"],
    ["one path word", "K7fQ2xLpZ9mWc3Rv8TnB4yHdQ1sJ5gN0eUw6/cache"],
  ])("redacts a run with %s", (_what, run) => {
    expect(redact(kept(run))).toBe(redacted);
  });

  it.each([
    ["no digit (symbols are not digits)", "KQ_bwMJq-xRTwn+RAzpPYt_sSUuvCFdgEHlmNO_ik"],
    ["no digit", "KQbwMJqxRTwnRAzpPYtsSUuvCFdgEHlmNOikGHjy"],
    ["no upper case", "kq3bw7mjq0xrt5wnr2azp8pyt1ss4uu9vcf6dgeh"],
    ["no lower case", "KQ3BW7MJQ0XRT5WNR2AZP8PYT1SS4UU9VCF6DGEH"],
    // camelCase: every capital starts a word, whatever lower-case letter follows.
    ["capitals followed by a", "Kaq3bw7mjQrq0xrt5wnr2zpMo8py1sPu4u9vcf6dgeh"],
    ["capitals followed by z", "Kzq3bw7mjQrq0xrt5wnr2zpMo8py1sPu4u9vcf6dgeh"],
    ["low entropy", "QR1xQR1xQR1xQR1xQR1xQR1xQR1xQR1xQR1xQR1x"],
    // Paths: two lower-case words of two characters or more.
    ["two path words", "cache/images/K7fQ2xLpZ9mWc3Rv8TnB4yHdQ1sJ5"],
    ["two short path words", "ab/cd/K7fQ2xLpZ9mWc3Rv8TnB4yHdQ1sJ5gN0eU"],
  ])("keeps a run with %s", (_what, run) => {
    expect(redact(kept(run))).toBe(kept(run));
  });

  it("does not count base64 padding as a character of the run", () => {
    // Entropy 3.73 bits per character: under the 3.8 of a random run; one "=" would lift it.
    const run = "WqmqX37Rm4pqRQRk3k574937RQ49pX5R5WmX2pk5";
    expect(redact(kept(run))).toBe(kept(run));
    expect(redact(kept(`${run}=`))).toBe(kept(`${run}=`));
    expect(redact(kept(`${run}==`))).toBe(kept(`${run}==`));
  });
});

describe("redact: length", () => {
  it("keeps text of exactly the limit whole and cuts one character more", () => {
    const exact = "word ".repeat(DEFAULT_MAX_TEXT_LENGTH / 5 + 1).slice(0, DEFAULT_MAX_TEXT_LENGTH);
    expect(redact(exact)).toBe(exact);
    const over = `${exact}x`;
    expect(redact(over)).toBe(`${exact.slice(0, DEFAULT_MAX_TEXT_LENGTH - 1)}…`);
    expect(redact("short text", 10)).toBe("short text");
    expect(redact("short text!", 10)).toBe("short tex…");
  });

  it("cuts long text at the limit, not before", () => {
    const long = "word ".repeat(1000);
    const out = redact(long);
    expect(out).toHaveLength(DEFAULT_MAX_TEXT_LENGTH);
    expect(out).toBe(`${long.slice(0, DEFAULT_MAX_TEXT_LENGTH - 1)}…`);
    expect(redact(long, 300)).toBe(`${long.slice(0, 299)}…`);
  });
});

describe("describeThrown: edge values", () => {
  it.each([
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [-0, "0"],
    [false, "false"],
    [() => 1, "a function was thrown"],
    [Math.max, "a function was thrown"],
  ])("renders %s", (value, expected) => {
    expect(describeThrown(value)).toBe(expected);
  });

  it("names an Error without a message by a string name only", () => {
    const numberName = new Error("");
    Object.defineProperty(numberName, "name", { value: 42 });
    expect(describeThrown(numberName)).toBe("Error");
    const emptyName = new Error("");
    emptyName.name = "";
    expect(describeThrown(emptyName)).toBe("Error");
    const throwingName = new Error("");
    Object.defineProperty(throwingName, "name", {
      get() {
        throw new Error("no name");
      },
    });
    expect(describeThrown(throwingName)).toBe("Error");
    const custom = new Error("");
    custom.name = "QuotaError";
    expect(describeThrown(custom)).toBe("QuotaError");
  });

  it("returns the empty message of a plain object rather than its JSON", () => {
    expect(describeThrown({ message: "", code: 7 })).toBe("");
    expect(describeThrown({ message: 7, code: 7 })).toBe('{"message":7,"code":7}');
  });

  it("bounds the rendering of a large object to four times the text limit", () => {
    const large = { data: "x".repeat(10_000) };
    expect(describeThrown(large)).toBe(JSON.stringify(large).slice(0, 4 * 1024));
    expect(boundedJson(large)).toHaveLength(4 * DEFAULT_MAX_TEXT_LENGTH);
    expect(boundedJson(large, 10)).toBe('{"data":"x');
    expect(boundedJson({ n: 1n })).toBe('{"n":"1"}');
    expect(boundedJson(() => 1)).toBeUndefined();
  });
});

describe("isError", () => {
  it("is false, not a throw, for a Proxy whose prototype cannot be read", () => {
    const hostile = new Proxy(
      {},
      {
        getPrototypeOf() {
          throw new Error("no prototype");
        },
      },
    );
    expect(isError(hostile)).toBe(false);
    expect(isError(new TypeError("x"))).toBe(true);
    expect(isError({ message: "x" })).toBe(false);
  });
});

describe("quoted values close where the JSON says they do", () => {
  it.each([
    [
      "an escaped quote inside JSON in a JSON string",
      JSON.stringify(JSON.stringify({ password: 'ab"cd', user: "bob" })),
    ],
    ["a value ending in an escaped backslash", JSON.stringify({ password: "ab\\", user: "bob" })],
    ["an escaped quote inside plain JSON", JSON.stringify({ password: 'a"b', user: "bob" })],
    [
      "three levels deep, a quote and a backslash in the value",
      JSON.stringify(JSON.stringify(JSON.stringify({ password: 'x"y\\', user: "bob" }))),
    ],
  ])("%s: the whole secret goes, the rest of the structure stays", (_name, text) => {
    const out = redact(text);
    expect(out).not.toMatch(/cd|ab|a.b|x.{0,8}y/);
    expect(out).toContain("[REDACTED]");
    // Unwrap the nesting: the result still parses, with the other field intact.
    let value: unknown = out;
    while (typeof value === "string") value = JSON.parse(value);
    expect(value).toEqual({ password: "[REDACTED]", user: "bob" });
  });
});
