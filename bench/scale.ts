/**
 * Scale: the cost of computing health, and the memory it holds, as recorded calls grow from 1e3
 * to 1e7 (20 tools, over at least two windows of virtual time). Both must stay flat.
 * Run: npm run bench:scale (writes bench/results/scale.json).
 */
import { HealthEvaluator } from "../dist/health/evaluator.js";
import { MemorySignalStore } from "../dist/health/memory-store.js";
import { DEFAULT_THRESHOLDS } from "../dist/health/thresholds.js";
import { VirtualClock } from "../dist/testing/index.js";
import { report } from "./harness.js";

const TOOLS = 20;
const ROUNDS = 7;
const ROUND_MS = 300;
const rows: Record<string, unknown>[] = [];
for (const calls of [1e3, 1e4, 1e5, 1e6, 1e7]) {
  const clock = new VirtualClock();
  const store = new MemorySignalStore();
  const evaluator = new HealthEvaluator({
    agent: "a",
    store,
    clock,
    cacheMs: 0,
    baselineTauMs: 3_600_000,
    thresholds: () => DEFAULT_THRESHOLDS,
    onChange: () => undefined,
    onStoreError: () => undefined,
  });
  // Spread over at least two 10 min windows (so every run has full windows), at most one call
  // every 5 ms: 1e7 calls are ~14 hours.
  const spacing = Math.max(5, 1_200_000 / calls);
  for (let i = 0; i < calls; i++) {
    const now = clock.now() + i * spacing;
    store.recordCall(
      {
        agent: "a",
        tool: `t${i % TOOLS}`,
        outcome: i % 7 ? "success" : "error",
        durationMs: 50 + (i % 200),
      },
      now,
    );
  }
  const at = clock.now() + calls * spacing;
  await clock.advance(calls * spacing);
  // Each point: ROUNDS rounds of at least ROUND_MS of evaluations, the median round kept (a
  // few hundred evaluations are too few to tell flat from growing on a noisy machine).
  const perRound: number[] = [];
  let evaluations = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    let runs = 0;
    while (performance.now() - started < ROUND_MS) {
      for (let i = 0; i < 100; i++) await evaluator.current(at + evaluations + runs++);
    }
    evaluations += runs;
    perRound.push(((performance.now() - started) / runs) * 1000);
  }
  const usPerStatus = [...perRound].sort((a, b) => a - b)[Math.floor(ROUNDS / 2)] ?? NaN;
  rows.push({
    calls,
    evaluations,
    "µs per status": +usPerStatus.toFixed(1),
    "numbers held": store.footprint("a"),
  });
}
type Row = { "µs per status": number; "numbers held": number };
const second = rows[1] as Row;
const last = rows.at(-1) as Row;
// Histograms are allocated per time bucket on first use: at 1e3 calls over 20 tools not every
// bucket has seen a call yet (less to hold, less to sum), so both are compared from 1e4 on,
// where every bucket has.
report("scale", rows, {
  "status cost 1e7 / 1e4": +(last["µs per status"] / second["µs per status"]).toFixed(2),
  "memory 1e7 / 1e4": +(last["numbers held"] / second["numbers held"]).toFixed(2),
});
