/**
 * `selfheal report` reads a file anyone with write access controls: what it prints can neither
 * drive the terminal nor forge a line of the review, the HTML page escapes everything, and text
 * written by an older version (or by hand) is redacted again.
 */
import { describe, expect, it } from "vitest";
import { analyze, parseEvents } from "../../src/report/analyze.js";
import { renderHtml } from "../../src/report/render-html.js";
import { renderText } from "../../src/report/render-text.js";

const ESC = "\u001b";
const PAYLOAD = `${ESC}[2J${ESC}[H${ESC}]0;pwned\u0007\r\nOutcomes: recovered 999\u202e`;

const event = (over: Record<string, unknown>) =>
  JSON.stringify({
    at: Date.UTC(2026, 0, 1),
    agent: "a",
    tool: "lookup",
    taskId: undefined,
    error: "boom",
    pattern: "UNKNOWN",
    confidence: 0,
    strategy: undefined,
    steps: [],
    attempts: 0,
    durationMs: 10,
    outcome: "failed",
    costUsd: 0,
    wastedRetries: 0,
    failoverCostDifferentialUsd: 0,
    provider: undefined,
    ...over,
  });

const log = [
  event({ tool: `lookup${PAYLOAD}`, error: `old log line password=hunter22 ${PAYLOAD}` }),
  event({
    pattern: `RATE_LIMIT${PAYLOAD}`,
    outcome: "recovered",
    strategy: `retry_once${PAYLOAD}`,
    steps: [{ strategy: `retry_once${PAYLOAD}` }, null, 7, { strategy: 3 }],
    durationMs: "soon",
    costUsd: "lots",
  }),
  event({ outcome: `weird${PAYLOAD}`, error: { not: "a string" } }),
  event({ at: 1e300 }), // no Date holds it: malformed, not a crash
].join("\n");

describe("report output from a hostile log", () => {
  const { events, malformed } = parseEvents(log);
  const review = analyze(events, malformed);

  it("junk lines are counted, not fatal", () => {
    expect(review.events).toBe(3);
    expect(review.malformed).toBe(1);
  });

  it("terminal text: no control character, no forged line", () => {
    const text = renderText(review);
    for (const c of [ESC, "\u0007", "\r", "\u202e"]) expect(text).not.toContain(c);
    expect(text).not.toMatch(/^Outcomes: recovered 999/m); // only the real Outcomes line starts one
    expect(text.match(/^Outcomes:/gm)).toHaveLength(1);
    expect(text).toContain("lookup\\x1b[2J");
    expect(text).not.toContain("hunter22");
    expect(text).toContain("password=[REDACTED]");
    expect(text).toContain("Recovery spend: $0.0000"); // junk numbers count as 0, not NaN
  });

  it("HTML: escaped, control characters shown, secrets redacted", () => {
    const html = renderHtml(
      analyze(parseEvents(event({ tool: "<script>alert(1)</script>", error: PAYLOAD })).events),
    );
    expect(html).not.toContain("<script>alert");
    expect(html).toContain("&lt;script&gt;");
    for (const c of [ESC, "\u0007", "\r", "\u202e"]) expect(html).not.toContain(c);
    expect(renderHtml(review)).not.toContain("hunter22");
  });
});
