/**
 * The log lines `--suggest-thresholds` reads, checked: the engine's `calls` rollups (with a reader
 * of the engine's own form that needs no JSON.parse), health `thresholds` settings, the watchdog's
 * `steps` rollups and `limits`; and the thresholds a settings line holds, each field defaulted.
 */
import type { CallRollupLine } from "../engine/call-rollup.js";
import type { HealthThresholds } from "../health/thresholds.js";
import { bucketsProblem } from "../telemetry/log-buckets.js";

const isCount = (v: unknown): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Why a `calls` line is not one (`CallRollupLine`), or undefined when it is. */
export function callsProblem(e: Record<string, unknown>): string | undefined {
  for (const key of ["agent", "tool"])
    if (typeof e[key] !== "string") return `${key} is not a string`;
  for (const key of ["ok", "failed", "llm", "empty"])
    if (!isCount(e[key])) return `${key} is not a count`;
  if ((e.empty as number) > (e.llm as number)) return "empty is more than llm";
  const problem = bucketsProblem(e.latencyMs);
  return problem === undefined ? undefined : `latencyMs: ${problem}`;
}

/** A `calls` line's fields, but its type and buckets. */
export type CallsCounts = Omit<CallRollupLine, "type" | "latencyMs">;

const JSON_STRING = String.raw`"((?:[^"\\\x00-\x1f]|\\.)*)"`;
const COUNT = String.raw`(0|[1-9]\d{0,14})`;
/** A bucket index up to MAX_BUCKET (400), leading zeros allowed as Number reads them. */
const BUCKET = String.raw`(?:[0-3]\d{2}|400|\d{1,2})`;
const PAIR = String.raw`"${BUCKET}":[1-9]\d{0,14}`;
/**
 * A `calls` line exactly as the engine writes it (JSON.stringify: these keys in this order, no
 * space). Most lines of a log are rollups: read so, they cost a regex match instead of a parse.
 */
const CALLS_LINE = new RegExp(
  String.raw`^\{"type":"calls","at":(0|[1-9]\d{0,15}),"agent":${JSON_STRING},"tool":${JSON_STRING},"ok":${COUNT},"failed":${COUNT},"llm":${COUNT},"empty":${COUNT},"latencyMs":\{((?:${PAIR})(?:,${PAIR})*)?\}\}$`,
);
/**
 * A string literal's content, unescaped (only a content with a backslash needs parsing);
 * undefined for a bad escape.
 */
function unquote(s: string): string | undefined {
  if (!s.includes("\\")) return s;
  try {
    return JSON.parse(`"${s}"`) as string;
  } catch {
    return undefined;
  }
}

/**
 * A `calls` line in the engine's own form, read without JSON.parse: its counts and its buckets
 * (as their text). Undefined for any other line, or one that breaks a rule callsProblem checks
 * (a time past Date's range, more empty than LLM calls, a bucket past MAX_BUCKET): those go the
 * parsing way, which names the problem.
 */
export function readCallsLine(
  line: string,
  maxTime: number,
): { counts: CallsCounts; latency: string } | undefined {
  if (!line.startsWith('{"type":"calls",')) return undefined;
  const m = CALLS_LINE.exec(line);
  if (!m) return undefined;
  const at = Number(m[1]);
  const llm = Number(m[6]);
  const empty = Number(m[7]);
  const latency = m[8] ?? "";
  const agent = unquote(m[2] ?? "");
  const tool = unquote(m[3] ?? "");
  if (at > maxTime || empty > llm || agent === undefined || tool === undefined) return undefined;
  return {
    counts: {
      at,
      agent,
      tool,
      ok: Number(m[4]),
      failed: Number(m[5]),
      llm,
      empty,
    },
    latency,
  };
}

/** Why a `thresholds` line is not one, or undefined when it is (only the fields read are checked). */
export function thresholdsProblem(e: Record<string, unknown>): string | undefined {
  if (typeof e.agent !== "string") return "agent is not a string";
  if (!isObject(e.thresholds)) return "thresholds is not an object";
  if (e.tools !== undefined && !isObject(e.tools)) return "tools is not an object";
  return undefined;
}

/** Why a watchdog `steps` line is not one, or undefined when it is. */
export function stepsProblem(e: Record<string, unknown>): string | undefined {
  if (typeof e.stage !== "string") return "stage is not a string";
  if (!isCount(e.steps)) return "steps is not a count";
  const problem = bucketsProblem(e.durationsMs);
  return problem === undefined ? undefined : `durationsMs: ${problem}`;
}

/** Why a watchdog `limits` line is not one, or undefined when it is. */
export function limitsProblem(e: Record<string, unknown>): string | undefined {
  if (typeof e.stallMs !== "number" || !(e.stallMs >= 0)) return "stallMs is not a duration";
  if (e.stageStallMs !== undefined && !isObject(e.stageStallMs))
    return "stageStallMs is not an object";
  return undefined;
}

/** A number read from a settings line, else the default. */
export const num = (v: unknown, fallback: number | null): number | null =>
  v === null ? null : typeof v === "number" && Number.isFinite(v) ? v : fallback;

/** Thresholds from a line, each field checked and defaulted: a hand-edited line cannot break it. */
export function readThresholds(v: unknown, base: HealthThresholds): HealthThresholds {
  const o = isObject(v) ? v : {};
  const group = (k: keyof HealthThresholds) => (isObject(o[k]) ? o[k] : {});
  const s = group("successRate");
  const l = group("latency");
  const e = group("emptyResponses");
  return {
    successRate: {
      warning: num(s.warning, base.successRate.warning),
      critical: num(s.critical, base.successRate.critical),
      minSamples: num(s.minSamples, base.successRate.minSamples) ?? base.successRate.minSamples,
    },
    latency: {
      warningFactor: num(l.warningFactor, base.latency.warningFactor),
      criticalFactor: num(l.criticalFactor, base.latency.criticalFactor),
      minSamples: num(l.minSamples, base.latency.minSamples) ?? base.latency.minSamples,
      baselineMs: num(l.baselineMs, base.latency.baselineMs),
    },
    emptyResponses: {
      warning: num(e.warning, base.emptyResponses.warning),
      critical: num(e.critical, base.emptyResponses.critical),
      minSamples:
        num(e.minSamples, base.emptyResponses.minSamples) ?? base.emptyResponses.minSamples,
    },
    taskCompletion: base.taskCompletion,
  };
}
