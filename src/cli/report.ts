/**
 * `selfheal report FILE.jsonl [MORE.jsonl ...] [--html OUT.html]`: the weekly review of a recovery
 * event log (recovery.eventLog), as text and optionally as a self-contained HTML page.
 */
import { access, constants, stat, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parseTime, type Period } from "../report/period.js";
import { ioProblem, reviewFiles } from "../report/review-files.js";
import { renderHtml } from "../report/render-html.js";
import {
  renderRuleSuggestions,
  renderText,
  renderThresholdSuggestions,
} from "../report/render-text.js";
import { oneLine } from "../telemetry/redact.js";
import { UsageError } from "./errors.js";

export const REPORT_USAGE = `Usage: selfheal report FILE.jsonl [MORE.jsonl ...] [--since T] [--until T] [--compare-previous]
                       [--html OUT.html] [--suggest-rules OUT.json] [--suggest-thresholds]
                       [--tz ZONE]

Reads a recovery event log (the JSONL file of recovery.eventLog) and prints the review: top
failure patterns, UNKNOWN share and sample texts per tool (the rules to write), the success of
each strategy, the outcomes, MTTR percentiles and cost per incident. With one FILE, its rotated
files FILE.1, FILE.2, ... are read too, oldest first; with several, exactly those, in order.
Lines that are not recovery events are counted, named and left out; a file set with no event
at all exits 2.

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
  -h, --help                this help`;

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

/** Writes `text` to `out`, or one line and exit 2. */
async function writeOut(out: string, text: string): Promise<void> {
  try {
    await writeFile(out, text);
  } catch (error) {
    throw new UsageError(`cannot write ${out}: ${ioProblem(error)}`);
  }
  console.log(`\nwrote ${oneLine(out)}`);
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
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      html: { type: "string" },
      "suggest-rules": { type: "string" },
      "suggest-thresholds": { type: "boolean", default: false },
      since: { type: "string" },
      until: { type: "string" },
      "compare-previous": { type: "boolean", default: false },
      tz: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
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
  console.log(renderText(review, { previous, timeZone }));
  if (rulesOut !== undefined) console.log(`\n${renderRuleSuggestions(review.rules)}`);
  if (values["suggest-thresholds"])
    console.log(`\n${renderThresholdSuggestions(review.thresholds)}`);
  if (values.html !== undefined)
    await writeOut(values.html, renderHtml(review, { previous, timeZone }));
  if (rulesOut !== undefined)
    await writeOut(rulesOut, `${JSON.stringify(review.rules.file, null, 2)}\n`);
}
