/**
 * `selfheal report FILE.jsonl [MORE.jsonl ...] [--html OUT.html]`: the weekly review of a recovery
 * event log (recovery.eventLog), as text and optionally as a self-contained HTML page.
 */
import { fstatSync } from "node:fs";
import { access, constants, stat, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { isatty } from "node:tty";
import { fileKind, notRegularFile } from "../file-kind.js";
import { STDIN } from "../report/read.js";
import { parseTime, type Period } from "../report/period.js";
import { ioProblem, reviewFiles } from "../report/review-files.js";
import { renderHtml } from "../report/render-html.js";
import {
  renderRuleSuggestions,
  renderText,
  renderThresholdSuggestions,
} from "../report/render-text.js";
import { oneLine, safeJson } from "../telemetry/redact.js";
import { UsageError } from "./errors.js";
import { parseFlags } from "./flags.js";

export const REPORT_USAGE = `Usage: selfheal report FILE.jsonl [MORE.jsonl ...] [--since T] [--until T] [--compare-previous]
                       [--html OUT.html] [--suggest-rules OUT.json] [--suggest-thresholds [--json]]
                       [--tz ZONE]

Reads a recovery event log (the JSONL file of recovery.eventLog) and prints the review: top
failure patterns, UNKNOWN share and sample texts per tool (the rules to write), the success of
each strategy, the outcomes, MTTR percentiles and cost per incident. With one FILE, its rotated
files FILE.1, FILE.2, ... are read too, oldest first; with several, exactly those, in order.
Lines that are not recovery events are counted, named and left out; a file set with no event
at all exits 2. FILE is a regular file (a pipe, device or folder exits 2 at once), or - for
standard input (a pipe or a redirected file). Text from the log is redacted and printed with its
control characters as escapes; the lines to paste are quoted for POSIX shells.

Options:
  --since T                 review from T: an ISO date or time (2026-11-23, 2026-11-23T08:00Z),
                            or a span back from --until (7d, 12h, 90m, 2w)
  --until T                 review up to T, excluded (default: now); same forms, spans back from now
  --compare-previous        also review the period of the same length before --since, and show
                            each figure's change (needs --since)
  --tz ZONE                 times in this IANA zone (Europe/Paris; default UTC)
  --html OUT.html           also write a self-contained page with charts (no network needed)
  --suggest-rules OUT.json  group the UNKNOWN texts into templates and propose each as a rule,
                            with its evidence; write them as a rule file that
                            createSelfHealing({ diagnosis: { ruleFile: "OUT.json" } }) loads
  --suggest-thresholds      replay the health thresholds and watchdog stall limits over the
                            period's calls and steps (the engine's per-minute rollup lines) and
                            propose, per tool and per stage, the settings that would have flagged
                            its incidents without false alarms on its quiet hours: the evidence,
                            then the config to paste
  --json                    with --suggest-thresholds: print only the suggestions, as one JSON
                            document (docs/cli.md describes it), instead of the review
  -h, --help                this help`;

/** `file`, preceded by its rotated files, oldest first: FILE.N ... FILE.1, FILE. */
async function rotatedSet(file: string): Promise<string[]> {
  if (file === STDIN) return [file];
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

/**
 * Standard input, when it is a pipe, a socket or a redirected regular file: a terminal would wait
 * for typing, a device (`< /dev/zero`) never end.
 */
function checkStdin(): { dev: number; ino: number } {
  const s = fstatSync(0);
  if (isatty(0))
    throw new UsageError("cannot read - (standard input): a terminal; pipe the log in, or name it");
  if (!(s.isFile() || s.isFIFO() || s.isSocket()))
    throw new UsageError(`cannot read - (standard input): ${fileKind(s)}`);
  return { dev: s.dev, ino: s.ino };
}

/**
 * Each input is a readable regular file (or `-`, once): else one line, exit 2, before any work.
 * A path is looked at, never opened here: opening a FIFO with no writer blocks.
 */
async function checkInputs(files: string[]): Promise<{ dev: number; ino: number }[]> {
  if (files.filter((f) => f === STDIN).length > 1)
    throw new UsageError("- (standard input) can be read once only");
  const ids: { dev: number; ino: number }[] = [];
  for (const file of files) {
    if (file === STDIN) {
      ids.push(checkStdin());
      continue;
    }
    let problem: string | undefined;
    try {
      const s = await stat(file);
      problem = notRegularFile(s);
      if (problem === undefined) await access(file, constants.R_OK);
      ids.push({ dev: s.dev, ino: s.ino });
    } catch (error) {
      problem = ioProblem(error);
    }
    if (problem !== undefined) throw new UsageError(`cannot read ${file}: ${problem}`);
  }
  return ids;
}

const sameFile = (a: { dev: number; ino: number } | undefined, b: { dev: number; ino: number }) =>
  a !== undefined && a.dev === b.dev && a.ino === b.ino;

/** An output can be written, and not over an input (a hard link or symlink to one included). */
async function checkTarget(
  out: string,
  what: string,
  files: string[],
  ids: { dev: number; ino: number }[],
): Promise<void> {
  const folder = dirname(resolve(out));
  try {
    if (!(await stat(folder)).isDirectory())
      throw Object.assign(new Error("not a folder"), { code: "ENOTDIR" });
    await access(folder, constants.W_OK);
  } catch (error) {
    throw new UsageError(`cannot write ${out}: folder ${folder}: ${ioProblem(error)}`);
  }
  const target = await stat(out).catch(() => undefined);
  if (target?.isDirectory()) throw new UsageError(`cannot write ${out}: is a folder (EISDIR)`);
  const same = files.find(
    (f, i) => resolve(f) === resolve(out) || (target !== undefined && sameFile(ids[i], target)),
  );
  if (same !== undefined)
    throw new UsageError(`refusing to write the ${what} over the input file ${same}`);
}

/** Writes `text` to `out` and says so (`say`), or one line and exit 2. */
async function writeOut(out: string, text: string, say: (line: string) => void): Promise<void> {
  try {
    await writeFile(out, text);
  } catch (error) {
    throw new UsageError(`cannot write ${out}: ${ioProblem(error)}`);
  }
  say(`wrote ${oneLine(out)}`);
}

/** `--since`, `--until`, `--compare-previous`: the period, or one line and exit 2. */
function periodFlags(
  values: { since?: string; until?: string; "compare-previous"?: boolean },
  now: number,
): Period {
  const time = (flag: string, value: string | undefined, base: number) => {
    if (value === undefined) return undefined;
    const ms = parseTime(value, base);
    if (ms === undefined)
      throw new UsageError(
        `--${flag} ${JSON.stringify(value)}: expected an ISO date or time (2026-11-23, 2026-11-23T08:00Z) or a span back (7d, 12h, 90m, 2w)`,
      );
    return ms;
  };
  const untilMs = time("until", values.until, now);
  const since = time("since", values.since, untilMs ?? now);
  if (values["compare-previous"] && since === undefined)
    throw new UsageError(
      "--compare-previous needs --since: the period to compare with the one before",
    );
  // With a start, the period ends now unless --until says otherwise.
  const end = untilMs ?? (since !== undefined ? now : undefined);
  if (since !== undefined && end !== undefined && since >= end)
    throw new UsageError(
      `--since ${new Date(since).toISOString()} is not before --until ${new Date(end).toISOString()}`,
    );
  return {
    ...(since !== undefined && { sinceMs: since }),
    ...(end !== undefined && { untilMs: end }),
  };
}

/** `--tz`: an IANA zone this runtime knows, or one line and exit 2. */
function zoneFlag(zone: string | undefined): string {
  if (zone === undefined) return "UTC";
  try {
    return new Intl.DateTimeFormat("en", { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw new UsageError(`--tz ${JSON.stringify(zone)}: not a time zone (try UTC or Europe/Paris)`);
  }
}

export async function report(argv: string[]): Promise<void> {
  const { values, positionals } = parseFlags(
    argv,
    {
      html: { type: "string" },
      "suggest-rules": { type: "string" },
      "suggest-thresholds": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      since: { type: "string" },
      until: { type: "string" },
      "compare-previous": { type: "boolean", default: false },
      tz: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    { allowPositionals: true },
  );
  if (values.help) {
    console.log(REPORT_USAGE);
    return;
  }
  const [first] = positionals;
  if (first === undefined)
    throw new UsageError("report needs the event log: selfheal report FILE.jsonl");
  const json = values.json;
  if (json && !values["suggest-thresholds"])
    throw new UsageError(
      "--json goes with --suggest-thresholds (the review itself is text, or a page with --html)",
    );
  const files = positionals.length === 1 ? await rotatedSet(first) : positionals;
  const ids = await checkInputs(files);
  const rulesOut = values["suggest-rules"];
  if (values.html !== undefined) await checkTarget(values.html, "HTML", files, ids);
  if (rulesOut !== undefined) await checkTarget(rulesOut, "rule file", files, ids);
  if (
    rulesOut !== undefined &&
    values.html !== undefined &&
    resolve(rulesOut) === resolve(values.html)
  )
    throw new UsageError("--html and --suggest-rules name the same file");
  const period = periodFlags(values, Date.now());
  const timeZone = zoneFlag(values.tz);
  const done = await reviewFiles({ files, period, comparePrevious: values["compare-previous"] });
  if (!done.ok) throw new UsageError(`cannot read ${done.file}: ${done.problem}`);
  const { review, previous } = done;
  if (review.events === 0 && review.watchdog.events === 0 && review.thresholds.rollups === 0) {
    const why = review.malformed
      ? `${review.malformed} lines, none a recovery event or rollup; ${review.malformedSamples[0] ?? ""}`
      : review.outsidePeriod
        ? `all ${review.outsidePeriod} lines are outside the period`
        : "the file is empty";
    throw new UsageError(`no recovery events in ${files.join(", ")} (${why})`);
  }
  if (json) {
    // stdout holds the one JSON document; what was written is said on stderr.
    console.log(safeJson({ version: 1, ...review.thresholds }));
  } else {
    console.log(renderText(review, { previous, timeZone }));
    if (rulesOut !== undefined) console.log(`\n${renderRuleSuggestions(review.rules)}`);
    if (values["suggest-thresholds"])
      console.log(`\n${renderThresholdSuggestions(review.thresholds)}`);
  }
  const said = (line: string) => {
    if (json) process.stderr.write(`${line}\n`);
    else console.log(`\n${line}`);
  };
  if (values.html !== undefined)
    await writeOut(values.html, renderHtml(review, { previous, timeZone }), said);
  if (rulesOut !== undefined) await writeOut(rulesOut, `${safeJson(review.rules.file, 2)}\n`, said);
}
