/**
 * Users' rules on the linear engine (re2js), side by side in one process: one diagnosis of a
 * 1 MB hostile error against the default table (V8, built-in regexes), against the defaults plus
 * a 40-rule user set (re2js), the same 40 regexes matched by V8 where V8 is safe; then the worst
 * rule sets the loader accepts (MAX_MATCH_COST): as many regexes as it takes whose DFA is built at
 * load, and sets of regexes whose DFA is too large to build (wide counted repeats, the classic
 * DFA blow-up), each regex fed a fresh text at every call, found by an adversarial search over
 * its rune classes, so that no call finds its states cached. Last, the rules
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
import { readErrorFacts } from "../dist/diagnosis/error-facts.js";
import {
  compileLinear,
  DFA_STEP_COST,
  MAX_MATCH_COST,
  MAX_PROGRAM_SIZE,
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
 * Regexes whose DFA is too large to build, sets at MAX_MATCH_COST: one at the largest size taken,
 * several mid-sized, many small (the per-regex constant counts most there).
 */
const WIDE: Record<string, readonly string[]> = {
  "1 regex of wide counted repeats": [".{0,35}a.{0,35}b.{0,35}c.{0,6}d"],
  "4 regexes of counted repeats": Array.from(
    { length: 4 },
    (_, i) => `.{0,12}a.{0,12}b.{0,${8 + i}}c`,
  ),
  "8 DFA blow-ups": Array.from({ length: 8 }, (_, i) => `[ab]*a[ab]{${18 + i}}`),
};
for (const [name, set] of Object.entries(WIDE))
  if (costOf(set) > MAX_MATCH_COST) throw new Error(`${name}: ${costOf(set)} > ${MAX_MATCH_COST}`);

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
 * The adversarial search: for each regex, random 4 KiB texts over its rune classes' letters with
 * one class left out (so that no match ends the scan early), run on a fresh compile; the alphabet
 * that costs most per call wins. Returned: the alphabet that is worst for the set as a whole.
 */
function worstAlphabet(set: readonly string[]): string {
  const letters = [...new Set(set.join("").replace(/[^a-z]/g, "") + "xyz .!")].join("");
  let worst = letters;
  let worstMs = 0;
  for (let drop = 0; drop <= letters.length; drop++) {
    const alphabet = letters.slice(0, drop) + letters.slice(drop + 1);
    const patterns = set.map((s) => {
      const c = compileLinear(new RegExp(s, "i"));
      if ("reason" in c) throw new Error(c.reason);
      return c.pattern;
    });
    const times: number[] = [];
    for (let k = 0; k < 5; k++) {
      const text = random(4096, alphabet);
      const started = performance.now();
      for (const p of patterns) p.test(text);
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
const wide = Object.fromEntries(
  Object.entries(WIDE).map(([name, set]) => [
    name,
    { sh: instance(name.replace(/\W+/g, "-"), set), alphabet: worstAlphabet(set) },
  ]),
);

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
// The wide sets, each on its own worst text, fresh at each call; beside the default table on it.
for (const [name, { sh, alphabet }] of Object.entries(wide)) {
  const make = fresh(alphabet);
  cases[`worst for ${name}: default table`] = () => defaults.diagnose(make());
  cases[`worst for ${name}: defaults + the set at the bound`] = () => sh.diagnose(make());
}
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
const worstCases = Object.entries(wide).map(([name, { alphabet }]) => ({
  set: name,
  cost: costOf(WIDE[name] ?? []),
  "worst text's letters": alphabet,
  "default table ms": ms(`worst for ${name}: default table`),
  "defaults + set ms": ms(`worst for ${name}: defaults + the set at the bound`),
}));
report(
  "linear-rules",
  [...rows, ...worstCases],
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
