/**
 * Users' rules on the linear engine (re2js), side by side in one process: one diagnosis of a
 * 1 MB hostile error against the default table (V8, built-in regexes), against the defaults plus
 * 30 user rules (re2js: 4 written by hand, the rest suggested), the same regexes matched by V8
 * where V8 is safe; the worst rule set the loader accepts (MAX_MATCH_COST: 60 regexes, each DFA
 * built at load); and what the regexes it refuses (DFA too large to build at load) would cost,
 * each on a fresh text at every call found by an adversarial search over its letters, so that no
 * call finds its states cached. Errors are made anew at every call (a fresh 4 KiB head where the
 * text varies): the default-table column includes making them. Last, the rules
 * `report --suggest-rules` proposes for a 100 MB generated log of hostile UNKNOWN texts: each
 * compiled by the linear engine and checked by recheck (too slow for the suite: 1 to 9 s a rule).
 *
 * Run: npm run bench:linear-rules   (writes bench/results/linear-rules.json)
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkSync } from "recheck";
import { createSelfHealing } from "../dist/index.js";
import { RE2JS } from "re2js";
import { readErrorFacts } from "../dist/diagnosis/error-facts.js";
import {
  compileLinear,
  DFA_STEP_COST,
  MAX_MATCH_COST,
  MAX_PROGRAM_SIZE,
  toRe2Syntax,
} from "../dist/diagnosis/linear-regex.js";
import { RuleSuggester } from "../dist/report/suggest-rules.js";
import { measure, report } from "./harness.js";

/** Hostile UNKNOWN texts and ordinary ones, as a log would hold them. */
const SHAPES: readonly ((i: number) => string)[] = [
  (i) => `Upstream shard ${i} refused the write`,
  (i) => `Upstream shard ${"!".repeat(i % 300)} refused... the write (${i})`,
  (i) => `quota: ${"(".repeat(i % 50)} budget ${i} spent !!! ${")".repeat(i % 40)}`,
  (i) => `worker-${i % 7} said: ${":".repeat(1 + (i % 5))} try again later`,
  (i) => `x${"y".repeat(200 + (i % 90))} invalid token at ${i}`,
  (i) => `${"\\".repeat(i % 9)}[*] {${i}} $^ .+? | timeout`,
  (i) => `a\u00a0b ${i} \u202e reset by peer --- ${"-".repeat(i % 70)}`,
  (i) => `gateway ${i % 13} says: upstream ${"=".repeat(i % 33)} closed, retry`,
  (i) => `tool lookup-${i % 11} failed: index ${i} is stale (${"#".repeat(i % 20)})`,
];

// ---- the 100 MB log's suggestions ------------------------------------------------------------
const LOG_BYTES = 100 * 1024 * 1024;
const suggester = new RuleSuggester();
let bytes = 0;
let texts = 0;
const started = performance.now();
for (let i = 0; bytes < LOG_BYTES; i++) {
  const error = (SHAPES[i % SHAPES.length] as (i: number) => string)(i);
  // A log line: the event's JSON around the text (about 120 bytes more).
  bytes += error.length + 120;
  texts++;
  suggester.add({ at: 1_000 + i, tool: `t${i % 5}`, error, outcome: "failed" });
}
const { file } = suggester.suggest("bench");
const suggestMs = performance.now() - started;
let compiled = 0;
let suggestedCost = 0;
const recheck: Record<string, number> = {};
for (const rule of file.rules) {
  const [source = ""] = rule.match.message;
  const linear = compileLinear(new RegExp(source, "i"));
  if (!("reason" in linear)) {
    compiled++;
    suggestedCost += linear.cost;
  }
  const status = checkSync(source, "i", { timeout: 60_000 }).status;
  if (status !== "safe") console.log(status, source);
  recheck[status] = (recheck[status] ?? 0) + 1;
}
console.log({
  texts,
  bytes,
  rules: file.rules.length,
  compiled,
  suggestedCost,
  recheck,
  suggestMs,
});

