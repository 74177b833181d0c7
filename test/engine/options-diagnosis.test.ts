/**
 * `diagnosis` options as the engine resolves them (src/engine/options/diagnosis.ts): the rule
 * table (given, built from the defaults, or with rule files after it), status pages, drift and
 * the advisor's defaults. End to end, through createSelfHealing, in test/diagnosis/.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_ADVICE_TIMEOUT_MS } from "../../src/diagnosis/advisor.js";
import { DEFAULT_DRIFT } from "../../src/diagnosis/drift.js";
import { DEFAULT_RULES, type Rule } from "../../src/diagnosis/rules.js";
import {
  DEFAULT_STATUS_PAGE_CACHE_MS,
  DEFAULT_STATUS_PAGE_TIMEOUT_MS,
} from "../../src/diagnosis/status-page.js";
import { resolveDiagnosis } from "../../src/engine/options/diagnosis.js";
import { configError } from "../helpers/engine.js";

/** The message of the SelfHealConfigError `fn` throws. */
const refused = (fn: () => unknown): string => configError(fn).message;

const dir = mkdtempSync(join(tmpdir(), "selfheal-options-diagnosis-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A rule file holding one wording rule named `name`; its path. */
function ruleFile(file: string, name: string, message = "budget spent"): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    JSON.stringify({
      version: 1,
      source: "test",
      rules: [{ name, pattern: "RATE_LIMIT", confidence: 0.6, match: { message: [message] } }],
    }),
  );
  return path;
}

const names = (input: unknown) => resolveDiagnosis(input).rules.map((r) => r.name);
const defaultNames = DEFAULT_RULES.map((r) => r.name);

describe("resolveDiagnosis: the rule table", () => {
  it("is the default rules when none are given", () => {
    expect(names(undefined)).toEqual(defaultNames);
    expect(names({})).toEqual(defaultNames);
  });

  it("is exactly the table given, or what a function builds from the defaults", () => {
    const own: Rule = { ...(DEFAULT_RULES[0] as Rule), name: "only-mine" };
    expect(names({ rules: [own] })).toEqual(["only-mine"]);
    let seen: readonly Rule[] = [];
    expect(
      names({
        rules: (defaults: readonly Rule[]) => {
          seen = defaults;
          return [own, ...defaults];
        },
      }),
    ).toEqual(["only-mine", ...defaultNames]);
    expect(seen).toBe(DEFAULT_RULES);
  });

  it("refuses null and a table that is not a list", () => {
    expect(refused(() => resolveDiagnosis({ rules: null }))).toMatch(/diagnosis\.rules/);
    expect(refused(() => resolveDiagnosis({ rules: "all" }))).toMatch(/diagnosis\.rules/);
  });
});

describe("resolveDiagnosis: rule files", () => {
  it("adds a file's rules after the table, one path or several in order", () => {
    const a = ruleFile("a.json", "from-a");
    const b = ruleFile("b.json", "from-b", "shard rebalancing");
    expect(names({ ruleFile: a })).toEqual([...defaultNames, "from-a"]);
    expect(names({ ruleFile: [a, b] })).toEqual([...defaultNames, "from-a", "from-b"]);
    expect(names({ ruleFile: [] })).toEqual(defaultNames);
  });

  it("refuses what is not a path or a list of non-empty paths, naming the value", () => {
    for (const [value, shown] of [
      [42, "42"],
      ["", '""'],
      [[join(dir, "x.json"), ""], ""],
      [[7], "[7]"],
      [{ path: "x" }, ""],
    ] as const) {
      const message = refused(() => resolveDiagnosis({ ruleFile: value }));
      expect(message).toContain("diagnosis.ruleFile");
      expect(message).toContain("expected a path or a list of paths, got");
      if (shown) expect(message).toContain(shown);
    }
  });

  it("names the file of a bad rule, without the option prefix twice", () => {
    const bad = join(dir, "bad.json");
    writeFileSync(
      bad,
      JSON.stringify({
        version: 1,
        rules: [
          { name: "x", pattern: "NOT_A_PATTERN", confidence: 0.5, match: { message: ["y"] } },
        ],
      }),
    );
    const message = refused(() => resolveDiagnosis({ ruleFile: [ruleFile("ok.json", "ok"), bad] }));
    expect(
      message.startsWith(
        `selfheal: invalid option \`diagnosis.ruleFile\`: ${bad}: \`diagnosis.rules["x"].pattern\`: unknown pattern "NOT_A_PATTERN" (known: `,
      ),
    ).toBe(true);
  });

  it("a rule name in a file and in the table at once is refused", () => {
    const dup = ruleFile("dup.json", defaultNames[0] ?? "");
    expect(refused(() => resolveDiagnosis({ ruleFile: dup }))).toMatch(/diagnosis\.rules/);
  });
});

describe("resolveDiagnosis: status pages, drift and the advisor", () => {
  it("takes http and https status pages, and nothing else", () => {
    const pages = { openai: "https://status.openai.com", local: "http://127.0.0.1:9/x" };
    expect(resolveDiagnosis({ statusPages: pages }).statusPages).toEqual(pages);
    for (const url of ["ftp://status.example", "status.example", "https//x", 7, "javascript:x"]) {
      expect(refused(() => resolveDiagnosis({ statusPages: { p: url } }))).toContain(
        "diagnosis.statusPages.p",
      );
    }
    expect(refused(() => resolveDiagnosis({ statusPages: { p: "httpsx://a" } }))).toContain(
      "expected an http(s) URL",
    );
  });

  it("fills what is not given with the defaults, and keeps what is", () => {
    const d = resolveDiagnosis({});
    expect(d.drift).toEqual(DEFAULT_DRIFT);
    expect(d.statusPageTimeoutMs).toBe(DEFAULT_STATUS_PAGE_TIMEOUT_MS);
    expect(d.statusPageCacheMs).toBe(DEFAULT_STATUS_PAGE_CACHE_MS);
    expect(d.escalateTimeoutMs).toBe(DEFAULT_ADVICE_TIMEOUT_MS);
    expect(d.escalateUnknown).toBeUndefined();
    expect(d.statusPageFetch).toBeUndefined();
    const advisor = () => Promise.resolve(undefined);
    const own = resolveDiagnosis({
      drift: { threshold: 0.2 },
      statusPageTimeoutMs: 500,
      statusPageCacheMs: 1_000,
      escalateTimeoutMs: 250,
      escalateUnknown: advisor,
      fetch,
    });
    expect(own.drift).toEqual({ ...DEFAULT_DRIFT, threshold: 0.2 });
    expect(own.statusPageTimeoutMs).toBe(500);
    expect(own.statusPageCacheMs).toBe(1_000);
    expect(own.escalateTimeoutMs).toBe(250);
    expect(own.escalateUnknown).toBe(advisor);
    expect(own.statusPageFetch).toBe(fetch);
  });
});
