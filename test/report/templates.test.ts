import { describe, expect, it } from "vitest";
import { compileRules } from "../../src/diagnosis/rules.js";
import {
  TemplateMiner,
  templateRegex,
  templateWords,
  WILDCARD,
} from "../../src/report/templates.js";

const W = WILDCARD;

describe("templateWords: the words of a text, what varies masked", () => {
  it.each([
    [
      "Quota exceeded for requests per minute",
      ["Quota", "exceeded", "for", "requests", "per", "minute"],
    ],
    ["retry in 30s (429)", ["retry", "in", W, W]],
    ['model "gpt-9" not found', ["model", W, "not", "found"]],
    ["GET https://api.example.com/v1/x failed", ["GET", W, "failed"]],
    ["connect to api.openai.com:443 refused", ["connect", "to", W, "refused"]],
    ["from 10.0.0.12:8080 reset", ["from", W, "reset"]],
    ["request 3f2b8c1e-9a7d-4c2b-8e1f-0a1b2c3d4e5f lost", ["request", W, "lost"]],
    ["id req_8f3a9c2b1d77 throttled", ["id", W, "throttled"]],
    ["key [REDACTED_KEY] rejected", ["key", W, "rejected"]],
    ["used 80% of 1.5MB at 12:00:01", ["used", W, "of", W, "at", W]],
    ["commit deadbeefcafe1234 bad", ["commit", W, "bad"]],
    ["  spaced   out  ", ["spaced", "out"]],
    ["( ) , ;", ["(", ")", ",", ";"]],
    ["failed - see log: (disk full)", ["failed", "-", "see", "log", "disk", "full"]],
  ])("%j", (text, words) => {
    expect(templateWords(text)).toEqual(words);
  });
});

describe("TemplateMiner", () => {
  it("texts that differ in variable words join one template; counts, first and last seen", () => {
    const m = new TemplateMiner();
    m.add("rate limited: retry in 30s", 3_000);
    m.add("rate limited: retry in 12s", 1_000);
    m.add("rate limited: retry in 5s", 2_000);
    const [t, ...rest] = m.templates();
    expect(rest).toEqual([]);
    expect(t).toMatchObject({
      words: ["rate", "limited", "retry", "in", W],
      count: 3,
      firstAt: 1_000,
      lastAt: 3_000,
    });
  });

  it("a word that differs on fewer than half the positions becomes a wildcard", () => {
    const m = new TemplateMiner();
    m.add("Upstream alpha overloaded, try later", 1);
    m.add("Upstream beta overloaded, try later", 2);
    expect(m.templates().map((t) => t.words)).toEqual([
      ["Upstream", W, "overloaded", "try", "later"],
    ]);
  });

  it("texts that agree on less than half their words, or differ in length or first word, stay apart", () => {
    const m = new TemplateMiner();
    m.add("alpha beta gamma delta", 1);
    m.add("alpha one two three", 2); // 1 of 4 agree
    m.add("alpha beta gamma", 3); // other length
    m.add("omega beta gamma delta", 4); // other first word
    expect(m.templates()).toHaveLength(4);
  });

  it("joins the template it agrees with most", () => {
    const m = new TemplateMiner();
    m.add("a b c d e f g h", 1);
    m.add("a p q r s t u h", 2); // 2 of 8 agree: a template of its own
    m.add("a b c d e t u h", 3); // 6 of 8 with the first, 4 of 8 with the second
    expect(m.templates().map((t) => [t.words.join(" "), t.count])).toEqual([
      ["a b c d e <*> <*> h", 2],
      ["a p q r s t u h", 1],
    ]);
  });

  it("the most frequent first; ties in the order first seen", () => {
    const m = new TemplateMiner();
    for (const t of ["x one", "y one", "y two", "z one"]) m.add(t, 0);
    expect(m.templates().map((t) => t.words[0])).toEqual(["y", "x", "z"]);
  });

  it("keeps the first distinct examples as they came, up to the limit", () => {
    const m = new TemplateMiner({ examples: 2 });
    for (const t of ["limit hit 1", "limit hit 1", "limit hit 2", "limit hit 3"]) m.add(t, 0);
    expect(m.templates()[0]?.examples).toEqual(["limit hit 1", "limit hit 2"]);
  });

  it("keeps a value only while every text of the template shares it", () => {
    const m = new TemplateMiner();
    m.add("busy now 1", 0, { status: 503, code: "overloaded" });
    m.add("busy now 2", 0, { status: 503, code: "busy" });
    m.add("slow down 1", 0, { status: undefined });
    const [busy, slow] = m.templates();
    expect(Object.fromEntries(busy?.shared ?? [])).toEqual({ status: 503 });
    expect(Object.fromEntries(slow?.shared ?? [])).toEqual({});
  });

  it("bounded: past maxTemplates, a text that would start a new one is counted, not kept", () => {
    const m = new TemplateMiner({ maxTemplates: 2 });
    for (const t of ["a x", "b x", "c x", "d x", "a y"]) m.add(t, 0);
    expect(m.templates().map((t) => t.words.join(" "))).toEqual(["a <*>", "b x"]);
    expect(m.leftOut).toBe(2);
  });

  it("the same texts in the same order give the same templates", () => {
    const texts = Array.from(
      { length: 200 },
      (_, i) => `err ${["alpha", "beta"][i % 2]} code ${i}`,
    );
    const run = () => {
      const m = new TemplateMiner();
      texts.forEach((t, i) => m.add(t, i));
      return m.templates();
    };
    expect(run()).toEqual(run());
  });
});

