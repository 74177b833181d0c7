/**
 * The review per agent and per tool: incidents, MTTR, spend and UNKNOWN share of each, in
 * bounded memory (at most MAX_KEYS names; the rest are summed under OTHER).
 */
import { DurationSketch } from "./sketch.js";

/** Names tallied one by one; a log with more (ids used as tool names, say) sums the rest. */
export const MAX_KEYS = 500;
export const OTHER = "(others)";
/** Durations kept exactly per name before they are folded into the sketch's buckets. */
const EXACT_PER_KEY = 1_000;

export interface Breakdown {
  name: string;
  incidents: number;
  recovered: number;
  /** recovered / incidents. */
  autoRecoveryRate: number;
  unknown: number;
  unknownShare: number;
  costUsd: number;
  /** Of the recovered incidents, seconds. */
  mttrP50Seconds: number | null;
  mttrP90Seconds: number | null;
}

interface Entry {
  incidents: number;
  recovered: number;
  unknown: number;
  costUsd: number;
  mttr: DurationSketch;
}

export class BreakdownTally {
  private readonly entries = new Map<string, Entry>();

  add(
    name: string,
    e: { pattern: string; outcome: string; durationMs: number; costUsd: number },
  ): void {
    const key = this.entries.has(name) || this.entries.size < MAX_KEYS ? name : OTHER;
    let t = this.entries.get(key);
    if (!t) {
      t = {
        incidents: 0,
        recovered: 0,
        unknown: 0,
        costUsd: 0,
        mttr: new DurationSketch(EXACT_PER_KEY),
      };
      this.entries.set(key, t);
    }
    t.incidents++;
    t.costUsd += e.costUsd;
    if (e.pattern === "UNKNOWN") t.unknown++;
    if (e.outcome === "recovered") {
      t.recovered++;
      t.mttr.add(e.durationMs / 1000);
    }
  }

  /** Every name, the most incidents first (ties by name). */
  breakdown(): Breakdown[] {
    return [...this.entries]
      .map(([name, t]) => ({
        name,
        incidents: t.incidents,
        recovered: t.recovered,
        autoRecoveryRate: t.recovered / t.incidents,
        unknown: t.unknown,
        unknownShare: t.unknown / t.incidents,
        costUsd: t.costUsd,
        mttrP50Seconds: t.mttr.quantile(0.5),
        mttrP90Seconds: t.mttr.quantile(0.9),
      }))
      .sort((a, b) => b.incidents - a.incidents || a.name.localeCompare(b.name));
  }
}
