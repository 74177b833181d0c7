/**
 * Static checks of the observability files: the dashboard, the Grafana provisioning and the
 * Prometheus rules, without running Prometheus (prometheus-e2e.test.ts does that).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultDashboard } from "@grafana/schema";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import * as conventions from "../../src/telemetry/conventions.js";
import { walk } from "./config-files.js";
import {
  buildDashboard,
  DASHBOARD_UID,
  DATASOURCE_UID,
  SCHEMA_VERSION,
  TEMPO_UID,
} from "./dashboard.js";
import { generate, DASHBOARD_FILE, GRAFANA_ALERTING_FILE } from "./generate.js";
import { buildGrafanaAlerting } from "./grafana-alerting.js";
import { provisionedDataSource, provisionedDataSources } from "./grafana-provisioning.js";
import { contractMetrics, resolveSeriesName } from "./metric-names.js";
import {
  inlineRecordings,
  isAlert,
  loadGroups,
  metricNames,
  ROOT,
  SELFHEAL_RULES_FILE,
} from "./rules.js";
import { SPAN_METRICS_LABELS, spanMetricNames, spanMetricsConfig } from "./span-metrics.js";

interface Target {
  refId: string;
  expr: string;
  datasource: { type: string; uid: string };
  exemplar?: boolean;
}
interface DataLink {
  title: string;
  url: string;
  internal?: { datasourceUid: string; query: { queryType: string; query: string } };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig?: { defaults: { unit?: string; links?: DataLink[] } };
  targets?: Target[];
}
interface Variable {
  name: string;
  type: string;
  query: string | { query: string };
  datasource?: { uid: string };
  allValue?: string;
  current?: { text?: unknown; value?: unknown };
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

/**
 * The expression without label names (grouping lists, matchers' names), so that a label such as
 * `selfheal_diagnosis_pattern` or `gen_ai_token_type` is not taken for a metric.
 */
const withoutLabels = (expr: string) =>
  expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "")
    .replace(/\b\w+\s*(?:=~|!~|!=|=)\s*""/g, "");
