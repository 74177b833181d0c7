// Mutation testing: `npm run mutate` (bench/mutate.ts: Stryker per folder of src/, then the
// summary). Full reports: reports/mutation/<folder>.json (gitignored); committed summary:
// bench/results/mutation.json (each folder with the commit it was measured on).

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  $schema: "./node_modules/@stryker-mutator/core/schema/stryker-schema.json",
  packageManager: "npm",
  // `npm run mutate -- <folder>...` (bench/mutate.ts) runs one folder at a time: it sets
  // STRYKER_MUTATE, STRYKER_REPORT and STRYKER_INCREMENTAL. Alone, `stryker run` mutates all of src/.
  mutate: (process.env.STRYKER_MUTATE ?? "src/**/*.ts").split(","),
  testRunner: "vitest",
  // Leaves out the suites that run dist/ or spawn the CLI: they cannot see a mutant.
  vitest: { configFile: "vitest.stryker.config.ts" },
  // Each mutant runs only the tests that reach it.
  coverageAnalysis: "perTest",
  // 2 cores, shared with other work. A folder whose tests mostly wait (src/redis: real servers,
  // real timers, a Cluster's failovers) leaves the cores idle at 2: STRYKER_CONCURRENCY=5 ran it
  // with the load average still under 2.
  concurrency: Number(process.env.STRYKER_CONCURRENCY) || 2,
  // Static mutants (module-level code: the redaction patterns, the diagnosis rule tables) each
  // need a fresh module load and the whole suite. Measured: 956 of 2939 mutants, estimated at half
  // of a ~2.5 h run. Ignored, they show as "Ignored" and are left out of the score. (Full run on
  // 2026-11-30: 4200 mutants, 588 ignored, 108 min at concurrency 2 on a busy machine.)
  ignoreStatic: true,
  // The machine is shared: under load the tests run several times slower than in the dry run,
  // and the defaults (5 s + 1.5 x) mark mutants "Timeout" that only waited for a CPU.
  timeoutMS: 10_000,
  timeoutFactor: 2,
  // A rerun tests only the mutants whose code or covering tests changed (file kept in reports/).
  incremental: true,
  incrementalFile: process.env.STRYKER_INCREMENTAL ?? "reports/stryker-incremental.json",
  reporters: ["clear-text", "progress-append-only", "json"],
  jsonReporter: { fileName: process.env.STRYKER_REPORT ?? "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, reportTests: false, reportMutants: false },
  thresholds: { high: 80, low: 60, break: null },
  // Not needed by the tests Stryker runs; keeps the sandbox copy small. dist/ stays: the suites
  // that run an example against the built package must pass the initial run (they kill no mutant:
  // the sandbox's dist/ is built before mutation, and a child process reports no coverage).
  ignorePatterns: ["coverage", "reports"],
  tempDirName: ".stryker-tmp",
};
