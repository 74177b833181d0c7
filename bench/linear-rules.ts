/**
 * Users' rules on the linear engine (re2js), side by side in one process: one diagnosis of a
 * 1 MB hostile error against the default table (V8, built-in regexes), against the defaults plus
 * a 40-rule user set (re2js), and the same 40 regexes matched by V8 over the same text where V8
 * is safe (no 55 s rule among them); then a set at the loader's bounds built to be slow (wide
 * counted repeats) to show the worst it accepts. Last, the rules `report --suggest-rules`
 * proposes for a 100 MB generated log of hostile UNKNOWN texts: each compiled by the linear
 * engine and checked by recheck (too slow for the suite: 1 to 9 s a rule).
 *
 * Run: npm run bench:linear-rules   (writes bench/results/linear-rules.json)
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkSync } from "recheck";
import { createSelfHealing } from "../dist/index.js";
import { readErrorFacts } from "../dist/diagnosis/error-facts.js";
import { compileLinear, MAX_PROGRAM_SIZE } from "../dist/diagnosis/linear-regex.js";
import { MAX_TOTAL_PROGRAM_SIZE } from "../dist/diagnosis/rules.js";
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
const recheck: Record<string, number> = {};
for (const rule of file.rules) {
  const [source = ""] = rule.match.message;
  if (!("reason" in compileLinear(new RegExp(source, "i")))) compiled++;
  const status = checkSync(source, "i", { timeout: 60_000 }).status;
  recheck[status] = (recheck[status] ?? 0) + 1;
}
console.log({ texts, bytes, rules: file.rules.length, compiled, recheck, suggestMs });

// ---- 40 user rules ---------------------------------------------------------------------------
const HAND_WRITTEN = [
  "credit balance|rate limit|quota exceeded|too many requests|service unavailable",
  String.raw`\bshard \d+ (refused|rejected) the write\b`,
  String.raw`index \d+ is stale`,
  String.raw`upstream (closed|reset|refused)`,
];
const suggested = file.rules.map((r) => r.match.message[0] ?? "");
const userRegexes = [...HAND_WRITTEN, ...suggested].slice(0, 40);
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
/** Slow on purpose, each just under MAX_PROGRAM_SIZE, as many as MAX_TOTAL_PROGRAM_SIZE takes. */
const ADVERSARIAL = Array.from(
  { length: 20 },
  (_, i) => `.{0,35}a.{0,35}b.{0,35}c.{0,35}${"defghijklmnopqrstuvw".charAt(i)}`,
);

const defaults = createSelfHealing({ agent: "bench" });
const users = createSelfHealing({
  agent: "bench",
  diagnosis: { ruleFile: ruleFile("user", userRegexes) },
});
const worst = createSelfHealing({
  agent: "bench",
  diagnosis: { ruleFile: ruleFile("worst", ADVERSARIAL) },
});

const random = (n: number, alphabet: string): string => {
  let x = 7;
  let out = "";
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    out += alphabet.charAt((x >> 8) % alphabet.length);
  }
  return out;
};
const HOSTILE = {
  "Upstream shard + 1 MB of !": new Error(`Upstream shard${"!".repeat(1_000_000)}`),
  "1 MB of ( then a@": new Error(`${"(".repeat(500_000)}${"a@".repeat(250_000)}`),
  "1 MB of random abcd": new Error(random(1_000_000, "abcd")),
};

const v8Regexes = userRegexes.map((s) => new RegExp(s, "i"));
const linearRegexes = userRegexes.map((s) => {
  const c = compileLinear(new RegExp(s, "i"));
  if ("reason" in c) throw new Error(c.reason);
  return c.pattern;
});

const cases: Record<string, () => Promise<unknown>> = {};
for (const [name, error] of Object.entries(HOSTILE)) {
  const text = readErrorFacts(error, 0).text; // what the rules see: the 4 KiB cut
  cases[`${name}: default table`] = () => defaults.diagnose(error);
  cases[`${name}: defaults + 40 user rules (re2js)`] = () => users.diagnose(error);
  cases[`${name}: the 40 regexes, re2js`] = () =>
    Promise.resolve(linearRegexes.some((re) => re.test(text)));
  cases[`${name}: the 40 regexes, V8`] = () =>
    Promise.resolve(v8Regexes.some((re) => re.test(text)));
  cases[`${name}: defaults + 20 slow-on-purpose rules at the bounds`] = () => worst.diagnose(error);
}
const ns = await measure(cases, { batch: 3, rounds: 5 });
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
  "+20 slow rules at the bounds ms": ms(
    `${name}: defaults + 20 slow-on-purpose rules at the bounds`,
  ),
}));
report(
  "linear-rules",
  rows,
  {
    bounds: { perRegex: MAX_PROGRAM_SIZE, total: MAX_TOTAL_PROGRAM_SIZE },
    suggestions: { texts, bytes, rules: file.rules.length, compiled, recheck },
  },
  { ns },
);
