/** The review as one HTML page: each section, the SVG charts' geometry, comparison, escaping. */
import { describe, expect, it } from "vitest";
import { reviewText, type Review } from "../../src/report/analyze.js";
import { renderHtml, SECTION_IDS } from "../../src/report/render-html.js";
import { event, watchdogLine } from "./events.js";
import { previousReview, sampleReview } from "./sample-review.js";

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);

/** The page from its body on: the head is a fixed style sheet. */
const body = (html: string) => html.slice(html.indexOf("<body>"));

/** The section of that id, whole; undefined when the page has none. */
const sectionOf = (html: string, id: string) =>
  new RegExp(`<section id="${id}">[\\s\\S]*?</section>`).exec(html)?.[0];

const ids = (html: string) => [...html.matchAll(/<section id="([^"]+)">/g)].map((m) => m[1]);

const ALL_SECTIONS = [...SECTION_IDS];

/** A card of the headline: its figure, label and, when comparing, what it was and the change. */
const card = (figure: string, name: string, was?: [string, string, string]) =>
  `<div class="card"><div class="figure">${figure}</div><div class="name">${name}</div>${
    was
      ? `<div class="was">was ${was[0]} <span class="delta" style="color:${was[1]}">${was[2]}</span></div>`
      : ""
  }</div>`;

const GREEN = "#1a7f37";
const RED = "#cf222e";
const GREY = "#57606a";

const AXIS = (top: string) =>
  `<line x1="48" y1="180" x2="880" y2="180" class="axis"></line><text x="44" y="180" class="tick" text-anchor="end">0</text><text x="44" y="10" class="tick" text-anchor="end">${top}</text>`;

/** The sample's time labels: its first, middle (second of four) and last bar. */
const TIME_LABELS =
  '<text x="48.0" y="196" class="tick" text-anchor="start">2026-01-01 00:00 UTC</text>' +
  '<text x="256.0" y="196" class="tick" text-anchor="middle">2026-01-01 02:00 UTC</text>' +
  '<text x="880.0" y="196" class="tick" text-anchor="end">2026-01-01 06:00 UTC</text>';

