/**
 * `selfheal status --redis URL`: the fleet's health as the workers share it in Redis. ioredis is
 * loaded only here, and only when the command runs: the other commands work without it.
 */
import type { ScopeHealth, SignalReading } from "../health/evaluator.js";
import type { FleetStatus } from "../redis/fleet.js";
import type { HealthStatus } from "../telemetry/conventions.js";
import { oneLine, safeJson } from "../telemetry/redact.js";
import { CommandFailedError, UsageError } from "./errors.js";
import { parseFlags } from "./flags.js";

export const STATUS_USAGE = `Usage: selfheal status --redis URL [--prefix P] [--agent NAME] [--json]

Reads the health signals the fleet's workers share in Redis (selfheal/redis) and prints each
agent's status, its signals and the status of each of its tools, judged with the default
thresholds. Exits 1 when Redis cannot be read (within a few seconds) or the agent is not there.

Options:
  --redis URL    redis://[user:password@]host:port[/db] or rediss:// (TLS); in a password,
                 write @ / : % # ? as %40 %2F %3A %25 %23 %3F. Only host, port and db are shown
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

/** A `--redis` URL, checked: what ioredis is given, and what may be shown of it. */
export interface RedisTarget {
  /** The URL as given (ioredis parses it with `URL` too). */
  url: string;
  /** `redis://host:port/db`: no user, password or query (they may hold credentials). */
  shown: string;
  /** The password as it may appear in an error, in each form (written, encoded, decoded). */
  secrets: string[];
}

const MALFORMED =
  '--redis: malformed URL (not shown: it may hold a password); expected redis://[user:password@]host:port[/db], with "@", "/", ":", "%", "#" and "?" in a password written %40, %2F, %3A, %25, %23 and %3F';

/**
 * Parses `--redis` with `URL`, as ioredis does. A URL that does not parse is never printed (its
 * password may be anywhere in it); one that does is shown as scheme, host, port and database.
 * A raw `/`, `?` or `#` in a password splits the URL early (then an `@` shows up after the host,
 * or the password's first digits pass for a port): malformed, not shown, never connected to.
 */
export function checkRedisUrl(text: string): RedisTarget {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(MALFORMED);
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
    // `user:password@host` parses too, its user as the scheme: only a `scheme://` is named.
    if (!text.toLowerCase().startsWith(`${url.protocol}//`)) throw new UsageError(MALFORMED);
    throw new UsageError(
      `--redis must be a redis:// or rediss:// URL, got the scheme "${oneLine(url.protocol)}//"`,
    );
  }
  if (text.includes("#") || `${url.pathname}${url.search}`.includes("@"))
    throw new UsageError(MALFORMED);
  let password: string;
  try {
    decodeURIComponent(url.username); // as ioredis will: a stray "%" would throw there
    password = decodeURIComponent(url.password);
  } catch {
    throw new UsageError(MALFORMED);
  }
  if (!/^\/?\d*$/.test(url.pathname)) {
    throw new UsageError("--redis: the database must be a number (redis://host:6379/0)");
  }
  const db = url.pathname.slice(1);
  const shown = `${url.protocol}//${url.hostname || "localhost"}:${url.port || "6379"}${db && `/${db}`}`;
  // The password as written: between the first ":" of the user info and its last "@".
  const authority = text.slice(text.indexOf("//") + 2).split(/[/?]/, 1)[0] ?? "";
  const userInfo = authority.slice(0, Math.max(0, authority.lastIndexOf("@")));
  const written = userInfo.includes(":") ? userInfo.slice(userInfo.indexOf(":") + 1) : "";
  const secrets = [written, url.password, password, encodeURIComponent(password)];
  return { url: text, shown: oneLine(shown), secrets: [...new Set(secrets)].filter(Boolean) };
}

/** An error's text without the password in any of its forms (should a library ever echo it). */
export function withoutSecrets(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join("[REDACTED]");
  return out;
}

/**
 * parseArgs echoes what it did not expect (`Unexpected argument 'redis://:pw@host'`): an argument
 * that looks like a URL or holds an `@` is hidden from its message.
 */
export function hideUrls(message: string, argv: string[]): string {
  let out = message;
  for (const arg of argv) {
    if (arg.includes("://") || arg.includes("@")) out = out.split(arg).join("[a URL, not shown]");
  }
  return out;
}

/** Longest name shown whole in the human output (the JSON has every name in full). */
const MAX_SHOWN_NAME = 80;

/** A UTF-16 surrogate that is not half of a pair (a terminal would show U+FFFD anyway). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A name from Redis as one line of the human output: control characters escaped, unpaired
 * surrogates as U+FFFD, cut (with its length said) past MAX_SHOWN_NAME characters.
 */
