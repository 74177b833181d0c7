/**
 * Two event log files with every kind of line (events recovered, UNKNOWN and unrecovered, watchdog
 * lines, call and step rollups, one bad line each) in a temp folder made for the suite and
 * removed after it, and the review job over them.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import type { ReviewJob } from "../../src/report/review-files.js";
import { event, watchdogLine } from "./events.js";
import { callsLines, DAY, incidentLine, spread, stepsLine, WEEK_START } from "./rollups.js";

export function reviewFixture(): {
  dir: () => string;
  files: () => string[];
  job: (over?: Partial<ReviewJob>) => ReviewJob;
} {
  let dir = "";
  let files: string[] = [];
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "selfheal-review-"));
    const week = [
      ...callsLines("a", "search", WEEK_START, WEEK_START + DAY, () => ({
        ok: 20,
        latencies: spread(20, 100, 300),
      })),
      incidentLine(WEEK_START + 3_600_000, "a", "search"),
      stepsLine(WEEK_START + 60_000, "a", "plan", [120, 130, 900]),
      watchdogLine({ at: WEEK_START + 120_000, kind: "verdict", verdict: "stalled", reason: "x" }),
    ];
    const events = [
      event({ at: WEEK_START + 10, pattern: "RATE_LIMIT", outcome: "recovered", durationMs: 800 }),
      event({ at: WEEK_START + 20, error: "upstream said: flux misaligned (code 7)" }),
      event({ at: WEEK_START + 2 * DAY, error: "timeout after 30000 ms", pattern: "TIMEOUT" }),
    ];
    files = [join(dir, "a.jsonl"), join(dir, "b.jsonl")];
    await writeFile(files[0] as string, `${week.join("\n")}\nnot json\n`);
    await writeFile(files[1] as string, `${events.join("\n")}\n{"at":"noon"}\n`);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  return {
    dir: () => dir,
    files: () => files,
    // The period is the log's second and third days; the one before it, the first two.
    job: (over = {}) => ({
      files,
      period: { sinceMs: WEEK_START + DAY, untilMs: WEEK_START + 3 * DAY },
      comparePrevious: true,
      ...over,
    }),
  };
}
