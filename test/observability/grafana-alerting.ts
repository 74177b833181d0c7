/**
 * The Prometheus alerts of alerts/*.rules.yml as Grafana-provisioned alert rules (file
 * provisioning, apiVersion 1), written to grafana/provisioning/alerting/selfheal-alerts.yml by
 * `npx tsx test/observability/generate.ts`. Recording rules are inlined, so Grafana evaluates
 * the same expressions whether or not Prometheus runs the rules.
 */
import { DATASOURCE_UID } from "./dashboard.js";
import { alertingRules, allGroups, inlineRecordings } from "./rules.js";

export const ALERT_FOLDER = "selfheal";

/** `SelfhealHealthCritical` -> `selfheal-health-critical` (Grafana uids: at most 40 chars). */
export const ruleUid = (alert: string): string =>
  alert.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

/** Prometheus templates see `$value`; Grafana's see each query's value as `$values.A.Value`. */
const grafanaTemplate = (text: string) => text.replace(/\$value\b/g, "$values.A.Value");

export function buildGrafanaAlerting(groups = allGroups()): Record<string, unknown> {
  const rules = alertingRules(groups).map((rule) => ({
    uid: ruleUid(rule.alert),
    title: rule.alert,
    condition: "B",
    data: [
      {
        refId: "A",
        relativeTimeRange: { from: 600, to: 0 },
        datasourceUid: DATASOURCE_UID,
        model: {
          refId: "A",
          datasource: { type: "prometheus", uid: DATASOURCE_UID },
          expr: inlineRecordings(rule.expr, groups),
          instant: true,
          range: false,
          intervalMs: 60_000,
          maxDataPoints: 43_200,
        },
      },
      {
        // Each expression returns only the series that breach (the threshold is in the PromQL,
        // and every breaching value is above 0): any series is an alert.
        refId: "B",
        relativeTimeRange: { from: 0, to: 0 },
        datasourceUid: "__expr__",
        model: {
          refId: "B",
          datasource: { type: "__expr__", uid: "__expr__" },
          type: "threshold",
          expression: "A",
          conditions: [{ evaluator: { type: "gt", params: [0] } }],
        },
      },
    ],
    // No series means nothing breaches.
    noDataState: "OK",
    execErrState: "Error",
    for: rule.for ?? "0s",
    annotations: Object.fromEntries(
      Object.entries(rule.annotations ?? {}).map(([k, v]) => [k, grafanaTemplate(v)]),
    ),
    labels: rule.labels ?? {},
    isPaused: false,
  }));
  return {
    apiVersion: 1,
    groups: [{ orgId: 1, name: "selfheal", folder: ALERT_FOLDER, interval: "1m", rules }],
  };
}
