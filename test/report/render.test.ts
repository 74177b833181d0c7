/**
 * `selfheal report` reads a file anyone with write access controls: what it prints can neither
 * drive the terminal nor forge a line of the review, the HTML page escapes everything, and text
 * written by an older version (or by hand) is redacted again.
 */
import { describe, expect, it } from "vitest";
import { DurationSketch, reviewText } from "../../src/report/analyze.js";
import { renderHtml } from "../../src/report/render-html.js";
import { renderText } from "../../src/report/render-text.js";
import { event, watchdogLine } from "./events.js";

const ESC = "\u001b";
const PAYLOAD = `${ESC}[2J${ESC}[H${ESC}]0;pwned\u0007\r\nOutcomes: recovered 999\u202e`;

const log = [
  event({ tool: `lookup${PAYLOAD}`, error: `old log line password=hunter22 ${PAYLOAD}` }),
  event({
    pattern: `RATE_LIMIT${PAYLOAD}`,
    outcome: "recovered",
    strategy: `retry_once${PAYLOAD}`,
    steps: [{ strategy: `retry_once${PAYLOAD}` }],
  }),
  event({ outcome: `weird${PAYLOAD}`, error: `boom${PAYLOAD}` }),
  event({ at: 1e300 }), // no Date holds it: malformed, not a crash
  event({ steps: [null] }),
  event({ costUsd: "lots" }),
  event({ error: { not: "a string" } }),
].join("\n");

describe("report output from a hostile log", () => {
  // Built in each test, not once at collection: a mutant is then seen by the tests that read it.
  const review = () => reviewText(log);

  it("junk lines are counted and named, not fatal", () => {
    expect(review().events).toBe(3);
    expect(review().malformed).toBe(4);
    expect(review().malformedSamples).toEqual([
      "line 4: at is not a time",
      "line 5: steps[0] is not a step",
      "line 6: costUsd is not a number",
      "line 7: error is not a string",
    ]);
  });

  it("terminal text: no control character, no forged line", () => {
    const text = renderText(review());
    for (const c of [ESC, "\u0007", "\r", "\u202e"]) expect(text).not.toContain(c);
    expect(text).not.toMatch(/^Outcomes: recovered 999/m); // only the real Outcomes line starts one
    expect(text.match(/^Outcomes/gm)).toHaveLength(1);
    expect(text).toContain("lookup\\x1b[2J");
    expect(text).not.toContain("hunter22");
    expect(text).toContain("password=[REDACTED]");
    expect(text).toContain("line 6: costUsd is not a number");
  });

  it("HTML: escaped, control characters shown, secrets redacted", () => {
    const html = renderHtml(
      reviewText(event({ tool: "<script>alert(1)</script>", error: PAYLOAD })),
    );
    expect(html).not.toContain("<script>alert");
    expect(html).toContain("&lt;script&gt;");
    for (const c of [ESC, "\u0007", "\r", "\u202e"]) expect(html).not.toContain(c);
    expect(renderHtml(review())).not.toContain("hunter22");
  });

  it("HTML has every section the terminal has, the outcome breakdown and skipped lines included", () => {
    const html = renderHtml(review());
    const text = renderText(review());
    // Each section of the terminal, and where the page has it.
    for (const [title, id, shown] of [
      ["Headline", "headline", '<div class="name">recovery spend</div>'],
      ["Top failure patterns", "over-time", "RATE_LIMIT\\x1b[2J"],
      ["Per agent", "agents", "<td>a</td><td>3</td>"],
      ["Per tool", "tools", "<h3>UNKNOWN texts of lookup\\x1b[2J"],
      ["Strategies", "outcomes", '<table class="strategies">'],
      ["Outcomes", "outcomes", '<table class="outcomes">'],
      ["Not recovered", "unrecovered", "2 incidents were not recovered"],
      ["MTTR (recovered calls, 1)", "mttr", "MTTR of recovered calls: 1 recoveries"],
    ] as const) {
      expect(text).toMatch(new RegExp(`^${title.replace(/[()]/g, "\\$&")}`, "m"));
      expect(new RegExp(`<section id="${id}">[\\s\\S]*?</section>`).exec(html)?.[0]).toContain(
        shown,
      );
    }
    expect(html).toContain("line 6: costUsd is not a number");
    expect(html).toMatch(/<td><b style="color:#1a7f37">recovered<\/b><\/td><td>1<\/td>/);
  });
});

