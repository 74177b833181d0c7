/**
 * Every built-in regex that runs over outside text (error texts, log lines) stays on V8, so each
 * must be safe from catastrophic backtracking: found in the source (every regex literal of the
 * files below, by the TypeScript parser, not copied) and checked by recheck. The rules
 * `report --suggest-rules` writes are checked too: they run on the linear engine here, but a
 * rule file may be used elsewhere. About regex sources, not the runtime: .ci/run runs this file
 * on one Node version (ONE_RUNTIME).
 */
import { readFileSync } from "node:fs";
import { checkSync } from "recheck";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { RuleSuggester } from "../../src/report/suggest-rules.js";
import { hostileLog } from "../helpers/hostile-log.js";

const FILES = [
  "src/diagnosis/rules.ts",
  "src/diagnosis/error-facts.ts",
  "src/diagnosis/linear-regex.ts",
  "src/report/suggest-rules.ts",
  "src/report/templates.ts",
  "src/telemetry/redact.ts",
  // Redis error texts and a provider's replies (src/otel/config.ts trims an endpoint's slashes
  // with a loop: no regex left there).
  "src/redis/fleet.ts",
  "src/testing/fake-provider.ts",
];

/**
 * recheck's fuzzer reports PAIR (a key before `=` or `:`) on 'A-'.repeat(n), which its lookbehind
 * never lets start inside a name; run below on that input at 1 MB, it ends (a backtracking
 * regex would not, and the test would hit its timeout).
 */
/**
 * recheck's fuzzer judges an attack by how long it took (1 s by default), and gives an incubation
 * 250 ms: on a busy machine a safe regex came back "vulnerable". With those limits wide, its
 * verdict rests on step counts and its fixed random seed, the same on a loaded machine.
 */
const RECHECK = {
  timeout: 120_000,
  incubationTimeout: null,
  attackTimeout: 10_000,
  randomSeed: 0,
} as const;

const KNOWN_FALSE_ALARMS = new Map([["src/telemetry/redact.ts", ["'A-'.repeat("]]]);

function literals(file: string): string[] {
  const source = ts.createSourceFile(
    file,
    readFileSync(file, "utf8"),
    ts.ScriptTarget.Latest,
    true,
  );
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (node.kind === ts.SyntaxKind.RegularExpressionLiteral) found.push(node.getText());
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("built-in regexes: recheck finds none vulnerable", () => {
  for (const file of FILES) {
    it(file, { timeout: 300_000 }, () => {
      const found = literals(file);
      expect(found.length).toBeGreaterThan(0);
      const flagged: string[] = [];
      for (const literal of found) {
        const end = literal.lastIndexOf("/");
        // g and y change where a search starts, not what one search costs.
        const flags = literal.slice(end + 1).replace(/[gy]/g, "");
        const result = checkSync(literal.slice(1, end), flags, RECHECK);
        if (result.status === "safe") continue;
        const attack = result.status === "vulnerable" ? result.attack.pattern : result.status;
        if (KNOWN_FALSE_ALARMS.get(file)?.some((a) => attack.startsWith(a))) {
          const re = new RegExp(literal.slice(1, end), flags);
          expect(typeof re.test("A-".repeat(500_000))).toBe("boolean");
          continue;
        }
        flagged.push(`${literal}: ${attack}`);
      }
      expect(flagged).toEqual([]);
    });
  }
});

describe("suggested rules of a log with hostile UNKNOWN texts", () => {
  // recheck takes 1 to 9 s a rule (its automaton checker is slower still on long literals): the
  // most frequent of each shape here (one per template start), every rule of a 100 MB log in
  // bench/linear-rules.ts.
  it("each shape passes recheck: no overlapping pieces", { timeout: 300_000 }, () => {
    const suggester = new RuleSuggester();
    for (const s of hostileLog(5_000)) suggester.add({ ...s, outcome: "failed" });
    const { file } = suggester.suggest("test");
    const firstOfShape = new Map<string, string>();
    for (const [source = ""] of file.rules.map((r) => r.match.message))
      if (!firstOfShape.has(source.slice(0, 8))) firstOfShape.set(source.slice(0, 8), source);
    expect(firstOfShape.size).toBeGreaterThan(3);
    const flagged = [...firstOfShape.values()].filter(
      (source) => checkSync(source, "i", RECHECK).status !== "safe",
    );
    expect(flagged).toEqual([]);
  });
});
