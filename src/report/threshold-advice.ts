/**
 * The proposals of `--suggest-thresholds`, one signal or stage at a time: a setting replayed over
 * the judged windows (incidents caught, quiet windows alarmed); the success and empty-rate
 * warnings, the latency warning (level shifts of the P95 included) and the watchdog stall limits,
 * each proposed only where it does better than the current one.
 */
import type { HealthThresholds, ThresholdOverrides } from "../health/thresholds.js";
import type { Buckets } from "../telemetry/log-buckets.js";
import { DEFAULT_LIMITS } from "../watchdog/verdict.js";
import type { Judged, ToolTally } from "./call-windows.js";

const HOUR_MS = 60 * 60_000;
/** Fewer quiet windows than this (an hour's worth) are too few to set a threshold on. */
const MIN_QUIET_WINDOWS = 6;
/** A level shift: the median hourly P95 after it over the one before, at least this (or 1/it). */
const SHIFT_RATIO = 1.5;
/** Hours each side of a shift, at the least. */
const MIN_SHIFT_HOURS = 6;
/** Steps a stage needs before a stall limit is proposed for it. */
const MIN_STEPS = 20;
/** A stall limit this many times the proposal or more is proposed tighter (stalls found sooner). */
const LOOSE_FACTOR = 4;
/** Stall limits: the step duration quantile used, the margin over it, the floor and the step. */
const STALL_QUANTILE = 0.99;
const STALL_MARGIN = 1.5;
const STALL_FLOOR_MS = 10_000;
const STALL_STEP_MS = 5_000;

export type SignalName = "success_rate" | "empty_responses" | "latency_p95";

/** How the agent's own signals are named in the tool column. */
export const AGENT_SCOPE = "(all tools)";

/** What a setting did (or would have done) over the period's windows. */
export interface Replay {
  /** The setting, as a person reads it: `warning below 0.80`, `learned baseline, warning at 3x`. */
  setting: string;
  /** Windows with incidents (or after a latency shift) it flagged, of `incidents`. */
  caught: number;
  incidents: number;
  /** Quiet windows it flagged, of `quiet`. */
  falseAlarms: number;
  quiet: number;
}

/** One signal of one tool: the evidence, what the current setting did and what is proposed. */
export interface SignalAdvice {
  agent: string;
  /** The tool, or AGENT_SCOPE for the agent's own signals (all its tools' calls together). */
  tool: string;
  scope: "agent" | "tool";
  signal: SignalName;
  /** Calls (or LLM calls) in the period, and the windows with enough of them to judge. */
  samples: number;
  windows: number;
  /** What was measured: `lowest quiet success rate 0.97`, `P95 210 ms before, 430 ms after`. */
  evidence: string;
  current: Replay;
  /** Absent: no change proposed (`reason` says why). */
  suggested?: Replay;
  /** The overrides proposed for this tool's health thresholds. */
  overrides?: ThresholdOverrides;
  /** A level shift of the P95 (latency only), when one was found. */
  shift?: { at: number; beforeMs: number; afterMs: number; ratio: number };
  reason: string;
}

/** One watchdog stage of one agent: observed step durations and the stall limit to set. */
export interface StageAdvice {
  agent: string;
  stage: string;
  steps: number;
  /** The quantile used (0.99), its value, and the longest step, ms. */
  quantile: number;
  quantileMs: number | null;
  maxMs: number | null;
  currentMs: number;
  /** Steps that took longer than the current limit: called stalled while only slow. */
  currentOver: number;
  suggestedMs?: number;
  suggestedOver?: number;
  reason: string;
}

export interface Limits {
  at: number;
  stallMs: number;
  stageStallMs: Record<string, number>;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};
const floorTo = (v: number, step: number) => Math.floor(v / step + 1e-9) * step;
const ceilTo = (v: number, step: number) => Math.ceil(v / step - 1e-9) * step;
const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v));
const round2 = (v: number) => Math.round(v * 100) / 100;
const ms = (v: number) => `${Math.round(v)} ms`;

/** A window judged on one signal: its start, value, and whether it is an incident or quiet one. */
interface Point {
  at: number;
  value: number;
  incident: boolean;
  quiet: boolean;
}

/** Counts what flagging `flag` windows does: incidents caught, quiet windows alarmed. */
function replay(points: Point[], setting: string, flag: (p: Point) => boolean): Replay {
  const r: Replay = { setting, caught: 0, incidents: 0, falseAlarms: 0, quiet: 0 };
  for (const p of points) {
    const flagged = flag(p);
    if (p.incident) {
      r.incidents++;
      if (flagged) r.caught++;
    } else if (p.quiet) {
      r.quiet++;
      if (flagged) r.falseAlarms++;
    }
  }
  return r;
}

