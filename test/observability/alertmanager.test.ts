/**
 * alertmanager/alertmanager.yml, the stack's one notification path: statically (routes by
 * severity, grouping, inhibition, a receiver for every severity the rules use), through Debian's
 * `amtool` 0.25 (`check-config`, `config routes test` with every alert's labels), and on a real
 * Alertmanager (Debian's `prometheus-alertmanager`) on 127.0.0.1, sent the alerts the rules make:
 * what reaches each receiver's webhook (a local HTTP server standing in for the placeholders), one
 * notification per alert and agent, and what the inhibition holds back. Without the binaries the
 * suites are skipped with a notice locally and fail under CI=true (.ci/run installs them).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { list, loadYaml, record, ROOT, strings, type YamlRecord } from "./config-files.js";
import { alertingRules } from "./rules.js";

const run = promisify(execFile);
const CONFIG = join(ROOT, "alertmanager", "alertmanager.yml");
const AMTOOL = which("amtool", process.env.AMTOOL_PATH);
const ALERTMANAGER =
  which("alertmanager", process.env.ALERTMANAGER_PATH) ?? which("prometheus-alertmanager");

const config = loadYaml("alertmanager/alertmanager.yml").root;
const route = record(config.route, "route");
const routes = list(route.routes, "route.routes").map((r) => record(r, "route"));
const receivers = list(config.receivers, "receivers").map((r) => record(r, "receiver"));
const inhibitRules = list(config.inhibit_rules, "inhibit_rules").map((r) => record(r, "rule"));
const severities = [...new Set(alertingRules().map((a) => a.labels?.severity ?? ""))].sort();

describe("alertmanager/alertmanager.yml (static)", () => {
  it("routes each severity the rules use to the receiver of that name", () => {
    expect(severities).toEqual(["page", "ticket"]);
    for (const severity of severities) {
      const matching = routes.filter((r) =>
        strings(r.matchers, "matchers").includes(`severity="${severity}"`),
      );
      expect(
        matching.map((r) => r.receiver),
        severity,
      ).toEqual([severity]);
    }
    expect(receivers.map((r) => r.name).sort()).toEqual(severities);
    // An alert with no severity still reaches someone.
    expect(severities).toContain(route.receiver);
  });

  it("sends one notification per alert and agent", () => {
    expect(strings(route.group_by, "group_by").sort()).toEqual(["agent", "alertname"]);
    for (const r of routes) expect(r.group_by, String(r.receiver)).toBeUndefined();
  });

  it("holds back an agent's tickets while it pages, and absent telemetry while no Collector is up", () => {
    expect(inhibitRules).toContainEqual({
      source_matchers: ['severity="page"'],
      target_matchers: ['severity="ticket"'],
      equal: ["agent"],
    });
    expect(inhibitRules).toContainEqual({
      source_matchers: ['alertname="SelfhealCollectorDown"'],
      target_matchers: ['alertname="SelfhealTelemetryAbsent"'],
    });
    const names = new Set(alertingRules().map((a) => a.alert));
    for (const rule of inhibitRules) {
      for (const m of [
        ...strings(rule.source_matchers, "source"),
        ...strings(rule.target_matchers, "target"),
      ]) {
        const alertname = /^alertname="(.*)"$/.exec(m)?.[1];
        if (alertname !== undefined) expect(names, m).toContain(alertname);
      }
    }
  });

  it("has a webhook per receiver, a placeholder that can never reach anyone by accident", () => {
    for (const r of receivers) {
      const hooks = list(r.webhook_configs, `${String(r.name)}.webhook_configs`).map((h) =>
        record(h, "webhook"),
      );
      expect(hooks).toHaveLength(1);
      expect(new URL(String(hooks[0]?.url)).hostname).toMatch(/\.invalid$/);
      expect(hooks[0]?.send_resolved).toBe(true);
    }
  });
});

const haveAmtool = haveAll(
  "amtool checks of alertmanager/alertmanager.yml",
  AMTOOL ? [] : ["amtool"],
  "apt-get install prometheus-alertmanager",
);

describe.skipIf(!haveAmtool)("amtool", () => {
  it("check-config accepts alertmanager/alertmanager.yml", async () => {
    const { stdout } = await run(AMTOOL ?? "amtool", ["check-config", CONFIG]);
    expect(stdout).toMatch(/SUCCESS/);
    expect(stdout).toMatch(/2 inhibit rules/);
  });

  it.each(alertingRules().map((a) => [a.alert, a.labels ?? {}] as const))(
    "routes %s to the receiver of its severity",
    async (alertname, labels) => {
      const args = Object.entries({ alertname, agent: "bot", ...labels }).map(
        ([k, v]) => `${k}=${v}`,
      );
      const { stdout } = await run(AMTOOL ?? "amtool", [
        "config",
        "routes",
        "test",
        `--config.file=${CONFIG}`,
        ...args,
      ]);
      expect(stdout.trim()).toBe(labels.severity);
    },
  );
});

const haveAlertmanager = haveAll(
  "a real Alertmanager on alertmanager/alertmanager.yml",
  ALERTMANAGER ? [] : ["alertmanager (prometheus-alertmanager)"],
  "apt-get install prometheus-alertmanager",
);

interface WebhookMessage {
  receiver: string;
  status: string;
  groupLabels: Record<string, string>;
  alerts: { labels: Record<string, string> }[];
}

describe.skipIf(!haveAlertmanager)("a real Alertmanager on alertmanager/alertmanager.yml", () => {
  let dir = "";
  let child: ChildProcess | undefined;
  let hooks: Server | undefined;
  let url = "";
  let log = "";
  const received: WebhookMessage[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "selfheal-alertmanager-"));
    const hookPort = await freePort();
    hooks = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        received.push(JSON.parse(body) as WebhookMessage);
        res.end();
      });
    });
    await new Promise<void>((resolve) => hooks?.listen(hookPort, "127.0.0.1", resolve));

    // The file as shipped, but the placeholders point at the local server and groups are sent
    // after 1 s instead of 30 s (10 s for pages): routes, grouping and inhibition are the file's.
    const copy = parse(readFileSync(CONFIG, "utf8")) as YamlRecord;
    const copyRoute = record(copy.route, "route");
    copyRoute.group_wait = "1s";
    for (const r of list(copyRoute.routes, "routes")) record(r, "route").group_wait = "1s";
    for (const r of list(copy.receivers, "receivers")) {
      const receiver = record(r, "receiver");
      for (const h of list(receiver.webhook_configs, "webhook_configs"))
        record(h, "webhook").url = `http://127.0.0.1:${hookPort}/${String(receiver.name)}`;
    }
    writeFileSync(join(dir, "alertmanager.yml"), stringify(copy));

    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    child = spawn(
      ALERTMANAGER ?? "alertmanager",
      [
        `--config.file=${join(dir, "alertmanager.yml")}`,
        `--storage.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--cluster.listen-address=",
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    child.stderr?.on("data", (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4_000);
    });
    const deadline = Date.now() + 60_000; // a busy machine may take seconds (issue 27)
    for (;;) {
      const ready = await fetch(`${url}/-/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`alertmanager not ready:\n${log}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // What Prometheus would send while these alerts fire.
    const alert = (labels: Record<string, string>) => ({
      labels,
      annotations: { summary: labels.alertname ?? "" },
      startsAt: new Date().toISOString(),
      generatorURL: "http://localhost:9090/graph",
    });
    const response = await fetch(`${url}/api/v2/alerts`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify([
        alert({ alertname: "SelfhealHealthCritical", agent: "bot", severity: "page" }),
        alert({ alertname: "SelfhealEscalationsHigh", agent: "bot", severity: "ticket" }),
        alert({ alertname: "SelfhealEscalationsHigh", agent: "other-bot", severity: "ticket" }),
        alert({
          alertname: "SelfhealAutoRecoveryBurnFast",
          agent: "bot",
          long_window: "1h",
          severity: "page",
          slo: "auto-recovery",
        }),
        alert({
          alertname: "SelfhealAutoRecoveryBurnFast",
          agent: "bot",
          long_window: "6h",
          severity: "page",
          slo: "auto-recovery",
        }),
        alert({ alertname: "SelfhealCollectorDown", job: "otel-collector", severity: "page" }),
        alert({ alertname: "SelfhealTelemetryAbsent", agent: "quiet-bot", severity: "ticket" }),
      ]),
    });
    expect(response.ok, await response.text()).toBe(true);
    // Every group is sent after its 1 s wait; give them a few.
    const until = Date.now() + 60_000;
    while (received.length < 4 && Date.now() < until)
      await new Promise((resolve) => setTimeout(resolve, 200));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }, 180_000);

  afterAll(async () => {
    if (child?.pid !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child?.once("exit", resolve));
      process.kill(child.pid, "SIGTERM");
      await exited;
    }
    await new Promise<void>((resolve) => {
      if (hooks)
        hooks.close(() => {
          resolve();
        });
      else resolve();
    });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const sent = (receiver: string) =>
    received
      .filter((m) => m.receiver === receiver && m.status === "firing")
      .map((m) => ({
        group: m.groupLabels,
        alerts: m.alerts.map((a) => a.labels.long_window ?? a.labels.alertname).sort(),
      }))
      .sort((a, b) => JSON.stringify(a.group).localeCompare(JSON.stringify(b.group)));

  it("pages once per alert and agent, the burn-rate tiers of an agent in one notification", () => {
    expect(sent("page"), log).toEqual([
      {
        group: { agent: "bot", alertname: "SelfhealAutoRecoveryBurnFast" },
        alerts: ["1h", "6h"],
      },
      {
        group: { agent: "bot", alertname: "SelfhealHealthCritical" },
        alerts: ["SelfhealHealthCritical"],
      },
      { group: { alertname: "SelfhealCollectorDown" }, alerts: ["SelfhealCollectorDown"] },
    ]);
  });

  it("opens tickets only for agents that are not paging, and not for absent telemetry while no Collector is up", () => {
    expect(sent("ticket"), log).toEqual([
      {
        group: { agent: "other-bot", alertname: "SelfhealEscalationsHigh" },
        alerts: ["SelfhealEscalationsHigh"],
      },
    ]);
  });

  it("shows the held-back tickets as inhibited", async () => {
    const alerts = (await (await fetch(`${url}/api/v2/alerts`)).json()) as {
      labels: Record<string, string>;
      status: { state: string; inhibitedBy: string[] };
    }[];
    const inhibited = alerts
      .filter((a) => a.status.inhibitedBy.length > 0)
      .map((a) => `${a.labels.alertname ?? ""}/${a.labels.agent ?? ""}`)
      .sort();
    expect(inhibited).toEqual(["SelfhealEscalationsHigh/bot", "SelfhealTelemetryAbsent/quiet-bot"]);
  });
});
