import { oneLine } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";
import type { RuleFileRule, RuleSuggestions } from "./suggest-rules.js";

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const secs = (x: number | null) => (x === null ? "n/a" : `${x.toFixed(1)} s`);

/**
 * Every cell comes from the log, which anyone who can write the file controls: control
 * characters are shown as escapes, so a cell cannot move the cursor, recolour or clear the
 * terminal, or start a line of its own.
 */
function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => oneLine(String(c))))];
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

/** The review as terminal text. */
export function renderText(r: Review): string {
  const out: string[] = [];
  const only =
    r.events === 0 && r.watchdog.events > 0 ? " (the log holds watchdog lines only)" : "";
  out.push(
    `Recovery review: ${r.events} incidents${r.from ? ` from ${r.from} to ${r.to ?? ""}` : ""}${only}`,
  );
  if (r.malformed) {
    out.push(`(${r.malformed} lines were not recovery events and were left out)`);
    for (const m of r.malformedSamples) out.push(`  ${oneLine(m)}`);
    if (r.malformed > r.malformedSamples.length)
      out.push(`  and ${r.malformed - r.malformedSamples.length} more`);
  }
  const section = (title: string, headers: string[], rows: (string | number)[][]) => {
    out.push("", title, table(headers, rows));
  };
  if (r.events > 0) recoverySections(r, out, section);
  const w = r.watchdog;
  if (w.events > 0) {
    section(
      `Watchdog: long runs (${w.sessions} ${w.sessions === 1 ? "session" : "sessions"})`,
      ["tier", "runs", "recovered", "failed", "success"],
      w.tiers.map((t) => [t.tier, t.runs, t.recovered, t.failed, pct(t.successRate)]),
    );
    out.push(
      `Verdicts entered: ${w.verdicts.map((v) => `${oneLine(v.verdict)} ${v.count}`).join(", ") || "none"}`,
      `Gave up (restart intensity reached): ${w.gaveUp}`,
    );
  }
  return out.join("\n");
}

/** Patterns, tools, strategies, outcomes, MTTR and spend: the review of recovery events. */
function recoverySections(
  r: Review,
  out: string[],
  section: (title: string, headers: string[], rows: (string | number)[][]) => void,
): void {
  section(
    "Top failure patterns",
    ["pattern", "incidents", "share"],
    r.patterns.map((p) => [p.pattern, p.incidents, pct(p.share)]),
  );
  section(
    "Per tool",
    ["tool", "incidents", "UNKNOWN", "UNKNOWN share"],
    r.tools.map((t) => [t.tool, t.incidents, t.unknown, pct(t.unknownShare)]),
  );
  for (const t of r.tools.filter((x) => x.samples.length)) {
    out.push(`  UNKNOWN texts of ${oneLine(t.tool)} (write rules for these):`);
    for (const s of t.samples)
      out.push(`    - ${oneLine(s.text)}${s.count > 1 ? ` (x${s.count})` : ""}`);
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
  out.push(
    "",
    `MTTR (recovered calls, ${r.mttrSeconds.count}): p50 ${secs(r.mttrSeconds.p50)}, p90 ${secs(r.mttrSeconds.p90)}, p99 ${secs(r.mttrSeconds.p99)}`,
    `Recovery spend: $${r.costUsd.toFixed(4)} ($${r.costPerIncidentUsd.toFixed(4)} per incident)`,
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
        `  ${r.name}: runs ${e.strategies.map((p) => (typeof p === "string" ? p : p.strategy)).join(" -> ") || "no strategy (passed on)"}; ${e.recovered} of ${e.samples} recovered${won ? ` (${won})` : ""}; tools ${e.tools.join(", ")}`,
        ...e.examples.map((x) => `    - ${oneLine(x)}`),
      );
    }
  }
  if (s.unclassified.length) {
    out.push("", "Templates with no pattern to propose (read them; write a rule by hand):");
    for (const u of s.unclassified) out.push(`  - ${oneLine(u.template)} (x${u.samples})`);
  }
  return out.join("\n");
}

const matchText = (m: RuleFileRule["match"]) =>
  [
    ...(m.status ? [`status ${m.status.join("|")}`] : []),
    ...(m.code ? [`code ${m.code.join("|")}`] : []),
    ...m.message.map((re) => `/${re}/i`),
  ].join(" and ");
