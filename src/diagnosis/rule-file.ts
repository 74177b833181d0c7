/**
 * Rule files: diagnosis rules kept as JSON, as `selfheal report --suggest-rules` writes them,
 * loaded by `createSelfHealing({ diagnosis: { ruleFile } })`. Regexes are strings there, read as
 * JavaScript regexes and matched case-insensitively; each rule then goes through the same
 * validator as rules given in code (compileRules: known patterns and strategies, regexes the
 * linear-time engine runs).
 */
import { readFileSync, statSync } from "node:fs";
import { SelfHealConfigError } from "../errors.js";
import { notRegularFile } from "../file-kind.js";
import type { Matcher, Rule } from "./rules.js";

/** Largest rule file read, bytes: a rule file is a few KB; more is not a rule file. */
const MAX_BYTES = 1024 * 1024;
const FIELD = "diagnosis.ruleFile";

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** One matcher of the file, its `message` strings compiled (`i`). */
function matcher(value: unknown, where: string, path: string): Matcher {
  if (!isObject(value)) return value as Matcher; // compileRules names what it should be
  const { message, ...rest } = value;
  if (message === undefined) return rest;
  if (!Array.isArray(message) || !message.every((m) => typeof m === "string"))
    throw new SelfHealConfigError(
      FIELD,
      `${path}: ${where}.message: expected a list of regex strings`,
    );
  return {
    ...rest,
    message: message.map((source: string, i) => {
      try {
        return new RegExp(source, "i");
      } catch (error) {
        throw new SelfHealConfigError(
          FIELD,
          `${path}: ${where}.message[${i}]: not a regex (${(error as Error).message})`,
        );
      }
    }),
  };
}

/**
 * The rules of a rule file's text: `{ "version": 1, "rules": [...] }`. Each rule's `evidence`
 * (why it was proposed) is for people and left out. The rules are not validated here:
 * createSelfHealing validates them with the rest of the table.
 */
export function parseRuleFile(text: string, path: string): Rule[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new SelfHealConfigError(FIELD, `${path}: not JSON (${(error as Error).message})`);
  }
  if (!isObject(value) || value.version !== 1 || !Array.isArray(value.rules))
    throw new SelfHealConfigError(
      FIELD,
      `${path}: expected { "version": 1, "rules": [...] } (as selfheal report --suggest-rules writes)`,
    );
  return value.rules.map((rule: unknown, i) => {
    if (!isObject(rule)) return rule as Rule;
    const { match, ...rest } = rule;
    delete rest.evidence;
    const where = `rules[${i}].match`;
    return {
      ...rest,
      match: Array.isArray(match)
        ? match.map((m, j) => matcher(m, `${where}[${j}]`, path))
        : matcher(match, where, path),
    } as Rule;
  });
}

/** The rules of the rule file at `path` (read once, when selfheal is created). */
export function readRuleFile(path: string): Rule[] {
  let text: string;
  try {
    // A regular file of sane size: a FIFO or a device would block or never end.
    const stats = statSync(path);
    const notRegular = notRegularFile(stats);
    if (notRegular !== undefined) throw new SelfHealConfigError(FIELD, `${path}: ${notRegular}`);
    if (stats.size > MAX_BYTES)
      throw new SelfHealConfigError(FIELD, `${path}: larger than ${MAX_BYTES} bytes`);
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (error instanceof SelfHealConfigError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new SelfHealConfigError(FIELD, `cannot read ${path} (${code})`);
  }
  return parseRuleFile(text, path);
}
