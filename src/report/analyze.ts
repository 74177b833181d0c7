import type { RecoveryEvent } from "../engine/events.js";
import {
  cutText,
  escapeControl,
  mayHoldSecret,
  oneLine,
  redact,
  withoutSecrets,
} from "../telemetry/redact.js";
import { BreakdownTally, type Breakdown } from "./breakdown.js";
import { SeriesTally, type Series } from "./series.js";
import { lineName, type Where } from "./read.js";
import { DurationSketch } from "./sketch.js";
import { RuleSuggester, type RuleSuggestions } from "./suggest-rules.js";
import { ThresholdTally, type ThresholdSuggestions } from "./suggest-thresholds.js";
import {
  callsProblem,
  limitsProblem,
  readCallsLine,
  type CallsCounts,
  stepsProblem,
  thresholdsProblem,
} from "./threshold-lines.js";

export { DurationSketch } from "./sketch.js";

/** The weekly review of a recovery event log. */
export interface Review {
  events: number;
  /** Lines that were not recovery events (kept out, counted). */
  malformed: number;
  /** The first few of them, named: `line 7: costUsd is not a number`. */
  malformedSamples: string[];
  from: string | undefined;
  to: string | undefined;
  patterns: { pattern: string; incidents: number; share: number }[];
  tools: {
    tool: string;
    incidents: number;
    unknown: number;
    unknownShare: number;
    /** The latest distinct UNKNOWN texts, with how often each came. */
    samples: { text: string; count: number }[];
  }[];
  strategies: { strategy: string; runs: number; recovered: number; successRate: number }[];
  /** Incidents per outcome, with their share and duration percentiles (first error to end). */
  outcomes: {
    outcome: string;
    incidents: number;
    share: number;
    p50Seconds: number | null;
    p90Seconds: number | null;
  }[];
  mttrSeconds: { count: number; p50: number | null; p90: number | null; p99: number | null };
  costUsd: number;
  costPerIncidentUsd: number;
  /** The watchdog's lines (`selfheal watch --event-log`, `Supervisor({ eventLog })`). */
  watchdog: WatchdogReview;
  /** The UNKNOWN texts as templates, each proposed as a rule (`--suggest-rules`). */
  rules: RuleSuggestions;
  /** Thresholds and stall limits proposed from the calls and steps (`--suggest-thresholds`). */
  thresholds: ThresholdSuggestions;
  /** Incidents, recoveries and spend over time, by pattern. */
  series: Series;
  /** MTTR of recovered calls as a histogram: count per bin of MTTR_BINS_SECONDS. */
  mttrHistogram: { fromSeconds: number; count: number }[];
  byAgent: Breakdown[];
  byTool: Breakdown[];
  /**
   * The incidents no recovery answered (failed, escalated, out of budget), grouped when the same
   * error on the same tool ended the same way: the latest groups first.
   */
  unrecovered: { total: number; groups: number; latest: Unrecovered[] };
  /** The period asked for (`--since`, `--until`), ISO; absent: the whole log. */
  period: { since?: string; until?: string };
  /** Valid lines left out: dated outside the period. */
  outsidePeriod: number;
  /** recovered / incidents. */
  autoRecoveryRate: number;
  /** UNKNOWN incidents / incidents. */
  unknownShare: number;
}

/** Incidents no recovery answered, alike: same agent, tool, pattern, outcome, error and steps. */
export interface Unrecovered {
  firstAt: number;
  lastAt: number;
  count: number;
  agent: string;
  tool: string;
  pattern: string;
  outcome: string;
  error: string;
  /** The strategies run, in order (skipped ones left out). */
  tried: string[];
}

/** Lower edges of the MTTR histogram's bins, seconds (the last bin is open). */
export const MTTR_BINS_SECONDS = [0, 1, 2, 5, 10, 30, 60, 120, 300, 600];
/** Groups of unrecovered incidents listed, and kept (the least recent dropped past it). */
const UNRECOVERED_LISTED = 50;
const UNRECOVERED_KEPT = 200;

/** What the watchdog did to long runs: verdicts entered, and each tier's results. */
export interface WatchdogReview {
  /** Lines read from the watchdog. */
  events: number;
  sessions: number;
  verdicts: { verdict: string; count: number }[];
  /** Runs of each tier, in tier order; `recovered` ones showed progress within their time. */
  tiers: { tier: string; runs: number; recovered: number; failed: number; successRate: number }[];
  /** Times a rotation was refused by the restart intensity: the supervisor gave up. */
  gaveUp: number;
  /** The latest runs the watchdog acted on, each with what it saw and did, in order. */
  runs: WatchdogRun[];
}

