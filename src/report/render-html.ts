/**
 * The weekly review as one self-contained HTML page: every style inline, every chart an SVG
 * drawn here, no script, no network. Colour carries meaning only: outcomes (green recovered, red
 * failed, orange escalated, purple out of budget), patterns by kind (transient blues, stream
 * teals, answers' ambers, the caller's own mistakes reds, UNKNOWN grey), changes (green better,
 * red worse). Times are written in one zone, said at the top.
 */
import { NON_RETRYABLE_PATTERNS } from "../telemetry/conventions.js";
import { safeJson } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";
import { change, formatTime, HEADLINE, pct, secs, shown, usd, type Change } from "./format.js";
import type { RenderOptions } from "./render-text.js";
import type { Breakdown } from "./breakdown.js";
import type { Replay, SignalAdvice, StageAdvice } from "./threshold-advice.js";

/** HTML-escaped, redacted, control characters shown as escapes (text from the log is untrusted). */
const escape = (s: string) =>
  shown(s).replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** The page's sections, in order (each a `<section id>`): what a reader, or a test, can link to. */
export const SECTION_IDS = [
  "headline",
  "over-time",
  "recovery-over-time",
  "mttr",
  "agents",
  "tools",
  "unrecovered",
  "outcomes",
  "watchdog",
  "suggested-rules",
  "suggested-thresholds",
] as const;

export const OUTCOME_COLORS: Record<string, string> = {
  recovered: "#1a7f37",
  failed: "#cf222e",
  escalated: "#bc4c00",
  budget_exhausted: "#8250df",
};

const PATTERN_COLORS: Record<string, string> = {
  RATE_LIMIT: "#0969da",
  TIMEOUT: "#54aeff",
  SERVICE_DOWN: "#0a3069",
  STREAM_FIRST_TOKEN_TIMEOUT: "#1b7c83",
  STREAM_STALLED: "#3192aa",
  STREAM_TRUNCATED: "#7ed3e5",
  EMPTY_LLM_RESPONSE: "#9a6700",
  JSON_PARSE_ERROR: "#d4a72c",
  UNKNOWN: "#8c959f",
};
/** The caller's own mistakes (never retried): reds. */
const NON_RETRYABLE_COLORS = ["#a40e26", "#fa4549", "#ff8182", "#82071e"];

function patternColor(pattern: string): string {
  const own = PATTERN_COLORS[pattern];
  if (own !== undefined && Object.hasOwn(PATTERN_COLORS, pattern)) return own;
  const i = (NON_RETRYABLE_PATTERNS as readonly string[]).indexOf(pattern);
  return i === -1 ? "#6e7781" : (NON_RETRYABLE_COLORS[i] ?? "#a40e26");
}

const TONE_COLORS: Record<Change["tone"], string> = {
  better: "#1a7f37",
  worse: "#cf222e",
  same: "#57606a",
};

const changeCell = (c: Change) =>
  `<span class="delta" style="color:${TONE_COLORS[c.tone]}">${escape(c.text)}</span>`;

function section(id: (typeof SECTION_IDS)[number], title: string, body: string): string {
  return `<section id="${id}"><h2>${escape(title)}</h2>\n${body}\n</section>`;
}

function table(headers: string[], rows: string[][], cls = ""): string {
  return `<table${cls ? ` class="${cls}"` : ""}><thead><tr>${headers.map((h) => `<th>${escape(h)}</th>`).join("")}</tr></thead><tbody>
${rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("\n")}
</tbody></table>`;
}

/** Headline figures as cards, each with its change from the previous period. */
function headline(r: Review, previous: Review | undefined): string {
  const cards = HEADLINE.map((f) => {
    const now = f.value(r);
    const delta = previous
      ? `<div class="was">was ${escape(f.show(f.value(previous)))} ${changeCell(change(now, f.value(previous), f.direction, f.kind))}</div>`
      : "";
    return `<div class="card"><div class="figure">${escape(f.show(now))}</div><div class="name">${escape(f.label)}</div>${delta}</div>`;
  }).join("");
  return `<div class="cards">${cards}</div>`;
}

const W = 880;
const PLOT_H = 180;
const LEFT = 48;