// ---- 40 user rules ---------------------------------------------------------------------------
const HAND_WRITTEN = [
  "credit balance|rate limit|quota exceeded|too many requests|service unavailable",
  String.raw`\bshard \d+ (refused|rejected) the write\b`,
  String.raw`index \d+ is stale`,
  String.raw`upstream (closed|reset|refused)`,
];
const suggested = file.rules.map((r) => r.match.message[0] ?? "");
const userRegexes = [...HAND_WRITTEN, ...suggested].slice(0, 40);
const costOf = (sources: readonly string[]): number =>
  sources.reduce((sum, s) => {
    const c = compileLinear(new RegExp(s, "i"));
    if ("reason" in c) throw new Error(`${s}: ${c.reason}`);
    return sum + c.cost;
  }, 0);

/** Regexes whose DFA is built at load: as many as MAX_MATCH_COST takes (distinct phrases). */
const BUILT = Array.from(
  { length: MAX_MATCH_COST / DFA_STEP_COST },
  (_, i) => String.raw`upstream\s+shard\s+\S+\s+refused\s+the\s+write\s+${i}\s+\S+\s+now`,
);
/**
 * What the loader refuses, and why: regexes whose DFA is too large to build at load, run by re2js
 * directly, each on a fresh worst text at every call (no state found cached).
 */
const REFUSED: Record<string, string> = {
  "wide counted repeats (229 instructions)": ".{0,35}a.{0,35}b.{0,35}c.{0,6}d",
  "3 counted repeats (75 instructions)": ".{0,12}a.{0,12}b.{0,10}c",
  "DFA blow-up (27 instructions)": "[ab]*a[ab]{20}",
};
for (const [name, source] of Object.entries(REFUSED))
  if (!("reason" in compileLinear(new RegExp(source, "i"))))
    throw new Error(`${name} is no longer refused`);

const dir = mkdtempSync(join(tmpdir(), "selfheal-bench-"));
const ruleFile = (name: string, regexes: readonly string[]): string => {
  const path = join(dir, `${name}.json`);
  const rules = regexes.map((message, i) => ({
    name: `${name}-${i}`,
    pattern: "SERVICE_DOWN",
    confidence: 0.6,
    match: { message: [message] },
  }));
  writeFileSync(path, JSON.stringify({ version: 1, rules }));
  return path;
};
const instance = (name: string, regexes: readonly string[]) =>
  createSelfHealing({ agent: "bench", diagnosis: { ruleFile: ruleFile(name, regexes) } });

let seed = 7;
const random = (n: number, alphabet: string): string => {
  let out = "";
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    out += alphabet.charAt((seed >> 8) % alphabet.length);
  }
  return out;
};
/** 1 MB of error behind a fresh 4 KiB head (what the rules see), a new one each call. */
const TAIL = "!".repeat(1_000_000);
const fresh = (alphabet: string) => () => new Error(random(4096, alphabet) + TAIL);

/**
 * The adversarial search for a refused regex: random 4 KiB texts over its letters and a few
 * others, each alphabet with one letter left out, and its own letters alone with one left out (so
 * that no match ends the scan early, and every character may reach a new state); the alphabet
 * that costs most per call (median of 5 fresh texts, fresh compile) wins.
 */
function worstAlphabet(source: string): string {
  const own = [...new Set(source.replace(/[^a-z]/g, ""))].join("");
  const candidates = [own + "xyz .!", own].flatMap((letters) =>
    Array.from(
      { length: letters.length },
      (_, drop) => letters.slice(0, drop) + letters.slice(drop + 1),
    ),
  );
  let worst = own;
  let worstMs = 0;
  for (const alphabet of candidates) {
    if (alphabet === "") continue;
    const re = RE2JS.compile(toRe2Syntax(source, "i"), RE2JS.CASE_INSENSITIVE);
    const times: number[] = [];
    for (let k = 0; k < 5; k++) {
      const text = random(4096, alphabet);
      const started = performance.now();
      re.test(text);
      times.push(performance.now() - started);
    }
    const median = times.sort((a, b) => a - b)[2] ?? 0;
    if (median > worstMs) [worst, worstMs] = [alphabet, median];
  }
  return worst;
}

