/**
 * Static checks of the alerting bundle beyond what promtool runs: the auto-recovery SLO and its
 * burn-rate tiers, the telemetry-absent signal (that every agent sends it from its start), the
 * Collector alerts' metric names, runbook links (and the package.json fields that name their
 * base), and the Grafana-managed alternative in grafana/alerting/: the same alerts, the data
 * source and runbook base from environment variables Grafana interpolates, and contact points and
 * a policy that route like Alertmanager does.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { MeterProvider } from "@opentelemetry/api";
import {
  MeterProvider as SdkMeterProvider,
  MetricReader,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createSelfHealing } from "../../src/engine/self-healing.js";
import { WatchdogTelemetry } from "../../src/watchdog/telemetry.js";
import { which } from "../helpers/binaries.js";
import { isRecord, list, loadYaml, record, strings, walk } from "./config-files.js";
import { DATASOURCE_UID } from "./dashboard.js";
import {
  ENVSUBST,
  generate,
  GRAFANA_ALERTING_FILE,
  GRAFANA_NOTIFICATIONS_FILE,
} from "./generate.js";
import {
  buildGrafanaAlerting,
  buildGrafanaNotifications,
  DEFAULT_RUNBOOK_BASE,
  GRAFANA_ENV,
  GROUP_BY,
  ruleUid,
  SEVERITY_ROUTES,
} from "./grafana-alerting.js";
import { OTELCOL_METRICS } from "./otelcol-metrics.js";
import {
  alertingRules,
  COLLECTOR_RULES_FILE,
  inlineRecordings,
  isAlert,
  loadGroups,
  metricNames,
  ROOT,
  SELFHEAL_RULES_FILE,
  type AlertingRule,
} from "./rules.js";

const alerts = alertingRules();
const selfhealGroups = loadGroups(SELFHEAL_RULES_FILE);
const collectorAlerts = alertingRules(loadGroups(COLLECTOR_RULES_FILE));
const alert = (name: string): AlertingRule => {
  const found = alerts.find((a) => a.alert === name);
  if (!found) throw new Error(`no alert ${name}`);
  return found;
};

describe("runbook links", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
    homepage?: string;
    repository?: { type?: string; url?: string };
    bugs?: { url?: string };
  };
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  /** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
  const slug = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
  const anchors = new Set(
    [...readme.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug((m[1] ?? "").replace(/`/g, ""))),
  );

  it("package.json names the repository whose README holds the runbooks", () => {
    expect(pkg.homepage, "package.json homepage").toBe(`${DEFAULT_RUNBOOK_BASE}#readme`);
    expect(pkg.repository, "package.json repository").toEqual({
      type: "git",
      url: `git+${DEFAULT_RUNBOOK_BASE}.git`,
    });
    expect(pkg.bugs, "package.json bugs").toEqual({ url: `${DEFAULT_RUNBOOK_BASE}/issues` });
  });

  it("every alert links its own runbook under the package's homepage", () => {
    const base = (pkg.homepage ?? "(package.json has no homepage)").replace(/#readme$/, "");
    for (const a of alerts) {
      expect(a.annotations?.runbook_url, a.alert).toMatch(
        new RegExp(`^${base.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}#runbook-[a-z0-9-]+$`),
      );
    }
    const urls = alerts.map((a) => a.annotations?.runbook_url);
    expect(new Set(urls).size).toBe(urls.length);
  });

  it("every runbook_url anchor is a heading of README.md's Runbooks chapter", () => {
    expect(readme).toMatch(/^## Runbooks$/m);
    const missing = alerts
      .map((a) => ({ alert: a.alert, anchor: a.annotations?.runbook_url?.split("#")[1] ?? "" }))
      .filter(({ anchor }) => !anchors.has(anchor));
    expect(missing, "README headings to add: ### Runbook: <what>").toEqual([]);
  });
});

describe("Prometheus alerts", () => {
  it("give every alert a severity, a summary and a description", () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual(
      [
        "SelfhealAutoRecoveryBurnFast",
        "SelfhealAutoRecoveryBurnSlow",
        "SelfhealCircuitOpenTooLong",
        "SelfhealCollectorDown",
        "SelfhealCollectorExportFailing",
        "SelfhealCollectorQueueFull",
        "SelfhealCollectorRefusingData",
        "SelfhealCollectorDroppingTraces",
        "SelfhealEscalationsHigh",
        "SelfhealHealthCritical",
        "SelfhealRecoveryBudgetExhausted",
        "SelfhealTelemetryAbsent",
        "SelfhealUnknownDiagnosesHigh",
        "SelfhealWatchdogGaveUp",
      ].sort(),
    );
    for (const a of alerts) {
      expect(["page", "ticket"], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description?.length ?? 0, a.alert).toBeGreaterThan(60);
    }
  });

  it("inlining the recording rules leaves no recorded series behind", () => {
    for (const a of alerts) expect(inlineRecordings(a.expr), a.alert).not.toMatch(/\w:\w/);
  });
});

describe("the auto-recovery SLO", () => {
  const header = readFileSync(SELFHEAL_RULES_FILE, "utf8").split("\ngroups:")[0] ?? "";
  const SLO = 0.995;
  const BUDGET = 1 - SLO;
  const MINUTES: Record<string, number> = { m: 1, h: 60, d: 1440 };
  const minutes = (w: string) => Number(w.slice(0, -1)) * (MINUTES[w.slice(-1)] ?? NaN);
  const PERIOD_MIN = 30 * 1440;

  /** The tiers of a burn-rate alert: each `label_replace(long and short and guard, ...)`. */
  const tiers = (name: string) => {
    const a = alert(name);
    return [
      ...a.expr.matchAll(/label_replace\(([\s\S]*?),\s*"long_window", "(\w+)", "", ""\s*\)/g),
    ].map((m) => {
      const body = m[1] ?? "";
      const ratios = [...body.matchAll(/ratio_rate(\w+) > \(([\d.]+) \* ([\d.]+)\)/g)].map((r) => ({
        window: r[1] ?? "",
        factor: Number(r[2]),
        budget: Number(r[3]),
      }));
      const guard = /recoveries:increase(\w+) >= (\d+)/.exec(body);
      return {
        severity: a.labels?.severity,
        label: m[2],
        long: ratios[0]?.window,
        short: ratios[1]?.window,
        factors: ratios.map((r) => r.factor),
        budgets: ratios.map((r) => r.budget),
        guardWindow: guard?.[1],
        guard: Number(guard?.[2]),
      };
    });
  };
  const all = [...tiers("SelfhealAutoRecoveryBurnFast"), ...tiers("SelfhealAutoRecoveryBurnSlow")];

  it("is stated with its target and period in the rules file", () => {
    expect(header).toMatch(
      /99\.5% of the recoveries of each agent end `recovered`, over a rolling 30 days/,
    );
    expect(header).toMatch(/error budget: 0\.5% of recoveries/);
  });

  it("pages on the workbook's 1 h/5 min and 6 h/30 min tiers, tickets on 1 d/2 h and 3 d/6 h", () => {
    expect(all.map((t) => [t.severity, t.long, t.short, t.factors[0]])).toEqual([
      ["page", "1h", "5m", 14.4],
      ["page", "6h", "30m", 6],
      ["ticket", "1d", "2h", 3],
      ["ticket", "3d", "6h", 1],
    ]);
    for (const t of all) {
      // Both windows at the same burn rate, of the SLO's budget; the short one 1/12 of the long.
      expect(t.factors[1], t.label).toBe(t.factors[0]);
      expect(
        t.budgets.every((b) => Math.abs(b - BUDGET) < 1e-12),
        t.label,
      ).toBe(true);
      expect(minutes(t.long ?? "") / minutes(t.short ?? ""), t.label).toBe(12);
      expect(t.label).toBe(t.long);
      // Reachable: a burn rate above 1 / budget would need more than every recovery failing.
      expect((t.factors[0] ?? Infinity) * BUDGET, t.label).toBeLessThan(1);
      // The low-traffic guard counts the tier's long window.
      expect([t.guardWindow, t.guard], t.label).toEqual([t.long, 10]);
    }
  });

  it("spends the budget shares the header's table says before each tier fires", () => {
    const spent = all.map((t) => ((t.factors[0] ?? 0) * minutes(t.long ?? "")) / PERIOD_MIN);
    expect(spent.map((s) => Math.round(s * 1000) / 10)).toEqual([2, 5, 10, 10]);
    for (const [i, t] of all.entries()) {
      const row = new RegExp(
        `^#\\s+${String(i + 1)}\\s+${t.severity ?? ""}\\s+${t.long ?? ""}\\s+${t.short ?? ""}\\s+${String(t.factors[0])}x\\s+> ${String(Math.round((t.factors[0] ?? 0) * BUDGET * 1000) / 10)}%\\s+${String(Math.round((spent[i] ?? 0) * 1000) / 10)}%`,
        "m",
      );
      expect(header, `table row of tier ${String(i + 1)}`).toMatch(row);
    }
  });

  it("has a recording rule for every window a tier reads", () => {
    const recorded = new Set(
      selfhealGroups.flatMap((g) => g.rules.flatMap((r) => (isAlert(r) ? [] : [r.record]))),
    );
    for (const t of all) {
      for (const w of [t.long, t.short])
        expect(recorded, w).toContain(`agent:selfheal_recovery_failures:ratio_rate${w ?? ""}`);
      expect(recorded).toContain(`agent:selfheal_recoveries:increase${t.guardWindow ?? ""}`);
    }
  });
});

