/** The review's worker thread (reviewFiles): reviews the job it is given and posts the result. */
// Stryker disable all: it runs only as the built worker (review-worker.test.ts, the CLI's spawn
// suites), where a mutant of the sources cannot be.
import { parentPort, workerData } from "node:worker_threads";
import { reviewFilesHere, type ReviewJob } from "./review-files.js";

parentPort?.postMessage(await reviewFilesHere(workerData as ReviewJob));
