/** The review's worker thread (reviewFiles): reviews the job it is given and posts the result. */
import { parentPort, workerData } from "node:worker_threads";
import { reviewFilesHere, type ReviewJob } from "./review-files.js";

parentPort?.postMessage(await reviewFilesHere(workerData as ReviewJob));
