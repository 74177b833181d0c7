import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Guards against a hang, not measures: a test that takes 1 s on an idle machine may take 20 s
    // on a busy one (load 15 on 2 cores, issue 27), and a hook starts real servers. No test decides
    // on how long something took; performance budgets live in bench/.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ["default", "./test/helpers/summary-reporter.ts"],
  },
});
