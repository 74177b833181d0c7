/**
 * The rule files through Prometheus's own tool: `promtool check rules` (syntax, PromQL, names)
 * and `promtool test rules` (alerts/*.test.yml: each alert fires where it should and stays quiet
 * where it should not), with two promtools: the one on PATH (Debian's 2.42, which .ci/run
 * installs) and Prometheus 3's, built from the Go module by scripts/build-prometheus.sh (what the
 * compose stack and most users run). The two read range selectors differently where a sample sits
 * on a window's start (2.x includes it, 3.x's windows are left-open), which promtool's
 * minute-aligned samples do: the test files assert at minutes where both agree (the SLO cases'
 * header in selfheal.rules.test.yml says how). Without the Prometheus 3 build that half is
 * skipped with a notice locally and fails under CI=true.
 */
import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { haveBinaries, PROMTOOL } from "./prometheus.js";
import { PROMTOOL3, prometheus3Available } from "./prometheus3.js";
import { alertingRules, ALERTS_DIR, ruleFiles, ruleTestFiles } from "./rules.js";

const run = promisify(execFile);

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

/** `promtool --version`'s number ("2.42.0+ds", "3.16.0"), for the suite's name. */
function versionOf(bin: string | undefined): string {
  if (bin === undefined) return "not found";
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
  return /version (\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? "unknown version";
}

/** Runs a promtool; its exit code and everything it printed. */
async function promtool(
  bin: string,
  args: string[],
  cwd?: string,
): Promise<{ code: number; out: string }> {
  return run(bin, args, { cwd }).then(
    ({ stdout, stderr }) => ({ code: 0, out: `${stdout}${stderr}` }),
    (e: unknown) => {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      return { code: err.code ?? -1, out: `${err.stdout ?? ""}${err.stderr ?? ""}` };
    },
  );
}

const PROMTOOLS = [
  {
    name: `promtool on PATH (${versionOf(PROMTOOL)})`,
    bin: PROMTOOL,
    available: haveBinaries("promtool rule checks and unit tests", {}),
  },
  {
    name: `Prometheus 3's promtool (${versionOf(PROMTOOL3)})`,
    bin: PROMTOOL3,
    available: prometheus3Available("promtool 3 rule checks and unit tests"),
  },
];

for (const { name, bin, available } of PROMTOOLS) {
  describe.skipIf(!available || bin === undefined)(name, () => {
    const tool = bin ?? "promtool";

    it.each(ruleFiles().map((f) => [basename(f), f]))("check rules %s", async (_name, file) => {
      const { code, out } = await promtool(tool, ["check", "rules", file]);
      expect(code, out).toBe(0);
      expect(out).toMatch(/SUCCESS: \d+ rules found/);
    });

    it.each(ruleTestFiles().map((f) => [basename(f), f]))(
      "test rules %s",
      async (_name, file) => {
        const { code, out } = await promtool(tool, ["test", "rules", basename(file)], ALERTS_DIR);
        expect(code, out).toBe(0);
        expect(out).toMatch(/SUCCESS/);
      },
      // The SLO cases evaluate every rule minute by minute over a day and more of data: about
      // 20 s for selfheal.rules.test.yml on an idle machine, with either promtool.
      120_000,
    );
  });
}
