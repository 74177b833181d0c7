/**
 * The built review worker (dist/, as `selfheal report` runs it; npm test builds first): the same
 * review as in this thread, and a file that cannot be read named the same way. It runs dist/, so
 * the mutation run leaves it out (vitest.stryker.config.ts).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  reviewFilesHere,
  type reviewFiles,
  type ReviewJob,
} from "../../src/report/review-files.js";
import { event, watchdogLine } from "./events.js";
import { callsLines, DAY, spread, stepsLine, WEEK_START } from "./rollups.js";

const BUILT = "../../dist/report/review-files.js";

let dir: string;
let files: string[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-review-worker-"));
  files = [join(dir, "a.jsonl"), join(dir, "b.jsonl")];
  const rollups = [
    ...callsLines("a", "search", WEEK_START, WEEK_START + DAY, () => ({
      ok: 20,
      latencies: spread(20, 100, 300),
    })),
    stepsLine(WEEK_START + 60_000, "a", "plan", [120, 130, 900]),
    watchdogLine({ at: WEEK_START + 120_000, kind: "verdict", verdict: "stalled", reason: "x" }),
  ];
  const events = [
    event({ at: WEEK_START + 10, pattern: "RATE_LIMIT", outcome: "recovered", durationMs: 800 }),
    event({ at: WEEK_START + 2 * DAY, error: "upstream said: flux misaligned (code 7)" }),
  ];
  await writeFile(files[0] as string, `${rollups.join("\n")}\nnot json\n`);
  await writeFile(files[1] as string, `${events.join("\n")}\n`);
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

describe("the built review worker", () => {
  it("gives the review this thread gives", async () => {
    const built = (await import(BUILT)) as { reviewFiles: typeof reviewFiles };
    const inWorker = await built.reviewFiles(job());
    expect(inWorker.ok && inWorker.previous?.thresholds.rollups).toBeGreaterThan(1000);
    expect(inWorker).toEqual(await reviewFilesHere(job()));
  });

  it("names a file that cannot be read, as this thread does", async () => {
    const built = (await import(BUILT)) as { reviewFiles: typeof reviewFiles };
    const missing = job({ files: [files[0] as string, join(dir, "gone.jsonl")] });
    expect(await built.reviewFiles(missing)).toEqual({
      ok: false,
      file: join(dir, "gone.jsonl"),
      problem: "no such file (ENOENT)",
    });
  });
});