export function shownName(name: string): string {
  const text = oneLine(name.replace(LONE_SURROGATE, "\uFFFD"));
  const chars = Array.from(text);
  if (chars.length <= MAX_SHOWN_NAME) return text;
  return `${chars.slice(0, MAX_SHOWN_NAME - 1).join("")}… (${name.length} chars)`;
}

/** Whether `error` says the optional peer ioredis is not installed. */
const missingIoredis = (error: unknown) =>
  error instanceof Error && (error as { code?: unknown }).code === "ERR_SELFHEAL_MISSING_PEER";

export function formatValue(r: SignalReading): string {
  if (r.value === null) return "n/a";
  return r.signal === "latency_p95"
    ? `${Math.round(r.value)} ms`
    : `${(r.value * 100).toFixed(1)}%`;
}

/** What a reading's status rests on, when the bare status would mislead. */
export function note(r: SignalReading): string {
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
export function renderStatus(fleet: FleetStatus, shownUrl: string): string {
  const lines = [
    `fleet under prefix "${fleet.prefix}" at ${shownUrl}, ${new Date(fleet.at).toISOString()}`,
    "thresholds: the defaults (an agent's own thresholds live in its code)",
    fleet.openBreakers.length === 0
      ? "breakers: none open"
      : `breakers open: ${fleet.openBreakers
          .map(
            (b) =>
              `${shownName(b.dependency)} until ${new Date(b.until).toISOString()} (${b.opens} in a row)`,
          )
          .join(", ")}`,
    fleet.throttledAlerts.length === 0
      ? "alert throttles: none in force"
      : `alert throttles: ${fleet.throttledAlerts
          .map((t) => `${shownName(t.kind)} (${Math.ceil(t.msLeft / 1000)} s left, ${t.held} held)`)
          .join(", ")}`,
    `task budgets: ${fleet.budgets.tasks} task(s) with recovery spend, $${fleet.budgets.totalUsd.toFixed(4)} in all, at most $${fleet.budgets.maxUsd.toFixed(4)}`,
  ];
  if (fleet.agents.length === 0) {
    lines.push("", `no agent has written under prefix "${fleet.prefix}"`);
  }
  for (const report of fleet.agents) {
    lines.push("", `${shownName(report.agent)}: ${painted(report.status)}`);
    for (const r of report.signals) {
      lines.push(
        `  ${r.signal.padEnd(20)} ${formatValue(r).padStart(8)}  ${String(r.samples).padStart(6)} samples  ${painted(r.status)}${note(r)}`,
      );
    }
    const tools = Object.entries(report.tools).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (tools.length === 0) continue;
    const width = Math.min(40, Math.max(...tools.map(([name]) => shownName(name).length)));
    lines.push("  tools:");
    for (const [name, scope] of tools) {
      const why = unhealthy(scope);
      lines.push(
        `    ${shownName(name).padEnd(width)}  ${painted(scope.status)}${why.length ? ` (${why.join(", ")})` : ""}`,
      );
    }
  }
  return lines.join("\n");
}

/** The flags of `status`; parseArgs's own errors (usage errors) with URLs hidden. */
function statusFlags(argv: string[]) {
  try {
    return parseFlags(argv, {
      redis: { type: "string" },
      prefix: { type: "string", default: "selfheal" },
      agent: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    }).values;
  } catch (error) {
    if (error instanceof Error) error.message = hideUrls(error.message, argv); // its code is kept
    throw error;
  }
}

export async function status(argv: string[]): Promise<void> {
  const values = statusFlags(argv);
  if (values.help) {
    console.log(STATUS_USAGE);
    return;
  }
  if (values.redis === undefined)
    throw new UsageError("status needs --redis URL: selfheal status --redis redis://HOST:6379");
  const target = checkRedisUrl(values.redis);
  if (values.agent?.trim() === "") throw new UsageError("--agent must not be empty");
  // keys.js needs no ioredis: a bad prefix is a usage error even where ioredis is missing.
  const { checkPrefix } = await import("../redis/keys.js");
  try {
    checkPrefix(values.prefix);
  } catch {
    throw new UsageError(
      `--prefix must be 1-64 letters, digits, "_", "." or "-", got "${hideUrls(oneLine(values.prefix), argv)}"`,
    );
  }
  let fleet: FleetStatus;
  try {
    const { readFleet } = await import("../redis/fleet.js");
    fleet = await readFleet({
      url: target.url,
      prefix: values.prefix,
      ...(values.agent !== undefined && { agent: values.agent }),
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
  } catch (error) {
    if (missingIoredis(error))
      throw new CommandFailedError("status needs ioredis, an optional peer: npm install ioredis");
    const message = withoutSecrets(
      error instanceof Error ? error.message : String(error),
      target.secrets,
    );
    throw new CommandFailedError(`cannot read the fleet from ${target.shown}: ${message}`);
  }
  // Names come from Redis, which anyone with its password writes: nothing raw reaches the terminal.
  console.log(values.json ? safeJson(fleet) : renderStatus(fleet, target.shown));
}
