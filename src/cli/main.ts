#!/usr/bin/env node
/**
 * The `selfheal` command. `selfheal demo` plays an incident scenario on virtual time, on the
 * in-memory default (no server), and shows selfheal heal the agent.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { analyze, parseEvents } from "../report/analyze.js";
import { renderHtml } from "../report/render-html.js";
import { renderText } from "../report/render-text.js";
import { runScenario, type TimelineEntry } from "../sim/run.js";
import { SCENARIOS } from "../sim/scenarios.js";
import { escapeControl, oneLine } from "../telemetry/redact.js";

const USAGE = `Usage: selfheal <command> [options]

Commands:
  demo      Play an incident on virtual time and watch selfheal heal the agent
  report    The weekly review of a recovery event log (recovery.eventLog JSONL)

Run "selfheal <command> --help" for its options.`;

const DEMO_USAGE = `Usage: selfheal demo [--scenario NAME] [--speed N] [--json] [--metrics-port PORT]

Plays an hour of incident against a simulated agent fleet in a few seconds, every tool call
going through selfheal with its defaults, and prints the timeline and a summary.

Options:
  --scenario NAME  one of: ${Object.keys(SCENARIOS).join(", ")} (default provider-outage)
  --speed N        virtual seconds per real second (default: as fast as it runs)
  --json           print one JSON object with the run's figures instead
  --metrics-port P serve the run's Prometheus metrics on 127.0.0.1:P/metrics while it runs
  --list           list the scenarios
  -h, --help       this help

With OTEL_EXPORTER_OTLP_ENDPOINT (or a per-signal endpoint) set, the run's spans and metrics
are exported there over OTLP/HTTP, protobuf unless OTEL_EXPORTER_OTLP_PROTOCOL=http/json; the
other OTEL_* variables (headers, service name, resource attributes, sampler) apply.`;

const REPORT_USAGE = `Usage: selfheal report FILE.jsonl [--html OUT.html]

Reads a recovery event log (the JSONL file of recovery.eventLog) and prints the review: top
failure patterns, UNKNOWN share and sample texts per tool (the rules to write), the success of
each strategy, MTTR percentiles and cost per incident.

Options:
  --html OUT.html  also write a self-contained page with charts (no network needed to view it)
  -h, --help       this help`;

/** A bad invocation: one line on stderr, exit code 2. */
class UsageError extends Error {}

const useColor = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code: number, text: string) => (useColor ? `\u001b[${code}m${text}\u001b[0m` : text);
const COLORS: Record<TimelineEntry["kind"], number> = {
  status: 33,
  circuit: 36,
  drift: 35,
  escalation: 31,
  page: 31,
};

