/**
 * Hostile input against users' rules: whatever a rule file, a rule in code or a suggestion holds,
 * matching runs on the linear engine. Outcomes only: a rule that backtracked would not end, and
 * fail its test by vitest's timeout (the cost is measured in bench/linear-rules.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  compileLinear,
  DFA_STEP_COST,
  MAX_MATCH_COST,
  MAX_PROGRAM_SIZE,
  toRe2Syntax,
} from "../../src/diagnosis/linear-regex.js";
import { parseRuleFile } from "../../src/diagnosis/rule-file.js";
import { compileRules, type Rule } from "../../src/diagnosis/rules.js";
import { readErrorFacts } from "../../src/diagnosis/error-facts.js";
import { RuleSuggester } from "../../src/report/suggest-rules.js";
import { configError, virtualInstance } from "../helpers/engine.js";
import { hostileLog } from "../helpers/hostile-log.js";

const dir = mkdtempSync(join(tmpdir(), "selfheal-linear-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const fileOf = (message: string[], name = "mine"): string => {
  const path = join(dir, `${name}-${Math.abs(message.join().length)}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      version: 1,
      rules: [{ name, pattern: "SERVICE_DOWN", confidence: 0.6, match: { message } }],
    }),
  );
  return path;
};

const OLD_SUGGESTION = String.raw`Upstream\W+shard\W+\S+\W+refused\W+the\W+write`;

describe("a rule that froze V8 for 55 s", () => {
  it("returns at once on the hostile text, and still matches the error it was made for", async () => {
    const { sh } = virtualInstance({ diagnosis: { ruleFile: fileOf([OLD_SUGGESTION]) } });
    for (const size of [3_000, 4_096, 1_000_000])
      expect((await sh.diagnose(new Error(`Upstream shard${"!".repeat(size)}`))).pattern).toBe(
        "UNKNOWN",
      );
    expect(await sh.diagnose(new Error("Upstream shard 7 refused the write"))).toMatchObject({
      pattern: "SERVICE_DOWN",
      rule: "mine",
    });
  });

  it("the same regex given in code runs on the linear engine too", async () => {
    const rule: Rule = {
      name: "shard",
      pattern: "SERVICE_DOWN",
      confidence: 0.6,
      match: { message: [new RegExp(OLD_SUGGESTION, "i"), /(a+)+x$/, /(\w*)*x/] },
    };
    const { sh } = virtualInstance({ diagnosis: { rules: (d) => [...d, rule] } });
    for (const text of [
      `Upstream shard${"!".repeat(4096)}`,
      "a".repeat(1_000_000),
      "w".repeat(5000),
    ])
      expect((await sh.diagnose(new Error(text))).pattern).toBe("UNKNOWN");
  });
});

describe("what the linear engine cannot run is a clear error at construction", () => {
  it.each([
    ["lookahead", "pay(?=ment)", "lookahead (?=...) is not supported"],
    ["negative lookahead", "pay(?!ment)", "negative lookahead (?!...) is not supported"],
    ["lookbehind", "(?<=pay)ment", "lookbehind (?<=...) is not supported"],
    ["a backreference", String.raw`(\w+) \1`, String.raw`a backreference (\1) is not supported`],
    ["a named backreference", String.raw`(?<w>\w+) \k<w>`, "a backreference (\\k<name>)"],
    ["a huge program", ".{0,500}a.{0,500}b", `at most ${MAX_PROGRAM_SIZE}`],
  ])("in a rule file: %s", (_what, source, reason) => {
    const path = fileOf(["fine", source], "bad-one");
    const error = configError(() => virtualInstance({ diagnosis: { ruleFile: path } }));
    expect(error.field).toBe("diagnosis.ruleFile");
    expect(error.message).toContain(path);
    expect(error.message).toContain('diagnosis.rules["bad-one"].match.message[1]');
    expect(error.message).toContain(reason);
  });

  it.each([
    ["a DFA blow-up", "[ab]*a[ab]{20}"],
    ["wide counted repeats", ".{0,20}a.{0,20}b"],
    ["wide counted repeats at the size bound", ".{0,35}a.{0,35}b.{0,35}c.{0,6}d"],
  ])("%s: its DFA is too large to build at load, refused", (_what, source) => {
    expect(compileLinear(new RegExp(source))).toEqual({
      reason: expect.stringContaining(
        "too many states for the linear engine to build at load",
      ) as unknown,
    });
  });

  it("a phrase with wildcards, or a short counted repeat, is built at load and costs one DFA step", () => {
    for (const re of [
      /upstream\s+shard\s+\S+\s+refused/i,
      /timeout after \d{1,6} ?ms/,
      /[ab]*a[ab]{3}/,
    ])
      expect(compileLinear(re)).toMatchObject({ cost: DFA_STEP_COST });
  });

  it("in code: names the rule and the regex, and says why", () => {
    const error = configError(() =>
      virtualInstance({
        diagnosis: {
          rules: [
            { name: "mine", pattern: "AUTH", confidence: 0.9, match: { message: [/(?<!x)y/] } },
          ],
        },
      }),
    );
    expect(error.field).toBe('diagnosis.rules["mine"].match.message[0]');
    expect(error.message).toContain("negative lookbehind (?<!...) is not supported");
    expect(error.message).toContain("linear-time engine (RE2 syntax), see docs/diagnosis.md");
    expect(error.message).toContain("/(?<!x)y/");
  });

  it("too costly in all: the table is refused, naming the rule that went past, the total and the bound", () => {
    const big = (i: number): Rule => ({
      name: `r${i}`,
      pattern: "AUTH",
      confidence: 0.9,
      match: { message: [new RegExp(`rate limit ${i}`)] },
    });
    const rules = Array.from({ length: MAX_MATCH_COST / DFA_STEP_COST + 1 }, (_, i) => big(i));
    const error = configError(() => virtualInstance({ diagnosis: { rules } }));
    expect(error.field).toBe(
      `diagnosis.rules["r${MAX_MATCH_COST / DFA_STEP_COST}"].match.message[0]`,
    );
    expect(error.message).toContain(
      `together cost ${MAX_MATCH_COST + DFA_STEP_COST} threads a character of an error's text, past the linear engine's bound of ${MAX_MATCH_COST}`,
    );
  });
});

describe("JavaScript syntax, run by RE2 as JavaScript would", () => {
  const test = (re: RegExp, text: string): boolean => {
    const compiled = compileLinear(re);
    if ("reason" in compiled) throw new Error(compiled.reason);
    return compiled.pattern.test(text);
  };

  it.each([
    [/a.b/, "a\rb"],
    [/a.b/, "a\u2028b"],
    [/a\sb/, "a\u00a0b"],
    [/a\sb/, "a\vb"],
    [/a\Sb/, "a b"],
    [/a[^]b/, "a\nb"],
    // eslint-disable-next-line no-empty-character-class -- JavaScript's class of nothing
    [/a[]b/, "ab"],
    [/\u0041/, "A"],
    [/\u{1F600}/u, "\u{1F600}"],
    [/\cJ/, "\n"],
    [/[\b]/, "\b"],
    [/^b$/m, "a\nb\nc"],
    [/a.b/s, "a\nb"],
    [/\p{Lu}/u, "É"],
    // eslint-disable-next-line no-useless-escape -- RE2 reads \z as the end of text
    [/\e\z/, "ez"],
    [/RATE LIMIT/i, "rate limit"],
    [/a\/b/, "a/b"],
    [/[\s\d]x/, "\u3000x"],
  ])("%s on %j: as V8 says", (re, text) => {
    expect(test(re, text)).toBe(re.test(text));
  });

  it("\\S inside a class is refused (RE2 has no class subtraction)", () => {
    expect(compileLinear(/[\Sx]/)).toEqual({
      reason: expect.stringContaining("\\S inside") as unknown,
    });
  });

  it("translates the source, keeping the rule's own source for people", () => {
    expect(toRe2Syntax(String.raw`\u00e9.`, "")).toBe(String.raw`\x{00e9}[^\n\r\x{2028}\x{2029}]`);
    const compiled = compileLinear(/caf\u00e9/i);
    expect("pattern" in compiled && compiled.pattern.source).toBe(String.raw`caf\u00e9`);
  });
});

describe("suggested rules of a log with hostile UNKNOWN texts", () => {
  const log = hostileLog(5_000);
  const suggester = new RuleSuggester();
  for (const s of log) suggester.add({ ...s, outcome: "failed" });
  const { file } = suggester.suggest("test");

  it("each compiles in the linear engine, loads back from its file, and matches its examples", () => {
    expect(file.rules.length).toBeGreaterThan(3);
    const rules = parseRuleFile(JSON.stringify(file), "suggested.json");
    const compiled = compileRules(rules);
    file.rules.forEach((rule, i) => {
      for (const example of rule.evidence?.examples ?? []) {
        const facts = readErrorFacts(new Error(example), 0);
        const [matcher] = compiled[i]?.matchers ?? [];
        // The wording alone: the samples were logged without their status and code.
        expect(matcher?.message?.some((p) => p.test(facts.text))).toBe(true);
      }
    });
  });
});
