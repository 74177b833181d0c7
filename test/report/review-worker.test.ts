/**
 * The built review worker (dist/, as `selfheal report` runs it; npm test builds first): the same
 * review as in this thread, and a file that cannot be read named the same way. It runs dist/, so
 * the mutation run leaves it out (vitest.stryker.config.ts).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { reviewFilesHere, type reviewFiles } from "../../src/report/review-files.js";
import { reviewFixture } from "./review-job.js";

const BUILT = "../../dist/report/review-files.js";
const { dir, files, job } = reviewFixture();

describe("the built review worker", () => {
  it("gives the review this thread gives", async () => {
    const built = (await import(BUILT)) as { reviewFiles: typeof reviewFiles };
    const inWorker = await built.reviewFiles(job());
    expect(inWorker.ok && inWorker.previous?.thresholds.rollups).toBeGreaterThan(1000);
    expect(inWorker).toEqual(await reviewFilesHere(job()));
  });

  it("names a file that cannot be read, as this thread does", async () => {
    const built = (await import(BUILT)) as { reviewFiles: typeof reviewFiles };
    const missing = job({ files: [files()[0] as string, join(dir(), "gone.jsonl")] });
    expect(await built.reviewFiles(missing)).toEqual({
      ok: false,
      file: join(dir(), "gone.jsonl"),
      problem: "no such file (ENOENT)",
    });
  });
});
