import { SelfHealConfigError } from "../../errors.js";
import { boundedJson, redact } from "../../telemetry/redact.js";

/** An options object as the user passed it, before validation. */
export type Plain = Record<string, unknown>;

/** A bad value, briefly, for an error message. */
export function show(value: unknown): string {
  return redact(boundedJson(value) ?? typeof value, 80); // redacted before it is cut
}

function isPlain(value: unknown): value is Plain {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What a value is, for "expected …, got …" messages: `null` and arrays by name. */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/** `key` under `field`; the top level has no field, so its keys stand alone. */
function path(field: string, key: string): string {
  return field ? `${field}.${key}` : key;
}

export function object(value: unknown, field: string): Plain {
  if (!isPlain(value))
    throw new SelfHealConfigError(field, `expected an object, got ${kindOf(value)}`);
  return value;
}

/** An optional section: omitted reads as empty, so callers check one shape. */
export function optionalObject(value: unknown, field: string): Plain {
  return value === undefined ? {} : object(value, field);
}

/** An optional list; `what` names its items in the message. */
export function optionalList(value: unknown, field: string, what: string): readonly unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new SelfHealConfigError(field, `expected a list of ${what}`);
  return value;
}

/** An object with the methods selfheal calls on it, each named when missing. */
export function withMethods(value: unknown, field: string, methods: readonly string[]): void {
  const o = object(value, field);
  for (const method of methods) {
    if (typeof o[method] !== "function")
      throw new SelfHealConfigError(field, `missing method ${method}()`);
  }
}

/**
 * The longest timer Node.js runs: a longer delay is replaced by 1 ms with a warning
 * (TimeoutOverflowWarning), so a timeout of 2^31 ms would fire at once on every call.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A typo in an option name fails loudly instead of silently keeping the default. */
export function knownKeys(value: Plain, allowed: readonly string[], field: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new SelfHealConfigError(
        path(field, key),
        `unknown option (known: ${allowed.join(", ")})`,
      );
    }
  }
}

export interface NumberRule {
  min?: number;
  max?: number;
  integer?: boolean;
  nullable?: boolean;
}

/** Rules of a group of numeric fields, by field name (the order is the order of checks). */
export type NumberRules = Readonly<Record<string, NumberRule>>;

export function number(value: unknown, field: string, rule: NumberRule = {}): void {
  if (value === null && rule.nullable) return;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new SelfHealConfigError(
      field,
      `expected a finite number${rule.nullable ? " or null" : ""}, got ${String(value)}`,
    );
  }
  if (rule.integer && !Number.isInteger(value))
    throw new SelfHealConfigError(field, `expected an integer, got ${value}`);
  if (rule.min !== undefined && value < rule.min)
    throw new SelfHealConfigError(field, `must be >= ${rule.min}, got ${value}`);
  if (rule.max !== undefined && value > rule.max) {
    const why =
      rule.max === MAX_TIMER_MS ? " (the longest timer Node.js runs, about 24.8 days)" : "";
    throw new SelfHealConfigError(field, `must be <= ${rule.max}${why}, got ${value}`);
  }
}

/** The fields of `rules` that are set in `values`, each checked against its rule; other keys pass. */
export function numbers(values: Plain, rules: NumberRules, field: string): void {
  for (const [key, rule] of Object.entries(rules)) {
    if (values[key] !== undefined) number(values[key], path(field, key), rule);
  }
}

/** An optional group made of numbers only (backoff, ledger, drift, a threshold group). */
export function numberGroup(value: unknown, rules: NumberRules, field: string): Plain {
  const group = optionalObject(value, field);
  knownKeys(group, Object.keys(rules), field);
  numbers(group, rules, field);
  return group;
}

export function nonEmptyString(value: unknown, field: string): asserts value is string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new SelfHealConfigError(field, `expected a non-empty string, got ${show(value)}`);
  }
}

export function optionalString(value: unknown, field: string): void {
  if (value !== undefined) nonEmptyString(value, field);
}

/** One of a few literal strings, or undefined. */
export function optionalChoice<C extends string>(
  value: unknown,
  choices: readonly C[],
  field: string,
): C | undefined {
  if (value === undefined || choices.includes(value as C)) return value as C | undefined;
  const expected = choices.map((c) => `"${c}"`).join(" or ");
  throw new SelfHealConfigError(field, `expected ${expected}, got ${show(value)}`);
}

export function optionalFunction(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== "function") {
    throw new SelfHealConfigError(field, `expected a function, got ${typeof value}`);
  }
}

export function optionalBoolean(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== "boolean") {
    throw new SelfHealConfigError(field, `expected true or false, got ${show(value)}`);
  }
}

/**
 * The candidate `name` is most likely a typo of, if any: a different spelling at most one edit
 * away (two for names of 8 characters or more; none for names under 5, too short to tell),
 * letters compared regardless of case. A swap of two neighbours counts as one edit.
 */
export function typoOf(name: string, candidates: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  const allowed = lower.length >= 8 ? 2 : lower.length >= 5 ? 1 : 0;
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    if (candidate === name) return undefined;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance <= allowed && (!best || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

/** Edits (insert, delete, replace, swap of neighbours) from `a` to `b`; 3 for "far apart". */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2 || a.length > 64 || b.length > 64) return 3;
  // d[i][j]: edits from the first i letters of a to the first j of b.
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] ?? [];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}

/** A share between 0 and 1, or null for a level that is off. */
export const SHARE: NumberRule = { min: 0, max: 1, nullable: true };
export const COUNT: NumberRule = { min: 0, integer: true };
/** A duration in ms, at least `min`, at most the longest timer Node.js runs. */
export const ms = (min: number): NumberRule => ({ min, max: MAX_TIMER_MS });
