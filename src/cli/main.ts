#!/usr/bin/env node
/**
 * The `selfheal` command. `selfheal demo` plays an incident scenario on virtual time, on the
 * in-memory default (no server), and shows selfheal heal the agent (demo.ts). `selfheal status
 * --redis URL` prints a fleet's health from Redis (ioredis is loaded for that command only).
 */
import { readFileSync } from "node:fs";
import { access, constants, stat, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { ReviewBuilder } from "../report/analyze.js";
import { readInto } from "../report/read.js";
import { renderHtml } from "../report/render-html.js";
import { renderText } from "../report/render-text.js";
import { escapeControl, oneLine } from "../telemetry/redact.js";
import { demo } from "./demo.js";
import { CommandFailedError, UsageError } from "./errors.js";
import { status } from "./status.js";
import { watch } from "./watch.js";

const USAGE = `Usage: selfheal <command> [options]

Commands:
  demo      Play an incident on virtual time and watch selfheal heal the agent
  report    The weekly review of a recovery event log (recovery.eventLog JSONL)
  status    The fleet's health from Redis: selfheal status --redis URL [--agent NAME] [--json]
  watch     Run an agent and supervise it: selfheal watch --state-dir DIR -- COMMAND ARGS

Run "selfheal <command> --help" for its options; "selfheal --version" prints the version.`;

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
