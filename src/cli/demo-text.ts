/**
 * The text `selfheal demo` prints, pure (from the results, for the terminal and for tests): the
 * progress line, the timeline's lines, and the summary, where the run's figures with selfheal
 * stand beside those of the same run without it (the same scenario, seed and fleet; see
 * src/sim/no-recovery-policy.ts and long-runs' `supervise: false`), then one line that says what
 * the difference was.
 */
import { clockText } from "../sim/clock-text.js";
import type { LongRunEntry, LongRunsResult } from "../sim/long-runs.js";
import type { SimResult } from "../sim/run.js";

/** Wide enough for every kind of timeline entry ("escalation"): the texts line up. */
const KIND_WIDTH = 10;

/** The progress line: virtual time played of the run's length; it ends at `runMs / runMs`. */
export function progressText(virtualMs: number, runMs: number): string {
  return `virtual time ${clockText(Math.min(virtualMs, runMs), runMs)} / ${clockText(runMs, runMs)}`;
}

/** One line of the timeline; `paint` colours the kind (a terminal's, or none). */
export function timelineLine(
  atMs: number,
  runMs: number,
  kind: string,
  text: string,
  paint: (kind: string) => string = (k) => k,
): string {
  return `  [${clockText(atMs, runMs)}] ${paint(kind.padEnd(KIND_WIDTH))} ${text}`;
}

/** A long run's entry: its session, then what happened (a page's title names the session once). */
export function longRunText(entry: LongRunEntry): string {
  return entry.text.includes(entry.session) ? entry.text : `${entry.session} ${entry.text}`;
}

/** A run's figures for `--json`: everything but its timeline. */
export function figuresOf<T extends { timeline: unknown }>(result: T): Omit<T, "timeline"> {
  const figures: Partial<T> = { ...result };
  delete figures.timeline;
  return figures as Omit<T, "timeline">;
}

/** A figure with and without selfheal; `without` undefined: the row has one column. */
type Row = [label: string, withSelfheal: string, without?: string];

const LABEL_WIDTH = 48;
const WITH = "with selfheal";
const WITHOUT = "without selfheal";
/** For a figure the run without selfheal has nothing of (no breaker, no diagnosis). */
const NONE = "-";

const percent = (share: number) => `${(share * 100).toFixed(1)}%`;
const usd = (x: number) => `$${x.toFixed(4)}`;
const counts = (record: Record<string, number>) =>
  Object.entries(record)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** The rows as a table: the label, then the two columns where a row has both. */
function table(rows: Row[]): string[] {
  const width = Math.max(
    WITH.length,
    ...rows.filter((r) => r[2] !== undefined).map(([, value]) => value.length),
  );
  const line = (label: string, a: string, b?: string) =>
    `  ${label.padEnd(LABEL_WIDTH)} ${b === undefined ? a : `${a.padEnd(width)}   ${b}`}`.trimEnd();
  return [line("", WITH, WITHOUT), ...rows.map(([label, a, b]) => line(label, a, b))];
}

/** The summary of a scenario: its figures with selfheal, and without, side by side. */
export function scenarioSummary(
  withSelfheal: SimResult,
  without: SimResult,
  options: { stream: boolean },
): string[] {
  const both = (label: string, figure: (r: SimResult) => string): Row => [
    label,
    figure(withSelfheal),
    figure(without),
  ];
  const mttr = (r: SimResult) =>
    r.mttrSeconds !== null
      ? `${r.mttrSeconds.toFixed(1)} s`
      : r.incidents > 0
        ? "none recovered"
        : "n/a";
  const rows: Row[] = [
    both("tasks", (r) => String(r.tasks)),
    both("incidents (calls whose first request failed)", (r) => String(r.incidents)),
    both("auto-recovery rate", (r) => percent(r.autoRecoveryRate)),
    both("MTTR (first failed request to answer)", mttr),
    both("user-visible failures", (r) => String(r.userVisibleFailures)),
    // Streamed answers: the cut ones a reader took for whole, and what selfheal diagnosed.
    ...(options.stream
      ? [
          both("truncated answers delivered as whole", (r) => String(r.truncatedAnswers)),
          ["diagnoses (selfheal's)", counts(withSelfheal.diagnoses) || "none"] satisfies Row,
        ]
      : []),
    both("pages (failed calls, one per kind per 10 min)", (r) => String(r.pages)),
    both("spend (every request)", (r) => usd(r.spendUsd)),
    both("recovery spend (requests after a call's first)", (r) => usd(r.recoveryCostUsd)),
    both("wasted retries", (r) => String(r.wastedRetries)),
    both("double charges", (r) => String(r.doubleCharges)),
    ["false breaker trips", String(withSelfheal.falseTrips), NONE],
    ["drift alerts", String(withSelfheal.driftEvents), NONE],
    ["requests per provider", ""],
    [`  ${WITH}`, counts(withSelfheal.callsPerProvider)],
    [`  ${WITHOUT}`, counts(without.callsPerProvider)],
  ];
  return [...table(rows), "", scenarioVerdict(withSelfheal, without)];
}

/** The difference in one line: what reached users and the on-call, without and with. */
export function scenarioVerdict(withSelfheal: SimResult, without: SimResult): string {
  const told = (r: SimResult) =>
    `${plural(r.userVisibleFailures, "user-visible failure")} and ${plural(r.pages, "page")}`;
  const doubles =
    without.doubleCharges + withSelfheal.doubleCharges > 0
      ? `; double charges ${without.doubleCharges} without, ${withSelfheal.doubleCharges} with`
      : "";
  return `Without selfheal: ${told(without)}. With selfheal: ${told(withSelfheal)}${doubles}.`;
}

/** The summary of the long-runs night: under the watchdog, and without it. */
export function longRunsSummary(withSelfheal: LongRunsResult, without: LongRunsResult): string[] {
  const both = (label: string, figure: (r: LongRunsResult) => string): Row => [
    label,
    figure(withSelfheal),
    figure(without),
  ];
  const rows: Row[] = [
    both("runs (with a fault)", (r) => `${r.runs} (${r.faulted})`),
    both("finished by morning", (r) => String(r.finished)),
    both("work done by morning (steps)", (r) => percent(r.stepsDone / (r.stepsPlanned || 1))),
    ["recovered, by tier", counts(withSelfheal.recoveredByTier)],
    ["tier runs that did not help", counts(withSelfheal.failedByTier)],
    ["given up (restart intensity)", String(withSelfheal.gaveUp)],
    [
      "pages sent (throttled per run)",
      String(withSelfheal.pages),
      `${without.pages} (nobody looks)`,
    ],
    ["pages if every bad look paged", String(withSelfheal.pagesUnthrottled)],
  ];
  return [...table(rows), "", longRunsVerdict(withSelfheal, without)];
}

/** The night's difference in one line: the runs lost by morning, and who was told. */
export function longRunsVerdict(withSelfheal: LongRunsResult, without: LongRunsResult): string {
  const lost = (r: LongRunsResult) => `${r.runs - r.finished} of ${r.runs} runs unfinished`;
  return (
    `Without selfheal: ${lost(without)} by morning, nobody told. ` +
    `With selfheal: ${lost(withSelfheal)}, ${plural(withSelfheal.pages, "page")}.`
  );
}
