/**
 * alerts/collector.rules.yml against a real Collector: the distribution of
 * collector/builder-config.yaml (otelcol-contrib v0.161.0 components, built by
 * scripts/build-collector.sh; this suite does not build it) runs on 127.0.0.1 in the states the
 * alerts describe (an exporter whose backend is away behind a one-batch queue, an exporter without
 * queue that fails outright, tail sampling with room for one trace), its own metrics are scraped every
 * second by Debian's Prometheus 2.42 as job `otel-collector`, and each alert's expression (its
 * `for` aside) must hold, with the labels its annotations name. Then the Collector stops and
 * SelfhealCollectorDown's expression must hold. So the metric names, their suffixes, labels and
 * types in the rules are the ones a real Collector exposes, not just the documented ones.
 *
 * The binary: $SELFHEAL_OTELCOL if set, else the one scripts/build-collector.sh has built. Without
 * it or Prometheus the suite is skipped with a notice locally and fails under CI=true.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { ROOT } from "./config-files.js";
import { haveBinaries, startPrometheus, type RunningPrometheus } from "./prometheus.js";
import { alertingRules, ALERTS_DIR, loadGroups } from "./rules.js";

const SUITE = "Collector alerts on a real Collector";
const BUILD_SCRIPT = join(ROOT, "scripts", "build-collector.sh");
const OTELCOL: string | undefined = (() => {
  const override = process.env.SELFHEAL_OTELCOL;
  if (override !== undefined) return which("otelcol", override);
  if (!existsSync(BUILD_SCRIPT)) return undefined;
  const r = spawnSync("bash", [BUILD_SCRIPT, "--path"], { encoding: "utf8" });
  const path = r.status === 0 ? r.stdout.trim().split("\n").pop() : undefined;
  return path !== undefined ? which("otelcol", path) : undefined;
})();

const available =
  haveBinaries(SUITE, { prometheus: true }) &&
  haveAll(
    SUITE,
    OTELCOL === undefined ? ["built Collector (otelcol-selfheal)"] : [],
    "bash scripts/build-collector.sh, or set SELFHEAL_OTELCOL",
  );

const RULES_FILE = join(ALERTS_DIR, "collector.rules.yml");
const alerts = alertingRules(loadGroups(RULES_FILE));
const exprOf = (name: string): string => {
  const alert = alerts.find((a) => a.alert === name);
  if (!alert) throw new Error(`no alert ${name} in ${RULES_FILE}`);
  return alert.expr;
};

let dir = "";
let collector: ChildProcess | undefined;
let collectorLog = "";
let prometheus: RunningPrometheus | undefined;
let otlpUrl = "";
let telemetryUrl = "";
/** The Collector's own metrics at the end of the traffic, for failure messages. */
let scraped = "";
/**
 * When the traffic ended: the alerts on it are evaluated at this time, so a test that runs after
 * the one that stops the Collector (any order, --sequence.shuffle) still sees its series.
 */
let trafficEnd = 0;

async function stopCollector(): Promise<void> {
  const child = collector;
  if (child?.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  process.kill(child.pid, "SIGTERM");
  await exited;
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex");
const nowNs = () => `${String(Date.now())}000000`;

/** Three new traces of one span each, and one gauge point, over OTLP/HTTP JSON. */
async function pushTelemetry(): Promise<void> {
  const spans = Array.from({ length: 3 }, () => ({
    traceId: hex(16),
    spanId: hex(8),
    name: "agent.tool_call",
    kind: 1,
    startTimeUnixNano: nowNs(),
    endTimeUnixNano: nowNs(),
  }));
  const resource = { attributes: [{ key: "service.name", value: { stringValue: "probe" } }] };
  const traces = await fetch(`${otlpUrl}/v1/traces`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ resourceSpans: [{ resource, scopeSpans: [{ spans }] }] }),
  });
  await traces.body?.cancel();
  const metrics = await fetch(`${otlpUrl}/v1/metrics`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      resourceMetrics: [
        {
          resource,
          scopeMetrics: [
            {
              metrics: [
                { name: "probe", gauge: { dataPoints: [{ asDouble: 1, timeUnixNano: nowNs() }] } },
              ],
            },
          ],
        },
      ],
    }),
  });
  await metrics.body?.cancel();
}

