/**
 * The rule files through Prometheus's own tool: `promtool check rules` (syntax, PromQL, names)
 * and `promtool test rules` (alerts/*.test.yml: each alert fires where it should and stays quiet
 * where it should not).
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { haveBinaries, PROMTOOL } from "./prometheus.js";
import { alertingRules, ALERTS_DIR, ruleFiles, ruleTestFiles } from "./rules.js";

const run = promisify(execFile);
const available = haveBinaries("promtool rule checks and unit tests", {});

interface RuleTestFile {
  rule_files: string[];
  tests: {
    name: string;
    alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[];
  }[];
}

describe("rule unit tests cover every alert (static)", () => {
  const files = ruleTestFiles().map((f) => parse(readFileSync(f, "utf8")) as RuleTestFile);

  it("test every rule file", () => {
    const tested = new Set(files.flatMap((f) => f.rule_files));
    expect(ruleFiles().map((f) => basename(f))).toEqual([...tested].sort());
  });

  it("have, for every alert, a case where it fires and a case where it stays quiet", () => {
    const cases = files.flatMap((f) => f.tests.flatMap((t) => t.alert_rule_test ?? []));
    for (const { alert } of alertingRules()) {
      const own = cases.filter((c) => c.alertname === alert);
      expect(
        own.some((c) => (c.exp_alerts?.length ?? 0) > 0),
        `${alert} never fires`,
      ).toBe(true);
      expect(
        own.some((c) => (c.exp_alerts?.length ?? 0) === 0),
        `${alert} never stays quiet`,
      ).toBe(true);
    }
  });
});

describe.skipIf(!available)("promtool", () => {
  it.each(ruleFiles().map((f) => [basename(f), f]))("check rules %s", async (_name, file) => {
    const { stdout } = await run(PROMTOOL ?? "promtool", ["check", "rules", file]);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it.each(ruleTestFiles().map((f) => [basename(f), f]))(
    "test rules %s",
    async (_name, file) => {
      const result = await run(PROMTOOL ?? "promtool", ["test", "rules", basename(file)], {
        cwd: ALERTS_DIR,
      }).catch((error: unknown) => error as { stdout?: string; stderr?: string });
      expect(`${result.stdout ?? ""}${result.stderr ?? ""}`).toMatch(/SUCCESS/);
    },
    30_000,
  );
});
