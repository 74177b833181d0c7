/**
 * The alerts of alerts/*.rules.yml as Grafana-managed alerting (file provisioning, apiVersion 1):
 * the alternative to Prometheus + Alertmanager for Grafana Cloud or a Grafana that evaluates
 * alerts itself. `npx tsx test/observability/generate.ts` writes
 * - grafana/alerting/selfheal-alerts.yml: the alert rules, recording rules inlined, so Grafana
 *   evaluates the same expressions whether or not Prometheus runs the recording rules;
 * - grafana/alerting/selfheal-notifications.yml: a contact point per severity (webhooks) and the
 *   notification policy that routes `page` and `ticket` to them.
 * The compose stack does not load them (it notifies through Alertmanager): one path, not both.
 *
 * What differs between installations comes from environment variables that Grafana interpolates
 * when it reads provisioning files (`${NAME}`, https://grafana.com/docs/grafana/latest/administration/provisioning/#use-environment-variables),
 * or that `envsubst` fills in for the HTTP API and Terraform (Grafana Cloud reads no files):
 * GRAFANA_ENV below.
 */
import { alertingRules, allGroups, inlineRecordings } from "./rules.js";

export const ALERT_FOLDER = "selfheal";

/** The environment variables the generated files read, and their defaults for the compose stack. */
export const GRAFANA_ENV = {
  /**
   * The uid of the Prometheus data source in that Grafana (`selfheal-prometheus` in the compose
   * stack, grafana/provisioning/datasources/; `grafanacloud-<stack>-prom` style on Grafana Cloud).
   */
  datasourceUid: { name: "SELFHEAL_PROMETHEUS_DATASOURCE_UID", compose: "selfheal-prometheus" },
  /** Where the README's "Runbooks" chapter is: `<base>#runbook-...`. */
  runbookBase: {
    name: "SELFHEAL_RUNBOOK_BASE_URL",
    compose: "https://github.com/selfheal/selfheal",
  },
  /** Webhooks of the two contact points. */
  pageWebhook: { name: "SELFHEAL_PAGE_WEBHOOK_URL", compose: undefined },
  ticketWebhook: { name: "SELFHEAL_TICKET_WEBHOOK_URL", compose: undefined },
} as const;

/**
 * The base of every `runbook_url` of alerts/*.rules.yml: the package's homepage (package.json
 * `homepage`, without its `#readme`), whose README holds the "Runbooks" chapter.
 */
export const DEFAULT_RUNBOOK_BASE = GRAFANA_ENV.runbookBase.compose;

/** `${NAME}`: a reference both Grafana's provisioning and `envsubst` expand. */
export const envRef = (name: string): string => `\${${name}}`;

/** `SelfhealHealthCritical` -> `selfheal-health-critical` (Grafana uids: at most 40 chars). */
export const ruleUid = (alert: string): string =>
  alert.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

/** Prometheus templates see `$value`; Grafana's see each query's value as `$values.A.Value`. */
const grafanaTemplate = (text: string) => text.replace(/\$value\b/g, "$values.A.Value");

/** A Prometheus rule's `runbook_url` with the default base swapped for the environment's. */
export function grafanaRunbookUrl(url: string): string {
  const prefix = `${DEFAULT_RUNBOOK_BASE}#`;
  if (!url.startsWith(prefix)) throw new Error(`runbook_url ${url} does not start with ${prefix}`);
  return `${envRef(GRAFANA_ENV.runbookBase.name)}#${url.slice(prefix.length)}`;
}

export function buildGrafanaAlerting(groups = allGroups()): Record<string, unknown> {
  const datasourceUid = envRef(GRAFANA_ENV.datasourceUid.name);
  const rules = alertingRules(groups).map((rule) => ({
    uid: ruleUid(rule.alert),
    title: rule.alert,
    condition: "B",
    data: [
      {
        refId: "A",
        relativeTimeRange: { from: 600, to: 0 },
        // Interpolated by Grafana (a provisioning field). The query model is not (Grafana keeps it
        // raw, for the `$__` macros), so it names no data source: Grafana queries datasourceUid.
        datasourceUid,
        model: {
          refId: "A",
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
    // No series means nothing breaches, for every rule: each expression returns a series exactly
    // when its condition holds. That includes SelfhealTelemetryAbsent: an agent that stopped
    // reporting IS a series (from the day of data before it went quiet), so OK cannot hide it,
    // while NoData or Alerting would raise every quiet threshold rule and make "all agents
    // report" (the absent rule's empty answer) an alert. A data source that fails is Error.
    noDataState: "OK",
    execErrState: "Error",
    for: rule.for ?? "0s",
    annotations: Object.fromEntries(
      Object.entries(rule.annotations ?? {}).map(([k, v]) => [
        k,
        k === "runbook_url" ? grafanaRunbookUrl(v) : grafanaTemplate(v),
      ]),
    ),
    labels: rule.labels ?? {},
    isPaused: false,
  }));
  return {
    apiVersion: 1,
    groups: [{ orgId: 1, name: "selfheal", folder: ALERT_FOLDER, interval: "1m", rules }],
  };
}

/** The contact point each severity goes to, and how often it is told again while it lasts. */
export const SEVERITY_ROUTES = {
  page: { contactPoint: "selfheal-page", webhook: GRAFANA_ENV.pageWebhook.name, repeat: "4h" },
  ticket: {
    contactPoint: "selfheal-ticket",
    webhook: GRAFANA_ENV.ticketWebhook.name,
    repeat: "24h",
  },
} as const;

/** One notification per alert and agent (all its instances: windows, tools, dependencies). */
export const GROUP_BY = ["alertname", "agent"];

export function buildGrafanaNotifications(): Record<string, unknown> {
  const routes = Object.entries(SEVERITY_ROUTES);
  return {
    apiVersion: 1,
    contactPoints: routes.map(([, r]) => ({
      orgId: 1,
      name: r.contactPoint,
      receivers: [
        {
          uid: `${r.contactPoint}-webhook`,
          type: "webhook",
          settings: { url: envRef(r.webhook), httpMethod: "POST" },
          disableResolveMessage: false,
        },
      ],
    })),
    policies: [
      {
        orgId: 1,
        // Anything without a known severity is a ticket rather than lost.
        receiver: SEVERITY_ROUTES.ticket.contactPoint,
        group_by: GROUP_BY,
        group_wait: "30s",
        group_interval: "5m",
        repeat_interval: SEVERITY_ROUTES.ticket.repeat,
        routes: routes.map(([severity, r]) => ({
          receiver: r.contactPoint,
          object_matchers: [["severity", "=", severity]],
          repeat_interval: r.repeat,
        })),
      },
    ],
  };
}