/** Incidents per bar, stacked by pattern, with the legend. */
function incidentsChart(r: Review, time: (ms: number) => string): string {
  const { bars, widthMs } = r.series;
  const max = Math.max(1, ...bars.map((b) => b.incidents));
  const bw = (W - LEFT) / Math.max(1, bars.length);
  const patterns = r.patterns.map((p) => p.pattern);
  const rects = bars
    .map((b, i) => {
      let y = PLOT_H;
      return b.patterns
        .map((p) => {
          const h = (p.incidents / max) * PLOT_H;
          y -= h;
          return `<rect x="${(LEFT + i * bw).toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, bw - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${patternColor(p.pattern)}"><title>${escape(`${time(b.at)}: ${p.pattern} ${p.incidents}`)}</title></rect>`;
        })
        .join("");
    })
    .join("");
  const legend = patterns
    .map(
      (p) => `<span class="key"><i style="background:${patternColor(p)}"></i>${escape(p)}</span>`,
    )
    .join(" ");
  return `<figure><figcaption>Incidents per ${escape(duration(widthMs))}, by pattern (highest bar ${max})</figcaption>
<svg class="chart" role="img" aria-label="incidents over time by pattern" width="${W}" height="${PLOT_H + 24}">${axis(max, String)}${rects}${timeLabels(bars, bw, time)}</svg>
<div class="legend">${legend}</div></figure>`;
}

/** The y axis: 0 and the top value. */
function axis(max: number, show: (x: number) => string): string {
  return `<line x1="${LEFT}" y1="${PLOT_H}" x2="${W}" y2="${PLOT_H}" class="axis"></line><text x="${LEFT - 4}" y="${PLOT_H}" class="tick" text-anchor="end">0</text><text x="${LEFT - 4}" y="10" class="tick" text-anchor="end">${escape(show(max))}</text>`;
}

/** First, middle and last bar's times under the plot. */
function timeLabels(bars: { at: number }[], bw: number, time: (ms: number) => string): string {
  if (bars.length === 0) return "";
  const picks = [...new Set([0, Math.floor((bars.length - 1) / 2), bars.length - 1])];
  return picks
    .map((i, k) => {
      const anchor = k === 0 ? "start" : k === picks.length - 1 ? "end" : "middle";
      const x = k > 0 && k === picks.length - 1 ? W : LEFT + i * bw;
      return `<text x="${x.toFixed(1)}" y="${PLOT_H + 16}" class="tick" text-anchor="${anchor}">${escape(time(bars[i]?.at ?? 0))}</text>`;
    })
    .join("");
}

const duration = (ms: number) =>
  ms % 86_400_000 === 0
    ? ms / 86_400_000 === 1
      ? "day"
      : `${ms / 86_400_000} days`
    : ms / 3_600_000 === 1
      ? "hour"
      : `${ms / 3_600_000} hours`;

/** A rate or amount per bar, as a line with dots; bars with no incident leave a gap. */
function lineChart(
  label: string,
  bars: { at: number; value: number | null }[],
  show: (x: number) => string,
  color: string,
  time: (ms: number) => string,
  fixedMax?: number,
): string {
  const values = bars.map((b) => b.value).filter((v): v is number => v !== null);
  const max = fixedMax ?? Math.max(1e-9, ...values);
  const bw = (W - LEFT) / Math.max(1, bars.length);
  const points = bars.map((b, i) =>
    b.value === null ? null : { x: LEFT + (i + 0.5) * bw, y: PLOT_H - (b.value / max) * PLOT_H, b },
  );
  let path = "";
  let pen = false;
  for (const p of points) {
    if (!p) {
      pen = false;
      continue;
    }
    path += `${pen ? "L" : "M"}${p.x.toFixed(1)} ${p.y.toFixed(1)} `;
    pen = true;
  }
  const dots = points
    .map((p) =>
      p
        ? `<circle cx="${p.x.toFixed(1)}" cy="${p.y.toFixed(1)}" r="2.5" fill="${color}"><title>${escape(`${time(p.b.at)}: ${show(p.b.value ?? 0)}`)}</title></circle>`
        : "",
    )
    .join("");
  return `<figure><figcaption>${escape(label)}</figcaption>
<svg class="chart" role="img" aria-label="${escape(label)}" width="${W}" height="${PLOT_H + 24}">${axis(max, show)}<path d="${path.trim()}" fill="none" stroke="${color}" stroke-width="2"></path>${dots}${timeLabels(bars, bw, time)}</svg></figure>`;
}