describe("templateRegex", () => {
  it.each([
    [
      ["Quota", "exceeded", "for"],
      "Quota[)\\]}>,;:.!?]*\\s+[([{<]*exceeded[)\\]}>,;:.!?]*\\s+[([{<]*for",
    ],
    [[W, "retry", "in", W], "retry[)\\]}>,;:.!?]*\\s+[([{<]*in"],
    [["limit", W, "hit"], "limit[)\\]}>,;:.!?]*\\s+\\S+\\s+[([{<]*hit"],
    [["a.b", "$1-x"], "a\\.b[)\\]}>,;:.!?]*\\s+[([{<]*\\$1\\-x"],
    [["at", "...", W, ":("], "at[)\\]}>,;:.!?]*\\s+\\.\\.\\.\\s+\\S+\\s+[([{<]*:\\("],
  ])("%j -> %s", (words, source) => {
    expect(templateRegex(words)).toBe(source);
  });

  it("matches every text of its template, and passes the rule validator", () => {
    const m = new TemplateMiner();
    const texts = [
      "Slow down: budget of 60 per minute spent (req_8f3a9c2b1d77)",
      "Slow down: budget of 120 per minute spent (req_00aa11bb22cc)",
    ];
    for (const t of texts) m.add(t, 0);
    const source = templateRegex(m.templates()[0]?.words ?? []);
    const re = new RegExp(source, "i");
    for (const t of texts) expect(re.test(t)).toBe(true);
    expect(re.test("Slow down: quota of 60 per hour spent")).toBe(false);
    expect(() =>
      compileRules([
        { name: "r", pattern: "RATE_LIMIT", confidence: 0.6, match: { message: [re] } },
      ]),
    ).not.toThrow();
  });
});

describe("a text cut by redaction", () => {
  it("its cut last word is masked: the rule matches the whole live error", () => {
    const live = `Request budget spent: ${Array.from({ length: 120 }, (_, i) => `w${"abcdefghij"[i % 10]}x`).join(" ")}`;
    const logged = `${live.slice(0, 511)}…`;
    const m = new TemplateMiner();
    m.add(logged, 0);
    const re = new RegExp(templateRegex(m.templates()[0]?.words ?? []), "i");
    expect(re.test(logged)).toBe(true);
    expect(re.test(live)).toBe(true);
  });
});
