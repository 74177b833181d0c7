import { escapeControl, safeJson } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";
import { change, formatTime, HEADLINE, pct, secs, shown, usd } from "./format.js";
import { shellQuote } from "./shell-quote.js";
import type { RuleFileRule, RuleSuggestions } from "./suggest-rules.js";
import type { ThresholdSuggestions } from "./suggest-thresholds.js";
import type { Replay, SignalAdvice } from "./threshold-advice.js";

/**
 * Every cell comes from the log, which anyone who can write the file controls: control
 * characters are shown as escapes, so a cell cannot move the cursor, recolour or clear the
 * terminal, or start a line of its own.
 */
function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => shown(String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...cells.slice(1).map(line)].join(
    "\n",
  );
}

/**
 * The lines as the terminal gets them. Each name and text from the log is already on one line
 * (`shown`) where it is put in; this last pass makes sure no control or bidi character of any
 * of them reaches the terminal raw, whatever a renderer forgot.
 */
const terminalText = (lines: string[]) => escapeControl(lines.join("\n"));

/** How to render: the previous period to compare with, the zone times are written in. */
export interface RenderOptions {
  previous?: Review | undefined;
  /** IANA zone (default UTC). */
  timeZone?: string;
}

/** Unrecovered incidents listed in the text (the page lists more). */
const UNRECOVERED_IN_TEXT = 10;

/** The review as terminal text. */
export function renderText(r: Review, options: RenderOptions = {}): string {
  const zone = options.timeZone ?? "UTC";
  const time = (iso: string | undefined) => (iso ? formatTime(Date.parse(iso), zone) : "");
  const out: string[] = [];
  const only =
    r.events === 0 && r.watchdog.events > 0 ? " (the log holds watchdog lines only)" : "";
  const span = r.period.since
    ? ` in ${time(r.period.since)} to ${r.period.until ? time(r.period.until) : "now"}`
    : r.from
      ? ` from ${time(r.from)} to ${time(r.to)}`
      : "";
  out.push(`Recovery review: ${r.events} incidents${span}${only}`);
  if (r.outsidePeriod)
    out.push(`(${r.outsidePeriod} lines dated outside the period were left out)`);
  if (r.malformed) {
    out.push(`(${r.malformed} lines were not recovery events and were left out)`);
    for (const m of r.malformedSamples) out.push(`  ${shown(m)}`);
    if (r.malformed > r.malformedSamples.length)
      out.push(`  and ${r.malformed - r.malformedSamples.length} more`);
  }
  const section = (title: string, headers: string[], rows: (string | number)[][]) => {
    out.push("", title, table(headers, rows));
  };
  if (r.events > 0 || options.previous) headline(r, options.previous, section, time);
  if (r.events > 0) recoverySections(r, out, section, time);
  const w = r.watchdog;
  if (w.events > 0) {
    section(
      `Watchdog: long runs (${w.sessions} ${w.sessions === 1 ? "session" : "sessions"})`,
      ["tier", "runs", "recovered", "failed", "success"],
      w.tiers.map((t) => [t.tier, t.runs, t.recovered, t.failed, pct(t.successRate)]),
    );
    out.push(
      `Verdicts entered: ${w.verdicts.map((v) => `${shown(v.verdict)} ${v.count}`).join(", ") || "none"}`,
      `Gave up (restart intensity reached): ${w.gaveUp}`,
    );
  }
  return terminalText(out);
}

type Section = (title: string, headers: string[], rows: (string | number)[][]) => void;

/** The headline figures, with the previous period's and the change when there is one. */
function headline(
  r: Review,
  previous: Review | undefined,
  section: Section,
  time: (iso: string | undefined) => string,
): void {
  if (!previous) {
    section(
      "Headline",
      ["figure", "value"],
      HEADLINE.map((f) => [f.label, f.show(f.value(r))]),
    );
    return;
  }
  section(
    `Headline, against the previous period (${time(previous.period.since)} to ${time(previous.period.until)})`,
    ["figure", "value", "previous", "change"],
    HEADLINE.map((f) => {
      const now = f.value(r);
      const before = f.value(previous);
      return [f.label, f.show(now), f.show(before), change(now, before, f.direction, f.kind).text];
    }),
  );
}