/** The MTTR histogram, with p50, p90 and p99 marked on it. */
function mttrChart(r: Review): string {
  const bins = r.mttrHistogram;
  const max = Math.max(1, ...bins.map((b) => b.count));
  const bw = (W - LEFT) / bins.length;
  const rects = bins
    .map((b, i) => {
      const h = (b.count / max) * PLOT_H;
      const next = bins[i + 1];
      const label = next ? `${b.fromSeconds}-${next.fromSeconds} s` : `${b.fromSeconds} s+`;
      return `<rect x="${(LEFT + i * bw).toFixed(1)}" y="${(PLOT_H - h).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${OUTCOME_COLORS.recovered}"><title>${escape(`${label}: ${b.count}`)}</title></rect><text x="${(LEFT + (i + 0.5) * bw).toFixed(1)}" y="${PLOT_H + 16}" class="tick" text-anchor="middle">${escape(label)}</text>`;
    })
    .join("");
  /** Where a value of seconds sits on the binned axis (linear inside its bin). */
  const xOf = (s: number) => {
    let i = bins.length - 1;
    while (i > 0 && s < (bins[i]?.fromSeconds ?? 0)) i--;
    const from = bins[i]?.fromSeconds ?? 0;
    const to = bins[i + 1]?.fromSeconds ?? from * 2 + 1;
    return LEFT + (i + Math.min(1, (s - from) / (to - from))) * bw;
  };
  const marks = (["p50", "p90", "p99"] as const)
    .map((q) => {
      const v = r.mttrSeconds[q];
      if (v === null) return "";
      const x = xOf(v).toFixed(1);
      return `<line x1="${x}" y1="0" x2="${x}" y2="${PLOT_H}" class="mark"></line><text x="${x}" y="${q === "p50" ? 10 : q === "p90" ? 22 : 34}" class="marklabel">${q} ${escape(secs(v))}</text>`;
    })
    .join("");
  return `<figure><figcaption>MTTR of recovered calls: ${r.mttrSeconds.count} recoveries per bin of seconds, percentiles marked</figcaption>
<svg class="chart" role="img" aria-label="MTTR distribution" width="${W}" height="${PLOT_H + 24}">${axis(max, String)}${rects}${marks}</svg></figure>`;
}

/** A per-agent or per-tool table, with each incident count's change when comparing. */
function breakdownTable(
  what: string,
  rows: Breakdown[],
  previous: Breakdown[] | undefined,
): string {
  const before = new Map(previous?.map((b) => [b.name, b]));
  const headers = [
    what,
    "incidents",
    "auto-recovered",
    "MTTR p50",
    "MTTR p90",
    "spend",
    "UNKNOWN share",
  ];
  return table(
    previous ? [...headers, "incidents change"] : headers,
    rows.map((b) => {
      const cells = [
        escape(b.name),
        String(b.incidents),
        pct(b.autoRecoveryRate),
        secs(b.mttrP50Seconds),
        secs(b.mttrP90Seconds),
        usd(b.costUsd),
        pct(b.unknownShare),
      ];
      if (!previous) return cells;
      const was = before.get(b.name);
      return [
        ...cells,
        was ? changeCell(change(b.incidents, was.incidents, "lower-is-better", "count")) : "new",
      ];
    }),
    "breakdown",
  );
}

function unrecoveredSection(r: Review, time: (ms: number) => string): string {
  const u = r.unrecovered;
  if (u.total === 0) return "<p>Every incident was recovered: nobody was paged.</p>";
  return `<p>${u.total} incidents were not recovered (escalated to a human, failed, or stopped by the budget), of ${u.groups} kinds (the same error on the same tool, ended the same way)${u.groups > u.latest.length ? `; the latest ${u.latest.length} kinds` : ""}:</p>
${table(
  ["last seen", "times", "first seen", "agent", "tool", "pattern", "outcome", "tried", "error"],
  u.latest.map((x) => [
    escape(time(x.lastAt)),
    String(x.count),
    escape(time(x.firstAt)),
    escape(x.agent),
    escape(x.tool),
    `<span style="color:${patternColor(x.pattern)}">${escape(x.pattern)}</span>`,
    `<b style="color:${OUTCOME_COLORS[x.outcome] ?? "#57606a"}">${escape(x.outcome)}</b>`,
    escape(x.tried.join(" → ") || "nothing"),
    `<code>${escape(x.error.slice(0, 160))}</code>`,
  ]),
  "unrecovered",
)}`;
}

function watchdogSection(r: Review, time: (ms: number) => string): string {
  const w = r.watchdog;
  const tiers = table(
    ["tier", "runs", "recovered", "failed", "success"],
    w.tiers.map((t) => [
      escape(t.tier),
      String(t.runs),
      `<span style="color:${OUTCOME_COLORS.recovered}">${t.recovered}</span>`,
      `<span style="color:${OUTCOME_COLORS.failed}">${t.failed}</span>`,
      pct(t.successRate),
    ]),
    "watchdog",
  );
  const runs = w.runs.length
    ? table(
        ["last seen", "agent", "session", "what the watchdog saw and did"],
        w.runs.map((run) => [
          escape(time(run.lastAt)),
          escape(run.agent),
          escape(run.session),
          run.steps
            .map(
              (s) =>
                `<span class="step${/failed|gave up/.test(s) ? " bad" : /recovered/.test(s) ? " good" : ""}">${escape(s)}</span>`,
            )
            .join(" → "),
        ]),
        "runs",
      )
    : "";
  return `${tiers}