describe("renderHtml", () => {
  /** Rendered in each test, not once for all: a mutant is then seen by the tests that read the page. */
  const html = (): string => renderHtml(sampleReview);

  it("a self-contained page", () => {
    expect(html().startsWith('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">')).toBe(
      true,
    );
    expect(html()).toContain("<title>selfheal recovery review</title>");
    expect(html()).not.toMatch(/<script|<link|src=|https?:/);
    expect(html().endsWith("</body></html>\n")).toBe(true);
  });

  it("every section of a full review, in order", () => {
    expect(ids(html())).toEqual(ALL_SECTIONS);
  });

  it("the top: the period in the zone, the zone said, the lines left out named", () => {
    expect(body(html()).split("\n").slice(0, 4)).toEqual([
      "<body>",
      "<h1>Recovery review</h1>",
      '<p class="sub">2026-01-01 00:00 UTC to 2026-01-01 08:00 UTC. Times in UTC. 6 incidents.</p>',
      "<p>7 lines were not recovery events and were left out; 4 lines dated outside the period were left out.</p>" +
        '<ul class="malformed"><li>line 2: not JSON</li><li>line 3: not a JSON object</li><li>line 4: at is not a time</li><li>line 5: tool is not a string</li><li>line 9: costUsd is not a number</li><li>and 2 more</li></ul>',
    ]);
  });

  it("the headline: one card per figure, rounded, no comparison without a previous period", () => {
    expect(sectionOf(html(), "headline")).toBe(
      '<section id="headline"><h2>Headline</h2>\n<div class="cards">' +
        card("6", "incidents") +
        card("50.0%", "auto-recovery rate") +
        card("2.0 s", "MTTR p50") +
        card("3.0 s", "MTTR p90") +
        card("3", "unrecovered (failed, escalated, out of budget)") +
        card("50.0%", "UNKNOWN share") +
        card("$1.5000", "recovery spend") +
        card("$0.2500", "spend per incident") +
        "</div>\n</section>",
    );
    expect(html()).not.toMatch(/class="was"|incidents change|Compared with/);
  });

  it("incidents over time: bars stacked by pattern, scaled to the highest, quiet bars empty", () => {
    const rect = (x: string, y: string, h: string, fill: string, title: string) =>
      `<rect x="${x}" y="${y}" width="207.0" height="${h}" fill="${fill}"><title>${title}</title></rect>`;
    expect(sectionOf(html(), "over-time")).toBe(
      [
        '<section id="over-time"><h2>Incidents over time</h2>',
        "<figure><figcaption>Incidents per 2 hours, by pattern (highest bar 3)</figcaption>",
        '<svg class="chart" role="img" aria-label="incidents over time by pattern" width="880" height="204">' +
          AXIS("3") +
          // 4 bars of 832 / 4 = 208 px; 3 incidents is the full 180 px.
          rect("48.0", "60.0", "120.0", "#8c959f", "2026-01-01 00:00 UTC: UNKNOWN 2") +
          rect("48.0", "0.0", "60.0", "#0969da", "2026-01-01 00:00 UTC: RATE_LIMIT 1") +
          rect("464.0", "120.0", "60.0", "#0969da", "2026-01-01 04:00 UTC: RATE_LIMIT 1") +
          rect("464.0", "60.0", "60.0", "#54aeff", "2026-01-01 04:00 UTC: TIMEOUT 1") +
          rect("672.0", "120.0", "60.0", "#8c959f", "2026-01-01 06:00 UTC: UNKNOWN 1") +
          TIME_LABELS +
          "</svg>",
        '<div class="legend"><span class="key"><i style="background:#8c959f"></i>UNKNOWN</span> <span class="key"><i style="background:#0969da"></i>RATE_LIMIT</span> <span class="key"><i style="background:#54aeff"></i>TIMEOUT</span></div></figure>',
        "</section>",
      ].join("\n"),
    );
  });

  it("recovery over time: a line per figure, a gap where a bar had no incident", () => {
    const s = sectionOf(html(), "recovery-over-time") ?? "";
    // Rate: 2/3, none, 1/2, 0 of a 0-100 % axis; each point in its bar's middle.
    expect(s).toContain(
      `${AXIS("100.0%")}<path d="M152.0 60.0 M568.0 90.0 L776.0 180.0" fill="none" stroke="${GREEN}" stroke-width="2"></path>` +
        `<circle cx="152.0" cy="60.0" r="2.5" fill="${GREEN}"><title>2026-01-01 00:00 UTC: 66.7%</title></circle>` +
        `<circle cx="568.0" cy="90.0" r="2.5" fill="${GREEN}"><title>2026-01-01 04:00 UTC: 50.0%</title></circle>` +
        `<circle cx="776.0" cy="180.0" r="2.5" fill="${GREEN}"><title>2026-01-01 06:00 UTC: 0.0%</title></circle>${TIME_LABELS}</svg>`,
    );
    // Spend per incident: $0.25 in each bar, the top of its own axis.
    expect(s).toContain(
      `${AXIS("$0.2500")}<path d="M152.0 0.0 M568.0 0.0 L776.0 0.0" fill="none" stroke="#8250df" stroke-width="2"></path>`,
    );
    expect(s.match(/<circle /g)).toHaveLength(6);
  });

  it("the MTTR histogram: a bar per bin, scaled to the fullest, percentiles marked in their bin", () => {
    const s = sectionOf(html(), "mttr") ?? "";
    expect(s).toContain(
      "<figcaption>MTTR of recovered calls: 3 recoveries per bin of seconds, percentiles marked</figcaption>",
    );
    expect(s.match(/<rect /g)).toHaveLength(10);
    for (const fragment of [
      '<rect x="48.0" y="180.0" width="81.2" height="0.0" fill="#1a7f37"><title>0-1 s: 0</title></rect>',
      '<rect x="131.2" y="90.0" width="81.2" height="90.0" fill="#1a7f37"><title>1-2 s: 1</title></rect>',
      '<rect x="214.4" y="0.0" width="81.2" height="180.0" fill="#1a7f37"><title>2-5 s: 2</title></rect>',
      '<rect x="796.8" y="180.0" width="81.2" height="0.0" fill="#1a7f37"><title>600 s+: 0</title></rect>',
      // p50 2 s at the start of [2, 5); p90 3 s a third in; p99 3.46 s about half.
      '<line x1="214.4" y1="0" x2="214.4" y2="180" class="mark"></line><text x="214.4" y="10" class="marklabel">p50 2.0 s</text>',
      '<line x1="242.1" y1="0" x2="242.1" y2="180" class="mark"></line><text x="242.1" y="22" class="marklabel">p90 3.0 s</text>',
      '<line x1="254.9" y1="0" x2="254.9" y2="180" class="mark"></line><text x="254.9" y="34" class="marklabel">p99 3.5 s</text>',
    ])
      expect(s).toContain(fragment);
  });

  it("per agent and per tool: one row each, figures rounded, n/a with no recovery", () => {
    const head =
      '<table class="breakdown"><thead><tr><th>WHAT</th><th>incidents</th><th>auto-recovered</th><th>MTTR p50</th><th>MTTR p90</th><th>spend</th><th>UNKNOWN share</th></tr></thead><tbody>';
    expect(sectionOf(html(), "agents")).toBe(
      [
        '<section id="agents"><h2>Per agent</h2>',
        head.replace("WHAT", "agent"),
        "<tr><td>planner</td><td>4</td><td>50.0%</td><td>2.0 s</td><td>3.0 s</td><td>$1.0000</td><td>50.0%</td></tr>",
        "<tr><td>writer</td><td>2</td><td>50.0%</td><td>1.3 s</td><td>1.3 s</td><td>$0.5000</td><td>50.0%</td></tr>",
        "</tbody></table>",
        "</section>",
      ].join("\n"),
    );
    expect(sectionOf(html(), "tools")).toBe(
      [
        '<section id="tools"><h2>Per tool</h2>',
        head.replace("WHAT", "tool"),
        "<tr><td>lookup</td><td>3</td><td>100.0%</td><td>2.0 s</td><td>3.0 s</td><td>$0.7500</td><td>0.0%</td></tr>",
        "<tr><td>fetch</td><td>2</td><td>0.0%</td><td>n/a</td><td>n/a</td><td>$0.5000</td><td>100.0%</td></tr>",
        "<tr><td>search</td><td>1</td><td>0.0%</td><td>n/a</td><td>n/a</td><td>$0.2500</td><td>100.0%</td></tr>",
        "</tbody></table>" +
          "<h3>UNKNOWN texts of fetch</h3><ul><li><code>disk full</code> &times;2</li><li><code>out of memory</code></li></ul>" +
          "<h3>UNKNOWN texts of search</h3><ul><li><code>no route to host</code></li></ul>",
        "</section>",
      ].join("\n"),
    );
  });

  it("the unrecovered incidents: each kind with its count, first and last seen, what was tried", () => {
    expect(sectionOf(html(), "unrecovered")).toBe(
      [
        '<section id="unrecovered"><h2>Escalations and pages: incidents not recovered</h2>',
        "<p>3 incidents were not recovered (escalated to a human, failed, or stopped by the budget), of 2 kinds (the same error on the same tool, ended the same way):</p>",
        '<table class="unrecovered"><thead><tr><th>last seen</th><th>times</th><th>first seen</th><th>agent</th><th>tool</th><th>pattern</th><th>outcome</th><th>tried</th><th>error</th></tr></thead><tbody>',
        `<tr><td>2026-01-01 06:00 UTC</td><td>2</td><td>2026-01-01 04:00 UTC</td><td>planner</td><td>fetch</td><td><span style="color:#8c959f">UNKNOWN</span></td><td><b style="color:${GREY}">fallback</b></td><td>retry_once → backoff</td><td><code>disk full</code></td></tr>`,
        `<tr><td>2026-01-01 01:00 UTC</td><td>1</td><td>2026-01-01 01:00 UTC</td><td>writer</td><td>search</td><td><span style="color:#8c959f">UNKNOWN</span></td><td><b style="color:${RED}">failed</b></td><td>nothing</td><td><code>no route to host</code></td></tr>`,
        "</tbody></table>",
        "</section>",
      ].join("\n"),
    );
  });

  it.each([
    [
      "more kinds than listed: says it lists the latest",
      { total: 500, groups: 240, latest: sampleReview.unrecovered.latest },
      "of 240 kinds (the same error on the same tool, ended the same way); the latest 2 kinds:</p>",
    ],
    [
      "every incident recovered: nobody was paged",
      { total: 0, groups: 0, latest: [] },
      "<p>Every incident was recovered: nobody was paged.</p>",
    ],
  ])("the unrecovered incidents, %s", (_, unrecovered, said) => {
    expect(sectionOf(renderHtml({ ...sampleReview, unrecovered }), "unrecovered")).toContain(said);
  });

  it("outcomes and strategies, each outcome in its colour", () => {
    expect(sectionOf(html(), "outcomes")).toBe(
      [
        '<section id="outcomes"><h2>Outcomes and strategies</h2>',
        '<table class="outcomes"><thead><tr><th>outcome</th><th>incidents</th><th>share</th><th>p50 duration</th><th>p90 duration</th></tr></thead><tbody>',
        `<tr><td><b style="color:${GREEN}">recovered</b></td><td>3</td><td>50.0%</td><td>2.0 s</td><td>3.0 s</td></tr>`,
        `<tr><td><b style="color:${GREY}">fallback</b></td><td>2</td><td>33.3%</td><td>2.0 s</td><td>4.0 s</td></tr>`,
        `<tr><td><b style="color:${RED}">failed</b></td><td>1</td><td>16.7%</td><td>8.0 s</td><td>12.3 s</td></tr>`,
        '</tbody></table><table class="strategies"><thead><tr><th>strategy</th><th>runs</th><th>recovered the call</th><th>success</th></tr></thead><tbody>',
        "<tr><td>retry_once</td><td>3</td><td>1</td><td>33.3%</td></tr>",
        "<tr><td>backoff</td><td>2</td><td>1</td><td>50.0%</td></tr>",
        "<tr><td>failover</td><td>1</td><td>0</td><td>0.0%</td></tr>",
        "</tbody></table>",
        "</section>",
      ].join("\n"),
    );
  });

  it("the watchdog: tiers, verdicts, give-ups, and each run with what it saw and did", () => {
    expect(sectionOf(html(), "watchdog")).toBe(
      [
        '<section id="watchdog"><h2>Watchdog: long runs (2 sessions)</h2>',
        '<table class="watchdog"><thead><tr><th>tier</th><th>runs</th><th>recovered</th><th>failed</th><th>success</th></tr></thead><tbody>',
        `<tr><td>nudge</td><td>2</td><td><span style="color:${GREEN}">1</span></td><td><span style="color:${RED}">1</span></td><td>50.0%</td></tr>`,
        `<tr><td>rotation</td><td>1</td><td><span style="color:${GREEN}">0</span></td><td><span style="color:${RED}">1</span></td><td>0.0%</td></tr>`,
        "</tbody></table>",
        "<p>Verdicts entered: looping 2, dead 1. Gave up (restart intensity reached): 1.</p>",
        '<table class="runs"><thead><tr><th>last seen</th><th>agent</th><th>session</th><th>what the watchdog saw and did</th></tr></thead><tbody>',
        '<tr><td>2026-01-01 05:00 UTC</td><td>planner</td><td>night-2</td><td><span class="step">dead</span> → <span class="step bad">rotation: failed</span> → <span class="step bad">gave up</span></td></tr>',
        '<tr><td>2026-01-01 03:00 UTC</td><td>planner</td><td>night-1</td><td><span class="step">looping</span> → <span class="step good">nudge: recovered</span></td></tr>',
        "</tbody></table>",
        "</section>",
      ].join("\n"),
    );
  });

  it("the suggested rules: each with its evidence and match, then the templates left to a person", () => {
    expect(sectionOf(html(), "suggested-rules")).toBe(
      [
        '<section id="suggested-rules"><h2>Suggested rules for the UNKNOWN errors</h2>',
        '<p>3 UNKNOWN errors grouped into templates; 1 proposed as rules. Apply them: <code>selfheal report LOG --suggest-rules rules.json</code>, review the file, then <code>createSelfHealing({ diagnosis: { ruleFile: "rules.json" } })</code>.</p>',
        '<table class="rules"><thead><tr><th>rule</th><th>pattern</th><th>evidence</th><th>samples</th><th>match</th><th>examples</th></tr></thead><tbody>',
        '<tr><td><code>suggested-rate-limit-1</code></td><td><span style="color:#0969da">RATE_LIMIT</span></td><td>structured: status 429</td><td>2</td><td><code>/quota exceeded for \\S+/i</code> and status 429</td><td><code>quota exceeded for gpt-x</code></td></tr>',
        "</tbody></table>",
        "<p>Templates with no pattern to propose (write these rules by hand):</p><ul><li><code>disk &lt;*&gt; full</code> ×1</li></ul>",
        "</section>",
      ].join("\n"),
    );
  });

  it("no UNKNOWN text: the suggested rules section says the rules know every error", () => {
    const rules = { ...sampleReview.rules, file: { ...sampleReview.rules.file, rules: [] } };
    expect(
      sectionOf(
        renderHtml({ ...sampleReview, rules: { ...rules, unclassified: [], texts: 0 } }),
        "suggested-rules",
      ),
    ).toContain("<p>No UNKNOWN errors in this period: the rules know every error seen.</p>");
  });

  it("the suggested thresholds: changes first, the rest folded, then the config to apply", () => {
    const section = sectionOf(html(), "suggested-thresholds") ?? "";
    const [changes, folded] = section.split("<details>");
    // The latency change: what the current setting did (red: missed), what the proposal would do.
    expect(changes).toContain(
      '<tr><td>support / lookup</td><td>latency_p95</td><td>9000</td><td>P95 210 ms before 2026-01-01T04:00:00.000Z, 430 ms after (x2.05)</td><td>learned baseline, warning at 3x<br><span style="color:#cf222e">caught 0/24</span>, <span style="color:#1a7f37">alarmed 0/24 quiet</span></td><td><strong style="color:#1a7f37">baseline 210 ms, warning at 1.2x<br><span style="color:#1a7f37">caught 24/24</span>, <span style="color:#1a7f37">alarmed 0/24 quiet</span></strong><br>P95 rose x2.05 and the learned baseline followed it</td></tr>',
    );
    expect(section).toContain(
      '<tr><td>planner / tool_call</td><td>120</td><td>140.0 s / 150.0 s</td><td>90.0 s: <span style="color:#cf222e">30 slower</span></td><td><strong style="color:#1a7f37">210.0 s</strong>: 0 slower; 30 steps took longer than the current limit: slow, not stuck</td></tr>',
    );
    expect(changes).not.toContain("success_rate");
    expect(folded).toContain("<summary>1 tool signals with no change</summary>");
    expect(folded).toContain(
      '<span style="color:#57606a">no change: the current setting does as well</span>',
    );
    expect(section).toContain(
      "<pre><code>createSelfHealing({ agent: &quot;support&quot;, health: {\n  &quot;tools&quot;: {",
    );
    expect(section).toContain(
      "new Supervisor({ agent: &quot;planner&quot;, limits: {&quot;stageStallMs&quot;:{&quot;tool_call&quot;:210000}} })</code></pre>",
    );
  });

  it("the suggested thresholds of a log without rollups say where they come from", () => {
    const none = {
      ...sampleReview.thresholds,
      signals: [],
      stages: [],
      health: {},
      watchdog: {},
      rollups: 0,
    };
    expect(
      sectionOf(renderHtml({ ...sampleReview, thresholds: none }), "suggested-thresholds"),
    ).toContain(
      "<p>No call rollups in this log: the engine writes them to <code>recovery.eventLog</code> once a minute",
    );
    const quiet = { ...none, rollups: 5 };
    expect(
      sectionOf(renderHtml({ ...sampleReview, thresholds: quiet }), "suggested-thresholds"),
    ).toContain("<p>No change proposed: the current settings fit the period.</p>");
  });

  it("names from the log are escaped in the thresholds section", () => {
    const [first] = sampleReview.thresholds.signals;
    if (!first) throw new Error("sample has a signal");
    const hostile = { ...first, agent: '<img src=x onerror="alert(1)">', tool: "t&t" };
    const page = renderHtml({
      ...sampleReview,
      thresholds: {
        ...sampleReview.thresholds,
        signals: [hostile],
        health: { [hostile.agent]: { tools: { "t&t": { latency: { baselineMs: 1 } } } } },
      },
    });
    const section = sectionOf(page, "suggested-thresholds") ?? "";
    expect(section).not.toContain("<img");
    expect(section).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt; / t&amp;t");
  });

  describe("against the previous period", () => {
    const compared = (): string => renderHtml(sampleReview, { previous: previousReview });

    it("the periods compared are said at the top", () => {
      expect(compared()).toContain(
        '<p class="sub">2026-01-01 00:00 UTC to 2026-01-01 08:00 UTC. Times in UTC. Compared with 2025-12-31 16:00 UTC to 2026-01-01 00:00 UTC. 6 incidents.</p>',
      );
    });

    it("each headline card shows the previous figure and the change, green better, red worse", () => {
      expect(sectionOf(compared(), "headline")).toBe(
        '<section id="headline"><h2>Headline, with the change from the previous period</h2>\n<div class="cards">' +
          card("6", "incidents", ["8", GREEN, "-2 (-25.0%)"]) +
          card("50.0%", "auto-recovery rate", ["25.0%", GREEN, "+25.0 pt"]) +
          card("2.0 s", "MTTR p50", ["4.0 s", GREEN, "-2.0 s (-50.0%)"]) +
          card("3.0 s", "MTTR p90", ["2.0 s", RED, "+1.0 s (+50.0%)"]) +
          card("3", "unrecovered (failed, escalated, out of budget)", ["6", GREEN, "-3 (-50.0%)"]) +
          card("50.0%", "UNKNOWN share", ["50.0%", GREY, "="]) +
          card("$1.5000", "recovery spend", ["$2.0000", GREEN, "-$0.5000 (-25.0%)"]) +
          card("$0.2500", "spend per incident", ["$0.2000", RED, "+$0.0500 (+25.0%)"]) +
          "</div>\n</section>",
      );
    });

    it("per agent and per tool: the change of each incident count, 'new' for a name not seen before", () => {
      const agents = sectionOf(compared(), "agents") ?? "";
      expect(agents).toContain("<th>UNKNOWN share</th><th>incidents change</th></tr>");
      expect(agents).toContain(
        `<td>50.0%</td><td><span class="delta" style="color:${GREEN}">-1 (-20.0%)</span></td></tr>`,
      );
      expect(agents).toMatch(/<tr><td>writer<\/td>.*<td>new<\/td><\/tr>/);
      const tools = sectionOf(compared(), "tools") ?? "";
      expect(
        tools.match(new RegExp(`<span class="delta" style="color:${GREY}">=</span>`, "g")),
      ).toHaveLength(3);
    });
  });

  it("times in the zone given, the zone said, UTC nowhere", () => {
    const paris = renderHtml(sampleReview, { previous: previousReview, timeZone: "Europe/Paris" });
    expect(paris).toContain(
      '<p class="sub">2026-01-01 01:00 GMT+1 to 2026-01-01 09:00 GMT+1. Times in Europe/Paris. Compared with 2025-12-31 17:00 GMT+1 to 2026-01-01 01:00 GMT+1. 6 incidents.</p>',
    );
    expect(paris).not.toContain("UTC");
    for (const fragment of [
      "<title>2026-01-01 01:00 GMT+1: UNKNOWN 2</title>", // a chart's bar
      'text-anchor="end">2026-01-01 07:00 GMT+1</text>', // a chart's last time
      "<tr><td>2026-01-01 07:00 GMT+1</td><td>2</td><td>2026-01-01 05:00 GMT+1</td>", // unrecovered
      "<tr><td>2026-01-01 06:00 GMT+1</td><td>planner</td><td>night-2</td>", // watchdog run
    ])
      expect(paris).toContain(fragment);
  });

  it.each([
    [HOUR, "hour"],
    [3 * HOUR, "3 hours"],
    [24 * HOUR, "day"],
    [48 * HOUR, "2 days"],
    [168 * HOUR, "7 days"],
  ])("bars of %i ms are named per %s", (widthMs, named) => {
    const series = { ...sampleReview.series, widthMs };
    expect(renderHtml({ ...sampleReview, series })).toContain(
      `<figcaption>Incidents per ${named}, by pattern (highest bar 3)</figcaption>`,
    );
  });

  it("a single bar: its time label starts at the left of the plot, inside the chart", () => {
    const one = renderHtml(reviewText(event({ at: T0 + 90 * 60_000 })));
    const labels = [
      ...(sectionOf(one, "over-time") ?? "").matchAll(/<text x="([\d.]+)" y="196"[^>]*>([^<]*)</g),
    ].map((m) => [m[1], m[2]]);
    expect(labels).toEqual([["48.0", "2026-01-01 01:00 UTC"]]);
  });

  it("an empty log: the headline and the rules, no chart, no list, no watchdog", () => {
    const empty = renderHtml(reviewText(""));
    expect(ids(empty)).toEqual(["headline", "suggested-rules", "suggested-thresholds"]);
    expect(body(empty)).toContain('<p class="sub">no incident. Times in UTC. 0 incidents.</p>');
    expect(sectionOf(empty, "headline")).toContain(
      card("0", "incidents") + card("n/a", "auto-recovery rate") + card("n/a", "MTTR p50"),
    );
    expect(empty).not.toMatch(/<svg|class="malformed"/);
  });

  it("bad lines all named: no 'and 0 more'", () => {
    const page = renderHtml(reviewText(["{", event()].join("\n")));
    expect(page).toContain(
      '<p class="sub">2026-01-01 00:00 UTC to 2026-01-01 00:00 UTC. Times in UTC. 1 incidents.</p>\n' +
        "<p>1 lines were not recovery events and were left out.</p>" +
        '<ul class="malformed"><li>line 1: not JSON</li></ul>\n',
    );
  });

  it("watchdog lines only: one session, no verdict, no recovery section", () => {
    const page = renderHtml(
      reviewText(
        [
          watchdogLine({ kind: "tier", tier: "nudge", reason: "r" }),
          watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "recovered" }),
          watchdogLine({ kind: "gave_up", reason: "r" }),
        ].join("\n"),
      ),
    );
    expect(ids(page)).toEqual(["headline", "watchdog", "suggested-rules", "suggested-thresholds"]);
    expect(sectionOf(page, "watchdog")).toBe(
      [
        '<section id="watchdog"><h2>Watchdog: long runs (1 session)</h2>',
        '<table class="watchdog"><thead><tr><th>tier</th><th>runs</th><th>recovered</th><th>failed</th><th>success</th></tr></thead><tbody>',
        `<tr><td>nudge</td><td>1</td><td><span style="color:${GREEN}">1</span></td><td><span style="color:${RED}">0</span></td><td>100.0%</td></tr>`,
        "</tbody></table>",
        "<p>Verdicts entered: none. Gave up (restart intensity reached): 1.</p>",
        '<table class="runs"><thead><tr><th>last seen</th><th>agent</th><th>session</th><th>what the watchdog saw and did</th></tr></thead><tbody>',
        '<tr><td>2026-01-01 00:00 UTC</td><td>a</td><td>s1</td><td><span class="step good">nudge: recovered</span> → <span class="step bad">gave up</span></td></tr>',
        "</tbody></table>",
        "</section>",
      ].join("\n"),
    );
  });

  it("text from the log is escaped in every place it appears", () => {
    const nasty = `a&b<c>"d'e\u001b`;
    const shown = "a&amp;b&lt;c&gt;&quot;d&#39;e\\x1b";
    const page = renderHtml(
      reviewText(
        [
          event({
            tool: nasty,
            error: nasty,
            outcome: nasty,
            strategy: nasty,
            steps: [{ strategy: nasty }],
          }),
          event({ pattern: nasty }),
          watchdogLine({ kind: "verdict", verdict: nasty, reason: "r" }),
          watchdogLine({ kind: "tier", tier: nasty, reason: "r" }),
          JSON.stringify({ type: "watchdog", at: 0, agent: "a", session: "s", kind: nasty }),
        ].join("\n"),
      ),
    );
    for (const raw of ["<c>", `"d'`, "\u001b"]) expect(page).not.toContain(raw);
    expect(page).toContain(
      `<li>line 5: watchdog event: kind &quot;a&amp;b&lt;c&gt;\\&quot;d&#39;e\\u001b&quot; is not a watchdog event</li>`,
    );
    for (const fragment of [
      `<title>2026-01-01 00:00 UTC: ${shown} 1</title>`, // the pattern's bar
      `</i>${shown}</span>`, // the legend
      `<tr><td><b style="color:${GREY}">${shown}</b></td><td>1</td><td>50.0%</td>`, // outcome
      `<tr><td>${shown}</td><td>1</td><td>0</td><td>0.0%</td></tr>`, // strategy
      `<tr><td>${shown}</td><td>1</td><td>0.0%</td><td>n/a</td>`, // tool
      `<h3>UNKNOWN texts of ${shown}</h3><ul><li><code>${shown}</code></li></ul>`,
      `<td>${shown}</td><td><span style="color:#8c959f">UNKNOWN</span></td>`, // unrecovered tool
      `<td>${shown}</td><td><code>${shown}</code></td></tr>`, // unrecovered tried, error
      `<tr><td>${shown}</td><td>1</td><td><span style=`, // tier
      `Verdicts entered: ${shown} 1.`,
      `<span class="step">${shown}</span>`, // a run's step
    ])
      expect(page).toContain(fragment);
  });
});

