/**
 * `selfheal report --suggest-thresholds`: health thresholds per tool and stall limits per
 * watchdog stage, proposed from what the log shows the agents doing. Deterministic: the period's
 * calls (the engine's per-minute rollup lines) are cut into the health signal's 10-minute
 * windows, and each setting is replayed over them, the current one (from the log's `thresholds`
 * and watchdog `limits` lines, else the defaults) and the proposed one, counting the windows with
 * incidents each would have flagged and the quiet windows (no incident in or next to them) it
 * would have raised false alarms on. A setting is proposed only where it does better.
 */
import type { CallRollupLine } from "../engine/call-rollup.js";
import { DEFAULT_WINDOWS } from "../health/store.js";
import {
  DEFAULT_BASELINE_TAU_MS,
  DEFAULT_THRESHOLDS,
  type HealthThresholds,
  type ThresholdOverrides,
} from "../health/thresholds.js";
import { Buckets, bucketPoint, bucketsProblem, MAX_BUCKET } from "../telemetry/log-buckets.js";
import { DEFAULT_LIMITS } from "../watchdog/verdict.js";

/** The health signal's call window: each window is judged as the evaluator would at its end. */
const WINDOW_MS = DEFAULT_WINDOWS.callWindowMs;
const HOUR_MS = 60 * 60_000;
/** Tools (agent and tool) tallied; calls of others are counted, not judged. */
const MAX_TOOLS = 500;
/** Stages (agent and stage) tallied. */
const MAX_STAGES = 200;
/**
 * Windows kept per tool: the latest 4 weeks (a proposal rests on the tool's recent behaviour, and
 * a year of log costs no more than a month).
 */
const WINDOWS_KEPT = (28 * 24 * 60 * 60_000) / WINDOW_MS;
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

export interface ThresholdSuggestions {
  /** Per tool and signal, tools in name order. */
  signals: SignalAdvice[];
  stages: StageAdvice[];
  /** The fragments to paste, per agent: `createSelfHealing({ agent, health })`. */
  health: Record<string, ThresholdOverrides & { tools?: Record<string, ThresholdOverrides> }>;
  /** `Supervisor({ limits: { stageStallMs } })`, per agent. */
  watchdog: Record<string, { stageStallMs: Record<string, number> }>;
  /** Rollup lines read; tools and stages past the bound (counted, not judged). */
  rollups: number;
  untracked: number;
}

/** One call window of one tool, summed from its minutes. */
interface Window {
  ok: number;
  failed: number;
  llm: number;
  empty: number;
  latency: DenseBuckets;
}

/**
 * An open window's latency histogram: one count per bucket in a typed array, reset and reused
 * once the window closes. A window a tool a minute would otherwise leave a histogram behind
 * each: garbage that made the heap (and the peak RSS) grow with the log.
 */
class DenseBuckets {
  private readonly counts = new Uint32Array(MAX_BUCKET + 1);
  total = 0;

  add(bucket: number, n: number): void {
    this.counts[bucket] = (this.counts[bucket] ?? 0) + n;
    this.total += n;
  }

  /**
   * Adds each bucket and count of a `"57":3,"58":50` text (checked by CALLS_LINE): a loop over
   * its characters, no match object per pair.
   */
  addText(text: string): void {
    let bucket = 0;
    let count = 0;
    let inKey = true;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c >= 48 && c <= 57) {
        if (inKey) bucket = bucket * 10 + c - 48;
        else count = count * 10 + c - 48;
      } else if (c === 58) inKey = false;
      else if (c === 44) {
        this.add(bucket, count);
        bucket = count = 0;
        inKey = true;
      }
    }
    if (text.length > 0) this.add(bucket, count);
  }

  /** The nearest-rank q-quantile as its bucket's point, or null when empty. */
  quantile(q: number): number | null {
    if (this.total === 0) return null;
    const rank = Math.min(this.total, Math.max(1, Math.ceil(q * this.total)));
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return bucketPoint(i);
    }
    return null;
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
  }
}

/** One window of one tool as the proposals read it, marked incident (one in it) or quiet. */
interface Judged {
  at: number;
  ok: number;
  failed: number;
  llm: number;
  empty: number;
  /** Calls with a latency, and their P95 (ms). */
  calls: number;
  p95: number;
  incident: boolean;
  /** No incident in it nor in the windows next to it. */
  quiet: boolean;
}

/** A closed window's row: its columns, in order. */
const [AT, OK, FAILED, LLM, EMPTY, CALLS, P95, INCIDENT, WIDTH] = [
  0, 1, 2, 3, 4, 5, 6, 7, 8,
] as const;

