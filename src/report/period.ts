/**
 * The period a review covers (`--since`, `--until`) and the one before it (`--compare-previous`),
 * both reviewed in one pass over the log: each line is parsed once and given to both.
 */
import { BLANK, MAX_TIME, NOT_JSON, parseLine, ReviewBuilder, valueProblem } from "./analyze.js";
import { readCallsLine } from "./threshold-lines.js";
import type { LineSink, Where } from "./read.js";

export interface Period {
  sinceMs?: number;
  untilMs?: number;
}

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A time flag: an ISO date or time (`2026-11-23`, `2026-11-23T08:00:00Z`), or a span back from
 * `base` (`7d`, `12h`, `90m`, `2w`). Undefined when it is neither.
 */
export function parseTime(value: string, base: number): number | undefined {
  const relative = /^(\d{1,6})([mhdw])$/.exec(value.trim());
  if (relative) return base - Number(relative[1]) * (UNIT_MS[relative[2] ?? ""] ?? 0);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value.trim())) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Reviews of a period and, optionally, of the period of the same length just before it. */
export class PeriodReviews implements LineSink {
  readonly current: ReviewBuilder;
  readonly previous: ReviewBuilder | undefined;

  constructor(period: Period, comparePrevious: boolean) {
    this.current = new ReviewBuilder(period);
    const { sinceMs, untilMs } = period;
    this.previous =
      comparePrevious && sinceMs !== undefined && untilMs !== undefined
        ? new ReviewBuilder({ sinceMs: sinceMs - (untilMs - sinceMs), untilMs: sinceMs })
        : undefined;
  }

  addLine(line: string, where: Where): void {
    const calls = readCallsLine(line, MAX_TIME);
    if (calls) {
      this.current.addCallsLine(calls);
      this.previous?.addCallsLine(calls);
      return;
    }
    const value = parseLine(line);
    if (value === BLANK) return;
    // Checked once; a bad line is named once, in the period reviewed.
    const problem = value === NOT_JSON ? "not JSON" : valueProblem(value);
    if (problem !== undefined) {
      this.current.reject(where, problem);
      return;
    }
    this.current.addChecked(value);
    this.previous?.addChecked(value);
  }

  reject(where: Where, problem: string): void {
    this.current.reject(where, problem);
  }
}