<p>Verdicts entered: ${w.verdicts.map((v) => `${escape(v.verdict)} ${v.count}`).join(", ") || "none"}. Gave up (restart intensity reached): ${w.gaveUp}.</p>
${runs}`;
}

function rulesSection(r: Review): string {
  const s = r.rules;
  if (s.texts === 0)
    return "<p>No UNKNOWN errors in this period: the rules know every error seen.</p>";
  const rows = s.file.rules.map((rule) => {
    const e = rule.evidence;
    return [
      `<code>${escape(rule.name)}</code>`,
      `<span style="color:${patternColor(rule.pattern)}">${escape(rule.pattern)}</span>`,
      escape(`${e?.tier ?? ""}: ${e?.because ?? ""}`),
      String(e?.samples ?? ""),
      `<code>${escape(rule.match.message.map((m) => `/${m}/i`).join(" "))}</code>${rule.match.status ? ` and status ${rule.match.status.join("|")}` : ""}`,
      (e?.examples ?? []).map((x) => `<code>${escape(x)}</code>`).join("<br>"),
    ];
  });
  const unclassified = s.unclassified.length
    ? `<p>Templates with no pattern to propose (write these rules by hand):</p><ul>${s.unclassified.map((u) => `<li><code>${escape(u.template)}</code> ×${u.samples}</li>`).join("")}</ul>`
    : "";
  return `<p>${s.texts} UNKNOWN errors grouped into templates; ${s.file.rules.length} proposed as rules. Apply them: <code>selfheal report LOG --suggest-rules rules.json</code>, review the file, then <code>createSelfHealing({ diagnosis: { ruleFile: "rules.json" } })</code>.</p>
${rows.length ? table(["rule", "pattern", "evidence", "samples", "match", "examples"], rows, "rules") : ""}
${unclassified}`;
}

/** A replayed setting's record: incidents caught (green when all), quiet windows alarmed (red when any). */
const replayCell = (r: Replay) =>
  `${escape(r.setting)}<br><span style="color:${r.caught === r.incidents ? TONE_COLORS.better : TONE_COLORS.worse}">caught ${r.caught}/${r.incidents}</span>, <span style="color:${r.falseAlarms ? TONE_COLORS.worse : TONE_COLORS.better}">alarmed ${r.falseAlarms}/${r.quiet} quiet</span>`;

function thresholdsSection(r: Review): string {
  const s = r.thresholds;
  if (s.rollups === 0)
    return "<p>No call rollups in this log: the engine writes them to <code>recovery.eventLog</code> once a minute (an older version did not).</p>";
  const signalRow = (a: SignalAdvice) => [
    escape(`${a.agent} / ${a.tool}`),
    escape(a.signal),
    String(a.samples),
    escape(a.evidence),
    replayCell(a.current),
    a.suggested
      ? `<strong style="color:${TONE_COLORS.better}">${replayCell(a.suggested)}</strong><br>${escape(a.reason)}`
      : `<span style="color:${TONE_COLORS.same}">no change: ${escape(a.reason)}</span>`,
  ];
  const stageRow = (a: StageAdvice) => [
    escape(`${a.agent} / ${a.stage}`),
    String(a.steps),
    escape(
      `${secs(a.quantileMs === null ? null : a.quantileMs / 1000)} / ${secs(a.maxMs === null ? null : a.maxMs / 1000)}`,
    ),
    `${escape(secs(a.currentMs / 1000))}: <span style="color:${a.currentOver ? TONE_COLORS.worse : TONE_COLORS.same}">${a.currentOver} slower</span>`,
    a.suggestedMs === undefined
      ? `<span style="color:${TONE_COLORS.same}">no change: ${escape(a.reason)}</span>`
      : `<strong style="color:${TONE_COLORS.better}">${escape(secs(a.suggestedMs / 1000))}</strong>: ${a.suggestedOver ?? 0} slower; ${escape(a.reason)}`,
  ];
  const SIGNAL_HEADERS = [
    "tool",
    "signal",
    "samples",
    "evidence",
    "current: it did",
    "suggested: it would do",
  ];
  const STAGE_HEADERS = [
    "agent / stage",
    "steps",
    "p99 / longest step",
    "current stall limit",
    "suggested",
  ];
  // What to act on first (a change, or a shift flagged); the rest folded, for whoever asks why.
  const flagged = (a: SignalAdvice) => a.suggested !== undefined || a.shift !== undefined;
  const changes = s.signals.filter(flagged);
  const rest = s.signals.filter((a) => !flagged(a));
  const stageChanges = s.stages.filter((a) => a.suggestedMs !== undefined);
  const stageRest = s.stages.filter((a) => a.suggestedMs === undefined);
  const folded = (what: string, body: string) =>
    `<details><summary>${escape(what)}</summary>\n${body}\n</details>`;
  const fragments = [
    ...Object.entries(s.health).map(
      ([agent, health]) =>
        `createSelfHealing({ agent: ${safeJson(agent)}, health: ${safeJson(health, 2)} })`,
    ),
    ...Object.entries(s.watchdog).map(
      ([agent, limits]) =>
        `new Supervisor({ agent: ${safeJson(agent)}, limits: ${safeJson(limits)} })`,
    ),
  ];
  return `<p>Each setting replayed over the period's 10-minute windows: <em>incident</em> windows had a recovery (or came after a latency shift), <em>quiet</em> ones had none in or next to them. A change is proposed only where it catches more incidents or raises fewer false alarms.</p>