beforeAll(async () => {
  if (!available) return;
  dir = mkdtempSync(join(tmpdir(), "selfheal-collector-alerts-"));
  const [http, health, telemetry, away] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  otlpUrl = `http://127.0.0.1:${String(http)}`;
  telemetryUrl = `http://127.0.0.1:${String(telemetry)}/metrics`;
  writeFileSync(
    join(dir, "collector.yaml"),
    stringify({
      extensions: { health_check: { endpoint: `127.0.0.1:${String(health)}` } },
      receivers: { otlp: { protocols: { http: { endpoint: `127.0.0.1:${String(http)}` } } } },
      processors: {
        // Room for one trace: of the three each push brings, the first two are evicted before
        // their decision, which counts them as dropped too early when it comes due (1 s later).
        tail_sampling: {
          decision_wait: "1s",
          num_traces: 1,
          policies: [{ name: "all", type: "always_sample" }],
        },
      },
      exporters: {
        // A backend that is away, behind a one-batch queue whose one consumer waits 30 s to
        // retry: the queue fills, then refuses new batches (enqueue_failed).
        "otlp_http/away": {
          endpoint: `http://127.0.0.1:${String(away)}`,
          retry_on_failure: {
            enabled: true,
            initial_interval: "30s",
            max_interval: "30s",
            max_elapsed_time: "0s",
          },
          sending_queue: { enabled: true, num_consumers: 1, queue_size: 1 },
        },
        // The same backend without queue or retry: sends fail (send_failed) and the error goes
        // back to the receiver (refused).
        debug: { verbosity: "basic" },
        "otlp_http/refusing": {
          endpoint: `http://127.0.0.1:${String(away)}`,
          retry_on_failure: { enabled: false },
          sending_queue: { enabled: false },
        },
      },
      service: {
        extensions: ["health_check"],
        telemetry: {
          logs: { level: "error" },
          metrics: {
            level: "normal",
            readers: [
              {
                pull: {
                  exporter: { prometheus: { host: "127.0.0.1", port: telemetry } },
                },
              },
            ],
          },
        },
        pipelines: {
          "traces/sampled": {
            receivers: ["otlp"],
            processors: ["tail_sampling"],
            exporters: ["debug"],
          },
          "traces/away": { receivers: ["otlp"], exporters: ["otlp_http/away"] },
          metrics: { receivers: ["otlp"], exporters: ["otlp_http/refusing"] },
        },
      },
    }),
  );
  collector = spawn(OTELCOL ?? "otelcol", ["--config", join(dir, "collector.yaml")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  collector.stderr?.on("data", (chunk: Buffer) => {
    collectorLog = (collectorLog + chunk.toString()).slice(-8_000);
  });
  const deadline = Date.now() + 60_000; // a busy machine may take seconds to start it (issue 27)
  for (;;) {
    if (collector.exitCode !== null) throw new Error(`the Collector exited:\n${collectorLog}`);
    const ok = await fetch(`http://127.0.0.1:${String(health)}/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`the Collector is not healthy:\n${collectorLog}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  writeFileSync(
    join(dir, "prometheus.yml"),
    stringify({
      global: { scrape_interval: "1s", scrape_timeout: "1s", evaluation_interval: "1s" },
      rule_files: [RULES_FILE],
      scrape_configs: [
        {
          job_name: "otel-collector",
          static_configs: [{ targets: [`127.0.0.1:${String(telemetry)}`] }],
        },
      ],
    }),
  );
  prometheus = await startPrometheus(join(dir, "prometheus.yml"), join(dir, "data"));
  // Traffic for 8 s, so every counter rises between scrapes (a rate needs two samples apart).
  for (let i = 0; i < 8; i++) {
    await pushTelemetry();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  scraped = (await (await fetch(telemetryUrl)).text())
    .split("\n")
    .filter((l) => /^otelcol_(exporter|receiver|processor_tail)/.test(l) && !l.includes("_bucket"))
    .join("\n");
  trafficEnd = Date.now();
}, 240_000);

afterAll(async () => {
  await stopCollector();
  await prometheus?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!available)(SUITE, () => {
  const holds = async (name: string, at = trafficEnd) =>
    (await (prometheus as RunningPrometheus).query(exprOf(name), at)).map(
      (s): Record<string, string | number> => ({ ...s.metric, value: Number(s.value?.[1]) }),
    );

  it("SelfhealCollectorExportFailing: failed sends and a full queue's refusals, per exporter", async () => {
    const series = await holds("SelfhealCollectorExportFailing");
    expect(series.map((s) => s.exporter).sort(), scraped).toEqual([
      "otlp_http/away",
      "otlp_http/refusing",
    ]);
    for (const s of series) {
      expect(s).toMatchObject({ job: "otel-collector" });
      expect(s.value).toBeGreaterThan(0);
      expect(s.instance).toMatch(/^127\.0\.0\.1:\d+$/);
    }
  });

  it("SelfhealCollectorQueueFull: the one-batch queue is full", async () => {
    const series = await holds("SelfhealCollectorQueueFull");
    expect(series, scraped).toEqual([
      expect.objectContaining({
        job: "otel-collector",
        exporter: "otlp_http/away",
        data_type: "traces",
        value: 1,
      }),
    ]);
  });

  it("SelfhealCollectorRefusingData: the OTLP receiver refuses what it cannot export", async () => {
    const series = await holds("SelfhealCollectorRefusingData");
    expect(series, scraped).toEqual([
      expect.objectContaining({ job: "otel-collector", receiver: "otlp" }),
    ]);
  });

  it("SelfhealCollectorDroppingTraces: tail sampling evicts undecided traces", async () => {
    const series = await holds("SelfhealCollectorDroppingTraces");
    expect(series, scraped).toEqual([expect.objectContaining({ job: "otel-collector" })]);
    expect(series[0]?.value).toBeGreaterThan(0);
  });

  it("evaluates every rule of the file without error", async () => {
    type Rules = { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
    const rules = (await (prometheus as RunningPrometheus).get<Rules>("/api/v1/rules")).groups
      .flatMap((g) => g.rules)
      .map((r) => ({ name: r.name, health: r.health, error: r.lastError ?? "" }));
    expect(rules.map((r) => r.name).sort()).toEqual(alerts.map((a) => a.alert).sort());
    expect(rules.filter((r) => r.health !== "ok")).toEqual([]);
  });

  it("SelfhealCollectorDown: once the Collector is gone, not before", async () => {
    expect(await holds("SelfhealCollectorDown", Date.now())).toEqual([]);
    await stopCollector();
    // Until the next scrapes (every 1 s) and evaluation find it gone: a busy machine may take
    // longer than an idle one (issue 27). The limit only ends a wait that would never end.
    let down = await holds("SelfhealCollectorDown", Date.now());
    for (const until = Date.now() + 60_000; down.length === 0 && Date.now() < until;) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      down = await holds("SelfhealCollectorDown", Date.now());
    }
    expect(down).toEqual([expect.objectContaining({ job: "otel-collector", value: 0 })]);
  }, 120_000);
});
