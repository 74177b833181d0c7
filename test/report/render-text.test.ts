/** The review as terminal text: each section, its aligned tables and its formatted figures. */
import { describe, expect, it } from "vitest";
import { reviewText, type Review } from "../../src/report/analyze.js";
import { renderText } from "../../src/report/render-text.js";
import { event, watchdogLine } from "./events.js";
import { previousReview, sampleReview } from "./sample-review.js";

/** The lines from the one that starts with `title` to the blank line after it. */
const block = (text: string, title: string) => {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => l.startsWith(title));
  const end = lines.indexOf("", start);
  return lines.slice(start, end === -1 ? undefined : end);
};

const HEADLINE_ROWS = [
  "incidents                                       6",
  "auto-recovery rate                              50.0%",
  "MTTR p50                                        2.0 s",
  "MTTR p90                                        3.0 s",
  "unrecovered (failed, escalated, out of budget)  3",
  "UNKNOWN share                                   50.0%",
  "recovery spend                                  $1.5000",
  "spend per incident                              $0.2500",
];

describe("renderText", () => {
  it("every section of a full review, columns aligned, shares and durations rounded", () => {
    expect(renderText(sampleReview)).toBe(
      [
        "Recovery review: 6 incidents in 2026-01-01 00:00 UTC to 2026-01-01 08:00 UTC",
        "(4 lines dated outside the period were left out)",
        "(7 lines were not recovery events and were left out)",
        "  line 2: not JSON",
        "  line 3: not a JSON object",
        "  line 4: at is not a time",
        "  line 5: tool is not a string",
        "  line 9: costUsd is not a number",
        "  and 2 more",
        "",
        "Headline",
        "figure                                          value",
        "----------------------------------------------  -------",
        ...HEADLINE_ROWS,
        "",
        "Top failure patterns",
        "pattern     incidents  share",
        "----------  ---------  -----",
        "UNKNOWN     3          50.0%",
        "RATE_LIMIT  2          33.3%",
        "TIMEOUT     1          16.7%",
        "",
        "Per agent",
        "agent    incidents  auto-recovered  MTTR p50  MTTR p90  spend    UNKNOWN share",
        "-------  ---------  --------------  --------  --------  -------  -------------",
        "planner  4          50.0%           2.0 s     3.0 s     $1.0000  50.0%",
        "writer   2          50.0%           1.3 s     1.3 s     $0.5000  50.0%",
        "",
        "Per tool",
        "tool    incidents  auto-recovered  MTTR p50  MTTR p90  spend    UNKNOWN share",
        "------  ---------  --------------  --------  --------  -------  -------------",
        "lookup  3          100.0%          2.0 s     3.0 s     $0.7500  0.0%",
        "fetch   2          0.0%            n/a       n/a       $0.5000  100.0%",
        "search  1          0.0%            n/a       n/a       $0.2500  100.0%",
        "  UNKNOWN texts of fetch (write rules for these):",
        "    - disk full (x2)",
        "    - out of memory",
        "  UNKNOWN texts of search (write rules for these):",
        "    - no route to host",
        "",
        "Strategies",
        "strategy    runs  recovered the call  success",
        "----------  ----  ------------------  -------",
        "retry_once  3     1                   33.3%",
        "backoff     2     1                   50.0%",
        "failover    1     0                   0.0%",
        "",
        "Outcomes",
        "outcome    incidents  share  p50 duration  p90 duration",
        "---------  ---------  -----  ------------  ------------",
        "recovered  3          50.0%  2.0 s         3.0 s",
        "fallback   2          33.3%  2.0 s         4.0 s",
        "failed     1          16.7%  8.0 s         12.3 s",
        "",
        "Not recovered (3 incidents, 2 kinds; the latest 2)",
        "last seen             times  agent    tool    pattern  outcome   tried                  error",
        "--------------------  -----  -------  ------  -------  --------  ---------------------  ----------------",
        "2026-01-01 06:00 UTC  2      planner  fetch   UNKNOWN  fallback  retry_once -> backoff  disk full",
        "2026-01-01 01:00 UTC  1      writer   search  UNKNOWN  failed    nothing                no route to host",
        "",
        "MTTR (recovered calls, 3): p50 2.0 s, p90 3.0 s, p99 3.5 s",
        "Recovery spend: $1.5000 ($0.2500 per incident)",
        "",
        "Watchdog: long runs (2 sessions)",
        "tier      runs  recovered  failed  success",
        "--------  ----  ---------  ------  -------",
        "nudge     2     1          1       50.0%",
        "rotation  1     0          1       0.0%",
        "Verdicts entered: looping 2, dead 1",
        "Gave up (restart intensity reached): 1",
      ].join("\n"),
    );
  });

  it("against the previous period: its figure and the change, by direction, in the zone given", () => {
    const text = renderText(sampleReview, {
      previous: previousReview,
      timeZone: "Europe/Paris",
    });
    expect(text.split("\n")[0]).toBe(
      "Recovery review: 6 incidents in 2026-01-01 01:00 GMT+1 to 2026-01-01 09:00 GMT+1",
    );
    expect(block(text, "Headline")).toEqual([
      "Headline, against the previous period (2025-12-31 17:00 GMT+1 to 2026-01-01 01:00 GMT+1)",
      "figure                                          value    previous  change",
      "----------------------------------------------  -------  --------  -----------------",
      "incidents                                       6        8         -2 (-25.0%)",
      "auto-recovery rate                              50.0%    25.0%     +25.0 pt",
      "MTTR p50                                        2.0 s    4.0 s     -2.0 s (-50.0%)",
      "MTTR p90                                        3.0 s    2.0 s     +1.0 s (+50.0%)",
      "unrecovered (failed, escalated, out of budget)  3        6         -3 (-50.0%)",
      "UNKNOWN share                                   50.0%    50.0%     =",
      "recovery spend                                  $1.5000  $2.0000   -$0.5000 (-25.0%)",
      "spend per incident                              $0.2500  $0.2000   +$0.0500 (+25.0%)",
    ]);
    // Every time in the zone: the unrecovered list's too.
    expect(block(text, "Not recovered").slice(3)).toEqual([
      "2026-01-01 07:00 GMT+1  2      planner  fetch   UNKNOWN  fallback  retry_once -> backoff  disk full",
      "2026-01-01 02:00 GMT+1  1      writer   search  UNKNOWN  failed    nothing                no route to host",
    ]);
    expect(text).not.toContain("UTC");
  });

  it("without a previous period: no comparison column", () => {
    const text = renderText(sampleReview);
    expect(block(text, "Headline").slice(3)).toEqual(HEADLINE_ROWS);
    expect(text).not.toMatch(/previous|change/);
  });

  it("a previous period with no incident: n/a where there is no figure, the headline still shown", () => {
    const empty = reviewText("");
    const quiet: Review = {
      ...empty,
      period: { since: "2026-01-01T00:00:00.000Z", until: "2026-01-01T08:00:00.000Z" },
    };
    const text = renderText(quiet, { previous: sampleReview });
    expect(block(text, "Headline").slice(3, 6)).toEqual([
      "incidents                                       0        6         -6 (-100.0%)",
      "auto-recovery rate                              n/a      50.0%     n/a",
      "MTTR p50                                        n/a      2.0 s     n/a",
    ]);
    expect(text).not.toContain("Top failure patterns");
  });

  it("the unrecovered list shows the latest 10 kinds, errors cut to 80 characters", () => {
    const kind = sampleReview.unrecovered.latest[0] as Review["unrecovered"]["latest"][number];
    const latest = Array.from({ length: 12 }, (_, i) => ({
      ...kind,
      lastAt: kind.lastAt - i * 60_000,
      error: `${String(i).padStart(2, "0")}${"x".repeat(100)}`,
    }));
    const text = renderText({
      ...sampleReview,
      unrecovered: { total: 40, groups: 30, latest },
    });
    const rows = block(text, "Not recovered");
    expect(rows[0]).toBe("Not recovered (40 incidents, 30 kinds; the latest 10)");
    expect(rows.slice(3).map((r) => r.slice(0, 20))).toEqual([
      "2026-01-01 06:00 UTC",
      ...Array.from({ length: 9 }, (_, i) => `2026-01-01 05:5${9 - i} UTC`),
    ]);
    expect(rows[3]?.endsWith(` 00${"x".repeat(78)}`)).toBe(true);
  });

  it("every incident recovered: no unrecovered section", () => {
    const text = renderText({ ...sampleReview, unrecovered: { total: 0, groups: 0, latest: [] } });
    expect(text).not.toContain("Not recovered");
  });

  it("an empty log: one line, no section", () => {
    expect(renderText(reviewText(""))).toBe("Recovery review: 0 incidents");
  });

  it("no recovered call: MTTR n/a; the bad lines all named, none 'more'", () => {
    const text = renderText(
      reviewText([event({ durationMs: 1_500, costUsd: 0.002 }), "{", "{"].join("\n")),
    );
    expect(text.split("\n").slice(0, 4)).toEqual([
      "Recovery review: 1 incidents from 2026-01-01 00:00 UTC to 2026-01-01 00:00 UTC",
      "(2 lines were not recovery events and were left out)",
      "  line 2: not JSON",
      "  line 3: not JSON",
    ]);
    expect(text).not.toContain("more");
    expect(text).toContain("\nfailed   1          100.0%  1.5 s         1.5 s\n");
    expect(text).toContain("\nMTTR p50                                        n/a\n");
    expect(text).toContain(
      "\nMTTR (recovered calls, 0): p50 n/a, p90 n/a, p99 n/a\nRecovery spend: $0.0020 ($0.0020 per incident)",
    );
  });

  it("exactly as many bad lines as are named: no 'and 0 more'", () => {
    const text = renderText(reviewText(Array<string>(5).fill("{").join("\n")));
    expect(text).toBe(
      [
        "Recovery review: 0 incidents",
        "(5 lines were not recovery events and were left out)",
        "  line 1: not JSON",
        "  line 2: not JSON",
        "  line 3: not JSON",
        "  line 4: not JSON",
        "  line 5: not JSON",
      ].join("\n"),
    );
  });

  it("a log of watchdog lines only says so; one session, no verdict", () => {
    const text = renderText(
      reviewText(
        [
          watchdogLine({ kind: "tier", tier: "nudge", reason: "step unmoved" }),
          watchdogLine({ kind: "tier_result", tier: "nudge", outcome: "recovered" }),
        ].join("\n"),
      ),
    );
    expect(text).toBe(
      [
        "Recovery review: 0 incidents (the log holds watchdog lines only)",
        "",
        "Watchdog: long runs (1 session)",
        "tier   runs  recovered  failed  success",
        "-----  ----  ---------  ------  -------",
        "nudge  1     1          0       100.0%",
        "Verdicts entered: none",
        "Gave up (restart intensity reached): 0",
      ].join("\n"),
    );
  });

  it("recovery events beside watchdog lines: no 'watchdog lines only'", () => {
    const text = renderText(
      reviewText([event(), watchdogLine({ kind: "gave_up", reason: "r" })].join("\n")),
    );
    expect(text.split("\n")[0]).toBe(
      "Recovery review: 1 incidents from 2026-01-01 00:00 UTC to 2026-01-01 00:00 UTC",
    );
    expect(text).toContain("\nWatchdog: long runs (1 session)\n");
  });

  it("cells from the log are one line each: control characters escaped, columns kept", () => {
    const text = renderText(
      reviewText(event({ tool: "a\tb\nc", agent: "ag\u0007", outcome: "x\u001b[2J" })),
    );
    // Widths are those of the escaped cells.
    expect(block(text, "Per agent").slice(1)).toEqual([
      "agent   incidents  auto-recovered  MTTR p50  MTTR p90  spend    UNKNOWN share",
      "------  ---------  --------------  --------  --------  -------  -------------",
      "ag\\x07  1          0.0%            n/a       n/a       $0.0000  100.0%",
    ]);
    expect(text).toContain(
      "\na\\tb\\nc  1          0.0%            n/a       n/a       $0.0000  100.0%\n",
    );
    expect(text).toContain("\n  UNKNOWN texts of a\\tb\\nc (write rules for these):\n");
    expect(text).toContain("\noutcome   incidents  share   p50 duration  p90 duration\n");
    expect(text).toContain("\nx\\x1b[2J  1          100.0%  0.0 s         0.0 s\n");
    expect(text).toContain(
      "\n2026-01-01 00:00 UTC  1      ag\\x07  a\\tb\\nc  UNKNOWN  x\\x1b[2J  nothing  boom\n",
    );
    for (const c of ["\u0007", "\u001b", "\t"]) expect(text).not.toContain(c);
  });
});
