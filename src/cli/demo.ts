/**
 * `selfheal demo`: plays an incident scenario on virtual time, on the in-memory default (no
 * server), and shows selfheal heal the agent: the timeline as it happens (incidents, recoveries,
 * health, breakers, pages), then the figures beside the same run without selfheal.
 */
import {
  LONG_RUNS,
  runLongRuns,
  type LongRunEntry,
  type LongRunsResult,
} from "../sim/long-runs.js";
import { NO_RECOVERY, runLengthMs, runScenario, type TimelineEntry } from "../sim/run.js";
import { SCENARIOS } from "../sim/scenarios.js";
import { oneLine, safeJson } from "../telemetry/redact.js";
import {
  figuresOf,
  longRunText,
  longRunsSummary,
  progressText,
  scenarioSummary,
  timelineLine,
} from "./demo-text.js";
import { UsageError } from "./errors.js";
import { parseFlags } from "./flags.js";
import { eventLogFlag, metricsPortFlag, startCliTelemetry, stopCliTelemetry } from "./telemetry.js";

/** --speed bounds: slower would wait longer than a timer can; faster is "as fast as it runs". */
const MIN_SPEED = 0.1;
const MAX_SPEED = 1e6;
const FIVE_MINUTES = 5 * 60_000;

export const DEMO_USAGE = `Usage: selfheal demo [--scenario NAME] [--speed N] [--json] [--metrics-port PORT]
                    [--event-log FILE]

Plays an hour of incident against a simulated agent fleet in a few seconds, every tool call
going through selfheal with its defaults, and prints the timeline (incidents and their
recoveries, health, breakers, pages) and a summary: the figures beside those of the same run
without selfheal (each call sent once to its primary, as an app without recovery does).

Options:
  --scenario NAME  one of: ${Object.keys(SCENARIOS).join(", ")}, long-runs (default provider-outage)
  --speed N        virtual seconds per real second, ${MIN_SPEED} to ${MAX_SPEED} (default: as fast as it runs)
  --json           print one JSON object with the run's figures instead (withoutSelfheal: the
                   figures of the run without selfheal)
  --metrics-port P serve the run's Prometheus metrics on 127.0.0.1:P/metrics while it runs
  --event-log FILE append the run's recovery events to FILE (JSONL), for "selfheal report FILE"
  --list           list the scenarios
  -h, --help       this help

With OTEL_EXPORTER_OTLP_ENDPOINT (or a per-signal endpoint) set, the run's spans and metrics
are exported there over OTLP/HTTP, protobuf unless OTEL_EXPORTER_OTLP_PROTOCOL=http/json; the
other OTEL_* variables (headers, service name, resource attributes, sampler) apply. Exporting
needs the OpenTelemetry SDK (selfheal's optional peers; without them: exit 2, with the npm
command that installs them).`;

const useColor = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code: number, text: string) => (useColor ? `\u001b[${code}m${text}\u001b[0m` : text);
const COLORS: Record<TimelineEntry["kind"], number> = {
  incident: 33,
  recovered: 32,
  failed: 31,
  status: 33,
  circuit: 36,
  drift: 35,
  escalation: 31,
  page: 31,
};
const LONG_RUN_COLORS: Record<LongRunEntry["kind"], number> = {
  verdict: 33,
  tier: 36,
  tier_result: 32,
  gave_up: 31,
  page: 31,
};
const SCENARIO_NAMES = [...Object.keys(SCENARIOS), LONG_RUNS.name].join(", ");

/** The night's figures beside the night without the watchdog: one JSON object, or the summary. */
function printLongRuns(
  night: LongRunsResult,
  without: LongRunsResult,
  json: boolean,
  wallSeconds: number,
): void {
  if (json) {
    const { timeline } = night;
    console.log(safeJson({ ...figuresOf(night), withoutSelfheal: figuresOf(without), timeline }));
    return;
  }
  console.log(
    `\n${paint(1, "summary")} (${night.virtualMinutes} virtual minutes in ${wallSeconds.toFixed(1)} s)`,
  );
  for (const line of longRunsSummary(night, without)) console.log(line);
}

