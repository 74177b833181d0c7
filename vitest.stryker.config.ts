import { configDefaults, defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/**
 * The vitest config Stryker runs (`npm run mutate`); `npm test` keeps vitest.config.ts.
 *
 * Left out: suites that run the built dist/ or a child process (the CLI, the examples). Stryker
 * switches mutants on inside the test process and mutates src/, so those suites can never kill a
 * mutant; they would only slow every run down. The property test runs 1,000 fault sequences
 * instead of 10,000: it covers most of recovery, so it runs for most mutants.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    exclude: [...configDefaults.exclude, "test/cli/**", "test/examples.test.ts"],
    reporters: ["dot"],
    env: { SEQ: "1000" },
  },
});