/** Whether `b` does better than `a`: fewer false alarms, or as few and more incidents caught. */
const better = (b: Replay, a: Replay) =>
  b.falseAlarms < a.falseAlarms || (b.falseAlarms === a.falseAlarms && b.caught > a.caught);

/** A share signal: the success rate (low is bad) or the empty-response rate (high is bad). */
interface RateSignal {
  signal: "success_rate" | "empty_responses";
  group: "successRate" | "emptyResponses";
  /** The calls a window's rate is over, and the rate. */
  samples: (w: Judged) => number;
  rate: (w: Judged) => number;
  lowIsBad: boolean;
  /** What the quiet windows' worst rate is called in the evidence. */
  worst: string;
}

export const SUCCESS_RATE: RateSignal = {
  signal: "success_rate",
  group: "successRate",
  samples: (w) => w.ok + w.failed,
  rate: (w) => w.ok / (w.ok + w.failed),
  lowIsBad: true,
  worst: "lowest quiet success rate",
};

export const EMPTY_RATE: RateSignal = {
  signal: "empty_responses",
  group: "emptyResponses",
  samples: (w) => w.llm,
  rate: (w) => w.empty / w.llm,
  lowIsBad: false,
  worst: "highest quiet empty rate",
};

/**
 * A rate's warning: 0.02 past the quiet windows' worst rate (just under the lowest success rate,
 * between 0.5 and 0.99; just over the highest empty rate, between 0.01 and 0.5), proposed if
 * that does better; the critical level kept on the far side of it.
 */
export function rateAdvice(
  t: { agent: string; tool: string; scope: "agent" | "tool" },
  all: Judged[],
  th: HealthThresholds,
  r: RateSignal,
): SignalAdvice | undefined {
  const { warning, critical, minSamples } = th[r.group];
  const samples = all.reduce((n, x) => n + r.samples(x), 0);
  if (samples === 0) return undefined;
  const points: Point[] = all
    .filter((x) => r.samples(x) >= minSamples)
    .map((x) => ({ ...x, value: r.rate(x) }));
  const setting = (level: number) =>
    `warning ${r.lowIsBad ? "below" : "above"} ${level.toFixed(2)}`;
  const alarms = (level: number | null) => (p: Point) =>
    level !== null && (r.lowIsBad ? p.value < level : p.value > level);
  const current = replay(points, warning === null ? "off" : setting(warning), alarms(warning));
  const base = {
    agent: t.agent,
    tool: t.tool,
    scope: t.scope,
    signal: r.signal,
    samples,
    windows: points.length,
    current,
  };
  const quiet = points.filter((p) => p.quiet).map((p) => p.value);
  if (quiet.length < MIN_QUIET_WINDOWS)
    return {
      ...base,
      evidence: `${quiet.length} quiet windows`,
      reason: "too few quiet windows to judge",
    };
  const worst = r.lowIsBad
    ? quiet.reduce((a, b) => Math.min(a, b), Infinity)
    : quiet.reduce((a, b) => Math.max(a, b), 0);
  const evidence = `${r.worst} ${worst.toFixed(3)}`;
  const candidate = round2(
    r.lowIsBad
      ? clamp(floorTo(worst - 0.02, 0.01), 0.5, 0.99)
      : clamp(ceilTo(worst + 0.02, 0.01), 0.01, 0.5),
  );
  const suggested = replay(points, setting(candidate), alarms(candidate));
  if (candidate === warning || !better(suggested, current))
    return { ...base, evidence, reason: "the current setting does as well" };
  const crossed = critical !== null && (r.lowIsBad ? critical >= candidate : critical <= candidate);
  return {
    ...base,
    evidence,
    suggested,
    overrides: {
      [r.group]: {
        warning: candidate,
        ...(crossed && {
          critical: round2(
            r.lowIsBad ? Math.max(0, candidate - 0.1) : Math.min(1, candidate + 0.1),
          ),
        }),
      },
    },
    reason:
      suggested.falseAlarms < current.falseAlarms
        ? `the current warning alarmed on ${current.falseAlarms} quiet windows`
        : `the current warning missed ${current.incidents - current.caught} incident windows`,
  };
}

/**
 * Replays the latency signal over the windows as the evaluator judges it: the P95 against a
 * pinned baseline, or one learned from healthy windows (a time-weighted average, time constant
 * `tauMs`, started at the first window's P95). Returns each point's flag.
 */
