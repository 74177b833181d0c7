import { relative } from "node:path";
import { configDefaults, defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import base from "./vitest.config.js";

/**
 * Quickest test files first (by their last recorded duration; unknown ones last). Vitest's own
 * order is the slowest first, but Stryker stops a mutant at the first failing test: most mutants
 * are killed by a quick unit test, and should not wait for the property test first.
 */
class QuickestFirst extends BaseSequencer {
  override sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const duration = (spec: TestSpecification) =>
      this.ctx.cache.getFileTestResults(
        `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`,
      )?.duration ?? Infinity;
    return Promise.resolve([...files].sort((a, b) => duration(a) - duration(b)));
  }
}

/**
 * The vitest config Stryker runs (`npm run mutate`); `npm test` keeps vitest.config.ts.
 *
 * Left out: suites that run the built dist/ or a child process (the CLI, the examples, the packed
 * tarball, the build itself, the Redis fault drills, the built review worker) and the bundle's
 * suites that start the Go binaries (Collector, Prometheus, Alertmanager). Stryker switches
 * mutants on inside the test process and mutates src/, so the first can never kill a mutant, and
 * the second would start a Prometheus for every mutant they reach: what they check of src/
 * (metric names, conventions) the in-process suites check too. The CLI's in-process suites stay in. The property test runs 1,000
 * fault sequences instead of 10,000: it covers most of recovery, so it runs for most mutants.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    exclude: [
      ...configDefaults.exclude,
      "test/cli/{demo,export,report,status,watch,watch-tiers}.test.ts",
      "test/observability/**",
      "test/redis/{chaos,fleet-processes,close-owned}.test.ts",
      "test/runtime.test.ts",
      "test/examples.test.ts",
      "test/package/**",
      "test/build.test.ts",
      "test/report/review-worker.test.ts",
    ],
    // bench/mutate.ts names the suites that test the folder being mutated (STRYKER_TESTS).
    ...(process.env.STRYKER_TESTS ? { include: process.env.STRYKER_TESTS.split(",") } : {}),
    reporters: ["dot"],
    env: { SEQ: "1000" },
    sequence: { sequencer: QuickestFirst },
  },
});