/** A meter provider whose data points the test reads when it wants. */
function collecting(): { provider: MeterProvider; collect: () => Promise<ResourceMetrics> } {
  class Reader extends MetricReader {
    protected onForceFlush = () => Promise.resolve();
    protected onShutdown = () => Promise.resolve();
  }
  const reader = new Reader();
  return {
    provider: new SdkMeterProvider({ readers: [reader] }),
    collect: async () => (await reader.collect()).resourceMetrics,
  };
}

/** The attributes of every data point of a metric. */
const pointsOf = (rm: ResourceMetrics, name: string): Record<string, unknown>[] =>
  rm.scopeMetrics.flatMap((s) =>
    s.metrics
      .filter((m) => m.descriptor.name === name)
      .flatMap((m) => m.dataPoints.map((p) => p.attributes as Record<string, unknown>)),
  );

describe("SelfhealTelemetryAbsent", () => {
  const absent = alert("SelfhealTelemetryAbsent");

  it("reads series every agent sends from its first export, before any call", async () => {
    expect(metricNames(absent.expr).sort()).toEqual([
      "selfheal_tasks_total",
      "selfheal_watchdog_verdicts_total",
    ]);
    // A selfheal() instance that has done nothing yet...
    const { provider, collect } = collecting();
    const sh = createSelfHealing({ agent: "idle-bot", meterProvider: provider });
    const points = pointsOf(await collect(), "selfheal_tasks");
    expect(points.map((p) => p.agent)).toContain("idle-bot");
    await sh.close();
    // ...and a supervisor of `selfheal watch` that has judged nothing yet.
    const watch = collecting();
    new WatchdogTelemetry({ agent: "nightly", sessionId: "s1", meterProvider: watch.provider });
    const verdicts = pointsOf(await watch.collect(), "selfheal_watchdog_verdicts");
    expect(verdicts.map((p) => p.agent)).toContain("nightly");
  });

  it("waits ten 60 s pushes and 5 min more, and forgets an agent after a day", () => {
    expect(absent.expr).toMatch(/\[1d\][\s\S]*unless[\s\S]*\[10m\]/);
    expect(absent.for).toBe("5m");
    expect(absent.labels).toEqual({ severity: "ticket" });
  });
});