describe("review figures", () => {
  const ok = (over: Record<string, unknown>) =>
    event({
      outcome: "recovered",
      strategy: "retry_once",
      steps: [{ strategy: "retry_once" }],
      ...over,
    });

  it("percentiles are nearest-rank: 1..100 s gives p50 50, p90 90, p99 99", () => {
    const lines = Array.from({ length: 100 }, (_, i) => ok({ durationMs: (100 - i) * 1000 }));
    const r = reviewText(lines.join("\n"));
    expect(r.mttrSeconds).toEqual({ count: 100, p50: 50, p90: 90, p99: 99 });
    expect(reviewText(ok({ durationMs: 7000 })).mttrSeconds.p99).toBe(7);
  });

  it("past the exact limit, percentiles come from the log-bucket histogram, within 0.5 %", () => {
    const sketch = new DurationSketch();
    const n = DurationSketch.EXACT_LIMIT * 3;
    // Shuffled 1..n ms.
    for (let i = 0; i < n; i++) sketch.add(((i * 7919) % n) + 1);
    for (const q of [0.5, 0.9, 0.99]) {
      const exact = Math.ceil(q * n);
      expect(Math.abs((sketch.quantile(q) ?? 0) - exact) / exact).toBeLessThan(0.005);
    }
    expect(sketch.count).toBe(n);
  });

  it("an outcome, tool or pattern named constructor or __proto__ is just a name", () => {
    const r = reviewText(
      [
        event({ outcome: "constructor", tool: "__proto__", pattern: "toString" }),
        event({ outcome: "constructor", tool: "constructor", pattern: "hasOwnProperty" }),
        event({ outcome: "__proto__" }),
      ].join("\n"),
    );
    expect(r.outcomes.map((o) => [o.outcome, o.incidents])).toEqual([
      ["constructor", 2],
      ["__proto__", 1],
    ]);
    const text = renderText(r);
    expect(text).not.toContain("function");
    expect(text).not.toContain("[object");
    expect(text).toMatch(/^constructor\s+2\s+66\.7%/m);
    expect(r.tools.map((t) => t.tool).sort()).toEqual(["__proto__", "constructor", "lookup"]);
  });

  it("an UNKNOWN text per tool is remembered in bounded memory: the latest five shown", () => {
    const lines = Array.from({ length: 500 }, (_, i) => event({ error: `text ${i}` }));
    const r = reviewText(lines.join("\n"));
    expect(r.tools[0]?.samples.map((s) => s.text)).toEqual([
      "text 495",
      "text 496",
      "text 497",
      "text 498",
      "text 499",
    ]);
  });
});

describe("watchdog lines in the log (selfheal watch --event-log)", () => {
  const watchdogLog = [
    watchdogLine({ kind: "verdict", verdict: "stalled", reason: "step unmoved" }),
    watchdogLine({ kind: "tier", tier: "nudge", reason: "step unmoved" }),
    watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "failed" }),
    watchdogLine({ kind: "tier", tier: "context_reset", reason: "nudge did not help" }),
    watchdogLine({ kind: "tier_result", tier: "context_reset", outcome: "recovered" }),
    watchdogLine({ session: "s2", kind: "verdict", verdict: "session_dead", reason: "no beat" }),
    watchdogLine({ session: "s2", kind: "tier", tier: "rotation", reason: "no beat" }),
    watchdogLine({ session: "s2", kind: "gave_up", reason: "3 restarts in 10 min" }),
    watchdogLine({ kind: "tier_result", tier: 7, outcome: "recovered" }),
    watchdogLine({ kind: "launch" }),
    event({}),
  ].join("\n");
  const review = () => reviewText(watchdogLog);

  it("counts each tier's runs and results, verdicts entered and give-ups, per session", () => {
    expect(review().events).toBe(1);
    expect(review().watchdog).toEqual({
      events: 8,
      sessions: 2,
      verdicts: [
        { verdict: "session_dead", count: 1 },
        { verdict: "stalled", count: 1 },
      ],
      tiers: [
        { tier: "nudge", runs: 1, recovered: 0, failed: 1, successRate: 0 },
        { tier: "context_reset", runs: 1, recovered: 1, failed: 0, successRate: 1 },
        { tier: "rotation", runs: 1, recovered: 0, failed: 0, successRate: 0 },
      ],
      gaveUp: 1,
      runs: [
        {
          agent: "a",
          session: "s2",
          lastAt: Date.UTC(2026, 0, 1),
          steps: ["session_dead", "gave up"],
        },
        {
          agent: "a",
          session: "s1",
          lastAt: Date.UTC(2026, 0, 1),
          steps: ["stalled", "nudge: failed", "context_reset: recovered"],
        },
      ],
    });
  });

  it("a bad watchdog line is named, not counted", () => {
    expect(review().malformedSamples).toEqual([
      "line 9: watchdog event: tier is not a string",
      'line 10: watchdog event: kind "launch" is not a watchdog event',
    ]);
  });

  it("the terminal and the HTML show the tiers", () => {
    const text = renderText(review());
    expect(text).toContain("Watchdog: long runs (2 sessions)");
    expect(text).toMatch(/^context_reset\s+1\s+1\s+0\s+100\.0%$/m);
    expect(text).toContain("Gave up (restart intensity reached): 1");
    const html = renderHtml(review());
    expect(html).toContain(
      '<td>context_reset</td><td>1</td><td><span style="color:#1a7f37">1</span></td><td><span style="color:#cf222e">0</span></td><td>100.0%</td>',
    );
    expect(html).toContain(
      '<td>s1</td><td><span class="step">stalled</span> → <span class="step bad">nudge: failed</span> → <span class="step good">context_reset: recovered</span></td>',
    );
  });

  it("a log without watchdog lines has no watchdog section", () => {
    expect(renderText(reviewText(event({})))).not.toContain("Watchdog");
  });
});
