/**
 * reviewFiles in this thread (from the sources): both periods over every file, a file that
 * cannot be read named, and a review that survives the copy between threads whole (what the
 * worker posts; review-worker.test.ts runs the built worker).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { reviewFiles, reviewFilesHere } from "../../src/report/review-files.js";
import { reviewFixture } from "./review-job.js";
import { previousReview, sampleReview } from "./sample-review.js";

const { dir, files, job } = reviewFixture();

describe("reviewFiles", () => {
  it("in this thread: both periods, every file, the bad lines named by file", async () => {
    const done = await reviewFilesHere(job());
    if (!done.ok) throw new Error(done.problem);
    expect(done.review.events).toBe(1);
    expect(done.previous?.events).toBe(3);
    expect(done.previous?.thresholds.rollups).toBeGreaterThan(1000);
    const [a, b] = files();
    expect(done.review.malformedSamples).toEqual([
      `${a ?? ""} line 1444: not JSON`,
      `${b ?? ""} line 4: at is not a time`,
    ]);
  });

  it("from the sources (no built worker beside them): in this thread, the same review", async () => {
    expect(await reviewFiles(job({ comparePrevious: false }))).toEqual(
      await reviewFilesHere(job({ comparePrevious: false })),
    );
  });

  it("a file that cannot be read: named with its problem", async () => {
    const missing = job({ files: [files()[0] as string, join(dir(), "gone.jsonl")] });
    expect(await reviewFilesHere(missing)).toEqual({
      ok: false,
      file: join(dir(), "gone.jsonl"),
      problem: "no such file (ENOENT)",
    });
  });

  it("a review with every section survives the copy between threads whole", () => {
    for (const review of [sampleReview, previousReview])
      expect(structuredClone(review)).toStrictEqual(review);
  });
});
