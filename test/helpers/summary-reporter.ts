import type { Reporter, SerializedError, TestModule } from "vitest/node";

/**
 * Prints one plain closing line, `N passed, N failed, N skipped`, that any CI log reader
 * understands, after vitest's own summary; and, when there are any, the suites that failed
 * outside a test (an error at load or in a hook: no test of theirs counts as failed) and the
 * unhandled errors, so the line never reads as green on a run that failed.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    testModules: readonly TestModule[],
    unhandledErrors: readonly SerializedError[],
  ): void {
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    let brokenSuites = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) counts[test.result().state]++;
      if (module.errors().length > 0) brokenSuites++;
    }
    const extra = [
      brokenSuites > 0 ? `, ${String(brokenSuites)} suites failed outside a test` : "",
      unhandledErrors.length > 0 ? `, ${String(unhandledErrors.length)} unhandled errors` : "",
    ].join("");
    process.stdout.write(
      `\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped + counts.pending} skipped${extra}\n`,
    );
  }
}
