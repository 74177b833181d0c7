/**
 * Side-by-side measurement shared by the benchmarks: many short tinybench rounds (a burst of
 * machine noise hits every case alike), each case run in batches (one async call is too short
 * for a timer), the median of the rounds kept. Results go to bench/results/NAME.json.
 *
 * Benchmarks import the built package (dist/), as users run it: a TypeScript loader's output
 * differs (esbuild's keepNames wraps every closure) and would measure the loader.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Bench } from "tinybench";

export interface MeasureOptions {
  /** Calls per measured iteration. */
  batch: number;
  rounds: number;
  /** Pause between rounds, ms (lets a batch span processor drain, as between bursts). */
  pauseMs?: number;
}

/** Median ns per call of each case. */
export async function measure(
  cases: Record<string, () => Promise<unknown>>,
  { batch, rounds, pauseMs = 0 }: MeasureOptions,
): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round++) {
    const bench = new Bench({ time: 300, warmupTime: 100 });
    for (const [name, fn] of Object.entries(cases)) {
      bench.add(name, async () => {
        for (let i = 0; i < batch; i++) await fn();
      });
    }
    await bench.run();
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== "completed") throw new Error(`${task.name}: ${result.state}`);
      (samples[task.name] ??= []).push((result.latency.mean * 1e6) / batch);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
}

/** Prints the rows and the summary, and writes both to bench/results/NAME.json. */
export function report(
  name: string,
  rows: Record<string, unknown>[],
  summary: Record<string, unknown>,
  extra: object = {},
) {
  console.table(rows);
  console.log(summary);
  mkdirSync(new URL("results/", import.meta.url), { recursive: true });
  writeFileSync(
    new URL(`results/${name}.json`, import.meta.url),
    JSON.stringify({ node: process.version, ...extra, rows, summary }, null, 2) + "\n",
  );
}
