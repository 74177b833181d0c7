/**
 * prometheus/prometheus.yml (the local stack's Prometheus 3 configuration, with its `otlp:`
 * section) through Prometheus 3's own check: `promtool check config` of the promtool built from
 * the Go module by scripts/build-prometheus.sh (Debian's promtool is 2.42 and refuses the `otlp:`
 * section). The rule files it names live at /etc/prometheus/alerts/ in the container, where
 * alerts/ is mounted: the check runs on a copy whose rule_files point at alerts/ here, so every
 * rule file it loads is checked too (Prometheus 3's PromQL).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { ROOT } from "./config-files.js";
import { PROMTOOL3, prometheus3Available } from "./prometheus3.js";
import { ALERTS_DIR, ruleFiles } from "./rules.js";

const run = promisify(execFile);
const SUITE = "prometheus/prometheus.yml through Prometheus 3's promtool";
const available = prometheus3Available(SUITE);
/** Where docker-compose.yml mounts alerts/ in the Prometheus container. */
const MOUNTED_ALERTS = "/etc/prometheus/alerts/";

describe.skipIf(!available)(SUITE, () => {
  const dir = mkdtempSync(join(tmpdir(), "selfheal-promcfg-"));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("passes `promtool check config`, its rule files included", async () => {
    const config = parse(readFileSync(join(ROOT, "prometheus", "prometheus.yml"), "utf8")) as {
      rule_files?: string[];
      otlp?: unknown;
    };
    expect(config.otlp, "the otlp: section").toBeDefined();
    const rules = config.rule_files ?? [];
    expect(rules.length).toBeGreaterThan(0);
    for (const r of rules) expect(r.startsWith(MOUNTED_ALERTS), r).toBe(true);
    const file = join(dir, "prometheus.yml");
    writeFileSync(
      file,
      stringify({
        ...config,
        rule_files: rules.map((r) => join(ALERTS_DIR, r.slice(MOUNTED_ALERTS.length))),
      }),
    );
    const result = await run(PROMTOOL3 ?? "promtool", ["check", "config", file]).then(
      ({ stdout, stderr }) => ({ code: 0, out: `${stdout}${stderr}` }),
      (e: unknown) => {
        const err = e as { code?: number; stdout?: string; stderr?: string };
        return { code: err.code ?? -1, out: `${err.stdout ?? ""}${err.stderr ?? ""}` };
      },
    );
    expect(result.code, result.out).toBe(0);
    expect(result.out).toMatch(/SUCCESS: .* is valid prometheus config file syntax/);
    // Every rule file Prometheus loads from alerts/ was found and checked.
    for (const f of ruleFiles())
      expect(result.out, f).toMatch(new RegExp(`Checking ${f}\\s+SUCCESS`));
  });
});