/** Metrics an expression reads beyond selfheal_* ones: GenAI semconv and span metrics. */
const otherNames = (expr: string) => [
  ...new Set(withoutLabels(expr).match(/\b(?:gen_ai_(?:client|server)|traces_span_metrics)_\w+/g)),
];
const span = spanMetricNames(spanMetricsConfig());
const spanSeries = new Set([
  span.calls,
  ...["bucket", "sum", "count"].map((x) => `${span.duration}_${x}`),
]);

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

  it("is schema 42, the version of the pinned @grafana/schema, which matches compose's Grafana", () => {
    expect(dashboard.schemaVersion).toBe(42);
    expect(SCHEMA_VERSION).toBe(defaultDashboard.schemaVersion);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
    };
    const pinned = pkg.devDependencies["@grafana/schema"];
    expect(pinned, "exactly pinned (npm install -D --save-exact)").toMatch(/^\d+\.\d+\.\d+$/);
    const compose = readFileSync(join(ROOT, "docker-compose.yml"), "utf8");
    expect(compose).toContain(`image: grafana/grafana:${pinned ?? ""}`);
  });

  it("writes variables as Grafana's schema has them: no `definition`, a `current` with text and value", () => {
    for (const v of dashboard.templating.list) {
      expect(v, v.name).not.toHaveProperty("definition");
      expect(v.current?.text, `${v.name}: current.text`).toBeDefined();
      expect(v.current?.value, `${v.name}: current.value`).toBeDefined();
    }
    const ds = dashboard.templating.list.find((v) => v.type === "datasource");
    expect(ds?.current?.value).toBe(DATASOURCE_UID);
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
        "Tokens per minute by model",
        "Model cost per hour by model",
        "Tool calls per minute (from spans)",
        "Tool-call error rate (from spans)",
        "P95 tool-call duration (from spans)",
        "Diagnosis spans per minute by pattern",
        "Recovery spans per minute by strategy",
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
    const withTool =
      /^(selfheal_(tool_calls|tool_call_duration|incidents|recover|wasted|stream|llm_cost)|gen_ai_client_token_usage|traces_span_metrics)/;
    const selectors = /\b(?:selfheal|gen_ai|traces_span_metrics)_\w+\{[^}]*\}/g;
    for (const t of targets) {
      for (const selector of t.expr.match(selectors) ?? []) {
        expect(selector, t.panel).toContain('agent=~"$agent"');
        if (withTool.test(selector)) expect(selector, t.panel).toContain('tool=~"$tool"');
      }
      expect(withoutLabels(t.expr), `${t.panel}: a metric without a selector`).not.toMatch(
        /\b(?:selfheal|gen_ai_client|traces_span_metrics)_\w+(?![\w{])/,
      );
    }
  });

  it("asks for exemplars on every latency and duration panel (dots that open a trace)", () => {
    const timed = panels.filter(
      (p) => p.type === "timeseries" && p.fieldConfig?.defaults.unit === "s",
    );
    expect(timed.length).toBeGreaterThanOrEqual(4);
    for (const p of timed)
      for (const t of p.targets ?? []) expect(t.exemplar, `${p.title} [${t.refId}]`).toBe(true);
  });

  it("links series to their traces in Tempo, by labels the series have and attributes the spans have", () => {
    const attributes = new Set(
      Object.entries(conventions)
        .filter(([k, v]) => k.startsWith("ATTR_") && typeof v === "string")
        .map(([, v]) => v as string),
    );
    const linked = panels.filter((p) => (p.fieldConfig?.defaults.links ?? []).length > 0);
    expect(linked.length).toBeGreaterThanOrEqual(10);
    for (const p of linked) {
      // Labels every query of the panel keeps (its outer `sum by (...)`).
      const kept = (p.targets ?? []).map(
        (t) => new Set((/\bby \(([^)]*)\)/.exec(t.expr)?.[1] ?? "").split(/,\s*/)),
      );
      for (const link of p.fieldConfig?.defaults.links ?? []) {
        expect(link.internal?.datasourceUid, p.title).toBe(TEMPO_UID);
        expect(link.internal?.query.queryType, p.title).toBe("traceql");
        const text = `${link.title} ${link.internal?.query.query ?? ""}`;
        for (const [, label] of text.matchAll(/\$\{__field\.labels\.(\w+)\}/g))
          for (const k of kept) expect(k.has(label ?? ""), `${p.title}: ${label ?? ""}`).toBe(true);
        for (const [, attribute] of (link.internal?.query.query ?? "").matchAll(
          /\bspan\.([\w.]+)/g,
        ))
          expect(attributes.has(attribute ?? ""), `${p.title}: span.${attribute ?? ""}`).toBe(true);
      }
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
    // selfheal's rules; the Collector's (collector.rules.yml) read otelcol_* metrics, which
    // alerting.test.ts checks against the Collector's documentation.
    ...loadGroups(SELFHEAL_RULES_FILE).flatMap((g) =>
      g.rules.map((r) => ({
        where: `rule ${isAlert(r) ? r.alert : r.record}`,
        // An alert may read only recorded series: check what it reads through them.
        expr: isAlert(r) ? inlineRecordings(r.expr, loadGroups(SELFHEAL_RULES_FILE)) : r.expr,
      })),
    ),
  ];

  it("are metrics of src/telemetry/conventions.ts, with the suffix their kind gets", () => {
    const problems: string[] = [];
    const used = new Set<string>();
    for (const { where, expr } of sources) {
      const names = [
        ...metricNames(withoutLabels(expr)),
        ...otherNames(expr).filter((n) => !n.startsWith("traces_")),
      ];
      const spanMetrics = otherNames(expr).filter((n) => n.startsWith("traces_"));
      if (names.length === 0 && spanMetrics.length === 0)
        problems.push(`${where}: reads no selfheal metric`);
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

  it("read the Collector's span metrics by the names its span_metrics connector gives them", () => {
    const read = targets.flatMap((t) => otherNames(t.expr).filter((n) => n.startsWith("traces_")));
    expect(read.length).toBeGreaterThan(0);
    for (const name of read) expect(spanSeries, name).toContain(name);
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

// The alert rules' own checks (severities, runbook links, the SLO's tiers, the Grafana-managed
// copy in grafana/alerting/): alerting.test.ts.

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

  it("gives Prometheus the push interval as timeInterval, and sends its exemplars' trace_id to Tempo", () => {
    const prometheus = provisionedDataSource(DATASOURCE_UID);
    expect(prometheus.jsonData.timeInterval).toBe("60s");
    // Prometheus's OTLP receiver and the Collector's remote write both name the trace `trace_id`.
    expect(prometheus.jsonData.exemplarTraceIdDestinations).toEqual([
      expect.objectContaining({ name: "trace_id", datasourceUid: TEMPO_UID }),
    ]);
  });

  it("runs compose's Prometheus with exemplar storage (an off-by-default feature in 2.x and 3.x)", () => {
    const compose = yamlFile("docker-compose.yml") as {
      services: Record<string, { command?: string[] }>;
    };
    const flags = compose.services.prometheus?.command ?? [];
    expect(
      flags.some((f) => /^--enable-feature=(.+,)?exemplar-storage(,.+)?$/.test(f)),
      `prometheus command: ${flags.join(" ")}`,
    ).toBe(true);
  });

  it("provisions Tempo (the compose service), with trace to metrics by agent and tool", () => {
    const tempo = provisionedDataSource(TEMPO_UID);
    expect(tempo).toMatchObject({ type: "tempo", url: "http://tempo:3200" });
    const tempoConfig = yamlFile("tempo", "tempo.yaml") as { server: { http_listen_port: number } };
    expect(tempoConfig.server.http_listen_port).toBe(3200);
    const compose = yamlFile("docker-compose.yml") as {
      services: Record<string, { volumes?: string[] }>;
    };
    expect(compose.services.tempo).toBeDefined();
    // Grafana loads the data source files (the provisioning folder, or its datasources folder).
    expect(compose.services.grafana?.volumes ?? []).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^\.\/grafana\/provisioning(\/datasources)?:\/etc\/grafana\/provisioning(\/datasources)?(:ro)?$/,
        ),
      ]),
    );
    const t2m = tempo.jsonData.tracesToMetrics as {
      datasourceUid: string;
      tags: { key: string; value: string }[];
      queries: { name: string; query: string }[];
    };
    expect(t2m.datasourceUid).toBe(DATASOURCE_UID);
    expect(Object.fromEntries(t2m.tags.map((t) => [t.key, t.value]))).toEqual(SPAN_METRICS_LABELS);
    const contract = contractMetrics();
    for (const q of t2m.queries) {
      // `$$` is a literal `$` in provisioning files (a single `$` is an environment variable).
      const query = q.query.replaceAll("$$", "$");
      expect(query, q.name).toContain("{");
      expect(query, q.name).toMatch(/\$__tags\}/);
      for (const name of metricNames(withoutLabels(query)))
        expect(resolveSeriesName(name, contract), `${q.name}: ${name}`).not.toHaveProperty("error");
      for (const name of otherNames(query))
        expect(spanSeries, `${q.name}: ${name}`).toContain(name);
    }
  });

  it("escapes every `$` of the data source files (Grafana would read `$name` as a variable)", () => {
    for (const ds of provisionedDataSources())
      for (const { path, value } of walk(ds.jsonData))
        if (typeof value === "string")
          expect(value.replaceAll("$$", ""), `${ds.file}: ${path.join(".")}`).not.toContain("$");
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
});