/** Patterns, agents, tools, strategies, outcomes, what was not recovered, MTTR and spend. */
function recoverySections(
  r: Review,
  out: string[],
  section: Section,
  time: (iso: string) => string,
): void {
  section(
    "Top failure patterns",
    ["pattern", "incidents", "share"],
    r.patterns.map((p) => [p.pattern, p.incidents, pct(p.share)]),
  );
  const breakdown = (title: string, what: string, rows: Review["byAgent"]) => {
    section(
      title,
      [what, "incidents", "auto-recovered", "MTTR p50", "MTTR p90", "spend", "UNKNOWN share"],
      rows.map((b) => [
        b.name,
        b.incidents,
        pct(b.autoRecoveryRate),
        secs(b.mttrP50Seconds),
        secs(b.mttrP90Seconds),
        usd(b.costUsd),
        pct(b.unknownShare),
      ]),
    );
  };
  breakdown("Per agent", "agent", r.byAgent);
  breakdown("Per tool", "tool", r.byTool);
  for (const t of r.tools.filter((x) => x.samples.length)) {
    out.push(`  UNKNOWN texts of ${shown(t.tool)} (write rules for these):`);
    for (const s of t.samples)
      out.push(`    - ${shown(s.text)}${s.count > 1 ? ` (x${s.count})` : ""}`);
  }
  section(
    "Strategies",
    ["strategy", "runs", "recovered the call", "success"],
    r.strategies.map((s) => [s.strategy, s.runs, s.recovered, pct(s.successRate)]),
  );
  section(
    "Outcomes",
    ["outcome", "incidents", "share", "p50 duration", "p90 duration"],
    r.outcomes.map((o) => [
      o.outcome,
      o.incidents,
      pct(o.share),
      secs(o.p50Seconds),
      secs(o.p90Seconds),
    ]),
  );
  if (r.unrecovered.total) {
    const listed = r.unrecovered.latest.slice(0, UNRECOVERED_IN_TEXT);
    section(
      `Not recovered (${r.unrecovered.total} incidents, ${r.unrecovered.groups} kinds; the latest ${listed.length})`,
      ["last seen", "times", "agent", "tool", "pattern", "outcome", "tried", "error"],
      listed.map((u) => [
        time(new Date(u.lastAt).toISOString()),
        u.count,
        u.agent,
        u.tool,
        u.pattern,
        u.outcome,
        u.tried.join(" -> ") || "nothing",
        u.error.slice(0, 80),
      ]),
    );
  }
  out.push(
    "",
    `MTTR (recovered calls, ${r.mttrSeconds.count}): p50 ${secs(r.mttrSeconds.p50)}, p90 ${secs(r.mttrSeconds.p90)}, p99 ${secs(r.mttrSeconds.p99)}`,
    `Recovery spend: ${usd(r.costUsd)} (${usd(r.costPerIncidentUsd)} per incident)`,
  );
}

/** `--suggest-rules`: each proposed rule with its evidence, then the templates left to a person. */
export function renderRuleSuggestions(s: RuleSuggestions): string {
  const out = [
    `Suggested rules: ${s.file.rules.length} from ${s.texts} UNKNOWN texts${s.leftOut ? ` (${s.leftOut} past the template limit, not grouped)` : ""}`,
  ];
  if (s.file.rules.length) {
    out.push(
      table(
        ["rule", "pattern", "evidence", "samples", "first seen", "last seen", "match"],
        s.file.rules.map((r) => [
          r.name,
          r.pattern,
          `${r.evidence?.tier ?? ""}: ${r.evidence?.because ?? ""}`,
          r.evidence?.samples ?? "",
          r.evidence?.firstSeen ?? "",
          r.evidence?.lastSeen ?? "",
          matchText(r.match),
        ]),
      ),
    );
    for (const r of s.file.rules) {
      const e = r.evidence;
      if (!e) continue;
      const won = Object.entries(e.recoveredBy)
        .map(([strategy, k]) => `${strategy} ${k}`)
        .join(", ");
      out.push(
        "",
        shown(
          `  ${r.name}: runs ${e.strategies.map((p) => (typeof p === "string" ? p : p.strategy)).join(" -> ") || "no strategy (passed on)"}; ${e.recovered} of ${e.samples} recovered${won ? ` (${won})` : ""}; tools ${e.tools.join(", ")}`,
        ),
        ...e.examples.map((x) => `    - ${shown(x)}`),
      );
    }
  }
  if (s.unclassified.length) {
    out.push("", "Templates with no pattern to propose (read them; write a rule by hand):");
    for (const u of s.unclassified) out.push(`  - ${shown(u.template)} (x${u.samples})`);
  }
  return terminalText(out);
}

const matchText = (m: RuleFileRule["match"]) =>
  [
    ...(m.status ? [`status ${m.status.join("|")}`] : []),
    ...(m.code ? [`code ${m.code.join("|")}`] : []),
    ...m.message.map((re) => `/${re}/i`),
  ].join(" and ");