function replayLatency(
  points: Point[],
  factor: number | null,
  pinned: number | null,
  tauMs: number,
): boolean[] {
  let learned: { ms: number; at: number } | undefined;
  return points.map((p) => {
    const baseline = pinned ?? learned?.ms ?? null;
    const flagged = baseline !== null && factor !== null && p.value / baseline > factor;
    if (pinned === null && !flagged) {
      const ms = learned
        ? learned.ms + (p.value - learned.ms) * (1 - Math.exp(-(p.at - learned.at) / tauMs))
        : p.value;
      learned = { ms, at: p.at };
    }
    return flagged;
  });
}

const latencySetting = (factor: number | null, pinned: number | null) =>
  `${pinned === null ? "learned baseline" : `baseline ${ms(pinned)}`}, ${factor === null ? "no warning" : `warning at ${factor}x`}`;

/**
 * A level shift of the hourly P95: the split that best cuts the log P95s in two (least squares:
 * it places the shift where it happened, where medians would tie over a range), kept when the
 * median hourly P95 after it is 1.5x the one before or more (or 1/1.5x or less): medians, so a
 * spike of an hour or two is never a shift.
 */
function findShift(
  all: Judged[],
  minSamples: number,
): { at: number; beforeMs: number; afterMs: number; ratio: number } | undefined {
  // An hour's P95: the median of its windows' (all is in time order, so hours come in order).
  const hours: { at: number; calls: number; p95s: number[] }[] = [];
  for (const w of all) {
    if (w.calls === 0) continue;
    const at = Math.floor(w.at / HOUR_MS) * HOUR_MS;
    let h = hours.at(-1);
    if (h?.at !== at) hours.push((h = { at, calls: 0, p95s: [] }));
    h.calls += w.calls;
    h.p95s.push(w.p95);
  }
  const series = hours
    .filter((h) => h.calls >= minSamples)
    .map((h) => ({ at: h.at, p95: Math.max(1, median(h.p95s)) }));
  const n = series.length;
  const least = Math.max(MIN_SHIFT_HOURS, Math.ceil(n * 0.1));
  if (n < 2 * least) return undefined;
  const logs = series.map((h) => Math.log(h.p95));
  const total = logs.reduce((a, b) => a + b, 0);
  let best = { k: least, score: -1 };
  let before = 0;
  for (let k = 1; k < n - least + 1; k++) {
    before += logs[k - 1] ?? 0;
    if (k < least) continue;
    const gap = before / k - (total - before) / (n - k);
    const score = ((k * (n - k)) / n) * gap * gap;
    if (score > best.score) best = { k, score };
  }
  const beforeMs = median(series.slice(0, best.k).map((h) => h.p95));
  const afterMs = median(series.slice(best.k).map((h) => h.p95));
  const ratio = afterMs / beforeMs;
  if (ratio < SHIFT_RATIO && ratio > 1 / SHIFT_RATIO) return undefined;
  return { at: series[best.k]?.at ?? 0, beforeMs, afterMs, ratio };
}

/**
 * The latency warning. A level shift of the P95 (the median hourly P95 moved by 1.5x or more for
 * 6 hours or more) is flagged: upward, a learned baseline follows it and health never warns, so a
 * baseline pinned at the level before it is proposed, with the lowest warning factor that spares
 * the quiet windows before it; downward, a pinned baseline is stale and the new level proposed.
 * Without a shift, a factor that stops false alarms on quiet windows, if any.
 */