${changes.length ? table(SIGNAL_HEADERS, changes.map(signalRow), "thresholds") : ""}
${rest.length ? folded(`${rest.length} tool signals with no change`, table(SIGNAL_HEADERS, rest.map(signalRow), "thresholds")) : ""}
${stageChanges.length ? table(STAGE_HEADERS, stageChanges.map(stageRow), "stages") : ""}
${stageRest.length ? folded(`${stageRest.length} watchdog stages with no change`, table(STAGE_HEADERS, stageRest.map(stageRow), "stages")) : ""}
${fragments.length ? `<p>Apply these (<code>selfheal report LOG --suggest-thresholds</code> prints them too):</p><pre><code>${fragments.join("\n\n").split("\n").map(escape).join("\n")}</code></pre>` : "<p>No change proposed: the current settings fit the period.</p>"}`;
}

const STYLE = `body{font:14px/1.5 system-ui,sans-serif;margin:2rem auto;color:#1f2328;max-width:960px;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2.2rem;border-bottom:1px solid #d0d7de}
.sub{color:#57606a;margin-top:0}figure{margin:1rem 0}figcaption{font-weight:600;margin-bottom:.4rem}
.cards{display:flex;flex-wrap:wrap;gap:.6rem}.card{border:1px solid #d0d7de;border-radius:6px;padding:.5rem .8rem;min-width:150px}
.figure{font-size:1.35rem;font-weight:600}.name{color:#57606a;font-size:12px}.was{font-size:12px;color:#57606a}
.delta{font-weight:600}.tick{font-size:11px;fill:#57606a}.axis{stroke:#8c959f}
.mark{stroke:#1f2328;stroke-dasharray:4 3}.marklabel{font-size:11px;fill:#1f2328}
.legend{font-size:12px}.key{margin-right:.8rem;white-space:nowrap}.key i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
table{border-collapse:collapse;margin:.5rem 0;font-size:13px}td,th{padding:.2rem .7rem;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:top}
th{background:#f6f8fa}code{background:#f6f8fa;padding:0 .3rem;font-size:12px;word-break:break-all}
.step{white-space:nowrap}.step.bad{color:#cf222e}.step.good{color:#1a7f37}`;

/**
 * The page's Content-Security-Policy: nothing may load or run, only its own inline styles (the
 * <style> element and style attributes) apply. Defence in depth: every text from the log is
 * escaped, and the page has no script to begin with.
 */
export const CSP =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/** The review as one self-contained HTML page. */
export function renderHtml(r: Review, options: RenderOptions = {}): string {
  const zone = options.timeZone ?? "UTC";
  const time = (ms: number) => formatTime(ms, zone);
  const previous = options.previous;
  const period = r.period.since
    ? `${time(Date.parse(r.period.since))} to ${r.period.until ? time(Date.parse(r.period.until)) : "now"}`
    : r.from
      ? `${time(Date.parse(r.from))} to ${time(Date.parse(r.to ?? r.from))}`
      : "no incident";
  const compared = previous?.period.since
    ? ` Compared with ${time(Date.parse(previous.period.since))} to ${time(Date.parse(previous.period.until ?? previous.period.since))}.`
    : "";
  const notes = [
    r.malformed ? `${r.malformed} lines were not recovery events and were left out` : "",
    r.outsidePeriod ? `${r.outsidePeriod} lines dated outside the period were left out` : "",
  ].filter(Boolean);
  const malformed = r.malformedSamples.length
    ? `<ul class="malformed">${r.malformedSamples.map((m) => `<li>${escape(m)}</li>`).join("")}${r.malformed > r.malformedSamples.length ? `<li>and ${r.malformed - r.malformedSamples.length} more</li>` : ""}</ul>`
    : "";
  const rate = r.series.bars.map((b) => ({
    at: b.at,
    value: b.incidents ? b.recovered / b.incidents : null,
  }));
  const costPer = r.series.bars.map((b) => ({
    at: b.at,
    value: b.incidents ? b.costUsd / b.incidents : null,
  }));
  const outcomes = table(
    ["outcome", "incidents", "share", "p50 duration", "p90 duration"],
    r.outcomes.map((o) => [
      `<b style="color:${OUTCOME_COLORS[o.outcome] ?? "#57606a"}">${escape(o.outcome)}</b>`,
      String(o.incidents),
      pct(o.share),
      secs(o.p50Seconds),
      secs(o.p90Seconds),
    ]),
    "outcomes",
  );
  const strategies = table(
    ["strategy", "runs", "recovered the call", "success"],
    r.strategies.map((s) => [
      escape(s.strategy),
      String(s.runs),
      String(s.recovered),
      pct(s.successRate),
    ]),
    "strategies",
  );
  const samples = r.tools
    .filter((t) => t.samples.length)
    .map(
      (t) =>
        `<h3>UNKNOWN texts of ${escape(t.tool)}</h3><ul>${t.samples.map((s) => `<li><code>${escape(s.text)}</code>${s.count > 1 ? ` &times;${s.count}` : ""}</li>`).join("")}</ul>`,
    )
    .join("");
  const recovery = r.events
    ? [
        section("over-time", "Incidents over time", incidentsChart(r, time)),
        section(
          "recovery-over-time",
          "Auto-recovery rate and spend per incident over time",
          lineChart(
            "Share of incidents recovered without a human, per bar",
            rate,
            pct,
            OUTCOME_COLORS.recovered ?? "",
            time,
            1,
          ) + lineChart("Recovery spend per incident, per bar", costPer, usd, "#8250df", time),
        ),
        section("mttr", "Time to recover", mttrChart(r)),
        section("agents", "Per agent", breakdownTable("agent", r.byAgent, previous?.byAgent)),
        section("tools", "Per tool", breakdownTable("tool", r.byTool, previous?.byTool) + samples),
        section(
          "unrecovered",
          "Escalations and pages: incidents not recovered",
          unrecoveredSection(r, time),
        ),
        section("outcomes", "Outcomes and strategies", outcomes + strategies),
      ].join("\n")
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${CSP}">
<title>selfheal recovery review</title>
<style>
${STYLE}
</style></head><body>
<h1>Recovery review</h1>
<p class="sub">${escape(period)}. Times in ${escape(zone)}.${escape(compared)} ${r.events} incidents.</p>
${notes.length ? `<p>${escape(notes.join("; "))}.</p>` : ""}${malformed}
${section("headline", previous ? "Headline, with the change from the previous period" : "Headline", headline(r, previous))}
${recovery}
${r.watchdog.events ? section("watchdog", `Watchdog: long runs (${r.watchdog.sessions} ${r.watchdog.sessions === 1 ? "session" : "sessions"})`, watchdogSection(r, time)) : ""}
${section("suggested-rules", "Suggested rules for the UNKNOWN errors", rulesSection(r))}
${section("suggested-thresholds", "Suggested thresholds and stall limits", thresholdsSection(r))}
</body></html>
`;
}
