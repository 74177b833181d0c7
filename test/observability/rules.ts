import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

export const ROOT = join(import.meta.dirname, "..", "..");
export const ALERTS_DIR = join(ROOT, "alerts");
/** selfheal's own alerts (they read selfheal_* metrics). */
export const SELFHEAL_RULES_FILE = join(ALERTS_DIR, "selfheal.rules.yml");
/** The Collector's health alerts (they read its otelcol_* metrics and `up`). */
export const COLLECTOR_RULES_FILE = join(ALERTS_DIR, "collector.rules.yml");

export interface AlertingRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RecordingRule {
  record: string;
  expr: string;
  labels?: Record<string, string>;
}

export interface RuleGroup {
  name: string;
  interval?: string;
  rules: (AlertingRule | RecordingRule)[];
}

export const isAlert = (rule: AlertingRule | RecordingRule): rule is AlertingRule =>
  "alert" in rule;

/** The rule files Prometheus loads (`*.rules.yml`); the promtool tests are `*.test.yml`. */
export const ruleFiles = (): string[] =>
  readdirSync(ALERTS_DIR)
    .filter((f) => f.endsWith(".rules.yml"))
    .sort()
    .map((f) => join(ALERTS_DIR, f));

export const ruleTestFiles = (): string[] =>
  readdirSync(ALERTS_DIR)
    .filter((f) => f.endsWith(".test.yml"))
    .sort()
    .map((f) => join(ALERTS_DIR, f));

export function loadGroups(file: string): RuleGroup[] {
  return (parse(readFileSync(file, "utf8")) as { groups: RuleGroup[] }).groups;
}

/** Every group of every rule file. */
export const allGroups = (): RuleGroup[] => ruleFiles().flatMap(loadGroups);

export const alertingRules = (groups = allGroups()): AlertingRule[] =>
  groups.flatMap((g) => g.rules.filter(isAlert));

/** A recorded series' name as a whole token: colons belong to it, so `\b` will not do. */
const token = (name: string) =>
  new RegExp(
    `(?<![A-Za-z0-9_:])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![A-Za-z0-9_:{])`,
    "g",
  );

/**
 * The expression with every recorded series replaced by the expression that records it, so it
 * means the same where the recording rules are not running: on backfilled data, or in Grafana's
 * own alerting. A recorded series used with label matchers cannot be inlined: that is an error.
 */
export function inlineRecordings(expr: string, groups = allGroups()): string {
  const recordings = groups.flatMap((g) => g.rules.filter((r): r is RecordingRule => !isAlert(r)));
  let out = expr.trim();
  for (let depth = 0; depth < 10; depth++) {
    let changed = false;
    for (const r of recordings) {
      if (new RegExp(`${r.record}\\s*[{[]`).test(out))
        throw new Error(`${r.record} is used with matchers or a range: inline it by hand`);
      const next = out.replace(token(r.record), () => `(${r.expr.trim()})`);
      if (next !== out) {
        out = next;
        changed = true;
      }
    }
    if (!changed) return out;
  }
  throw new Error("recording rules nest too deep (a cycle?)");
}

/** Metric names an expression reads: identifiers starting `selfheal_` (recorded names have `:`). */
export function metricNames(expr: string): string[] {
  const names = new Set<string>();
  // Label values and strings are not names: drop quoted text first.
  const code = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  for (const m of code.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    if (m[0].startsWith("selfheal_")) names.add(m[0]);
  }
  return [...names];
}