/** One supervised run (agent and session) the watchdog acted on. */
export interface WatchdogRun {
  agent: string;
  session: string;
  lastAt: number;
  /** `stalled`, `nudge: failed`, `context_reset: recovered`, `gave up`, in order (the last 20). */
  steps: string[];
}

/** Runs listed, the latest; steps kept per run. */
const RUNS_LISTED = 100;
const STEPS_PER_RUN = 20;

const SAMPLES_PER_TOOL = 5;
/**
 * Distinct UNKNOWN texts remembered per tool (the latest ones; an older text that comes back
 * starts its count again). Bounds memory whatever the log holds.
 */
const TEXTS_TRACKED_PER_TOOL = 50;
/** Longest sample text shown: the review is for reading, the log keeps the rest. */
const MAX_SAMPLE_LENGTH = 512;
/** Distinct raw texts whose redaction is remembered (the cache is emptied when full). */
const REDACT_CACHE_SIZE = 1024;
/** Bad lines named in the review (all are counted). */
const MALFORMED_NAMED = 5;
/** Largest time a Date can hold, ms from the epoch. */
export const MAX_TIME = 8.64e15;

const isFiniteNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
/** The `type` of a line that has one: watchdog lines, call rollups, settings (events have none). */
const lineType = (v: unknown): unknown =>
  typeof v === "object" && v !== null ? (v as { type?: unknown }).type : undefined;
const optionalString = (v: unknown) => v === undefined || v === null || typeof v === "string";

/**
 * Why `value` is not a recovery event (`RecoveryEvent`), or undefined when it is one. Required:
 * at, agent, tool, error, pattern, outcome, steps, durationMs, costUsd; the other fields are
 * checked when present (older versions may not have written them).
 */
export function eventProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return "not a JSON object";
  const e = value as Record<string, unknown>;
  if (!isFiniteNumber(e.at) || Math.abs(e.at) > MAX_TIME) return "at is not a time";
  // Plain loops over constant lists: this runs for every event of a log of millions.
  for (let k = 0; k < REQUIRED_STRINGS.length; k++) {
    const key = REQUIRED_STRINGS[k] as string;
    if (typeof e[key] !== "string") return `${key} is not a string`;
  }
  for (let k = 0; k < OPTIONAL_STRINGS.length; k++) {
    const key = OPTIONAL_STRINGS[k] as string;
    if (!optionalString(e[key])) return `${key} is not a string`;
  }
  const steps = e.steps;
  if (!Array.isArray(steps)) return "steps is not a list";
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i] as { strategy?: unknown; skipped?: unknown } | null;
    if (typeof s !== "object" || s === null || typeof s.strategy !== "string")
      return `steps[${i}] is not a step`;
    if (!optionalString(s.skipped)) return `steps[${i}].skipped is not a string`;
  }
  if (!isFiniteNumber(e.durationMs) || e.durationMs < 0) return "durationMs is not a number";
  if (!isFiniteNumber(e.costUsd) || e.costUsd < 0) return "costUsd is not a number";
  if (e.code !== undefined && typeof e.code !== "string") return "code is not a string";
  for (let k = 0; k < OPTIONAL_NUMBERS.length; k++) {
    const key = OPTIONAL_NUMBERS[k] as string;
    if (e[key] !== undefined && !isFiniteNumber(e[key])) return `${key} is not a number`;
  }
  return undefined;
}

const REQUIRED_STRINGS = ["agent", "tool", "error", "pattern", "outcome"];
const OPTIONAL_STRINGS = ["taskId", "strategy", "provider"];
const OPTIONAL_NUMBERS = [
  "confidence",
  "attempts",
  "wastedRetries",
  "failoverCostDifferentialUsd",
  "status",
];

/** What parseLine gives for a blank line, and for one that is not JSON. */
export const BLANK = Symbol("blank");
export const NOT_JSON = Symbol("not JSON");

/** One line of JSONL, parsed. */
export function parseLine(line: string): unknown {
  if (line.trim() === "") return BLANK;
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return NOT_JSON;
  }
}

const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

const WATCHDOG_KINDS: Record<string, readonly string[]> = {
  verdict: ["verdict", "reason"],
  tier: ["tier", "reason"],
  tier_result: ["tier", "outcome"],
  gave_up: ["reason"],
};

