import type { RecoveryEvent } from "../engine/recovery-step.js";
import { quantile } from "../stats.js";
import { redact } from "../telemetry/redact.js";

/** The weekly review of a recovery event log. */
export interface Review {
  events: number;
  /** Lines that were not recovery events (kept out, counted). */
  malformed: number;
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
  outcomes: Record<string, number>;
  mttrSeconds: { count: number; p50: number | null; p90: number | null; p99: number | null };
  costUsd: number;
  costPerIncidentUsd: number;
}

const SAMPLES_PER_TOOL = 5;
/** Longest sample text shown: the review is for reading, the log keeps the rest. */
const MAX_SAMPLE_LENGTH = 512;

/** A finite number from the log, else 0 (a hand-edited or foreign line must not poison sums). */
const finite = (value: unknown): number =>
  typeof value === "number" && Number.isFinite(value) ? value : 0;

/**
 * An event's error text as the review shows it: redacted again, whichever version (or hand)
 * wrote the log.
 */
const textOf = (error: unknown): string =>
  typeof error === "string" ? redact(error, MAX_SAMPLE_LENGTH) : "(no error text)";

function isEvent(value: unknown): value is RecoveryEvent {
  if (typeof value !== "object" || value === null) return false;
  const e = value as Record<string, unknown>;
  return (
    typeof e.tool === "string" &&
    typeof e.pattern === "string" &&
    typeof e.outcome === "string" &&
    typeof e.at === "number" &&
    Math.abs(e.at) <= 8.64e15 && // a time a Date can hold
    Array.isArray(e.steps)
  );
}

/** Reads JSONL text: one recovery event a line; a line that is not one is counted, not fatal. */
export function parseEvents(text: string): { events: RecoveryEvent[]; malformed: number } {
  const events: RecoveryEvent[] = [];
  let malformed = 0;
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    try {
      const value: unknown = JSON.parse(line);
      if (isEvent(value)) events.push(value);
      else malformed++;
    } catch {
      malformed++;
    }
  }
  return { events, malformed };
}

/** Top patterns, UNKNOWN share and samples per tool, strategy success, MTTR, cost per incident. */
export function analyze(events: RecoveryEvent[], malformed = 0): Review {
  const count = <K extends string>(map: Map<K, number>, key: K) =>
    map.set(key, (map.get(key) ?? 0) + 1);
  const patterns = new Map<string, number>();
  const outcomes: Record<string, number> = {};
  const tools = new Map<
    string,
    { incidents: number; unknown: number; texts: Map<string, number> }
  >();
  const runs = new Map<string, number>();
  const wins = new Map<string, number>();
  const mttr: number[] = [];
  let cost = 0;
  for (const e of events) {
    count(patterns, e.pattern);
    outcomes[e.outcome] = (outcomes[e.outcome] ?? 0) + 1;
    const t = tools.get(e.tool) ?? { incidents: 0, unknown: 0, texts: new Map<string, number>() };
    t.incidents++;
    if (e.pattern === "UNKNOWN") {
      t.unknown++;
      const text = textOf(e.error);
      const seen = t.texts.get(text) ?? 0;
      t.texts.delete(text); // re-insert: the map's order is the order of last appearance
      t.texts.set(text, seen + 1);
    }
    tools.set(e.tool, t);
    for (const step of e.steps as unknown[]) {
      const s = step as { strategy?: unknown; skipped?: unknown } | null;
      if (typeof s?.strategy === "string" && s.skipped === undefined) count(runs, s.strategy);
    }
    if (e.outcome === "recovered") {
      if (typeof e.strategy === "string") count(wins, e.strategy);
      mttr.push(finite(e.durationMs) / 1000);
    }
    cost += finite(e.costUsd);
  }
  mttr.sort((a, b) => a - b);
  const times = events.map((e) => e.at).sort((a, b) => a - b);
  return {
    events: events.length,
    malformed,
    from: times.length ? new Date(times[0] ?? 0).toISOString() : undefined,
    to: times.length ? new Date(times.at(-1) ?? 0).toISOString() : undefined,
    patterns: [...patterns]
      .map(([pattern, n]) => ({ pattern, incidents: n, share: n / events.length }))
      .sort((a, b) => b.incidents - a.incidents),
    tools: [...tools]
      .map(([tool, t]) => ({
        tool,
        incidents: t.incidents,
        unknown: t.unknown,
        unknownShare: t.unknown / t.incidents,
        samples: [...t.texts].slice(-SAMPLES_PER_TOOL).map(([text, n]) => ({ text, count: n })),
      }))
      .sort((a, b) => b.incidents - a.incidents),
    strategies: [...runs]
      .map(([strategy, n]) => ({
        strategy,
        runs: n,
        recovered: wins.get(strategy) ?? 0,
        successRate: (wins.get(strategy) ?? 0) / n,
      }))
      .sort((a, b) => b.runs - a.runs),
    outcomes,
    mttrSeconds: {
      count: mttr.length,
      p50: quantile(mttr, 0.5),
      p90: quantile(mttr, 0.9),
      p99: quantile(mttr, 0.99),
    },
    costUsd: cost,
    costPerIncidentUsd: events.length ? cost / events.length : 0,
  };
}
