/**
 * Cost of one diagnosis, side by side in one process: the common path (a 429 from the OpenAI
 * SDK), a 503, an error that walks the whole table to UNKNOWN, and a 1 MB hostile message.
 * Compare ratios between versions, not absolute numbers.
 *
 * Run: npm run bench:diagnosis   (writes bench/results/diagnosis.json)
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Bench } from "tinybench";
import { createSelfHealing } from "../src/index.js";
import { thrownFault } from "../src/testing/index.js";

const BATCH = 100;
const ROUNDS = 7;

const sh = createSelfHealing({ agent: "bench" });
const cases: Record<string, unknown> = {
  "429 (OpenAI SDK shape)": thrownFault("rate_limit", { retryAfterSeconds: 2 }),
  "503 (OpenAI SDK shape)": thrownFault("http_503"),
  "UNKNOWN (walks every rule)": new Error("the flux capacitor is misaligned"),
  "1 MB hostile message": new Error(`${"(a+)+".repeat(170_000)}@`),
};

const samples: Record<string, number[]> = {};
for (let round = 0; round < ROUNDS; round++) {
  const bench = new Bench({ time: 300, warmupTime: 100 });
  for (const [name, error] of Object.entries(cases)) {
    bench.add(name, async () => {
      for (let i = 0; i < BATCH; i++) await sh.diagnose(error, { tool: "t" });
    });
  }
  await bench.run();
  for (const task of bench.tasks) {
    if (task.result.state !== "completed") throw new Error(`${task.name}: ${task.result.state}`);
    (samples[task.name] ??= []).push((task.result.latency.mean * 1e3) / BATCH);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const us = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
const common = us["429 (OpenAI SDK shape)"] ?? NaN;
const rows = Object.entries(us).map(([name, value]) => ({
  case: name,
  "µs/diagnosis": +value.toFixed(2),
  "x 429": +(value / common).toFixed(2),
}));
console.table(rows);
const summary = { "429 diagnosis, µs (target < 10)": +common.toFixed(2) };
console.log(summary);
mkdirSync(new URL("results/", import.meta.url), { recursive: true });
writeFileSync(
  new URL("results/diagnosis.json", import.meta.url),
  JSON.stringify(
    { node: process.version, batch: BATCH, rounds: ROUNDS, microseconds: us, rows, summary },
    null,
    2,
  ) + "\n",
);
await sh.close();
