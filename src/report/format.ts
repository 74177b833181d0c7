/** How the review writes times, shares, money and changes: one place for both renderers. */
import { cutText, DEFAULT_MAX_TEXT_LENGTH, oneLine, withoutSecrets } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";

/**
 * A name or text from the log as the review shows it, in the terminal and on the page: redacted
 * (whoever wrote the log may have put a key in it), its control, bidi and invisible characters as
 * escapes, on one line, cut at 1,024 characters.
 */
export const shown = (text: string): string =>
  cutText(oneLine(withoutSecrets(text)), DEFAULT_MAX_TEXT_LENGTH);

export const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
export const secs = (x: number | null): string => (x === null ? "n/a" : `${x.toFixed(1)} s`);
export const usd = (x: number): string => `$${x.toFixed(4)}`;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** `2026-11-23 08:00 UTC`: a time in the reader's zone, the zone said. */
export function formatTime(ms: number, timeZone: string): string {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
      timeZoneName: "short",
    });
    formatters.set(timeZone, f);
  }
  const parts = Object.fromEntries(f.formatToParts(ms).map((p) => [p.type, p.value]));
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute} ${parts.timeZoneName}`;
}

/** Whether a rise of the figure is good news (recovery rate), bad news (incidents) or neither. */
export type Direction = "higher-is-better" | "lower-is-better";

export interface Change {
  /** `+12 (+40.0%)`, `-0.5 pt`, `new`, `=`. */
  text: string;
  /** For colour: an improvement, a regression, or no change. */
  tone: "better" | "worse" | "same";
}

/**
 * The change of a figure from the previous period. Rates change in points (`+3.2 pt`), counts
 * and amounts in their unit and percent.
 */
export function change(
  now: number | null,
  before: number | null,
  direction: Direction,
  kind: "count" | "rate" | "seconds" | "usd",
): Change {
  if (now === null || before === null) return { text: "n/a", tone: "same" };
  const d = now - before;
  if (Math.abs(d) < 1e-12) return { text: "=", tone: "same" };
  const better = direction === "higher-is-better" ? d > 0 : d < 0;
  const sign = d > 0 ? "+" : "-";
  const abs = Math.abs(d);
  const rel = before === 0 ? "" : ` (${sign}${((abs / Math.abs(before)) * 100).toFixed(1)}%)`;
  const text =
    kind === "rate"
      ? `${sign}${(abs * 100).toFixed(1)} pt`
      : kind === "count"
        ? `${sign}${abs}${rel}`
        : kind === "seconds"
          ? `${sign}${abs.toFixed(1)} s${rel}`
          : `${sign}$${abs.toFixed(4)}${rel}`;
  return { text, tone: better ? "better" : "worse" };
}

/** A headline figure of a review, with how to read its change. */
export interface Figure {
  label: string;
  value: (r: Review) => number | null;
  show: (x: number | null) => string;
  direction: Direction;
  kind: "count" | "rate" | "seconds" | "usd";
}

/** The figures the review opens with, and compares with the previous period. */
export const HEADLINE: readonly Figure[] = [
  {
    label: "incidents",
    value: (r) => r.events,
    show: String,
    direction: "lower-is-better",
    kind: "count",
  },
  {
    label: "auto-recovery rate",
    value: (r) => (r.events ? r.autoRecoveryRate : null),
    show: (x) => (x === null ? "n/a" : pct(x)),
    direction: "higher-is-better",
    kind: "rate",
  },
  {
    label: "MTTR p50",
    value: (r) => r.mttrSeconds.p50,
    show: secs,
    direction: "lower-is-better",
    kind: "seconds",
  },
  {
    label: "MTTR p90",
    value: (r) => r.mttrSeconds.p90,
    show: secs,
    direction: "lower-is-better",
    kind: "seconds",
  },
  {
    label: "unrecovered (failed, escalated, out of budget)",
    value: (r) => r.unrecovered.total,
    show: String,
    direction: "lower-is-better",
    kind: "count",
  },
  {
    label: "UNKNOWN share",
    value: (r) => (r.events ? r.unknownShare : null),
    show: (x) => (x === null ? "n/a" : pct(x)),
    direction: "lower-is-better",
    kind: "rate",
  },
  {
    label: "recovery spend",
    value: (r) => r.costUsd,
    show: (x) => usd(x ?? 0),
    direction: "lower-is-better",
    kind: "usd",
  },
  {
    label: "spend per incident",
    value: (r) => (r.events ? r.costPerIncidentUsd : null),
    show: (x) => (x === null ? "n/a" : usd(x)),
    direction: "lower-is-better",
    kind: "usd",
  },
];
