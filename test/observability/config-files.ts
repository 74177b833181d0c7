/**
 * Reading the repository's YAML configuration files (collector/, docker-compose.yml,
 * prometheus/) in the static tests: strict parsing and typed access to what was parsed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocument } from "yaml";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

export type YamlRecord = Record<string, unknown>;

export function isRecord(value: unknown): value is YamlRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `value` as a mapping; `where` names it in the failure. */
export function record(value: unknown, where: string): YamlRecord {
  if (!isRecord(value))
    throw new Error(`${where}: expected a mapping, got ${JSON.stringify(value)}`);
  return value;
}

/** `value` as a mapping, or an empty one when absent (a section that may be left out). */
export function optionalRecord(value: unknown, where: string): YamlRecord {
  return value === undefined || value === null ? {} : record(value, where);
}

export function strings(value: unknown, where: string): string[] {
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === "string")) {
    throw new Error(`${where}: expected a list of strings, got ${JSON.stringify(value)}`);
  }
  return value;
}

export function list(value: unknown, where: string): unknown[] {
  if (!Array.isArray(value))
    throw new Error(`${where}: expected a list, got ${JSON.stringify(value)}`);
  return value;
}

/** Parses a YAML file of the repository; duplicate keys and syntax errors fail. */
export function loadYaml(relativePath: string): { text: string; root: YamlRecord } {
  const text = readFileSync(join(ROOT, relativePath), "utf8");
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const problems = [...doc.errors, ...doc.warnings].map((e) => e.message);
  if (problems.length > 0) throw new Error(`${relativePath}:\n${problems.join("\n")}`);
  return { text, root: record(doc.toJS(), relativePath) };
}

/** Every (path, key, value) below `node`, depth first. */
export function* walk(
  node: unknown,
  path: string[] = [],
): Generator<{ path: string[]; key: string; value: unknown }> {
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) yield* walk(item, [...path, String(i)]);
  } else if (isRecord(node)) {
    for (const [key, value] of Object.entries(node)) {
      yield { path: [...path, key], key, value };
      yield* walk(value, [...path, key]);
    }
  }
}

/** `${env:NAME}` or `${env:NAME:-default}`, the whole value (the Collector's env provider). */
const ENV_REF = /^\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}$/;

export function envRef(value: unknown): { name: string; fallback: string | undefined } | undefined {
  if (typeof value !== "string") return undefined;
  const match = ENV_REF.exec(value);
  if (match?.[1] === undefined) return undefined;
  return { name: match[1], fallback: match[2] };
}

/** The names of every `${env:NAME...}` in a Collector configuration's text. */
export function collectorEnvNames(text: string): string[] {
  return [...text.matchAll(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1] ?? "");
}

/** The names of every `${NAME...}` interpolation in a Compose file's text. */
export function composeEnvNames(text: string): string[] {
  return [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1] ?? "");
}

/** A value as written, or the default of its `${env:...:-default}` reference. */
export function withDefault(value: unknown): unknown {
  const ref = envRef(value);
  return ref === undefined ? value : ref.fallback;
}

/** Go duration strings as the Collector writes them (`250ms`, `1s`, `2m`), in seconds. */
export function durationSeconds(text: string): number {
  const units: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text);
  const unit = match?.[2];
  if (match?.[1] === undefined || unit === undefined) throw new Error(`not a duration: ${text}`);
  return Number(match[1]) * (units[unit] ?? Number.NaN);
}
