#!/usr/bin/env node
/**
 * The `selfheal` command. `selfheal demo` plays an incident scenario on virtual time, on the
 * in-memory default (no server), and shows selfheal heal the agent. `selfheal status --redis URL`
 * prints a fleet's health from Redis (ioredis is loaded for that command only).
 */
import { readFileSync } from "node:fs";
import { access, constants, stat, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { ReviewBuilder } from "../report/analyze.js";
import { readInto } from "../report/read.js";
import { renderHtml } from "../report/render-html.js";
import { renderText } from "../report/render-text.js";
import { runScenario, type TimelineEntry } from "../sim/run.js";
import { SCENARIOS } from "../sim/scenarios.js";
import {
  LONG_RUNS,
  runLongRuns,
  type LongRunEntry,
  type LongRunsResult,
} from "../sim/long-runs.js";
import { escapeControl, oneLine } from "../telemetry/redact.js";
import { CommandFailedError, UsageError } from "./errors.js";
import { status } from "./status.js";
import { eventLogFlag, metricsPortFlag, startCliTelemetry, stopCliTelemetry } from "./telemetry.js";
import { watch } from "./watch.js";

const USAGE = `Usage: selfheal <command> [options]

Commands:
  demo      Play an incident on virtual time and watch selfheal heal the agent
  report    The weekly review of a recovery event log (recovery.eventLog JSONL)
  status    The fleet's health from Redis: selfheal status --redis URL [--agent NAME] [--json]
  watch     Run an agent and supervise it: selfheal watch --state-dir DIR -- COMMAND ARGS

Run "selfheal <command> --help" for its options; "selfheal --version" prints the version.`;

/** --speed bounds: slower would wait longer than a timer can; faster is "as fast as it runs". */
const MIN_SPEED = 0.1;
const MAX_SPEED = 1e6;

const DEMO_USAGE = `Usage: selfheal demo [--scenario NAME] [--speed N] [--json] [--metrics-port PORT]
                    [--event-log FILE]

Plays an hour of incident against a simulated agent fleet in a few seconds, every tool call
going through selfheal with its defaults, and prints the timeline and a summary.

Options:
  --scenario NAME  one of: ${Object.keys(SCENARIOS).join(", ")}, long-runs (default provider-outage)
  --speed N        virtual seconds per real second, ${MIN_SPEED} to ${MAX_SPEED} (default: as fast as it runs)
  --json           print one JSON object with the run's figures instead
  --metrics-port P serve the run's Prometheus metrics on 127.0.0.1:P/metrics while it runs
  --event-log FILE append the run's recovery events to FILE (JSONL), for "selfheal report FILE"
  --list           list the scenarios
  -h, --help       this help

With OTEL_EXPORTER_OTLP_ENDPOINT (or a per-signal endpoint) set, the run's spans and metrics
are exported there over OTLP/HTTP, protobuf unless OTEL_EXPORTER_OTLP_PROTOCOL=http/json; the
other OTEL_* variables (headers, service name, resource attributes, sampler) apply.`;

const REPORT_USAGE = `Usage: selfheal report FILE.jsonl [MORE.jsonl ...] [--html OUT.html]

Reads a recovery event log (the JSONL file of recovery.eventLog) and prints the review: top
failure patterns, UNKNOWN share and sample texts per tool (the rules to write), the success of
each strategy, the outcomes, MTTR percentiles and cost per incident. With one FILE, its rotated
files FILE.1, FILE.2, ... are read too, oldest first; with several, exactly those, in order.
Lines that are not recovery events are counted, named and left out; a file set with no event
at all exits 2.

Options:
  --html OUT.html  also write a self-contained page with charts (no network needed to view it)
  -h, --help       this help`;

const useColor = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code: number, text: string) => (useColor ? `\u001b[${code}m${text}\u001b[0m` : text);
const COLORS: Record<TimelineEntry["kind"], number> = {
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

/** The night's figures: one JSON object, or the summary. */
function printLongRuns(night: LongRunsResult, json: boolean, wallSeconds: number): void {
  if (json) {
    console.log(JSON.stringify(night));
    return;
  }
  const tiers = (t: Record<string, number>) =>
    Object.entries(t)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
  const rows: [string, string][] = [
    ["runs (with a fault)", `${night.runs} (${night.faulted})`],
    ["finished by morning", String(night.finished)],
    ["recovered, by tier", tiers(night.recovered_by_tier)],
    ["tier runs that did not help", tiers(night.failed_by_tier)],
    ["given up (restart intensity)", String(night.gave_up)],
    ["pages sent (throttled per run)", String(night.pages)],
    ["pages if every bad look paged", String(night.pages_unthrottled)],
  ];
  console.log(
    `\n${paint(1, "summary")} (${night.virtual_minutes} virtual minutes in ${wallSeconds.toFixed(1)} s)`,
  );
  for (const [k, v] of rows) console.log(`  ${k.padEnd(48)} ${v}`);
}

function clockText(ms: number): string {
  const s = Math.floor(ms / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

// Long on purpose: one command's flags, run and printout, read top to bottom.
async function demo(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenario: { type: "string", default: "provider-outage" },
      speed: { type: "string" },
      json: { type: "boolean", default: false },
      "metrics-port": { type: "string" },
      "event-log": { type: "string" },
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
  if (live) console.log(`${paint(1, scenario.name)}: ${scenario.description}\n`);
  const wallStart = performance.now();
  if (live && telemetry) {
    const { traces, metrics } = telemetry.config;
    if (traces.otlp) console.log(`  traces:  ${traces.otlp.url} (${traces.otlp.protocol})`);
    if (metrics.otlp) console.log(`  metrics: ${metrics.otlp.url} (${metrics.otlp.protocol})`);
    if (telemetry.metricsUrl) console.log(`  metrics: ${telemetry.metricsUrl}`);
  }
  const onMinute = async (virtualMs: number) => {
    if (progress)
      process.stdout.write(
        `\r  virtual time ${clockText(virtualMs)} / ${clockText(scenario.durationMs)}`,
      );
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
    console.log(`  [${clockText(atMs)}] ${paint(color, kind.padEnd(8))} ${text}`);
  };
  const sink = {
    ...(eventLog !== undefined && { eventLog }),
    telemetry: {
      tracerProvider: telemetry?.tracerProvider,
      meterProvider: telemetry?.meterProvider,
    },
    onMinute,
    // The simulated period ends now: its spans and events are dated in the recent past.
    startMs: Date.now() - scenario.durationMs,
  };
  if ("mix" in scenario) {
    const night = await runLongRuns(scenario, {
      ...sink,
      onEntry: (e) => {
        say(
          e.atMs,
          e.kind === "tier_result" ? "result" : e.kind,
          LONG_RUN_COLORS[e.kind],
          `${e.session} ${e.text}`,
        );
      },
    });
    if (progress) process.stdout.write("\r\u001b[K");
    await stopCliTelemetry(telemetry);
    printLongRuns(night, values.json, (performance.now() - wallStart) / 1000);
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
    // Streamed answers: the cut ones a reader took for whole, and what selfheal diagnosed.
    ...(scenario.stream
      ? ([
          ["truncated answers delivered as whole", String(result.truncated_answers)],
          [
            "diagnoses",
            Object.entries(result.diagnoses)
              .map(([k, v]) => `${k} ${v}`)
              .join(", ") || "none",
          ],
        ] satisfies [string, string][])
      : []),
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
  if (eventLog !== undefined) console.log(`\nrecovery events appended to ${oneLine(eventLog)}`);
}

/** An I/O failure as one line: the path and the error code, never a stack. */
function ioProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  const known: Record<string, string> = {
    ENOENT: "no such file",
    EISDIR: "is a folder",
    EACCES: "permission denied",
    EPERM: "permission denied",
    ENOTDIR: "a part of the path is not a folder",
  };
  if (typeof code === "string")
    return Object.hasOwn(known, code) ? `${known[code] ?? ""} (${code})` : code;
  return error instanceof Error ? error.message : String(error);
}

/** `file`, preceded by its rotated files, oldest first: FILE.N ... FILE.1, FILE. */
async function rotatedSet(file: string): Promise<string[]> {
  const older: string[] = [];
  for (let i = 1; i <= 10_000; i++) {
    const candidate = `${file}.${i}`;
    const found = await stat(candidate).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!found) break;
    older.unshift(candidate);
  }
  return [...older, file];
}

/** Each input is a readable file: else one line, exit 2, before any work. */
async function checkInputs(files: string[]): Promise<{ dev: number; ino: number }[]> {
  const ids: { dev: number; ino: number }[] = [];
  for (const file of files) {
    try {
      const s = await stat(file);
      if (s.isDirectory()) throw Object.assign(new Error("is a folder"), { code: "EISDIR" });
      await access(file, constants.R_OK);
      ids.push({ dev: s.dev, ino: s.ino });
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${ioProblem(error)}`);
    }
  }
  return ids;
}

const sameFile = (a: { dev: number; ino: number } | undefined, b: { dev: number; ino: number }) =>
  a !== undefined && a.dev === b.dev && a.ino === b.ino;

/** The HTML can be written, and not over an input (a hard link or symlink to one included). */
async function checkHtmlTarget(
  html: string,
  files: string[],
  ids: { dev: number; ino: number }[],
): Promise<void> {
  const folder = dirname(resolve(html));
  try {
    if (!(await stat(folder)).isDirectory())
      throw Object.assign(new Error("not a folder"), { code: "ENOTDIR" });
    await access(folder, constants.W_OK);
  } catch (error) {
    throw new UsageError(`cannot write ${html}: folder ${folder}: ${ioProblem(error)}`);
  }
  const target = await stat(html).catch(() => undefined);
  if (target?.isDirectory()) throw new UsageError(`cannot write ${html}: is a folder (EISDIR)`);
  const same = files.find(
    (f, i) => resolve(f) === resolve(html) || (target !== undefined && sameFile(ids[i], target)),
  );
  if (same !== undefined)
    throw new UsageError(`refusing to write the HTML over the input file ${same}`);
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
  const [first] = positionals;
  if (first === undefined)
    throw new UsageError("report needs the event log: selfheal report FILE.jsonl");
  const files = positionals.length === 1 ? await rotatedSet(first) : positionals;
  const ids = await checkInputs(files);
  if (values.html !== undefined) await checkHtmlTarget(values.html, files, ids);
  const builder = new ReviewBuilder();
  for (const file of files) {
    try {
      await readInto(file, builder, files.length > 1 ? oneLine(file) : undefined);
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${ioProblem(error)}`);
    }
  }
  const review = builder.review();
  if (review.events === 0 && review.watchdog.events === 0) {
    const why = review.malformed
      ? `${review.malformed} lines, none a recovery event; ${review.malformedSamples[0] ?? ""}`
      : "the file is empty";
    throw new UsageError(`no recovery events in ${files.join(", ")} (${why})`);
  }
  console.log(renderText(review));
  if (values.html !== undefined) {
    try {
      await writeFile(values.html, renderHtml(review));
    } catch (error) {
      throw new UsageError(`cannot write ${values.html}: ${ioProblem(error)}`);
    }
    console.log(`\nwrote ${oneLine(values.html)}`);
  }
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return String(pkg.version);
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    process.stderr.write(`${USAGE}\n`);
    process.exitCode = 2;
    return;
  }
  if (command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return;
  }
  if (command === "--version" || command === "-v" || command === "version") {
    console.log(version());
    return;
  }
  if (command === "demo") return demo(rest);
  if (command === "report") return report(rest);
  if (command === "status") return status(rest);
  if (command === "watch") return watch(rest);
  throw new UsageError(`unknown command "${command}" (known: demo, report, status, watch)`);
}

// A closed stdout (`selfheal demo | head -1`) is the reader saying it has seen enough.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  process.stderr.write(`selfheal: cannot write the output: ${error.code ?? error.message}\n`);
  process.exit(1);
});

main(process.argv.slice(2)).catch((error: unknown) => {
  // parseArgs throws TypeErrors with ERR_PARSE_ARGS_* codes for bad flags: usage errors too.
  const code = (error as { code?: unknown }).code;
  if (
    error instanceof UsageError ||
    code === "SELFHEAL_CONFIG" ||
    (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS"))
  ) {
    // Arguments are echoed in usage errors: shown, never obeyed by the terminal.
    const message = (error as Error).message.replace(/^selfheal: /, "");
    process.stderr.write(`selfheal: ${oneLine(message)}\n`);
    process.exitCode = 2;
    return;
  }
  if (error instanceof CommandFailedError) {
    process.stderr.write(`selfheal: ${oneLine(error.message)}\n`);
    process.exitCode = 1;
    return;
  }
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`selfheal: ${escapeControl(text)}\n`);
  process.exitCode = 1;
});
