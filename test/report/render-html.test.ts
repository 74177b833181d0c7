/** The review as one HTML page: each section, the SVG bar charts' geometry, escaping. */
import { describe, expect, it } from "vitest";
import { reviewText } from "../../src/report/analyze.js";
import { renderHtml } from "../../src/report/render-html.js";
import { event, watchdogLine } from "./events.js";
import { sampleReview } from "./sample-review.js";

/** The page from its body on: the head is a fixed style sheet. */
const body = (html: string) => html.slice(html.indexOf("<body>"));

describe("renderHtml", () => {
  it("a self-contained page", () => {
    const html = renderHtml(sampleReview);
    expect(html.startsWith('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">')).toBe(
      true,
    );
    expect(html).toContain("<title>selfheal recovery review</title>");
    expect(html).not.toMatch(/<script|<link|src=/);
    expect(html.endsWith("</body></html>\n")).toBe(true);
  });

  it("every section of a full review: bars scaled to the largest value, figures rounded", () => {
    expect(body(renderHtml(sampleReview))).toBe(
      [
        "<body>",
        "<h1>Recovery review</h1>",
        "<p>6 incidents from 2026-01-01T00:00:00.000Z to 2026-01-01T06:00:00.000Z. Recovery spend $1.5000 ($0.2500 per incident). 7 lines were not recovery events and were left out.</p>",
        '<ul class="malformed"><li>line 2: not JSON</li><li>line 3: not a JSON object</li><li>line 4: at is not a time</li><li>line 5: tool is not a string</li><li>line 9: costUsd is not a number</li><li>and 2 more</li></ul>',
        '<figure><figcaption>Top failure patterns (incidents)</figcaption><svg class="chart" role="img" aria-label="Top failure patterns (incidents)" width="680" height="72">' +
          '<text x="0" y="16" class="label">UNKNOWN</text><rect class="bar" x="200" y="4" width="380" height="16"></rect><text x="586" y="16" class="value">3 (50.0%)</text>' +
          '<text x="0" y="40" class="label">RATE_LIMIT</text><rect class="bar" x="200" y="28" width="253" height="16"></rect><text x="459" y="40" class="value">2 (33.3%)</text>' +
          '<text x="0" y="64" class="label">TIMEOUT</text><rect class="bar" x="200" y="52" width="127" height="16"></rect><text x="333" y="64" class="value">1 (16.7%)</text>' +
          "</svg></figure>",
        '<figure><figcaption>Strategy success (share of runs that recovered the call)</figcaption><svg class="chart" role="img" aria-label="Strategy success (share of runs that recovered the call)" width="680" height="72">' +
          '<text x="0" y="16" class="label">retry_once</text><rect class="bar" x="200" y="4" width="253" height="16"></rect><text x="459" y="16" class="value">33.3% of 3</text>' +
          '<text x="0" y="40" class="label">backoff</text><rect class="bar" x="200" y="28" width="380" height="16"></rect><text x="586" y="40" class="value">50.0% of 2</text>' +
          // A zero still gets a sliver of a bar.
          '<text x="0" y="64" class="label">failover</text><rect class="bar" x="200" y="52" width="2" height="16"></rect><text x="208" y="64" class="value">0.0% of 1</text>' +
          "</svg></figure>",
        '<figure><figcaption>MTTR of recovered calls (seconds)</figcaption><svg class="chart" role="img" aria-label="MTTR of recovered calls (seconds)" width="680" height="72">' +
          '<text x="0" y="16" class="label">p50</text><rect class="bar" x="200" y="4" width="220" height="16"></rect><text x="426" y="16" class="value">2.0 s</text>' +
          '<text x="0" y="40" class="label">p90</text><rect class="bar" x="200" y="28" width="329" height="16"></rect><text x="535" y="40" class="value">3.0 s</text>' +
          '<text x="0" y="64" class="label">p99</text><rect class="bar" x="200" y="52" width="380" height="16"></rect><text x="586" y="64" class="value">3.5 s</text>' +
          "</svg></figure>",
        "<p>MTTR (recovered calls, 3): p50 2.0 s, p90 3.0 s, p99 3.5 s</p>",
        "<h2>Outcomes</h2>",
        '<table class="outcomes"><tr><th>outcome</th><th>incidents</th><th>share</th><th>p50 duration</th><th>p90 duration</th></tr>',
        "<tr><td>recovered</td><td>3</td><td>50.0%</td><td>2.0 s</td><td>3.0 s</td></tr>",
        "<tr><td>fallback</td><td>2</td><td>33.3%</td><td>2.0 s</td><td>4.0 s</td></tr>",
        "<tr><td>failed</td><td>1</td><td>16.7%</td><td>8.0 s</td><td>12.3 s</td></tr>",
        "</table>",
        "<h2>Strategies</h2>",
        '<table class="strategies"><tr><th>strategy</th><th>runs</th><th>recovered the call</th><th>success</th></tr>',
        "<tr><td>retry_once</td><td>3</td><td>1</td><td>33.3%</td></tr>",
        "<tr><td>backoff</td><td>2</td><td>1</td><td>50.0%</td></tr>",
        "<tr><td>failover</td><td>1</td><td>0</td><td>0.0%</td></tr>",
        "</table>",
        "<h2>Per tool</h2>",
        "<table><tr><th>tool</th><th>incidents</th><th>UNKNOWN</th><th>UNKNOWN share</th></tr>",
        "<tr><td>lookup</td><td>3</td><td>0</td><td>0.0%</td></tr>",
        "<tr><td>fetch</td><td>2</td><td>2</td><td>100.0%</td></tr>",
        "<tr><td>search</td><td>1</td><td>1</td><td>100.0%</td></tr>",
        "</table>",
        "<h3>UNKNOWN texts of fetch</h3><ul><li><code>disk full</code> &times;2</li><li><code>out of memory</code></li></ul>" +
          "<h3>UNKNOWN texts of search</h3><ul><li><code>no route to host</code></li></ul>",
        "<h2>Watchdog: long runs (2 sessions)</h2>",
        '<table class="watchdog"><tr><th>tier</th><th>runs</th><th>recovered</th><th>failed</th><th>success</th></tr>',
        "<tr><td>nudge</td><td>2</td><td>1</td><td>1</td><td>50.0%</td></tr>",
        "<tr><td>rotation</td><td>1</td><td>0</td><td>1</td><td>0.0%</td></tr>",
        "</table>",
        "<p>Verdicts entered: looping 2, dead 1. Gave up (restart intensity reached): 1.</p>",
        "</body></html>",
        "",
      ].join("\n"),
    );
  });

  it("an empty log: zeros, n/a, empty charts of one row's height, no list, no watchdog", () => {
    expect(body(renderHtml(reviewText("")))).toBe(
      [
        "<body>",
        "<h1>Recovery review</h1>",
        "<p>0 incidents. Recovery spend $0.0000 ($0.0000 per incident).</p>",
        "",
        '<figure><figcaption>Top failure patterns (incidents)</figcaption><svg class="chart" role="img" aria-label="Top failure patterns (incidents)" width="680" height="24"></svg></figure>',
        '<figure><figcaption>Strategy success (share of runs that recovered the call)</figcaption><svg class="chart" role="img" aria-label="Strategy success (share of runs that recovered the call)" width="680" height="24"></svg></figure>',
        '<figure><figcaption>MTTR of recovered calls (seconds)</figcaption><svg class="chart" role="img" aria-label="MTTR of recovered calls (seconds)" width="680" height="72">' +
          '<text x="0" y="16" class="label">p50</text><rect class="bar" x="200" y="4" width="2" height="16"></rect><text x="208" y="16" class="value">0.0 s</text>' +
          '<text x="0" y="40" class="label">p90</text><rect class="bar" x="200" y="28" width="2" height="16"></rect><text x="208" y="40" class="value">0.0 s</text>' +
          '<text x="0" y="64" class="label">p99</text><rect class="bar" x="200" y="52" width="2" height="16"></rect><text x="208" y="64" class="value">0.0 s</text>' +
          "</svg></figure>",
        "<p>MTTR (recovered calls, 0): p50 n/a, p90 n/a, p99 n/a</p>",
        "<h2>Outcomes</h2>",
        '<table class="outcomes"><tr><th>outcome</th><th>incidents</th><th>share</th><th>p50 duration</th><th>p90 duration</th></tr>',
        "",
        "</table>",
        "<h2>Strategies</h2>",
        '<table class="strategies"><tr><th>strategy</th><th>runs</th><th>recovered the call</th><th>success</th></tr>',
        "",
        "</table>",
        "<h2>Per tool</h2>",
        "<table><tr><th>tool</th><th>incidents</th><th>UNKNOWN</th><th>UNKNOWN share</th></tr>",
        "",
        "</table>",
        "",
        "",
        "</body></html>",
        "",
      ].join("\n"),
    );
  });

  it("bad lines all named: no 'and 0 more'", () => {
    const html = renderHtml(reviewText(["{", event()].join("\n")));
    expect(html).toContain(
      "<p>1 incidents from 2026-01-01T00:00:00.000Z to 2026-01-01T00:00:00.000Z. Recovery spend $0.0000 ($0.0000 per incident). 1 lines were not recovery events and were left out.</p>\n" +
        '<ul class="malformed"><li>line 1: not JSON</li></ul>\n',
    );
  });

  it("watchdog lines only: one session, no verdict", () => {
    const html = renderHtml(
      reviewText(
        [
          watchdogLine({ kind: "tier", tier: "nudge", reason: "r" }),
          watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "recovered" }),
          watchdogLine({ kind: "gave_up", reason: "r" }),
        ].join("\n"),
      ),
    );
    expect(
      body(html).endsWith(
        [
          "<h2>Watchdog: long runs (1 session)</h2>",
          '<table class="watchdog"><tr><th>tier</th><th>runs</th><th>recovered</th><th>failed</th><th>success</th></tr>',
          "<tr><td>nudge</td><td>1</td><td>1</td><td>0</td><td>100.0%</td></tr>",
          "</table>",
          "<p>Verdicts entered: none. Gave up (restart intensity reached): 1.</p>",
          "</body></html>",
          "",
        ].join("\n"),
      ),
    ).toBe(true);
  });

  it("text from the log is escaped in every place it appears", () => {
    const nasty = `a&b<c>"d'e\u001b`;
    const shown = "a&amp;b&lt;c&gt;&quot;d&#39;e\\x1b";
    const html = renderHtml(
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
    for (const raw of ["<c>", '"d', "d'", "\u001b"]) expect(html).not.toContain(raw);
    expect(html).toContain(
      `<li>line 5: watchdog event: kind &quot;a&amp;b&lt;c&gt;\\&quot;d&#39;e\\u001b&quot; is not a watchdog event</li>`,
    );
    for (const fragment of [
      `class="label">${shown}</text>`, // pattern and strategy charts
      `<tr><td>${shown}</td><td>1</td><td>50.0%</td>`, // outcome
      `<tr><td>${shown}</td><td>1</td><td>0</td><td>0.0%</td></tr>`, // strategy
      `<tr><td>${shown}</td><td>1</td><td>1</td><td>100.0%</td></tr>`, // tool
      `<h3>UNKNOWN texts of ${shown}</h3><ul><li><code>${shown}</code></li></ul>`,
      `<tr><td>${shown}</td><td>1</td><td>0</td><td>0</td><td>0.0%</td></tr>`, // tier
      `Verdicts entered: ${shown} 1.`,
    ])
      expect(html).toContain(fragment);
  });
});
