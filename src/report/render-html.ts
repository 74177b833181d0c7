import { oneLine } from "../telemetry/redact.js";
import type { Review } from "./analyze.js";

/** HTML-escaped, with control characters shown as escapes (text from the log is untrusted). */
const escape = (s: string) =>
  oneLine(s).replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** A horizontal bar chart as inline SVG: drawn by any browser, no script, no CDN. */
function bars(title: string, items: { label: string; value: number; text: string }[]): string {
  const max = Math.max(1e-9, ...items.map((i) => i.value));
  const rowH = 24;
  const rows = items
    .map((item, i) => {
      const w = Math.max(2, Math.round((item.value / max) * 380));
      const y = i * rowH;
      return `<text x="0" y="${y + 16}" class="label">${escape(item.label)}</text><rect class="bar" x="200" y="${y + 4}" width="${w}" height="16"></rect><text x="${206 + w}" y="${y + 16}" class="value">${escape(item.text)}</text>`;
    })
    .join("");
  return `<figure><figcaption>${escape(title)}</figcaption><svg class="chart" role="img" aria-label="${escape(title)}" width="680" height="${Math.max(rowH, items.length * rowH)}">${rows}</svg></figure>`;
}

/** The watchdog's tiers and verdicts, when the log has any. */
function watchdogSection(r: Review): string {
  const w = r.watchdog;
  if (w.events === 0) return "";
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return `<h2>Watchdog: long runs (${w.sessions} ${w.sessions === 1 ? "session" : "sessions"})</h2>
<table class="watchdog"><tr><th>tier</th><th>runs</th><th>recovered</th><th>failed</th><th>success</th></tr>
${w.tiers.map((t) => `<tr><td>${escape(t.tier)}</td><td>${t.runs}</td><td>${t.recovered}</td><td>${t.failed}</td><td>${pct(t.successRate)}</td></tr>`).join("\n")}
</table>
<p>Verdicts entered: ${w.verdicts.map((v) => `${escape(v.verdict)} ${v.count}`).join(", ") || "none"}. Gave up (restart intensity reached): ${w.gaveUp}.</p>`;
}

/** The review as one self-contained HTML page (every style inline, charts as SVG). */
export function renderHtml(r: Review): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const mttr = [
    {
      label: "p50",
      value: r.mttrSeconds.p50 ?? 0,
      text: `${(r.mttrSeconds.p50 ?? 0).toFixed(1)} s`,
    },
    {
      label: "p90",
      value: r.mttrSeconds.p90 ?? 0,
      text: `${(r.mttrSeconds.p90 ?? 0).toFixed(1)} s`,
    },
    {
      label: "p99",
      value: r.mttrSeconds.p99 ?? 0,
      text: `${(r.mttrSeconds.p99 ?? 0).toFixed(1)} s`,
    },
  ];
  const secs = (x: number | null) => (x === null ? "n/a" : `${x.toFixed(1)} s`);
  const malformed = r.malformedSamples.length
    ? `<ul class="malformed">${r.malformedSamples.map((m) => `<li>${escape(m)}</li>`).join("")}${r.malformed > r.malformedSamples.length ? `<li>and ${r.malformed - r.malformedSamples.length} more</li>` : ""}</ul>`
    : "";
  const samples = r.tools
    .filter((t) => t.samples.length)
    .map(
      (t) =>
        `<h3>UNKNOWN texts of ${escape(t.tool)}</h3><ul>${t.samples.map((s) => `<li><code>${escape(s.text)}</code>${s.count > 1 ? ` &times;${s.count}` : ""}</li>`).join("")}</ul>`,
    )
    .join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>selfheal recovery review</title>
<style>
body{font:14px/1.5 system-ui,sans-serif;margin:2rem;color:#1b1f24;max-width:960px}
h1{font-size:1.4rem}figure{margin:1.5rem 0}figcaption{font-weight:600;margin-bottom:.5rem}
.bar{fill:#2f81f7}.label{font-size:12px}.value{font-size:12px;fill:#57606a}
table{border-collapse:collapse}td,th{padding:.2rem .8rem;border-bottom:1px solid #d0d7de;text-align:left}
code{background:#f6f8fa;padding:0 .3rem}
</style></head><body>
<h1>Recovery review</h1>
<p>${r.events} incidents${r.from ? ` from ${escape(r.from)} to ${escape(r.to ?? "")}` : ""}. Recovery spend $${r.costUsd.toFixed(4)} ($${r.costPerIncidentUsd.toFixed(4)} per incident).${r.malformed ? ` ${r.malformed} lines were not recovery events and were left out.` : ""}</p>
${malformed}
${bars(
  "Top failure patterns (incidents)",
  r.patterns.map((p) => ({
    label: p.pattern,
    value: p.incidents,
    text: `${p.incidents} (${pct(p.share)})`,
  })),
)}
${bars(
  "Strategy success (share of runs that recovered the call)",
  r.strategies.map((s) => ({
    label: s.strategy,
    value: s.successRate,
    text: `${pct(s.successRate)} of ${s.runs}`,
  })),
)}
${bars("MTTR of recovered calls (seconds)", mttr)}
<p>MTTR (recovered calls, ${r.mttrSeconds.count}): p50 ${secs(r.mttrSeconds.p50)}, p90 ${secs(r.mttrSeconds.p90)}, p99 ${secs(r.mttrSeconds.p99)}</p>
<h2>Outcomes</h2>
<table class="outcomes"><tr><th>outcome</th><th>incidents</th><th>share</th><th>p50 duration</th><th>p90 duration</th></tr>
${r.outcomes.map((o) => `<tr><td>${escape(o.outcome)}</td><td>${o.incidents}</td><td>${pct(o.share)}</td><td>${secs(o.p50Seconds)}</td><td>${secs(o.p90Seconds)}</td></tr>`).join("\n")}
</table>
<h2>Strategies</h2>
<table class="strategies"><tr><th>strategy</th><th>runs</th><th>recovered the call</th><th>success</th></tr>
${r.strategies.map((s) => `<tr><td>${escape(s.strategy)}</td><td>${s.runs}</td><td>${s.recovered}</td><td>${pct(s.successRate)}</td></tr>`).join("\n")}
</table>
<h2>Per tool</h2>
<table><tr><th>tool</th><th>incidents</th><th>UNKNOWN</th><th>UNKNOWN share</th></tr>
${r.tools.map((t) => `<tr><td>${escape(t.tool)}</td><td>${t.incidents}</td><td>${t.unknown}</td><td>${pct(t.unknownShare)}</td></tr>`).join("\n")}
</table>
${samples}
${watchdogSection(r)}
</body></html>
`;
}