/**
 * A value from a line, as a complaint quotes it: redacted (`{"type":"sk-proj-..."}` names no key),
 * escaped and cut to 64 characters.
 */
const shownValue = (v: unknown): string => {
  const json =
    typeof v === "string"
      ? JSON.stringify(withoutSecrets(v, 64))
      : withoutSecrets(JSON.stringify(v), 64);
  return cutText(oneLine(json), 64);
};

/** Why `value` is not a watchdog line (`WatchdogLogLine`), or undefined when it is one. */
export function watchdogProblem(e: Record<string, unknown>): string | undefined {
  if (!isFiniteNumber(e.at) || Math.abs(e.at) > MAX_TIME) return "at is not a time";
  for (const key of ["agent", "session", "kind"]) {
    if (typeof e[key] !== "string") return `${key} is not a string`;
  }
  if (e.kind === "steps") return stepsProblem(e);
  if (e.kind === "limits") return limitsProblem(e);
  const fields = WATCHDOG_KINDS[e.kind as string];
  if (!Object.hasOwn(WATCHDOG_KINDS, e.kind as string) || !fields)
    return `kind ${shownValue(e.kind)} is not a watchdog event`;
  for (const key of fields) if (typeof e[key] !== "string") return `${key} is not a string`;
  return undefined;
}

/**
 * Why a parsed line is neither a recovery event nor a line with a `type` this version reads
 * (watchdog, call rollup, settings), or undefined when it is one. Checked once per line, however
 * many periods it is given to.
 */
export function valueProblem(value: unknown): string | undefined {
  const type = lineType(value);
  if (type === undefined) return eventProblem(value);
  const e = value as Record<string, unknown>;
  if (type !== "watchdog" && type !== "calls" && type !== "thresholds") {
    // A newer version's line, or garbage: named, but never at length.
    return `type ${shownValue(type)} is not one this version reads`;
  }
  let problem: string | undefined;
  if (!isFiniteNumber(e.at) || Math.abs(e.at) > MAX_TIME) problem = "at is not a time";
  else if (type === "watchdog") problem = watchdogProblem(e);
  else if (type === "calls") problem = callsProblem(e);
  else problem = thresholdsProblem(e);
  if (problem === undefined) return undefined;
  return `${type === "watchdog" ? "watchdog event" : `${type} line`}: ${problem}`;
}

/** Tiers in the order the supervisor tries them; unknown ones (a newer version's) after. */
const TIER_ORDER = ["nudge", "context_reset", "rotation"];
const tierRank = (tier: string) => {
  const i = TIER_ORDER.indexOf(tier);
  return i === -1 ? TIER_ORDER.length : i;
};

/** The watchdog's lines, tallied (bounded by the number of distinct names and sessions). */
class WatchdogTally {
  events = 0;
  private readonly sessions = new Set<string>();
  private readonly verdicts = new Map<string, number>();
  private readonly runs = new Map<string, number>();
  private readonly recovered = new Map<string, number>();
  private readonly failed = new Map<string, number>();
  private gaveUp = 0;
  /** The latest runs acted on, least recent first (a Map keeps insertion order). */
  private readonly latest = new Map<string, WatchdogRun>();

  add(e: Record<string, unknown>): void {
    this.events++;
    const key = `${e.agent as string}/${e.session as string}`;
    this.sessions.add(key);
    const name = (k: string) => oneLine(e[k] as string).slice(0, 64);
    let step: string | undefined;
    switch (e.kind) {
      case "verdict":
        count(this.verdicts, name("verdict"));
        if (e.verdict !== "healthy" && e.verdict !== "starting") step = name("verdict");
        break;
      case "tier":
        count(this.runs, name("tier"));
        break;
      case "tier_result":
        count(e.outcome === "recovered" ? this.recovered : this.failed, name("tier"));
        step = `${name("tier")}: ${name("outcome")}`;
        break;
      case "gave_up":
        this.gaveUp++;
        step = "gave up";
        break;
    }
    if (step !== undefined) this.step(key, e, step);
  }