const defaults = createSelfHealing({ agent: "bench" });
const users = instance("user", userRegexes);
const built = instance("built", BUILT);
const refused = Object.entries(REFUSED).map(([name, source]) => ({
  name,
  source,
  re: RE2JS.compile(toRe2Syntax(source, "i"), RE2JS.CASE_INSENSITIVE),
  alphabet: worstAlphabet(source),
}));

const HOSTILE = {
  "Upstream shard + 1 MB of !": () => new Error(`Upstream shard${"!".repeat(1_000_000)}`),
  "1 MB of ( then a@": () => new Error(`${"(".repeat(500_000)}${"a@".repeat(250_000)}`),
  "fresh random abcd head, 1 MB": fresh("abcd"),
  "fresh random phrase letters head, 1 MB": fresh("upstreamshardrefusedthewrite \t!0123456789"),
};

const v8Regexes = userRegexes.map((s) => new RegExp(s, "i"));
const linearRegexes = userRegexes.map((s) => {
  const c = compileLinear(new RegExp(s, "i"));
  if ("reason" in c) throw new Error(c.reason);
  return c.pattern;
});

const cases: Record<string, () => Promise<unknown>> = {};
for (const [name, make] of Object.entries(HOSTILE)) {
  cases[`${name}: default table`] = () => defaults.diagnose(make());
  cases[`${name}: defaults + 40 user rules (re2js)`] = () => users.diagnose(make());
  cases[`${name}: the 40 regexes, re2js`] = () => {
    const text = readErrorFacts(make(), 0).text; // what the rules see: the 4 KiB cut
    return Promise.resolve(linearRegexes.some((re) => re.test(text)));
  };
  cases[`${name}: the 40 regexes, V8`] = () => {
    const text = readErrorFacts(make(), 0).text;
    return Promise.resolve(v8Regexes.some((re) => re.test(text)));
  };
  cases[`${name}: defaults + ${BUILT.length} built-DFA rules at the bound`] = () =>
    built.diagnose(make());
}
// The refused regexes, each on its own worst text, fresh at each call (1 MB: the 4 KiB cut).
for (const { name, re, alphabet } of refused)
  cases[`refused, ${name}`] = () => Promise.resolve(re.test(random(4096, alphabet)));
cases["a fresh 4 KiB text alone"] = () => Promise.resolve(random(4096, "abc").length);
const ns = await measure(cases, { batch: 3, rounds: 7 });
const ms = (name: string) => Number(((ns[name] ?? NaN) / 1e6).toFixed(3));
const rows = Object.keys(HOSTILE).map((name) => ({
  error: name,
  "default table ms": ms(`${name}: default table`),
  "+40 user rules ms": ms(`${name}: defaults + 40 user rules (re2js)`),
  "40 regexes re2js ms": ms(`${name}: the 40 regexes, re2js`),
  "40 regexes V8 ms": ms(`${name}: the 40 regexes, V8`),
  "re2js / V8": Number(
    (ms(`${name}: the 40 regexes, re2js`) / ms(`${name}: the 40 regexes, V8`)).toFixed(1),
  ),
  [`+${BUILT.length} built-DFA rules at the bound ms`]: ms(
    `${name}: defaults + ${BUILT.length} built-DFA rules at the bound`,
  ),
}));
const refusedRows = refused.map(({ name, source, alphabet }) => ({
  "refused at load": name,
  source,
  "worst text's letters": alphabet,
  "re2js ms a call": Number((ms(`refused, ${name}`) - ms("a fresh 4 KiB text alone")).toFixed(3)),
}));
report(
  "linear-rules",
  [...rows, ...refusedRows],
  {
    bounds: {
      perRegexInstructions: MAX_PROGRAM_SIZE,
      matchCost: MAX_MATCH_COST,
      builtDfaCost: DFA_STEP_COST,
    },
    costs: {
      "40 user rules": costOf(userRegexes),
      [`${BUILT.length} built-DFA rules`]: costOf(BUILT),
    },
    suggestions: { texts, bytes, rules: file.rules.length, compiled, cost: suggestedCost, recheck },
  },
  { ns },
);
