/**
 * `--suggest-thresholds` end to end: the real engine on virtual time writes its event log (its
 * thresholds line, its per-minute call rollups), the report reads it back. Two days of a tool
 * answering in 100 to 200 ms, three calls a minute; on one run it gets twice as slow halfway.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_TIME, reviewText } from "../../src/report/analyze.js";
import { readCallsLine } from "../../src/report/threshold-lines.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";
import { freshDirs } from "../helpers/temp.js";

const dirs = freshDirs("suggest-thresholds-engine");
const MINUTE = 60_000;
const DAYS = 2;
const LATENCIES = [100, 150, 200];

/** Runs the days, returns the review of the log written; `factor` multiplies latency from halfway. */
async function run(factor: number) {
  const eventLog = join(dirs(), "events.jsonl");
  const { sh, clock } = virtualInstance({ recovery: { ...NO_RECOVERY, eventLog } });
  const start = clock.now();
  const half = start + (DAYS * 1440 * MINUTE) / 2;
  let latency = 0;
  const search = sh.tool("search", { readOnly: true }, async (q: string) => {
    await clock.sleep(latency);
    return q;
  });
  for (let minute = 0; minute < DAYS * 1440; minute++) {
    for (const ms of LATENCIES) {
      latency = clock.now() >= half ? ms * factor : ms;
      await clock.run(search("q"), { stepMs: latency });
    }
    await clock.advance(MINUTE - LATENCIES.reduce((a, b) => a + b * factor, 0));
  }
  await sh.close();
  const text = await readFile(eventLog, "utf8");
  // The engine's lines are in the form the report reads without a parse (a change of key order
  // would still read right, but slowly: this says so).
  const calls = text.split("\n").filter((l) => l.includes('"type":"calls"'));
  expect(calls.filter((l) => readCallsLine(l, MAX_TIME) === undefined)).toEqual([]);
  return { review: reviewText(text), half };
}

describe("--suggest-thresholds on the engine's own log", () => {
  it("a tool that got twice as slow: flagged, with the baseline before it to pin", async () => {
    const { review, half } = await run(2);
    expect(review.malformed).toBe(0);
    const latency = review.thresholds.signals.find((s) => s.signal === "latency_p95");
    expect(latency?.shift?.at).toBe(half);
    expect(latency?.shift?.ratio).toBeCloseTo(2, 1);
    // The P95 of 100, 150 and 200 ms calls is 200 ms, within a bucket's 4.5 %.
    expect(Math.abs((latency?.overrides?.latency?.baselineMs ?? 0) / 200 - 1)).toBeLessThan(0.045);
    expect(latency?.current.caught).toBe(0);
    expect(latency?.suggested?.caught).toBe(latency?.suggested?.incidents);
    expect(latency?.suggested?.falseAlarms).toBe(0);
    expect(Object.keys(review.thresholds.health)).toEqual(["test-agent"]);
  }, 60_000);

  it("the same tool, steady: no change", async () => {
    const { review } = await run(1);
    expect(review.thresholds.rollups).toBe(DAYS * 1440);
    expect(review.thresholds.health).toEqual({});
    expect(review.thresholds.signals.every((s) => s.suggested === undefined)).toBe(true);
  }, 60_000);
});
