/**
 * The text of `selfheal demo`, from results (no process, no terminal): the progress line ends
 * where the run ends, times show hours in a long run, a long run's session is named once, and the
 * summary sets each figure beside the run without selfheal.
 */
import { describe, expect, it } from "vitest";
import {
  longRunText,
  progressText,
  scenarioSummary,
  scenarioVerdict,
  timelineLine,
} from "../../src/cli/demo-text.js";
import { LONG_RUNS } from "../../src/sim/long-runs.js";
import { NO_RECOVERY, runLengthMs, runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";

const scenario = (name: string) => SCENARIOS[name] ?? expect.unreachable();
const HOUR = 3_600_000;

describe("selfheal demo's text", () => {
  it("the progress line ends at the end of the run: 70:00 / 70:00, never past it", () => {
    const runMs = runLengthMs(scenario("provider-outage"));
    expect(progressText(runMs, runMs)).toBe("virtual time 70:00 / 70:00");
    expect(progressText(5 * 60_000, runMs)).toBe("virtual time 05:00 / 70:00");
    expect(progressText(runMs + 60_000, runMs)).toBe("virtual time 70:00 / 70:00");
    expect(progressText(LONG_RUNS.durationMs, LONG_RUNS.durationMs)).toBe(
      "virtual time 12:00:00 / 12:00:00",
    );
  });

  it("a long run's times show hours: [8:44:55], not [524:55]; an hour's scenario keeps mm:ss", () => {
    const at = 8 * HOUR + 44 * 60_000 + 55_000;
    expect(timelineLine(at, LONG_RUNS.durationMs, "result", "night-34 rotation recovered")).toBe(
      "  [8:44:55] result     night-34 rotation recovered",
    );
    expect(timelineLine(65 * 60_000 + 1_500, runLengthMs(scenario("blip")), "page", "x")).toBe(
      "  [65:01] page       x",
    );
    // Every kind lines up, the longest too.
    expect(timelineLine(0, HOUR, "escalation", "x")).toBe("  [00:00] escalation x");
  });

  it("a long run's page names its session once", () => {
    const page = { atMs: 0, session: "night-40", kind: "page" as const };
    expect(longRunText({ ...page, text: "night-40 was rotated" })).toBe("night-40 was rotated");
    expect(longRunText({ ...page, text: "supervision of night-40 gave up" })).toBe(
      "supervision of night-40 gave up",
    );
    expect(longRunText({ ...page, kind: "tier", text: "nudge: stalled" })).toBe(
      "night-40 nudge: stalled",
    );
  });

  it("the summary: each figure with selfheal beside the same run without it, then the difference", async () => {
    const s = scenario("provider-outage");
    const withSelfheal = await runScenario(s);
    const without = await runScenario(s, { policy: NO_RECOVERY });
    const lines = scenarioSummary(withSelfheal, without, { stream: false });
    const row = (label: string) => lines.find((l) => l.startsWith(`  ${label} `))?.trim();
    expect(lines[0]?.trim()).toMatch(/^with selfheal +without selfheal$/);
    expect(row("user-visible failures")).toMatch(/^user-visible failures +0 +170$/);
    expect(row("pages (failed calls, one per kind per 10 min)")).toMatch(/ 0 +5$/);
    expect(row("MTTR (first failed request to answer)")).toMatch(/ 1\.\d s +none recovered$/);
    expect(row("spend (every request)")).toMatch(/ \$1\.\d{4} +\$0\.8150$/);
    // Figures the run without selfheal has nothing of: not 0, none.
    expect(row("false breaker trips")).toMatch(/ 0 +-$/);
    expect(lines.at(-1)).toBe(scenarioVerdict(withSelfheal, without));
    expect(lines.at(-1)).toBe(
      "Without selfheal: 170 user-visible failures and 5 pages. With selfheal: 0 user-visible failures and 0 pages.",
    );
  });
});