function clockText(ms: number): string {
  const s = Math.floor(ms / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

async function demo(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenario: { type: "string", default: "provider-outage" },
      speed: { type: "string" },
      json: { type: "boolean", default: false },
      "metrics-port": { type: "string" },
      list: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(DEMO_USAGE);
    return;
  }
  if (values.list) {
    for (const s of Object.values(SCENARIOS)) console.log(`${s.name.padEnd(20)} ${s.description}`);
    return;
  }
  const scenario = SCENARIOS[values.scenario];
  if (!scenario) {
    throw new UsageError(
      `unknown scenario "${values.scenario}" (known: ${Object.keys(SCENARIOS).join(", ")})`,
    );
  }
  let speed: number | undefined;
  if (values.speed !== undefined) {
    speed = Number(values.speed);
    if (!Number.isFinite(speed) || speed <= 0)
      throw new UsageError(`--speed must be a positive number, got "${values.speed}"`);
  }
  let metricsPort: number | undefined;
  if (values["metrics-port"] !== undefined) {
    metricsPort = Number(values["metrics-port"]);
    if (!Number.isInteger(metricsPort) || metricsPort < 1 || metricsPort > 65_535) {
      throw new UsageError(`--metrics-port must be a port number, got "${values["metrics-port"]}"`);
    }
  }
  // The SDK is loaded only when asked for: the demo itself needs none.
  const env = process.env;
  const otlp = Boolean(
    env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
  );
  const telemetry =
    metricsPort !== undefined || otlp
      ? await (
          await import("../otel/index.js")
        ).startTelemetry({
          // OTEL_SERVICE_NAME, when set, names the run; options would win over it.
          ...(!env.OTEL_SERVICE_NAME && { serviceName: `selfheal-demo-${scenario.name}` }),
          // No endpoint set: nothing goes over OTLP (the spec's default would be localhost:4318).
          ...(!otlp && { tracesExporter: "none" as const, metricsExporter: "none" as const }),
          metricsPort,
          // An interactive run should not linger 10 s (the spec's default) on a collector that is down.
          ...(!env.OTEL_EXPORTER_OTLP_TIMEOUT && { exportTimeoutMillis: 3_000 }),
          // A demo hour makes thousands of spans in a second: keep them all for the export.
          maxQueueSize: 100_000,
          maxExportBatchSize: 2_048,
        })
      : undefined;
  const live = !values.json;
  const progress = live && process.stdout.isTTY;
  if (live) console.log(`${paint(1, scenario.name)}: ${scenario.description}\n`);
  const wallStart = performance.now();
  if (live && telemetry) {
    const { traces, metrics } = telemetry.config;
    if (traces.otlp) console.log(`  traces:  ${traces.otlp.url} (${traces.otlp.protocol})`);
    if (metrics.otlp) console.log(`  metrics: ${metrics.otlp.url} (${metrics.otlp.protocol})`);
    if (telemetry.metricsUrl) console.log(`  metrics: ${telemetry.metricsUrl}`);
  }
  const result = await runScenario(scenario, {
    telemetry: {
      tracerProvider: telemetry?.tracerProvider,
      meterProvider: telemetry?.meterProvider,
    },
    onTimeline: (e) => {
      if (!live) return;
      if (progress) process.stdout.write("\r\u001b[K");
      console.log(`  [${clockText(e.atMs)}] ${paint(COLORS[e.kind], e.kind.padEnd(8))} ${e.text}`);
    },
    onMinute: async (virtualMs) => {
      if (progress)
        process.stdout.write(
          `\r  virtual time ${clockText(virtualMs)} / ${clockText(scenario.durationMs)}`,
        );
      if (speed !== undefined) {
        const due = wallStart + virtualMs / speed;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    },
  });
  if (progress) process.stdout.write("\r\u001b[K");
  if (telemetry) {
    await telemetry.shutdown(); // flushes the spans and metrics to the OTLP endpoint
    const failed = telemetry.exportErrors();
    if (failed.traces + failed.metrics > 0) {
      process.stderr.write(
        `selfheal: ${failed.traces + failed.metrics} telemetry export(s) failed, the run was unaffected; last: ${failed.last ?? ""}\n`,
      );
    }
  }
  if (values.json) {
    const { timeline, ...figures } = result;
    console.log(JSON.stringify({ ...figures, timeline }));
    return;
  }
  const rows: [string, string][] = [
    ["tasks", String(result.tasks)],
    ["incidents (calls whose first request failed)", String(result.incidents)],
    ["auto-recovery rate", `${(result.auto_recovery_rate * 100).toFixed(1)}%`],
    [
      "MTTR (first failed request to answer)",
      result.mttr_seconds === null ? "n/a" : `${result.mttr_seconds.toFixed(1)} s`,
    ],
    ["user-visible failures", String(result.user_visible_failures)],
    ["pages (failed calls, one per kind per 10 min)", String(result.pages)],
    ["spend (every request)", `$${result.spend_usd.toFixed(4)}`],
    ["recovery spend (requests after a call's first)", `$${result.recovery_cost_usd.toFixed(4)}`],
    ["wasted retries", String(result.wasted_retries)],
    ["double charges", String(result.double_charges)],
    ["false breaker trips", String(result.false_trips)],
    ["drift alerts", String(result.drift_events)],
    [
      "requests per provider",
      Object.entries(result.calls_per_provider)
        .map(([k, v]) => `${k} ${v}`)
        .join(", "),
    ],
  ];
  console.log(
    `\n${paint(1, "summary")} (${result.virtual_minutes} virtual minutes in ${((performance.now() - wallStart) / 1000).toFixed(1)} s)`,
  );
  for (const [k, v] of rows) console.log(`  ${k.padEnd(48)} ${v}`);
}

async function report(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { html: { type: "string" }, help: { type: "boolean", short: "h", default: false } },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    console.log(REPORT_USAGE);
    return;
  }
  const [file, ...extra] = positionals;
  if (file === undefined)
    throw new UsageError("report needs the event log: selfheal report FILE.jsonl");
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0] ?? ""}"`);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  const { events, malformed } = parseEvents(text);
  const review = analyze(events, malformed);
  console.log(renderText(review));
  if (values.html !== undefined) {
    await writeFile(values.html, renderHtml(review));
    console.log(`\nwrote ${oneLine(values.html)}`);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return;
  }
  if (command === "demo") return demo(rest);
  if (command === "report") return report(rest);
  throw new UsageError(`unknown command "${command}" (known: demo, report)`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  // parseArgs throws TypeErrors with ERR_PARSE_ARGS_* codes for bad flags: usage errors too.
  const code = (error as { code?: unknown }).code;
  if (
    error instanceof UsageError ||
    (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS"))
  ) {
    // Arguments are echoed in usage errors: shown, never obeyed by the terminal.
    process.stderr.write(`selfheal: ${oneLine((error as Error).message)}\n`);
    process.exitCode = 2;
    return;
  }
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`selfheal: ${escapeControl(text)}\n`);
  process.exitCode = 1;
});