describe("the Collector's alerts", () => {
  const prometheus = loadYaml("prometheus/prometheus.yml").root;

  it("read metrics otelcol v0.161.0 documents, counters through rate() under both names", () => {
    const problems: string[] = [];
    for (const a of collectorAlerts) {
      expect(a.expr, `${a.alert}: a __name__ regex lets rate() collide`).not.toContain("__name__");
      const inRate = [...a.expr.matchAll(/rate\((otelcol_\w+)\[/g)].map((m) => m[1] ?? "");
      for (const name of inRate) {
        const base = name.replace(/_total$/, "");
        if (OTELCOL_METRICS.get(base) !== "counter")
          problems.push(`${a.alert}: ${name} is no counter`);
        if (!inRate.includes(base) || !inRate.includes(`${base}_total`))
          problems.push(`${a.alert}: ${base} is not read as both ${base} and ${base}_total`);
      }
      const plain = [...a.expr.matchAll(/\b(otelcol_\w+)\b(?!\[)/g)].map((m) => m[1] ?? "");
      for (const name of plain.filter((n) => !inRate.includes(n))) {
        if (OTELCOL_METRICS.get(name) !== "gauge") problems.push(`${a.alert}: ${name} is no gauge`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("SelfhealCollectorDown watches the job compose's Prometheus scrapes the Collector as", () => {
    const job = /up\{job="([^"]+)"\}/.exec(alert("SelfhealCollectorDown").expr)?.[1];
    const jobs = list(prometheus.scrape_configs, "scrape_configs").map((j) =>
      String(record(j, "job").job_name),
    );
    expect(jobs).toContain(job);
  });
});

describe("Grafana-managed alerting (grafana/alerting/)", () => {
  const file = parse(readFileSync(GRAFANA_ALERTING_FILE, "utf8")) as {
    apiVersion: number;
    groups: {
      name: string;
      folder: string;
      interval: string;
      rules: {
        uid: string;
        title: string;
        for: string;
        condition: string;
        noDataState: string;
        execErrState: string;
        labels: Record<string, string>;
        annotations: Record<string, string>;
        data: { refId: string; datasourceUid: string; model: Record<string, unknown> }[];
      }[];
    }[];
  };
  const notifications = parse(readFileSync(GRAFANA_NOTIFICATIONS_FILE, "utf8")) as {
    contactPoints: {
      name: string;
      receivers: { type: string; settings: Record<string, string> }[];
    }[];
    policies: {
      receiver: string;
      group_by: string[];
      routes: { receiver: string; object_matchers: string[][]; repeat_interval: string }[];
    }[];
  };
  const rules = file.groups.flatMap((g) => g.rules);
  const env = (name: string) => `\${${name}}`;

  it("are what generate.ts writes", async () => {
    const files = await generate();
    for (const path of [GRAFANA_ALERTING_FILE, GRAFANA_NOTIFICATIONS_FILE])
      expect(
        readFileSync(path, "utf8"),
        `${path}: run npx tsx test/observability/generate.ts`,
      ).toBe(files[path]);
    expect(parse(files[GRAFANA_ALERTING_FILE] ?? "")).toEqual(buildGrafanaAlerting());
    expect(parse(files[GRAFANA_NOTIFICATIONS_FILE] ?? "")).toEqual(buildGrafanaNotifications());
  });

  it("provisions the same alerts as the Prometheus rules: expressions, for, labels, annotations", () => {
    expect(file.apiVersion).toBe(1);
    expect(rules.map((r) => r.title)).toEqual(alerts.map((a) => a.alert));
    for (const a of alerts) {
      const r = rules.find((x) => x.title === a.alert);
      expect(r?.uid).toBe(ruleUid(a.alert));
      expect(r?.uid.length ?? 99).toBeLessThanOrEqual(40);
      expect(r?.for).toBe(a.for ?? "0s");
      expect(r?.labels).toEqual(a.labels);
      expect(Object.keys(r?.annotations ?? {}).sort()).toEqual(
        Object.keys(a.annotations ?? {}).sort(),
      );
      expect(JSON.stringify(r?.annotations)).not.toMatch(/\$value\b(?!s)/);
      const query = r?.data.find((d) => d.refId === "A");
      expect(query?.model.expr).toBe(inlineRecordings(a.expr));
      expect(r?.data.map((d) => d.refId)).toContain(r?.condition);
    }
  });

  it("takes the data source uid and the runbook base from the environment, and names no uid", () => {
    for (const r of rules) {
      const query = r.data.find((d) => d.refId === "A");
      expect(query?.datasourceUid, r.title).toBe(env(GRAFANA_ENV.datasourceUid.name));
      // The model is not interpolated: a uid there would be the literal text.
      expect(query?.model, r.title).not.toHaveProperty("datasource");
      const anchor = alert(r.title).annotations?.runbook_url?.split("#")[1];
      expect(r.annotations.runbook_url).toBe(
        `${env(GRAFANA_ENV.runbookBase.name)}#${anchor ?? ""}`,
      );
    }
    const values = [...walk(file), ...walk(notifications)].map((n) => n.value);
    expect(values).not.toContain(DATASOURCE_UID);
    expect(values.filter((v) => typeof v === "string" && v.includes(DEFAULT_RUNBOOK_BASE))).toEqual(
      [],
    );
    expect(GRAFANA_ENV.datasourceUid.compose).toBe(DATASOURCE_UID);
  });

  it("treats no data as OK (nothing breaches), absent telemetry being a series, not no data", () => {
    for (const r of rules) {
      expect([r.title, r.noDataState, r.execErrState]).toEqual([r.title, "OK", "Error"]);
    }
    // The absent rule returns a series per silent agent: its condition is any series above 0.
    const absent = rules.find((r) => r.title === "SelfhealTelemetryAbsent");
    expect(absent?.data.find((d) => d.refId === "B")?.model).toMatchObject({
      type: "threshold",
      conditions: [{ evaluator: { type: "gt", params: [0] } }],
    });
  });

  /**
   * What Grafana's file provisioning does to a value it interpolates (os.ExpandEnv over the
   * parts between `$$`, which stands for `$`): `${NAME}` and `$NAME` become the variable's value,
   * empty if unset. Annotations: raw in Grafana releases before grafana/grafana#127214, `${NAME}`
   * only (so `{{ $labels.x }}` survives) from it on; the query model: always raw.
   */
  const expand = (value: string, vars: Record<string, string>, bracedOnly = false) =>
    value
      .split("$$")
      .map((part) =>
        part.replace(
          bracedOnly ? /\$\{(\w+)\}/g : /\$\{(\w+)\}|\$(\w+)/g,
          (_m, a?: string, b?: string) => vars[a ?? b ?? ""] ?? "",
        ),
      )
      .join("$");
  const composeEnv = {
    [GRAFANA_ENV.datasourceUid.name]: GRAFANA_ENV.datasourceUid.compose,
    [GRAFANA_ENV.runbookBase.name]: GRAFANA_ENV.runbookBase.compose,
    [GRAFANA_ENV.pageWebhook.name]: "https://pager.example/hook",
    [GRAFANA_ENV.ticketWebhook.name]: "https://tickets.example/hook",
  };
  /** Every string Grafana interpolates in the two files, with where it is. */
  const interpolated = () => {
    const out: { where: string; value: string }[] = [];
    const add = (where: string, node: unknown) => {
      if (typeof node === "string") out.push({ where, value: node });
      else if (Array.isArray(node) || isRecord(node))
        for (const { path, value } of walk(node))
          if (typeof value === "string") out.push({ where: `${where}.${path.join(".")}`, value });
    };
    for (const g of file.groups) {
      add(`group ${g.name}`, { name: g.name, folder: g.folder, interval: g.interval });
      for (const r of g.rules) {
        // Not the annotations (raw or braced-only, checked below) nor the query models (raw).
        const rest = Object.fromEntries(
          Object.entries(r).filter(([k]) => k !== "annotations" && k !== "data"),
        );
        add(r.title, rest);
        for (const d of r.data) add(`${r.title}.${d.refId}`, { datasourceUid: d.datasourceUid });
      }
    }
    add("notifications", notifications);
    return out;
  };

  it("interpolates to each installation's values and leaves every template alone", () => {
    // Only our references carry a `$` where Grafana interpolates: nothing else is eaten.
    for (const { where, value } of interpolated()) {
      const withoutRefs = Object.values(GRAFANA_ENV).reduce(
        (v, { name }) => v.replaceAll(env(name), ""),
        value,
      );
      expect(withoutRefs, where).not.toContain("$");
    }
    for (const r of rules) {
      const query = r.data.find((d) => d.refId === "A");
      expect(expand(query?.datasourceUid ?? "", composeEnv)).toBe("selfheal-prometheus");
      for (const [k, v] of Object.entries(r.annotations)) {
        const braced = expand(v, composeEnv, true);
        if (k === "runbook_url") expect(braced).toMatch(/^https:\/\/github\.com\/.+#runbook-/);
        else expect(braced, `${r.title}.${k}`).toBe(v);
      }
    }
    const urls = notifications.contactPoints.map((c) =>
      expand(c.receivers[0]?.settings.url ?? "", composeEnv),
    );
    expect(urls).toEqual(["https://pager.example/hook", "https://tickets.example/hook"]);
  });

  const envsubst = which("envsubst");
  it.skipIf(envsubst === undefined)(
    "fills in with the documented envsubst command (HTTP API, Terraform, Grafana Cloud)",
    () => {
      const vars = /^envsubst '([^']+)'$/.exec(ENVSUBST)?.[1] ?? "";
      for (const [path, parsed] of [
        [GRAFANA_ALERTING_FILE, file],
        [GRAFANA_NOTIFICATIONS_FILE, notifications],
      ] as const) {
        const r = spawnSync(envsubst ?? "envsubst", [vars], {
          input: readFileSync(path, "utf8"),
          env: { PATH: process.env.PATH, ...composeEnv },
          encoding: "utf8",
        });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout).not.toMatch(/\$\{SELFHEAL_/);
        const filled = parse(r.stdout) as unknown;
        // What Grafana would make of the file with the same variables, field by field.
        const expected = JSON.parse(
          JSON.stringify(parsed, (_k, v: unknown) =>
            typeof v === "string" ? expand(v, composeEnv, true) : v,
          ),
        ) as unknown;
        expect(filled).toEqual(expected);
      }
    },
  );

  it("notifies through a contact point per severity, routed like Alertmanager routes", () => {
    const am = loadYaml("alertmanager/alertmanager.yml").root;
    const amRoute = record(am.route, "route");
    const severities = [...new Set(alerts.map((a) => a.labels?.severity ?? ""))].sort();
    expect(Object.keys(SEVERITY_ROUTES).sort()).toEqual(severities);
    const [policy] = notifications.policies;
    expect(policy?.group_by).toEqual(GROUP_BY);
    expect([...GROUP_BY].sort()).toEqual(strings(amRoute.group_by, "group_by").sort());
    for (const severity of severities) {
      const route = policy?.routes.find((r) =>
        r.object_matchers.some((m) => m.join(" ") === `severity = ${severity}`),
      );
      const contactPoint = notifications.contactPoints.find((c) => c.name === route?.receiver);
      expect(
        contactPoint?.receivers.map((r) => r.type),
        severity,
      ).toEqual(["webhook"]);
      // The same repeat interval as Alertmanager's route for that severity (or its root's).
      const amRepeat =
        list(amRoute.routes, "routes")
          .map((r) => record(r, "route"))
          .find((r) => strings(r.matchers, "matchers").includes(`severity="${severity}"`))
          ?.repeat_interval ?? amRoute.repeat_interval;
      expect(route?.repeat_interval, severity).toBe(amRepeat);
    }
  });
});
