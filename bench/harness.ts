/**
 * Side-by-side measurement shared by the benchmarks: many short tinybench rounds (a burst of
 * machine noise hits every case alike), each case run in batches (one async call is too short
 * for a timer), the median of the rounds kept. Results go to bench/results/NAME.json.
 *
 * Benchmarks import the built package (dist/), as users run it: a TypeScript loader's output
 * differs (esbuild's keepNames wraps every closure) and would measure the loader.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { ExportResultCode } from "@opentelemetry/core";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Bench } from "tinybench";

export interface MeasureOptions {
  /** Calls per measured iteration. */
  batch: number;
  rounds: number;
  /** Pause between rounds, ms (lets a batch span processor drain, as between bursts). */
  pauseMs?: number;
}

type Cases = Record<string, () => Promise<unknown>>;

/** A case's ns per call in one run: by the clock, and in the process's CPU time (all threads). */
export interface Sample {
  ns: number;
  cpuNs: number;
}

/** One tinybench run of every case, in the order given. */
async function run(cases: Cases, batch: number): Promise<Record<string, Sample>> {
  const bench = new Bench({ time: 300, warmupTime: 100 });
  const cpu: Record<string, { start: NodeJS.CpuUsage; calls: number; ns: number }> = {};
  for (const [name, fn] of Object.entries(cases)) {
    const c = (cpu[name] = { start: process.cpuUsage(), calls: 0, ns: NaN });
    bench.add(
      name,
      async () => {
        for (let i = 0; i < batch; i++) await fn();
        c.calls += batch;
      },
      {
        // The CPU time of the measured run only, not of the warm-up.
        beforeAll: (mode) => {
          if (mode !== "run") return;
          c.calls = 0;
          c.start = process.cpuUsage();
        },
        afterAll: (mode) => {
          if (mode !== "run") return;
          const used = process.cpuUsage(c.start);
          c.ns = ((used.user + used.system) * 1000) / c.calls;
        },
      },
    );
  }
  await bench.run();
  const samples: Record<string, Sample> = {};
  for (const task of bench.tasks) {
    const result = task.result;
    if (result.state !== "completed") throw new Error(`${task.name}: ${result.state}`);
    samples[task.name] = {
      ns: (result.latency.mean * 1e6) / batch,
      cpuNs: cpu[task.name]?.ns ?? NaN,
    };
  }
  return samples;
}

/** Median ns per call of each case. */
export async function measure(
  cases: Cases,
  { batch, rounds, pauseMs = 0 }: MeasureOptions,
): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = {};
  for (let round = 0; round < rounds; round++) {
    const ran = await run(cases, batch);
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    for (const [name, { ns }] of Object.entries(ran)) (samples[name] ??= []).push(ns);
  }
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
}

export const median = (xs: readonly number[]) =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/**
 * Every round's ns per call of each case, by the clock (`ns`) and in CPU time (`cpuNs`): one run
 * at a time, the cases' order rotated each round (in a fixed order the case after the heaviest
 * is billed for its garbage).
 */
export async function rotatedRounds(
  cases: Cases,
  { batch, rounds, pauseMs = 0 }: MeasureOptions,
): Promise<{ ns: Record<string, number[]>; cpuNs: Record<string, number[]> }> {
  const entries = Object.entries(cases);
  const empty = () => Object.fromEntries(entries.map(([name]) => [name, [] as number[]]));
  const ns = empty();
  const cpuNs = empty();
  for (let round = 0; round < rounds; round++) {
    const k = round % entries.length;
    const ran = await run(Object.fromEntries([...entries.slice(k), ...entries.slice(0, k)]), batch);
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    for (const [name, sample] of Object.entries(ran)) {
      ns[name]?.push(sample.ns);
      cpuNs[name]?.push(sample.cpuNs);
    }
  }
  return { ns, cpuNs };
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

/** A metric reader that keeps what it reads and never exports. */
class KeepingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * A recording SDK that costs what instrumentation costs, not an exporter: spans batched and
 * dropped, metrics kept by a reader that never exports; no context manager. Shut both down.
 */
export function recordingSdk(): {
  tracerProvider: BasicTracerProvider;
  meterProvider: MeterProvider;
} {
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [
      new BatchSpanProcessor(
        {
          export: (_spans, done) => {
            done({ code: ExportResultCode.SUCCESS });
          },
          shutdown: () => Promise.resolve(),
        },
        { maxQueueSize: 65_536, scheduledDelayMillis: 50 },
      ),
    ],
  });
  return { tracerProvider, meterProvider: new MeterProvider({ readers: [new KeepingReader()] }) };
}