  private step(key: string, e: Record<string, unknown>, step: string): void {
    const run = this.latest.get(key) ?? {
      agent: oneLine(e.agent as string).slice(0, 64),
      session: oneLine(e.session as string).slice(0, 64),
      lastAt: e.at as number,
      steps: [],
    };
    this.latest.delete(key); // re-inserted: the most recent last
    run.lastAt = Math.max(run.lastAt, e.at as number);
    run.steps.push(step);
    if (run.steps.length > STEPS_PER_RUN) run.steps.shift();
    this.latest.set(key, run);
    if (this.latest.size > RUNS_LISTED) {
      const oldest = this.latest.keys().next().value;
      if (oldest !== undefined) this.latest.delete(oldest);
    }
  }

  review(): WatchdogReview {
    return {
      events: this.events,
      sessions: this.sessions.size,
      verdicts: [...this.verdicts]
        .map(([verdict, k]) => ({ verdict, count: k }))
        .sort((a, b) => b.count - a.count || a.verdict.localeCompare(b.verdict)),
      tiers: [...this.runs]
        .map(([tier, runs]) => {
          const recovered = this.recovered.get(tier) ?? 0;
          return {
            tier,
            runs,
            recovered,
            failed: this.failed.get(tier) ?? 0,
            successRate: recovered / runs,
          };
        })
        .sort((a, b) => tierRank(a.tier) - tierRank(b.tier) || a.tier.localeCompare(b.tier)),
      gaveUp: this.gaveUp,
      runs: [...this.latest.values()].reverse(),
    };
  }
}

/**
 * Builds the review one line at a time: memory grows with the number of distinct tools,
 * patterns, strategies and outcomes, never with the number of lines. Every keyed tally is a Map,
 * so a name such as `constructor` or `__proto__` is just a name.
 */
export class ReviewBuilder {
  private events = 0;
  private malformed = 0;
  private readonly malformedSamples: string[] = [];
  private minAt = Infinity;
  private maxAt = -Infinity;
  private readonly patterns = new Map<string, number>();
  private readonly outcomes = new Map<string, { n: number; durations: DurationSketch }>();
  private readonly tools = new Map<
    string,
    { incidents: number; unknown: number; texts: Map<string, number> }
  >();
  private readonly runs = new Map<string, number>();
  private readonly wins = new Map<string, number>();
  private cost = 0;
  /** Raw UNKNOWN text to its redacted form: texts repeat, redacting is the costly part. */
  private readonly redacted = new Map<string, string>();
  private readonly watchdog = new WatchdogTally();
  private readonly suggester = new RuleSuggester();
  private readonly thresholds = new ThresholdTally();
  private readonly series = new SeriesTally();
  private readonly byAgent = new BreakdownTally();
  private readonly byTool = new BreakdownTally();
  private unknown = 0;
  private recovered = 0;
  /** Valid lines dated outside the period. */
  private outside = 0;
  private unrecoveredTotal = 0;
  private unrecoveredGroups = 0;
  private readonly unrecovered = new Map<string, Unrecovered>();

  /** `period`: only events from `sinceMs` (inclusive) to `untilMs` (exclusive) are reviewed. */
  constructor(private readonly period: { sinceMs?: number; untilMs?: number } = {}) {}

  /** Adds one line of JSONL; `where` names it in a complaint (`line 7`). */
  addLine(line: string, where: Where): void {
    const calls = readCallsLine(line, MAX_TIME);
    if (calls) {
      this.addCallsLine(calls);
      return;
    }
    const value = parseLine(line);
    if (value === BLANK) return;
    const problem = value === NOT_JSON ? "not JSON" : valueProblem(value);
    if (problem !== undefined) this.reject(where, problem);
    else this.addChecked(value);
  }

  /**
   * Adds a line valueProblem found nothing wrong with: an event or watchdog line of the period, a
   * call rollup, or settings in effect.
   */
  addChecked(value: unknown): void {
    const e = value as Record<string, unknown>;
    const type = e.type;
    if (type === undefined) {
      if (this.inPeriod(e.at as number)) this.add(value as RecoveryEvent);
      return;
    }
    // Settings are in effect from their time on: those before the period count too.
    const settings = type === "thresholds" || (type === "watchdog" && e.kind === "limits");
    if (settings) {
      if ((e.at as number) >= (this.period.untilMs ?? Infinity)) {
        this.outside++;
        return;
      }
      if (type === "thresholds") this.thresholds.addSettings(e);
      else this.thresholds.addLimits(e);
    } else if (!this.inPeriod(e.at as number)) return;
    else if (type === "calls")
      this.thresholds.addCalls(e as unknown as CallsCounts, e.latencyMs as Record<string, number>);
    else if (e.kind === "steps") this.thresholds.addSteps(e);
    else this.watchdog.add(e);
  }