export function latencyAdvice(
  t: ToolTally,
  all: Judged[],
  th: HealthThresholds,
  tauMs: number,
): SignalAdvice | undefined {
  const { warningFactor, minSamples, baselineMs } = th.latency;
  const samples = all.reduce((n, x) => n + x.calls, 0);
  if (samples === 0) return undefined;
  const shift = findShift(all, minSamples);
  const points: Point[] = all
    .filter((x) => x.calls >= minSamples)
    .map((x) => ({
      at: x.at,
      value: x.p95,
      // After an upward shift, every window is one health should flag.
      incident: x.incident || (shift !== undefined && shift.ratio > 1 && x.at >= shift.at),
      quiet: x.quiet && !(shift !== undefined && shift.ratio > 1 && x.at >= shift.at),
    }));
  const judge = (factor: number | null, pinned: number | null) => {
    const flags = replayLatency(points, factor, pinned, tauMs);
    let i = 0;
    return replay(points, latencySetting(factor, pinned), () => flags[i++] ?? false);
  };
  const current = judge(warningFactor, baselineMs);
  const base = {
    agent: t.agent,
    tool: t.tool,
    scope: "tool" as const,
    signal: "latency_p95" as const,
    samples,
    windows: points.length,
    current,
  };
  const p95 = median(points.map((p) => p.value));
  if (shift && shift.ratio > 1) {
    const pinned = Math.round(shift.beforeMs);
    const quiet = points.filter((p) => p.quiet && p.at < shift.at).map((p) => p.value / pinned);
    const factor = round2(
      Math.max(1.2, ceilTo(quiet.reduce((a, b) => Math.max(a, b), 0) * 1.05, 0.1)),
    );
    const suggested = judge(factor, pinned);
    const evidence = `P95 ${ms(shift.beforeMs)} before ${new Date(shift.at).toISOString()}, ${ms(shift.afterMs)} after (x${shift.ratio.toFixed(2)})`;
    if (!better(suggested, current))
      return {
        ...base,
        evidence,
        shift,
        reason: "shift flagged; the current setting already warns on it",
      };
    return {
      ...base,
      evidence,
      shift,
      suggested,
      overrides: { latency: { baselineMs: pinned, warningFactor: factor } },
      reason: `P95 rose x${shift.ratio.toFixed(2)} and ${baselineMs === null ? "the learned baseline followed it" : "the warning factor let it pass"}: pin the baseline before it (if the new level is expected, keep the current setting)`,
    };
  }
  if (shift && baselineMs !== null) {
    const pinned = Math.round(shift.afterMs);
    const evidence = `P95 ${ms(shift.beforeMs)} before ${new Date(shift.at).toISOString()}, ${ms(shift.afterMs)} after (x${shift.ratio.toFixed(2)})`;
    return {
      ...base,
      evidence,
      shift,
      suggested: judge(warningFactor, pinned),
      overrides: { latency: { baselineMs: pinned } },
      reason: `P95 fell x${shift.ratio.toFixed(2)}: the pinned baseline ${ms(baselineMs)} is stale`,
    };
  }
  const quiet = points.filter((p) => p.quiet).length;
  // Too few windows with enough calls to have a P95 (the evaluator's minSamples): nothing to
  // measure a factor on.
  if (quiet < MIN_QUIET_WINDOWS)
    return {
      ...base,
      evidence: `${quiet} quiet windows of ${minSamples}+ calls`,
      reason: "too few quiet windows to judge",
    };
  const evidence = `median window P95 ${ms(p95)}${shift ? ` (fell x${shift.ratio.toFixed(2)} on ${new Date(shift.at).toISOString()})` : ""}`;
  if (current.falseAlarms === 0 || warningFactor === null)
    return { ...base, evidence, reason: "no false alarm on quiet windows" };
  // Raise the factor past the quiet windows' worst ratio to the baseline the replay learned.
  for (let factor = ceilTo(warningFactor + 0.5, 0.5); factor <= 20; factor += 0.5) {
    const suggested = judge(factor, baselineMs);
    if (suggested.falseAlarms === 0)
      return {
        ...base,
        evidence,
        suggested,
        overrides: { latency: { warningFactor: factor } },
        reason: `the current factor alarmed on ${current.falseAlarms} quiet windows`,
      };
  }
  return {
    ...base,
    evidence,
    reason: "no factor up to 20x spares the quiet windows: latency is erratic",
  };
}

/** A stall limit for a stage: the 0.99 quantile of its step durations with a 1.5x margin. */
export function stageAdvice(
  agent: string,
  stage: string,
  d: Buckets,
  limits: Limits | undefined,
): StageAdvice {
  const currentMs = limits?.stageStallMs[stage] ?? limits?.stallMs ?? DEFAULT_LIMITS.stallMs;
  const quantileMs = d.quantile(STALL_QUANTILE);
  const base: StageAdvice = {
    agent,
    stage,
    steps: d.total,
    quantile: STALL_QUANTILE,
    quantileMs,
    maxMs: d.quantile(1),
    currentMs,
    currentOver: d.above(currentMs),
    reason: "",
  };
  if (d.total < MIN_STEPS || quantileMs === null)
    return { ...base, reason: `too few steps to judge (${d.total} of ${MIN_STEPS})` };
  const suggestedMs = Math.max(STALL_FLOOR_MS, ceilTo(quantileMs * STALL_MARGIN, STALL_STEP_MS));
  const suggestedOver = d.above(suggestedMs);
  if (base.currentOver > 0 && suggestedMs > currentMs)
    return {
      ...base,
      suggestedMs,
      suggestedOver,
      reason: `${base.currentOver} steps took longer than the current limit: slow, not stuck`,
    };
  // Tighter only when no step seen would have been called stalled.
  if (currentMs >= LOOSE_FACTOR * suggestedMs && suggestedOver === 0)
    return {
      ...base,
      suggestedMs,
      suggestedOver,
      reason: `the current limit is ${Math.floor(currentMs / suggestedMs)}x the slowest steps: stalls found sooner`,
    };
  return { ...base, reason: "the current limit fits" };
}