describe("renderHtml of a hostile review: every text from the log escaped", () => {
  const SCRIPT = "<script>alert(1)</script>";
  const CTL = "\u001b[2J\u0007\r\n\u202e";
  const evil = (what: string) => `${what}${SCRIPT}${CTL}`;
  const at = T0;
  const hostile: Review = {
    ...sampleReview,
    malformedSamples: [evil("line 1: ")],
    patterns: [{ pattern: evil("pattern"), incidents: 6, share: 1 }],
    tools: [
      {
        tool: evil("tool"),
        incidents: 6,
        unknown: 1,
        unknownShare: 1 / 6,
        samples: [{ text: evil("sample"), count: 1 }],
      },
    ],
    strategies: [{ strategy: evil("strategy"), runs: 1, recovered: 0, successRate: 0 }],
    outcomes: [{ outcome: evil("outcome"), incidents: 6, share: 1, p50Seconds: 1, p90Seconds: 1 }],
    series: {
      widthMs: HOUR,
      bars: [
        {
          at,
          incidents: 6,
          recovered: 3,
          costUsd: 1.5,
          patterns: [{ pattern: evil("pattern"), incidents: 6 }],
        },
      ],
    },
    byAgent: sampleReview.byAgent.map((b) => ({ ...b, name: evil("agent") })),
    byTool: sampleReview.byTool.map((b) => ({ ...b, name: evil("tool") })),
    unrecovered: {
      total: 1,
      groups: 1,
      latest: [
        {
          firstAt: at,
          lastAt: at,
          count: 1,
          agent: evil("agent"),
          tool: evil("tool"),
          pattern: evil("pattern"),
          outcome: evil("outcome"),
          error: evil("error"),
          tried: [evil("strategy")],
        },
      ],
    },
    watchdog: {
      ...sampleReview.watchdog,
      verdicts: [{ verdict: evil("verdict"), count: 1 }],
      tiers: [{ tier: evil("tier"), runs: 1, recovered: 0, failed: 1, successRate: 0 }],
      runs: [{ agent: evil("agent"), session: evil("session"), lastAt: at, steps: [evil("step")] }],
    },
    rules: {
      ...sampleReview.rules,
      file: {
        ...sampleReview.rules.file,
        rules: sampleReview.rules.file.rules.map((r) => ({
          ...r,
          name: evil("rule"),
          match: { message: [evil("regex")] },
          ...(r.evidence && {
            evidence: {
              ...r.evidence,
              because: evil("because"),
              examples: [evil("example")],
            },
          }),
        })),
      },
      unclassified: [{ template: evil("template"), samples: 1, examples: [] }],
    },
  };
  const page = (): string => renderHtml(hostile, { previous: { ...hostile, byAgent: [] } });
  const shown = (what: string) =>
    `${what}&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J\\x07\\r\\n\\u202e`;

  it("no tag, no control character reaches the page", () => {
    expect(page()).not.toMatch(/<script|<\/script/i);
    for (const c of ["\u001b", "\u0007", "\r", "\u202e"]) expect(page()).not.toContain(c);
    // The page's own newlines only: none inside a cell.
    expect(page()).not.toMatch(/<td>[^<]*\n/);
  });

  it.each([
    "line 1: ",
    "pattern",
    "tool",
    "sample",
    "strategy",
    "outcome",
    "agent",
    "error",
    "verdict",
    "tier",
    "session",
    "step",
    "rule",
    "regex",
    "because",
    "example",
    "template",
  ])("%s is shown escaped", (what) => {
    expect(page()).toContain(shown(what));
  });
});