/**
 * A tool's closed windows, the latest WINDOWS_KEPT, as rows of numbers in a ring: 64 bytes a
 * window and no object each. The rows live in a typed array, outside V8's heap: a heap that grows
 * with the log's length makes V8 leave more garbage between collections, so a month of log costs
 * far more than its windows (this keeps the review's peak memory flat).
 */
class ClosedWindows {
  private rows = new Float64Array(64 * WIDTH);
  /** Rows written in all; the latest WINDOWS_KEPT are held. */
  private written = 0;

  push(at: number, w: Window | undefined, incident: boolean): void {
    const capacity = this.rows.length / WIDTH;
    if (this.written === capacity && capacity < WINDOWS_KEPT) {
      const grown = new Float64Array(Math.min(2 * capacity, WINDOWS_KEPT) * WIDTH);
      grown.set(this.rows);
      this.rows = grown;
    }
    const r = (this.written % (this.rows.length / WIDTH)) * WIDTH;
    const rows = this.rows;
    rows[r + AT] = at;
    rows[r + OK] = w?.ok ?? 0;
    rows[r + FAILED] = w?.failed ?? 0;
    rows[r + LLM] = w?.llm ?? 0;
    rows[r + EMPTY] = w?.empty ?? 0;
    rows[r + CALLS] = w?.latency.total ?? 0;
    rows[r + P95] = w?.latency.quantile(0.95) ?? 0;
    rows[r + INCIDENT] = incident ? 1 : 0;
    this.written++;
  }

  /**
   * The windows in time order. One closed twice (lines of another process's file, read after
   * it closed) is merged: counts summed, the larger P95.
   */
  judged(): Judged[] {
    const rows = this.rows;
    const held = Math.min(this.written, rows.length / WIDTH);
    const order = Array.from({ length: held }, (_, i) => i * WIDTH).sort(
      (a, b) => (rows[a + AT] ?? 0) - (rows[b + AT] ?? 0),
    );
    const out: Judged[] = [];
    for (const r of order) {
      const n = (col: number) => rows[r + col] ?? 0;
      const w = {
        at: n(AT),
        ok: n(OK),
        failed: n(FAILED),
        llm: n(LLM),
        empty: n(EMPTY),
        calls: n(CALLS),
        p95: n(P95),
        incident: n(INCIDENT) === 1,
      };
      const last = out.at(-1);
      if (last?.at === w.at) foldWindow(last, w);
      else out.push({ ...w, quiet: true });
    }
    markQuiet(out);
    return out;
  }
}

/**
 * One tool's tally. Windows stay open (a full latency histogram each) until the log is two
 * windows past them, then close into columns; incidents wait in `pending` for their window.
 */
interface ToolTally {
  agent: string;
  tool: string;
  open: Map<number, Window>;
  closed: ClosedWindows;
  pending: Set<number>;
  /** The latest window start seen. */
  newest: number;
  /** Histograms of closed windows, for the next ones to open. */
  spare: DenseBuckets[];
  /** Whether any call was read (a tool with incidents only has nothing to judge). */
  called: boolean;
}

/** Closes the tool's windows that start before `before`, with the incidents waiting for them. */
function closeWindows(t: ToolTally, before: number): void {
  for (const at of [...t.open.keys()].sort((a, b) => a - b)) {
    if (at >= before) continue;
    const w = t.open.get(at);
    t.closed.push(at, w, t.pending.delete(at));
    t.open.delete(at);
    if (w) {
      w.latency.reset();
      t.spare.push(w.latency);
    }
  }
  // An incident with no call in its window still makes its neighbours not quiet.
  for (const at of t.pending) {
    if (at >= before || t.open.has(at)) continue;
    t.closed.push(at, undefined, true);
    t.pending.delete(at);
  }
}

/** The log reached window `start`: windows two before it are closed. */
function advance(t: ToolTally, start: number): void {
  if (start <= t.newest) return;
  t.newest = start;
  closeWindows(t, start - 2 * WINDOW_MS);
}

interface Settings {
  at: number;
  thresholds: HealthThresholds;
  tools: Record<string, HealthThresholds>;
  tauMs: number;
}

interface Limits {
  at: number;
  stallMs: number;
  stageStallMs: Record<string, number>;
}

const isCount = (v: unknown): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const windowOf = (at: number) => Math.floor(at / WINDOW_MS) * WINDOW_MS;

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
const num = (v: unknown, fallback: number | null): number | null =>
  v === null ? null : typeof v === "number" && Number.isFinite(v) ? v : fallback;

