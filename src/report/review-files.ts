/**
 * Reviews a set of event log files, in order: in a worker thread whose young generation is
 * capped (reviewFiles), or in this one (reviewFilesHere, which the worker runs).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { oneLine } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";
import { PeriodReviews, type Period } from "./period.js";
import { readInto, STDIN } from "./read.js";

/** What to review: the files in order, the period, and whether to review the one before it. */
export interface ReviewJob {
  files: string[];
  period: Period;
  comparePrevious: boolean;
}

/** The reviews of the period (and of the one before it), or the file that could not be read. */
export type FilesReview =
  | { ok: true; review: Review; previous: Review | undefined }
  | { ok: false; file: string; problem: string };

/**
 * V8's young generation for the review's thread, MB. Node 24 lets its semi-spaces grow to 64 MB
 * each over a long run (32 MB, doubled without pointer compression): about 80 MB more at the
 * peak of a 1 GB review than of a 100 MB one. 48 MB (16 MB semi-spaces) keeps the peak flat at
 * the same speed.
 */
export const REVIEW_YOUNG_GENERATION_MB = 48;

/** An I/O failure as one line: the path and the error code, never a stack. */
export function ioProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  const known: Record<string, string> = {
    ENOENT: "no such file",
    EISDIR: "is a folder",
    EACCES: "permission denied",
    EPERM: "permission denied",
    ENOTDIR: "a part of the path is not a folder",
  };
  if (typeof code === "string")
    return Object.hasOwn(known, code) ? `${known[code] ?? ""} (${code})` : code;
  return error instanceof Error ? error.message : String(error);
}

/** Reviews the files in this thread; the first that cannot be read ends it. */
export async function reviewFilesHere(job: ReviewJob): Promise<FilesReview> {
  const reviews = new PeriodReviews(job.period, job.comparePrevious);
  for (const file of job.files) {
    try {
      const label = file === STDIN ? "stdin" : oneLine(file);
      await readInto(file, reviews, job.files.length > 1 ? label : undefined);
    } catch (error) {
      return { ok: false, file, problem: ioProblem(error) };
    }
  }
  return { ok: true, review: reviews.current.review(), previous: reviews.previous?.review() };
}

/**
 * Reviews the files in a worker thread with a young generation of REVIEW_YOUNG_GENERATION_MB, so
 * the peak memory stays flat with the log's size on every Node. From the TypeScript sources (no
 * built worker beside this file: tests, tsx) the review runs in this thread.
 */
export function reviewFiles(job: ReviewJob): Promise<FilesReview> {
  const script = new URL("./review-worker.js", import.meta.url);
  if (!existsSync(fileURLToPath(script))) return reviewFilesHere(job);
  // Stryker disable all: only the built worker gets here (review-worker.test.ts, the CLI's spawn
  // suites), where a mutant of the sources cannot be.
  return new Promise((resolve, reject) => {
    const worker = new Worker(script, {
      workerData: job,
      resourceLimits: { maxYoungGenerationSizeMb: REVIEW_YOUNG_GENERATION_MB },
    });
    worker.once("message", resolve);
    worker.once("error", reject);
    // After the answer, the exit settles nothing.
    worker.once("exit", (code) => {
      reject(new Error(`the review's worker thread exited (code ${code}) before it answered`));
    });
  });
  // Stryker restore all
}