const SIGNAL_NAMES: Record<SignalAdvice["signal"], string> = {
  success_rate: "success rate",
  empty_responses: "empty rate",
  latency_p95: "P95 latency",
};

/** What a replayed setting did, in a cell: `caught 3/4 incident windows, 0/120 quiet alarmed`. */
const did = (r: Replay) =>
  `caught ${r.caught}/${r.incidents}, alarmed ${r.falseAlarms}/${r.quiet} quiet`;

/**
 * `--suggest-thresholds`: per tool and signal, the evidence and what the current and suggested
 * settings would have done; per watchdog stage, the step durations and the stall limit; then the
 * config fragments to paste.
 */
export function renderThresholdSuggestions(s: ThresholdSuggestions): string {
  const changes = s.signals.filter((a) => a.suggested).length + Object.keys(s.watchdog).length;
  const out = [
    `Suggested thresholds: ${s.signals.filter((a) => a.overrides).length} tool signals and ${s.stages.filter((a) => a.suggestedMs !== undefined).length} stall limits to change, from ${s.rollups} rollup lines${s.untracked ? ` (${s.untracked} past the tool limit, not judged)` : ""}`,
  ];
  if (s.rollups === 0)
    out.push(
      '  The log has no call rollups ("type":"calls" lines): the engine writes them to recovery.eventLog once a minute; an older version did not.',
    );
  if (s.signals.length) {
    out.push(
      "",
      "Per tool (10-minute windows; incident: a recovery in it; quiet: none in it or next to it)",
      table(
        [
          "agent",
          "tool",
          "signal",
          "samples",
          "evidence",
          "current",
          "it did",
          "suggested",
          "would do",
        ],
        s.signals.map((a) => [
          a.agent,
          a.tool,
          SIGNAL_NAMES[a.signal],
          a.samples,
          a.evidence,
          a.current.setting,
          did(a.current),
          a.suggested?.setting ?? "no change",
          a.suggested ? did(a.suggested) : a.reason,
        ]),
      ),
    );
    for (const a of s.signals.filter((x) => x.suggested))
      out.push(shown(`  ${a.agent}/${a.tool} ${SIGNAL_NAMES[a.signal]}: ${a.reason}`));
  }
  if (s.stages.length) {
    out.push(
      "",
      "Watchdog stall limits per stage (from the durations of completed steps)",
      table(
        [
          "agent",
          "stage",
          "steps",
          "p99",
          "longest",
          "current",
          "slower than it",
          "suggested",
          "slower than it",
          "why",
        ],
        s.stages.map((a) => [
          a.agent,
          a.stage,
          a.steps,
          secs(a.quantileMs === null ? null : a.quantileMs / 1000),
          secs(a.maxMs === null ? null : a.maxMs / 1000),
          secs(a.currentMs / 1000),
          a.currentOver,
          a.suggestedMs === undefined ? "no change" : secs(a.suggestedMs / 1000),
          a.suggestedOver ?? "",
          a.reason,
        ]),
      ),
    );
  }
  if (changes === 0) {
    out.push("", "No change proposed: the current settings fit the period.");
    return terminalText(out);
  }
  out.push("", "Paste:", ...pasteLines(s));
  return terminalText(out);
}

/**
 * The config fragments to paste: names as JSON strings with every unsafe code point escaped
 * (safeJson: the same value, nothing raw), and the watch line with each argument quoted for a
 * POSIX shell. A stage no quoting makes safe to paste (a line break, a control character) is left
 * out of the line, and said.
 */
function pasteLines(s: ThresholdSuggestions): string[] {
  const out: string[] = [];
  for (const [agent, health] of Object.entries(s.health))
    out.push(
      `createSelfHealing({ agent: ${safeJson(agent)}, health: ${safeJson(health, 2).replace(/\n/g, "\n  ")} });`,
    );
  for (const [agent, limits] of Object.entries(s.watchdog)) {
    out.push(`new Supervisor({ agent: ${safeJson(agent)}, limits: ${safeJson(limits)}, ... });`);
    const args: string[] = [];
    const unsafe: string[] = [];
    for (const [stage, ms] of Object.entries(limits.stageStallMs)) {
      const arg = shellQuote(`${stage}=${ms}`);
      if (arg === undefined) unsafe.push(stage);
      else args.push(`--stage-stall-ms ${arg}`);
    }
    if (args.length) out.push(`selfheal watch ${args.join(" ")} ...`);
    for (const stage of unsafe)
      out.push(
        `# stage ${safeJson(stage)} left out of the watch line: its name holds a line break or control character, which no shell quoting makes safe to paste`,
      );
  }
  return out;
}