/** Thresholds from a line, each field checked and defaulted: a hand-edited line cannot break it. */
function readThresholds(v: unknown, base: HealthThresholds): HealthThresholds {
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

/** The tally of rollups, settings and incidents, and the proposals made from it. */
export class ThresholdTally {
  /** By agent, then tool (two maps: no key to build per line). */
  private readonly tools = new Map<string, Map<string, ToolTally>>();
  private tracked = 0;
  private readonly stages = new Map<string, { agent: string; stage: string; durations: Buckets }>();
  private readonly settings = new Map<string, Settings>();
  private readonly limits = new Map<string, Limits>();
  private rollups = 0;
  private untracked = 0;

  private tool(agent: string, tool: string): ToolTally | undefined {
    let byTool = this.tools.get(agent);
    if (!byTool) this.tools.set(agent, (byTool = new Map<string, ToolTally>()));
    let t = byTool.get(tool);
    if (!t) {
      if (this.tracked >= MAX_TOOLS) return undefined;
      this.tracked++;
      t = {
        agent,
        tool,
        open: new Map(),
        closed: new ClosedWindows(),
        pending: new Set(),
        newest: -Infinity,
        spare: [],
        called: false,
      };
      byTool.set(tool, t);
    }
    return t;
  }

  /** A `calls` line (checked by callsProblem, or read by readCallsLine). */
  addCalls(c: CallsCounts, latency: Readonly<Record<string, number>> | string): void {
    this.rollups++;
    const t = this.tool(c.agent, c.tool);
    if (!t) {
      this.untracked++;
      return;
    }
    const start = windowOf(c.at);
    advance(t, start);
    t.called = true;
    let w = t.open.get(start);
    if (!w) {
      const latency = t.spare.pop() ?? new DenseBuckets();
      t.open.set(start, (w = { ok: 0, failed: 0, llm: 0, empty: 0, latency }));
    }
    w.ok += c.ok;
    w.failed += c.failed;
    w.llm += c.llm;
    w.empty += c.empty;
    const buckets = w.latency;
    if (typeof latency !== "string")
      for (const [bucket, n] of Object.entries(latency)) buckets.add(Number(bucket), n);
    else buckets.addText(latency);
  }

  /** An incident of `tool` at `at`: its window is one the thresholds should flag. */
  addIncident(agent: string, tool: string, at: number): void {
    const t = this.tool(agent, tool);
    if (!t) return;
    const start = windowOf(at);
    advance(t, start);
    t.pending.add(start);
  }

  /** A `thresholds` line: the latest one per agent is the setting in effect. */
  addSettings(e: Record<string, unknown>): void {
    const agent = e.agent as string;
    const at = e.at as number;
    if ((this.settings.get(agent)?.at ?? -Infinity) > at) return;
    const thresholds = readThresholds(e.thresholds, DEFAULT_THRESHOLDS);
    const tools: Record<string, HealthThresholds> = {};
    for (const [name, value] of Object.entries(
      (e.tools as Record<string, unknown> | undefined) ?? {},
    ))
      tools[name] = readThresholds(value, thresholds);
    const tauMs = num(e.baselineTauMs, DEFAULT_BASELINE_TAU_MS) ?? DEFAULT_BASELINE_TAU_MS;
    this.settings.set(agent, { at, thresholds, tools, tauMs });
  }

  /** A watchdog `steps` line (checked by stepsProblem). */
  addSteps(e: Record<string, unknown>): void {
    this.rollups++;
    const key = JSON.stringify([e.agent, e.stage]);
    let s = this.stages.get(key);
    if (!s) {
      if (this.stages.size >= MAX_STAGES) {
        this.untracked++;
        return;
      }
      s = { agent: e.agent as string, stage: e.stage as string, durations: new Buckets() };
      this.stages.set(key, s);
    }
    s.durations.addEncoded(e.durationsMs as Record<string, number>);
  }

  /** A watchdog `limits` line: the latest one per agent is the setting in effect. */
  addLimits(e: Record<string, unknown>): void {
    const agent = e.agent as string;
    const at = e.at as number;
    if ((this.limits.get(agent)?.at ?? -Infinity) > at) return;
    const stage: Record<string, number> = {};
    for (const [name, v] of Object.entries(
      (e.stageStallMs as Record<string, unknown> | undefined) ?? {},
    ))
      if (typeof v === "number" && v > 0) stage[name] = v;
    this.limits.set(agent, { at, stallMs: e.stallMs as number, stageStallMs: stage });
  }

  suggest(): ThresholdSuggestions {
    const signals: SignalAdvice[] = [];
    const health: ThresholdSuggestions["health"] = {};
    const sorted = [...this.tools.values()]
      .flatMap((byTool) => [...byTool.values()])
      .filter((t) => t.called)
      .sort((a, b) => a.agent.localeCompare(b.agent) || a.tool.localeCompare(b.tool));
    const byAgent = new Map<string, ToolTally[]>();
    for (const t of sorted) {
      const list = byAgent.get(t.agent);
      if (list) list.push(t);
      else byAgent.set(t.agent, [t]);
    }
    const add = (advice: SignalAdvice | undefined, into: ThresholdOverrides, list = signals) => {
      if (!advice) return;
      list.push(advice);
      for (const [group, values] of Object.entries(advice.overrides ?? {}))
        Object.assign(((into as Record<string, object>)[group] ??= {}), values);
    };
    for (const [agent, tools] of byAgent) {
      const settings = this.settings.get(agent);
      const agentThresholds = settings?.thresholds ?? DEFAULT_THRESHOLDS;
      // One tool's windows at a time (a month of them for hundreds of tools would not be small),
      // summed by window start into the agent's own as they go.
      const merged = new Map<number, Judged>();
      const toolSignals: SignalAdvice[] = [];
      const toolOverrides: Record<string, ThresholdOverrides> = {};
      for (const t of tools) {
        closeWindows(t, Infinity);
        const windows = t.closed.judged();
        for (const w of windows) {
          const m = merged.get(w.at);
          if (m) foldWindow(m, w);
          else merged.set(w.at, { ...w });
        }
        const thresholds = settings?.tools[t.tool] ?? agentThresholds;
        const tau = settings?.tauMs ?? DEFAULT_BASELINE_TAU_MS;
        const tool = { agent, tool: t.tool, scope: "tool" as const };
        const overrides: ThresholdOverrides = {};
        add(rateAdvice(tool, windows, thresholds, SUCCESS_RATE), overrides, toolSignals);
        add(rateAdvice(tool, windows, thresholds, EMPTY_RATE), overrides, toolSignals);
        add(latencyAdvice(t, windows, thresholds, tau), overrides, toolSignals);
        if (Object.keys(overrides).length) toolOverrides[t.tool] = overrides;
      }
      // The agent's own rates, first: its tools' calls together, judged on its thresholds.
      const own: ThresholdSuggestions["health"][string] = {};
      const scope = { agent, tool: AGENT_SCOPE, scope: "agent" as const };
      const agentWindows = [...merged.values()].sort((a, b) => a.at - b.at);
      markQuiet(agentWindows);
      add(rateAdvice(scope, agentWindows, agentThresholds, SUCCESS_RATE), own);
      add(rateAdvice(scope, agentWindows, agentThresholds, EMPTY_RATE), own);
      signals.push(...toolSignals);
      if (Object.keys(toolOverrides).length) own.tools = toolOverrides;
      if (Object.keys(own).length) health[agent] = own;
    }
    const stages: StageAdvice[] = [];
    const watchdog: ThresholdSuggestions["watchdog"] = {};
    for (const s of [...this.stages.values()].sort(
      (a, b) => a.agent.localeCompare(b.agent) || a.stage.localeCompare(b.stage),
    )) {
      const advice = stageAdvice(s.agent, s.stage, s.durations, this.limits.get(s.agent));
      stages.push(advice);
      if (advice.suggestedMs !== undefined)
        (watchdog[s.agent] ??= { stageStallMs: {} }).stageStallMs[s.stage] = advice.suggestedMs;
    }
    return { signals, stages, health, watchdog, rollups: this.rollups, untracked: this.untracked };
  }
}

/** Adds `w` into `into`, a window of the same start: counts summed, the larger P95. */
function foldWindow(into: Judged, w: Omit<Judged, "quiet">): void {
  into.ok += w.ok;
  into.failed += w.failed;
  into.llm += w.llm;
  into.empty += w.empty;
  into.calls += w.calls;
  into.p95 = Math.max(into.p95, w.p95);
  into.incident ||= w.incident;
}

/** Marks each window quiet when no window next to it, nor it, had an incident. */
function markQuiet(windows: Judged[]): void {
  const incidents = new Set(windows.filter((w) => w.incident).map((w) => w.at));
  for (const w of windows)
    w.quiet = ![w.at - WINDOW_MS, w.at, w.at + WINDOW_MS].some((x) => incidents.has(x));
}

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

const SUCCESS_RATE: RateSignal = {
  signal: "success_rate",
  group: "successRate",
  samples: (w) => w.ok + w.failed,
  rate: (w) => w.ok / (w.ok + w.failed),
  lowIsBad: true,
  worst: "lowest quiet success rate",
};

const EMPTY_RATE: RateSignal = {
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
function rateAdvice(
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
function latencyAdvice(
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
function stageAdvice(
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
