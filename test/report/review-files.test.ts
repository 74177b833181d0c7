/**
 * reviewFiles in this thread (from the sources): both periods over every file, a file that
 * cannot be read named, and a review that survives the copy between threads whole (what the
 * worker posts; review-worker.test.ts runs the built worker).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reviewFiles, reviewFilesHere, type ReviewJob } from "../../src/report/review-files.js";
import { event, watchdogLine } from "./events.js";
import { callsLines, DAY, incidentLine, spread, stepsLine, WEEK_START } from "./rollups.js";
import { sampleReview, previousReview } from "./sample-review.js";

let dir: string;
let files: string[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-review-files-"));
  // Two files with every kind of line: events (recovered, UNKNOWN, unrecovered), watchdog
  // lines, call and step rollups, and one bad line each.
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

const job = (over: Partial<ReviewJob> = {}): ReviewJob => ({
  files,
  period: { sinceMs: WEEK_START + DAY, untilMs: WEEK_START + 3 * DAY },
  comparePrevious: true,
  ...over,
});

describe("reviewFiles", () => {
  it("in this thread: both periods, every file, the bad lines named by file", async () => {
    const done = await reviewFilesHere(job());
    if (!done.ok) throw new Error(done.problem);
    expect(done.review.events).toBe(1);
    expect(done.previous?.events).toBe(3);
    expect(done.previous?.thresholds.rollups).toBeGreaterThan(1000);
    expect(done.review.malformedSamples).toEqual([
      `${files[0] ?? ""} line 1444: not JSON`,
      `${files[1] ?? ""} line 4: at is not a time`,
    ]);
  });

  it("from the sources (no built worker beside them): in this thread, the same review", async () => {
    expect(await reviewFiles(job({ comparePrevious: false }))).toEqual(
      await reviewFilesHere(job({ comparePrevious: false })),
    );
  });

  it("a file that cannot be read: named with its problem", async () => {
    const missing = job({ files: [files[0] as string, join(dir, "gone.jsonl")] });
    expect(await reviewFilesHere(missing)).toEqual({
      ok: false,
      file: join(dir, "gone.jsonl"),
      problem: "no such file (ENOENT)",
    });
  });

  it("a review with every section survives the copy between threads whole", () => {
    for (const review of [sampleReview, previousReview])
      expect(structuredClone(review)).toStrictEqual(review);
  });
});
