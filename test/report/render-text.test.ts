/** The review as terminal text: each section, its aligned tables and its formatted figures. */
import { describe, expect, it } from "vitest";
import { reviewText } from "../../src/report/analyze.js";
import { renderText } from "../../src/report/render-text.js";
import { event, watchdogLine } from "./events.js";
import { sampleReview } from "./sample-review.js";

describe("renderText", () => {
  it("every section of a full review, columns aligned, shares and durations rounded", () => {
    expect(renderText(sampleReview)).toBe(
      [
        "Recovery review: 6 incidents from 2026-01-01T00:00:00.000Z to 2026-01-01T06:00:00.000Z",
        "(7 lines were not recovery events and were left out)",
        "  line 2: not JSON",
        "  line 3: not a JSON object",
        "  line 4: at is not a time",
        "  line 5: tool is not a string",
        "  line 9: costUsd is not a number",
        "  and 2 more",
        "",
        "Top failure patterns",
        "pattern     incidents  share",
        "----------  ---------  -----",
        "UNKNOWN     3          50.0%",
        "RATE_LIMIT  2          33.3%",
        "TIMEOUT     1          16.7%",
        "",
        "Per tool",
        "tool    incidents  UNKNOWN  UNKNOWN share",
        "------  ---------  -------  -------------",
        "lookup  3          0        0.0%",
        "fetch   2          2        100.0%",
        "search  1          1        100.0%",
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

  it("an empty log: one line, no section", () => {
    expect(renderText(reviewText(""))).toBe("Recovery review: 0 incidents");
  });

  it("no recovered call: MTTR n/a; the bad lines all named, none 'more'", () => {
    const text = renderText(
      reviewText([event({ durationMs: 1_500, costUsd: 0.002 }), "{", "{"].join("\n")),
    );
    expect(text.split("\n").slice(0, 4)).toEqual([
      "Recovery review: 1 incidents from 2026-01-01T00:00:00.000Z to 2026-01-01T00:00:00.000Z",
      "(2 lines were not recovery events and were left out)",
      "  line 2: not JSON",
      "  line 3: not JSON",
    ]);
    expect(text).not.toContain("more");
    expect(text).toContain("\nfailed   1          100.0%  1.5 s         1.5 s\n");
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
      "Recovery review: 1 incidents from 2026-01-01T00:00:00.000Z to 2026-01-01T00:00:00.000Z",
    );
    expect(text).toContain("\nWatchdog: long runs (1 session)\n");
  });

  it("cells from the log are one line each: control characters escaped, columns kept", () => {
    const text = renderText(reviewText(event({ tool: "a\tb\nc", outcome: "x\u001b[2J" })));
    // Widths are those of the escaped cells.
    expect(text).toContain("\ntool     incidents  UNKNOWN  UNKNOWN share\n");
    expect(text).toContain("\na\\tb\\nc  1          1        100.0%\n");
    expect(text).toContain("\n  UNKNOWN texts of a\\tb\\nc (write rules for these):\n");
    expect(text).toContain("\noutcome   incidents  share   p50 duration  p90 duration\n");
    expect(text).toContain("\nx\\x1b[2J  1          100.0%  0.0 s         0.0 s\n");
  });
});