// Long on purpose: one command's flags, run and printout, read top to bottom.
export async function demo(argv: string[]): Promise<void> {
  const { values } = parseFlags(argv, {
    scenario: { type: "string", default: "provider-outage" },
    speed: { type: "string" },
    json: { type: "boolean", default: false },
    "metrics-port": { type: "string" },
    "event-log": { type: "string" },
    list: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  });
  if (values.help) {
    console.log(DEMO_USAGE);
    return;
  }
  if (values.list) {
    for (const s of [...Object.values(SCENARIOS), LONG_RUNS])
      console.log(`${s.name.padEnd(20)} ${s.description}`);
    return;
  }
  // Own names only: "__proto__" or "constructor" is not a scenario.
  const scenario =
    values.scenario === LONG_RUNS.name
      ? LONG_RUNS
      : Object.hasOwn(SCENARIOS, values.scenario)
        ? SCENARIOS[values.scenario]
        : undefined;
  if (!scenario) {
    throw new UsageError(`unknown scenario "${values.scenario}" (known: ${SCENARIO_NAMES})`);
  }
  let speed: number | undefined;
  if (values.speed !== undefined) {
    speed = Number(values.speed);
    if (!Number.isFinite(speed) || speed <= 0)
      throw new UsageError(`--speed must be a positive number, got "${values.speed}"`);
    if (speed < MIN_SPEED || speed > MAX_SPEED)
      throw new UsageError(`--speed must be ${MIN_SPEED} to ${MAX_SPEED}, got "${values.speed}"`);
  }
  const metricsPort = metricsPortFlag(values["metrics-port"]);
  const eventLog = eventLogFlag(values["event-log"]);
  // A demo hour makes thousands of spans in a second: keep them all for the export.
  const telemetry = await startCliTelemetry(`selfheal-demo-${scenario.name}`, metricsPort, {
    maxQueueSize: 100_000,
    maxExportBatchSize: 2_048,
  });
  const live = !values.json;
  const progress = live && process.stdout.isTTY;
  /** Virtual time the run plays: the long-runs night, or a scenario and its grace. */
  const runMs = "mix" in scenario ? scenario.durationMs : runLengthMs(scenario);
  if (live) console.log(`${paint(1, scenario.name)}: ${scenario.description}\n`);
  const wallStart = performance.now();
  if (live && telemetry) {
    const { traces, metrics } = telemetry.config;
    if (traces.otlp) console.log(`  traces:  ${traces.otlp.url} (${traces.otlp.protocol})`);
    if (metrics.otlp) console.log(`  metrics: ${metrics.otlp.url} (${metrics.otlp.protocol})`);
    if (telemetry.metricsUrl) console.log(`  metrics: ${telemetry.metricsUrl}`);
  }
  const onMinute = async (virtualMs: number) => {
    if (progress) process.stdout.write(`\r  ${progressText(virtualMs, runMs)}`);
    if (speed !== undefined) {
      const due = wallStart + virtualMs / speed;
      const wait = due - performance.now();
      // Within a timer's range whatever the speed (the bounds on --speed keep it there).
      if (wait > 0)
        await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 2 ** 31 - 1)));
    }
  };
  const say = (atMs: number, kind: string, color: number, text: string) => {
    if (!live) return;
    if (progress) process.stdout.write("\r\u001b[K");
    console.log(timelineLine(atMs, runMs, kind, oneLine(text), (k) => paint(color, k)));
  };
  const sink = {
    ...(eventLog !== undefined && { eventLog }),
    telemetry: {
      tracerProvider: telemetry?.tracerProvider,
      meterProvider: telemetry?.meterProvider,
    },
    onMinute,
    // The simulated period ends about now: its spans and events are dated in the recent past. On
    // a whole 5 minutes, so that the windows' buckets (whole 10 s, 50 s and 60 s spans of the
    // epoch: calls, breakers, tasks) cut every run at the same points: the figures do not depend
    // on when the demo is played.
    startMs: Math.floor((Date.now() - scenario.durationMs) / FIVE_MINUTES) * FIVE_MINUTES,
  };
  if ("mix" in scenario) {
    const night = await runLongRuns(scenario, {
      ...sink,
      onEntry: (e) => {
        say(
          e.atMs,
          e.kind === "tier_result" ? "result" : e.kind,
          LONG_RUN_COLORS[e.kind],
          longRunText(e),
        );
      },
    });
    if (progress) process.stdout.write("\r\u001b[K");
    await stopCliTelemetry(telemetry);
    const wallSeconds = (performance.now() - wallStart) / 1000;
    // The same night without the watchdog: unpaced, untold, no telemetry, no event log.
    const without = await runLongRuns(scenario, { supervise: false, startMs: sink.startMs });
    printLongRuns(night, without, values.json, wallSeconds);
    if (eventLog !== undefined && !values.json)
      console.log(`\nwatchdog events appended to ${oneLine(eventLog)}`);
    return;
  }
  const result = await runScenario(scenario, {
    ...sink,
    onTimeline: (e) => {
      say(e.atMs, e.kind, COLORS[e.kind], e.text);
    },
  });
  if (progress) process.stdout.write("\r\u001b[K");
  await stopCliTelemetry(telemetry);
  const wallSeconds = (performance.now() - wallStart) / 1000;
  // The same run without selfheal: unpaced, untold, no telemetry, no event log.
  const without = await runScenario(scenario, { policy: NO_RECOVERY, startMs: sink.startMs });
  if (values.json) {
    const { timeline } = result;
    console.log(safeJson({ ...figuresOf(result), withoutSelfheal: figuresOf(without), timeline }));
    return;
  }
  const graceMinutes = (runMs - scenario.durationMs) / 60_000;
  console.log(
    `\n${paint(1, "summary")} (${result.virtualMinutes} virtual minutes and ${graceMinutes} for the calls in flight, in ${wallSeconds.toFixed(1)} s)`,
  );
  for (const line of scenarioSummary(result, without, { stream: scenario.stream !== undefined }))
    console.log(line);
  if (eventLog !== undefined) console.log(`\nrecovery events appended to ${oneLine(eventLog)}`);
}
