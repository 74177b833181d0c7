/**
 * The `selfheal` command's dispatch and its exit codes, importable (main.ts, the bin, runs them):
 * `run` runs the command an argv names, `exitFor` turns what it threw into stderr's text and the
 * exit code.
 */
import { readFileSync } from "node:fs";
import { escapeControl, oneLine } from "../telemetry/redact.js";
import { CommandFailedError, UsageError } from "./errors.js";

/**
 * Each command's module, loaded when its command runs: `selfheal report` does not load the
 * simulator, nor `selfheal status` the watchdog (a third of the start-up time).
 */
const COMMANDS = {
  demo: async () => (await import("./demo.js")).demo,
  report: async () => (await import("./report.js")).report,
  status: async () => (await import("./status.js")).status,
  watch: async () => (await import("./watch.js")).watch,
} satisfies Record<string, () => Promise<(argv: string[]) => Promise<unknown>>>;

export const USAGE = `Usage: selfheal <command> [options]

Commands:
  demo      Play an incident on virtual time and watch selfheal heal the agent
  report    The weekly review of a recovery event log (recovery.eventLog JSONL)
  status    The fleet's health from Redis: selfheal status --redis URL [--agent NAME] [--json]
  watch     Run an agent and supervise it: selfheal watch --state-dir DIR -- COMMAND ARGS

Run "selfheal <command> --help" for its options; "selfheal --version" prints the version.`;

/** The package's version, from its package.json (two folders up, in src/ and in dist/ alike). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version?: unknown;
  };
  return String(pkg.version);
}

/**
 * Runs the command `argv` (the arguments after `selfheal`) names. Resolves with the exit code when
 * it is decided here (no command: the usage on stderr, 2); undefined leaves it to the command
 * (watch sets the child's). Bad usage and failures are thrown: see `exitFor`.
 */
export async function run(argv: string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return undefined;
  }
  if (command === "--version" || command === "-v" || command === "version") {
    console.log(version());
    return undefined;
  }
  if (!Object.hasOwn(COMMANDS, command))
    throw new UsageError(`unknown command "${command}" (known: demo, report, status, watch)`);
  const commandOf = await COMMANDS[command as keyof typeof COMMANDS]();
  await commandOf(rest);
  return undefined;
}

/**
 * What `run` threw, as the bin ends with it: bad usage (a UsageError, a SELFHEAL_CONFIG error, a
 * parseArgs error) one line and exit 2; a command that failed one line and exit 1; anything else,
 * a bug, its stack (escaped) and exit 1. `text` is stderr's, newline included.
 */
export function exitFor(error: unknown): { exitCode: 1 | 2; text: string } {
  // parseArgs throws TypeErrors with ERR_PARSE_ARGS_* codes for bad flags: usage errors too.
  const code = (error as { code?: unknown } | null | undefined)?.code;
  if (
    error instanceof UsageError ||
    code === "SELFHEAL_CONFIG" ||
    (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS"))
  ) {
    // Arguments are echoed in usage errors: shown, never obeyed by the terminal.
    const message = (error as Error).message.replace(/^selfheal: /, "");
    return { exitCode: 2, text: `selfheal: ${oneLine(message)}\n` };
  }
  if (error instanceof CommandFailedError)
    return { exitCode: 1, text: `selfheal: ${oneLine(error.message)}\n` };
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return { exitCode: 1, text: `selfheal: ${escapeControl(text)}\n` };
}