  /** A `calls` line read without parsing (readCallsLine): valid already. */
  addCallsLine(c: { counts: CallsCounts; latency: string }): void {
    if (this.inPeriod(c.counts.at)) this.thresholds.addCalls(c.counts, c.latency);
  }

  /** Whether `at` is in the period reviewed; counts the lines left out for being outside. */
  private inPeriod(at: number): boolean {
    const { sinceMs = -Infinity, untilMs = Infinity } = this.period;
    if (at >= sinceMs && at < untilMs) return true;
    this.outside++;
    return false;
  }

  /** Counts a line that is not an event (a line too long to read, for one). */
  reject(where: Where, problem: string): void {
    this.malformed++;
    if (this.malformedSamples.length < MALFORMED_NAMED)
      this.malformedSamples.push(`${lineName(where)}: ${problem}`);
  }

  /** Adds a validated event. */
  add(e: RecoveryEvent): void {
    this.events++;
    const recovered = e.outcome === "recovered";
    if (recovered) this.recovered++;
    if (e.pattern === "UNKNOWN") this.unknown++;
    this.series.add(e.at, e.pattern, recovered, e.costUsd);
    this.byAgent.add(e.agent, e);
    this.byTool.add(e.tool, e);
    if (!recovered) this.keepUnrecovered(e);
    this.thresholds.addIncident(e.agent, e.tool, e.at);
    this.minAt = Math.min(this.minAt, e.at);
    this.maxAt = Math.max(this.maxAt, e.at);
    count(this.patterns, e.pattern);
    let o = this.outcomes.get(e.outcome);
    if (!o) this.outcomes.set(e.outcome, (o = { n: 0, durations: new DurationSketch() }));
    o.n++;
    o.durations.add(e.durationMs / 1000);
    let t = this.tools.get(e.tool);
    if (!t) this.tools.set(e.tool, (t = { incidents: 0, unknown: 0, texts: new Map() }));
    t.incidents++;
    if (e.pattern === "UNKNOWN") {
      t.unknown++;
      // Redacted again, whichever version (or hand) wrote the log.
      const text = this.redactOnce(e.error);
      const seen = t.texts.get(text) ?? 0;
      t.texts.delete(text); // re-insert: the map's order is the order of last appearance
      t.texts.set(text, seen + 1);
      if (t.texts.size > TEXTS_TRACKED_PER_TOOL) {
        const oldest = t.texts.keys().next().value;
        if (oldest !== undefined) t.texts.delete(oldest);
      }
      this.suggester.add(e, text);
    }
    for (const s of e.steps) if (s.skipped == null) count(this.runs, s.strategy);
    if (e.outcome === "recovered" && typeof e.strategy === "string") count(this.wins, e.strategy);
    this.cost += e.costUsd;
  }

  private keepUnrecovered(e: RecoveryEvent): void {
    this.unrecoveredTotal++;
    const error = this.redactOnce(e.error);
    // Length-prefixed parts: a key that cannot collide, cheaper than JSON.stringify per event.
    let key = `${e.agent.length}:${e.agent}${e.tool.length}:${e.tool}${e.pattern}:${e.outcome}:${error.length}:${error}`;
    for (const s of e.steps) if (s.skipped == null) key += `${s.strategy.length}:${s.strategy}`;
    const group = this.unrecovered.get(key);
    if (group) {
      group.count++;
      group.firstAt = Math.min(group.firstAt, e.at);
      group.lastAt = Math.max(group.lastAt, e.at);
      // Re-inserted: the map's order is the order of last appearance.
      this.unrecovered.delete(key);
      this.unrecovered.set(key, group);
      return;
    }
    this.unrecoveredGroups++;
    const { agent, tool, pattern, outcome } = e;
    this.unrecovered.set(key, {
      firstAt: e.at,
      lastAt: e.at,
      count: 1,
      agent,
      tool,
      pattern,
      outcome,
      error,
      tried: e.steps.filter((s) => s.skipped == null).map((s) => s.strategy),
    });
    // The group seen least recently goes (a log is read in time order: the least recent one).
    if (this.unrecovered.size > UNRECOVERED_KEPT) {
      const oldest = this.unrecovered.keys().next().value;
      if (oldest !== undefined) this.unrecovered.delete(oldest);
    }
  }

