/**
 * Static checks of the observability files: the dashboard, the Grafana provisioning and the
 * Prometheus rules, without running Prometheus (prometheus-e2e.test.ts does that).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { buildDashboard, DASHBOARD_UID, DATASOURCE_UID } from "./dashboard.js";
import { generate, DASHBOARD_FILE, GRAFANA_ALERTING_FILE } from "./generate.js";
import { buildGrafanaAlerting, ruleUid } from "./grafana-alerting.js";
import { contractMetrics, resolveSeriesName } from "./metric-names.js";
import { alertingRules, allGroups, inlineRecordings, isAlert, metricNames, ROOT } from "./rules.js";

interface Target {
  refId: string;
  expr: string;
  datasource: { type: string; uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig?: { defaults: { unit?: string } };
  targets?: Target[];
}
interface Variable {
  name: string;
  type: string;
  query: string | { query: string };
  datasource?: { uid: string };
  allValue?: string;
}
interface Dashboard {
  uid: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Variable[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as Dashboard;
const panels = dashboard.panels.filter((p) => p.type !== "row");
const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
const yamlFile = (...path: string[]) => parse(readFileSync(join(ROOT, ...path), "utf8")) as unknown;

describe("generated files", () => {
  it("dashboards/selfheal-overview.json and the Grafana alert rules are what generate.ts writes", async () => {
    const files = await generate();
    for (const [file, text] of Object.entries(files)) {
      // Compared as text: prettier formats both, so any difference is a real one.
      expect(
        readFileSync(file, "utf8"),
        `${file}: run npx tsx test/observability/generate.ts`,
      ).toBe(text);
    }
    expect(JSON.parse(files[DASHBOARD_FILE] ?? "")).toEqual(buildDashboard());
    expect(parse(files[GRAFANA_ALERTING_FILE] ?? "")).toEqual(buildGrafanaAlerting());
  });
});

describe("dashboard selfheal-overview", () => {
  it("is a classic JSON model with a Prometheus datasource variable and agent/tool variables", () => {
    expect(dashboard.uid).toBe(DASHBOARD_UID);
    expect(dashboard.schemaVersion).toBe(39);
    const vars = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
    expect(vars.datasource).toMatchObject({ type: "datasource", query: "prometheus" });
    for (const name of ["agent", "tool"]) {
      const v = vars[name];
      expect(v, name).toMatchObject({ type: "query", allValue: ".*" });
      expect(v?.datasource?.uid).toBe("${datasource}");
      const query = typeof v?.query === "string" ? v.query : v?.query.query;
      expect(query).toMatch(new RegExp(`^label_values\\(selfheal_\\w+(\\{[^}]*\\})?, ${name}\\)$`));
    }
  });

  it("has the panels the overview promises", () => {
    const titles = panels.map((p) => p.title);
    expect(titles).toEqual(
      expect.arrayContaining([
        "Health status per agent",
        "Tool-call success rate",
        "P95 tool-call latency",
        "Empty-response rate",
        "Task completion",
        "Incidents per hour by tool",
        "Recovery strategies invoked",
        "MTTR distribution",
        "MTTR percentiles",
        "Auto-recovery rate",
        "UNKNOWN share of diagnoses",
        "Recovery cost per incident",
        "Wasted retries",
        "Failover cost differential per hour",
        "Breaker states",
        "Read-only periods",
        "Time to first token (P50, P95)",
        "Stream failures by pattern",
      ]),
    );
    expect(new Set(titles).size).toBe(titles.length);
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("gives every panel a description, a unit, the ${datasource} and at least one query", () => {
    for (const p of panels) {
      expect(p.description?.length ?? 0, p.title).toBeGreaterThan(20);
      expect(p.fieldConfig?.defaults.unit ?? "", p.title).not.toBe("");
      expect(p.datasource, p.title).toEqual({ type: "prometheus", uid: "${datasource}" });
      expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0);
    }
    for (const t of targets) expect(t.datasource.uid, t.panel).toBe("${datasource}");
  });

  it("uses $__rate_interval as the range of every rate() and increase()", () => {
    let calls = 0;
    for (const t of targets) {
      // Gauge panels read no range; each rate/increase reads one, and no other function does.
      const functions = t.expr.match(/\b(rate|increase|irate|delta|idelta|\w+_over_time)\(/g) ?? [];
      expect(
        functions.every((f) => f === "rate(" || f === "increase("),
        t.expr,
      ).toBe(true);
      const ranges = [...t.expr.matchAll(/\[([^\]]*)\]/g)].map((m) => m[1]);
      expect(ranges.length, `${t.panel}: ${t.expr}`).toBe(functions.length);
      for (const range of ranges) expect(range, `${t.panel}: ${t.expr}`).toBe("$__rate_interval");
      calls += functions.length;
    }
    expect(calls).toBeGreaterThan(20);
  });

  it("filters by $agent everywhere and by $tool wherever the metric has a tool label", () => {
    const withTool = /selfheal_(tool_calls|tool_call_duration|incidents|recover|wasted|stream)/;
    for (const t of targets) {
      for (const selector of t.expr.match(/selfheal_\w+\{[^}]*\}/g) ?? []) {
        expect(selector, t.panel).toContain('agent=~"$agent"');
        if (withTool.test(selector)) expect(selector, t.panel).toContain('tool=~"$tool"');
      }
      expect(t.expr, `${t.panel}: a metric without a selector`).not.toMatch(
        /selfheal_\w+(?![\w{])/,
      );
    }
  });

  it("lays the panels out on the 24-column grid without overlaps", () => {
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      const { x, y, w, h } = p.gridPos;
      expect(x + w, p.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${p.title} overlaps at ${i},${j}`).toBe(false);
          cells.add(`${i},${j}`);
        }
      }
    }
  });
});

describe("metric names in dashboards and rules", () => {
  const contract = contractMetrics();
  const sources = [
    ...targets.map((t) => ({ where: `dashboard panel "${t.panel}"`, expr: t.expr })),
    ...dashboard.templating.list
      .filter((v) => v.type === "query")
      .map((v) => ({
        where: `dashboard variable ${v.name}`,
        expr: typeof v.query === "string" ? v.query : v.query.query,
      })),
    ...allGroups().flatMap((g) =>
      g.rules.map((r) => ({
        where: `rule ${isAlert(r) ? r.alert : r.record}`,
        // An alert may read only recorded series: check what it reads through them.
        expr: isAlert(r) ? inlineRecordings(r.expr) : r.expr,
      })),
    ),
  ];

  it("are metrics of src/telemetry/conventions.ts, with the suffix their kind gets", () => {
    const problems: string[] = [];
    const used = new Set<string>();
    for (const { where, expr } of sources) {
      const names = metricNames(expr);
      if (names.length === 0) problems.push(`${where}: reads no selfheal metric`);
      for (const name of names) {
        const resolved = resolveSeriesName(name, contract);
        if ("error" in resolved) problems.push(`${where}: ${resolved.error}`);
        else used.add(resolved.metric);
      }
    }
    expect(problems).toEqual([]);
    // Every metric selfheal records is on the dashboard.
    const recorded = [...contract].filter(([, kind]) => kind !== undefined).map(([m]) => m);
    expect(recorded.filter((m) => !used.has(m))).toEqual([]);
  });

  it("the name check itself tells right from wrong", () => {
    expect(resolveSeriesName("selfheal_tool_calls_total", contract)).toMatchObject({
      metric: "selfheal_tool_calls",
    });
    expect(resolveSeriesName("selfheal_recovery_duration_seconds_count", contract)).toMatchObject({
      kind: "histogram",
    });
    for (const wrong of [
      "selfheal_tool_calls", // a counter without _total
      "selfheal_health_status_total", // a gauge with it
      "selfheal_recovery_duration_seconds_total",
      "selfheal_tool_call_duration_seconds",
      "selfheal_made_up_total",
    ]) {
      expect(resolveSeriesName(wrong, contract), wrong).toHaveProperty("error");
    }
    expect(
      metricNames('sum(rate(selfheal_a_total{x="selfheal_b"}[5m])) / agent:selfheal_c:x'),
    ).toEqual(["selfheal_a_total"]);
  });
});

describe("Prometheus rules", () => {
  const alerts = alertingRules();
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
  const hasRunbooks = /^## Runbooks$/m.test(readme);
  if (!hasRunbooks)
    console.warn(
      "[skipped] runbook anchors against README.md: it has no '## Runbooks' section yet",
    );

  it("every alert has a severity, a summary, a description and a README runbook", () => {
    expect(alerts.length).toBe(8);
    for (const a of alerts) {
      expect(["page", "ticket"], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description?.length ?? 0, a.alert).toBeGreaterThan(60);
      expect(a.annotations?.runbook_url, a.alert).toMatch(
        /^https:\/\/github\.com\/selfheal\/selfheal#runbook-[a-z0-9-]+$/,
      );
    }
    const urls = alerts.map((a) => a.annotations?.runbook_url);
    expect(new Set(urls).size).toBe(urls.length);
  });

  it.skipIf(!hasRunbooks)("every runbook_url anchor is a heading of README.md", () => {
    for (const a of alerts) {
      const anchor = a.annotations?.runbook_url?.split("#")[1] ?? "";
      expect(anchors.has(anchor), `${a.alert}: README has no heading for #${anchor}`).toBe(true);
    }
  });

  it("inlining the recording rules leaves no recorded series behind", () => {
    for (const a of alerts) expect(inlineRecordings(a.expr), a.alert).not.toMatch(/\w:\w/);
  });
});

describe("Grafana provisioning", () => {
  it("has a Prometheus datasource with the uid the dashboard and alert rules use", () => {
    const file = yamlFile("grafana", "provisioning", "datasources", "prometheus.yml") as {
      apiVersion: number;
      datasources: { uid: string; type: string; url: string }[];
    };
    expect(file.apiVersion).toBe(1);
    expect(file.datasources).toEqual([
      expect.objectContaining({ uid: DATASOURCE_UID, type: "prometheus" }),
    ]);
  });

  it("loads the dashboards folder through a file provider", () => {
    const file = yamlFile("grafana", "provisioning", "dashboards", "selfheal.yml") as {
      apiVersion: number;
      providers: { type: string; options: { path: string } }[];
    };
    expect(file.apiVersion).toBe(1);
    expect(file.providers).toEqual([
      expect.objectContaining({
        type: "file",
        options: expect.objectContaining({ path: "/var/lib/grafana/dashboards" }) as unknown,
      }),
    ]);
  });

  it("provisions the same alerts as the Prometheus rules: expressions, for, labels, annotations", () => {
    const file = parse(readFileSync(GRAFANA_ALERTING_FILE, "utf8")) as {
      apiVersion: number;
      groups: {
        rules: {
          uid: string;
          title: string;
          for: string;
          condition: string;
          labels: Record<string, string>;
          annotations: Record<string, string>;
          data: { refId: string; datasourceUid: string; model: { expr?: string } }[];
        }[];
      }[];
    };
    expect(file.apiVersion).toBe(1);
    const rules = file.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.title)).toEqual(alertingRules().map((a) => a.alert));
    for (const a of alertingRules()) {
      const r = rules.find((x) => x.title === a.alert);
      expect(r?.uid).toBe(ruleUid(a.alert));
      expect(r?.uid.length ?? 99).toBeLessThanOrEqual(40);
      expect(r?.for).toBe(a.for ?? "0s");
      expect(r?.labels).toEqual(a.labels);
      expect(r?.annotations.runbook_url).toBe(a.annotations?.runbook_url);
      expect(Object.keys(r?.annotations ?? {}).sort()).toEqual(
        Object.keys(a.annotations ?? {}).sort(),
      );
      expect(JSON.stringify(r?.annotations)).not.toMatch(/\$value\b(?!s)/);
      const query = r?.data.find((d) => d.refId === "A");
      expect(query?.datasourceUid).toBe(DATASOURCE_UID);
      expect(query?.model.expr).toBe(inlineRecordings(a.expr));
      expect(r?.data.map((d) => d.refId)).toContain(r?.condition);
    }
  });
});
