/**
 * `selfheal status --redis URL`: the fleet's health as the workers share it in Redis. ioredis is
 * loaded only here, and only when the command runs: the other commands work without it.
 */
import { parseArgs } from "node:util";
import type { ScopeHealth, SignalReading } from "../health/evaluator.js";
import type { FleetStatus } from "../redis/fleet.js";
import type { HealthStatus } from "../telemetry/conventions.js";
import { oneLine } from "../telemetry/redact.js";
import { CommandFailedError, UsageError } from "./errors.js";

export const STATUS_USAGE = `Usage: selfheal status --redis URL [--prefix P] [--agent NAME] [--json]

Reads the health signals the fleet's workers share in Redis (selfheal/redis) and prints each
agent's status, its signals and the status of each of its tools, judged with the default
thresholds. Exits 1 when Redis cannot be read (within a few seconds) or the agent is not there.

Options:
  --redis URL    redis://[user:password@]host:port[/db] or rediss:// (TLS)
  --prefix P     the prefix the workers write under (default selfheal)
  --agent NAME   this agent only
  --json         print the status as one JSON document instead
  -h, --help     this help`;

/** Waits short enough for a person at a terminal, long enough for a remote TLS server. */
const CONNECT_TIMEOUT_MS = 3_000;
const COMMAND_TIMEOUT_MS = 2_000;

const useColor = process.stdout.isTTY && !process.env.NO_COLOR;
const STATUS_COLORS: Record<HealthStatus, number> = { healthy: 32, warning: 33, critical: 31 };
const painted = (status: HealthStatus) =>
  useColor ? `\u001b[${STATUS_COLORS[status]}m${status}\u001b[0m` : status;

/** A URL as it may be shown: without its credentials, on one line. */
const shownUrl = (text: string) => oneLine(text.replace(/\/\/[^/@]*@/, "//[REDACTED]@"));

/** The URL ioredis is given: redis:// or rediss://, a numeric database if any. */
function checkRedisUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--redis must be a redis:// or rediss:// URL, got "${shownUrl(text)}"`);
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
    throw new UsageError(
      `--redis must be a redis:// or rediss:// URL, got the scheme "${oneLine(url.protocol)}//"`,
    );
  }
  if (!/^\/?\d*$/.test(url.pathname)) {
    throw new UsageError(
      `--redis: the database must be a number (redis://host:6379/0), got "${oneLine(url.pathname)}"`,
    );
  }
  return text;
}

/** Whether `error` says the optional peer ioredis is not installed. */
const missingIoredis = (error: unknown) =>
  error instanceof Error && (error as { code?: unknown }).code === "ERR_SELFHEAL_MISSING_PEER";

function formatValue(r: SignalReading): string {
  if (r.value === null) return "n/a";
  return r.signal === "latency_p95"
    ? `${Math.round(r.value)} ms`
    : `${(r.value * 100).toFixed(1)}%`;
}

/** What a reading's status rests on, when the bare status would mislead. */
function note(r: SignalReading): string {
  if (r.value === null) return r.samples === 0 ? "" : " (too few samples)";
  if (r.signal === "latency_p95" && (r.baselineMs ?? null) === null)
    return " (no learned baseline here: not judged)";
  if (r.recent !== undefined) return ` (recent ${(r.recent * 100).toFixed(1)}%: recovering)`;
  return "";
}

/** The signals of a scope that are not healthy, as `name value`. */
const unhealthy = (scope: ScopeHealth) =>
  scope.signals.filter((r) => r.status !== "healthy").map((r) => `${r.signal} ${formatValue(r)}`);

/** The human-readable status: one block per agent. */
export function renderStatus(fleet: FleetStatus, url: string): string {
  const lines = [
    `fleet under prefix "${fleet.prefix}" at ${shownUrl(url)}, ${new Date(fleet.at).toISOString()}`,
    "thresholds: the defaults (an agent's own thresholds live in its code)",
    fleet.openBreakers.length === 0
      ? "breakers: none open"
      : `breakers open: ${fleet.openBreakers
          .map(
            (b) =>
              `${oneLine(b.dependency)} until ${new Date(b.until).toISOString()} (${b.opens} in a row)`,
          )
          .join(", ")}`,
    fleet.throttledAlerts.length === 0
      ? "alert throttles: none in force"
      : `alert throttles: ${fleet.throttledAlerts
          .map((t) => `${oneLine(t.kind)} (${Math.ceil(t.msLeft / 1000)} s left, ${t.held} held)`)
          .join(", ")}`,
    `task budgets: ${fleet.budgets.tasks} task(s) with recovery spend, $${fleet.budgets.totalUsd.toFixed(4)} in all, at most $${fleet.budgets.maxUsd.toFixed(4)}`,
  ];
  if (fleet.agents.length === 0) {
    lines.push("", `no agent has written under prefix "${fleet.prefix}"`);
  }
  for (const report of fleet.agents) {
    lines.push("", `${oneLine(report.agent)}: ${painted(report.status)}`);
    for (const r of report.signals) {
      lines.push(
        `  ${r.signal.padEnd(20)} ${formatValue(r).padStart(8)}  ${String(r.samples).padStart(6)} samples  ${painted(r.status)}${note(r)}`,
      );
    }
    const tools = Object.entries(report.tools).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (tools.length === 0) continue;
    const width = Math.min(40, Math.max(...tools.map(([name]) => oneLine(name).length)));
    lines.push("  tools:");
    for (const [name, scope] of tools) {
      const why = unhealthy(scope);
      lines.push(
        `    ${oneLine(name).padEnd(width)}  ${painted(scope.status)}${why.length ? ` (${why.join(", ")})` : ""}`,
      );
    }
  }
  return lines.join("\n");
}

export async function status(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      redis: { type: "string" },
      prefix: { type: "string", default: "selfheal" },
      agent: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(STATUS_USAGE);
    return;
  }
  if (values.redis === undefined)
    throw new UsageError("status needs --redis URL: selfheal status --redis redis://HOST:6379");
  const url = checkRedisUrl(values.redis);
  if (values.agent?.trim() === "") throw new UsageError("--agent must not be empty");
  // keys.js needs no ioredis: a bad prefix is a usage error even where ioredis is missing.
  const { checkPrefix } = await import("../redis/keys.js");
  try {
    checkPrefix(values.prefix);
  } catch {
    throw new UsageError(
      `--prefix must be 1-64 letters, digits, "_", "." or "-", got "${oneLine(values.prefix)}"`,
    );
  }
  let fleet: FleetStatus;
  try {
    const { readFleet } = await import("../redis/fleet.js");
    fleet = await readFleet({
      url,
      prefix: values.prefix,
      ...(values.agent !== undefined && { agent: values.agent }),
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
  } catch (error) {
    if (missingIoredis(error))
      throw new CommandFailedError("status needs ioredis, an optional peer: npm install ioredis");
    const message = error instanceof Error ? error.message : String(error);
    throw new CommandFailedError(`cannot read the fleet from ${shownUrl(url)}: ${message}`);
  }
  console.log(values.json ? JSON.stringify(fleet) : renderStatus(fleet, url));
}