  private redactOnce(raw: string): string {
    // Plain short text needs no more than redact's first look: only the rest is worth
    // remembering (a cache of every distinct text would keep thousands alive long enough to
    // burden the collector).
    if (raw.length <= MAX_SAMPLE_LENGTH && !mayHoldSecret(raw))
      return cutText(escapeControl(raw), MAX_SAMPLE_LENGTH);
    let text = this.redacted.get(raw);
    if (text === undefined) {
      if (this.redacted.size >= REDACT_CACHE_SIZE) this.redacted.clear();
      text = redact(raw, MAX_SAMPLE_LENGTH);
      this.redacted.set(raw, text);
    }
    return text;
  }

  /** Top patterns, UNKNOWN share and samples per tool, strategy success, MTTR, cost. */
  review(): Review {
    const n = this.events;
    const mttr = this.outcomes.get("recovered")?.durations;
    return {
      events: n,
      malformed: this.malformed,
      malformedSamples: [...this.malformedSamples],
      from: n ? new Date(this.minAt).toISOString() : undefined,
      to: n ? new Date(this.maxAt).toISOString() : undefined,
      patterns: [...this.patterns]
        .map(([pattern, k]) => ({ pattern, incidents: k, share: k / n }))
        .sort((a, b) => b.incidents - a.incidents),
      tools: [...this.tools]
        .map(([tool, t]) => ({
          tool,
          incidents: t.incidents,
          unknown: t.unknown,
          unknownShare: t.unknown / t.incidents,
          samples: [...t.texts].slice(-SAMPLES_PER_TOOL).map(([text, k]) => ({ text, count: k })),
        }))
        .sort((a, b) => b.incidents - a.incidents),
      strategies: [...this.runs]
        .map(([strategy, k]) => ({
          strategy,
          runs: k,
          recovered: this.wins.get(strategy) ?? 0,
          successRate: (this.wins.get(strategy) ?? 0) / k,
        }))
        .sort((a, b) => b.runs - a.runs),
      outcomes: [...this.outcomes]
        .map(([outcome, o]) => ({
          outcome,
          incidents: o.n,
          share: o.n / n,
          p50Seconds: o.durations.quantile(0.5),
          p90Seconds: o.durations.quantile(0.9),
        }))
        .sort((a, b) => b.incidents - a.incidents),
      mttrSeconds: {
        count: mttr?.count ?? 0,
        p50: mttr?.quantile(0.5) ?? null,
        p90: mttr?.quantile(0.9) ?? null,
        p99: mttr?.quantile(0.99) ?? null,
      },
      costUsd: this.cost,
      costPerIncidentUsd: n ? this.cost / n : 0,
      watchdog: this.watchdog.review(),
      series: this.series.series(
        this.period.sinceMs ?? (n ? this.minAt : 0),
        this.period.untilMs ?? (n ? this.maxAt + 1 : 0),
      ),
      mttrHistogram: (mttr?.histogram(MTTR_BINS_SECONDS) ?? MTTR_BINS_SECONDS.map(() => 0)).map(
        (count, i) => ({ fromSeconds: MTTR_BINS_SECONDS[i] ?? 0, count }),
      ),
      byAgent: this.byAgent.breakdown(),
      byTool: this.byTool.breakdown(),
      unrecovered: {
        total: this.unrecoveredTotal,
        groups: this.unrecoveredGroups,
        latest: [...this.unrecovered.values()]
          .sort((a, b) => b.lastAt - a.lastAt)
          .slice(0, UNRECOVERED_LISTED),
      },
      period: {
        ...(this.period.sinceMs !== undefined && {
          since: new Date(this.period.sinceMs).toISOString(),
        }),
        ...(this.period.untilMs !== undefined && {
          until: new Date(this.period.untilMs).toISOString(),
        }),
      },
      outsidePeriod: this.outside,
      autoRecoveryRate: n ? this.recovered / n : 0,
      unknownShare: n ? this.unknown / n : 0,
      thresholds: this.thresholds.suggest(),
      rules: this.suggester.suggest(
        n
          ? `selfheal report: ${new Date(this.minAt).toISOString()} to ${new Date(this.maxAt).toISOString()}`
          : "selfheal report",
      ),
    };
  }
}

/** The review of JSONL text held in memory (tests; the CLI streams its files). */
export function reviewText(text: string): Review {
  const builder = new ReviewBuilder();
  text.split("\n").forEach((line, i) => {
    builder.addLine(line, `line ${i + 1}`);
  });
  return builder.review();
}
