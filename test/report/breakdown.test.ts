/** The review per agent and per tool: rates, MTTR, spend, in bounded memory. */
import { describe, expect, it } from "vitest";
import { reviewText } from "../../src/report/analyze.js";
import { BreakdownTally, MAX_KEYS, OTHER } from "../../src/report/breakdown.js";
import { event } from "./events.js";

const incident = (
  over: Partial<{ pattern: string; outcome: string; durationMs: number; costUsd: number }> = {},
) => ({
  pattern: "TIMEOUT",
  outcome: "failed",
  durationMs: 0,
  costUsd: 0,
  ...over,
});

describe("BreakdownTally", () => {
  it("per name: incidents, recovery rate, UNKNOWN share, spend; MTTR of the recovered only", () => {
    const tally = new BreakdownTally();
    for (const s of [4, 1, 3, 2])
      tally.add("a", incident({ outcome: "recovered", durationMs: s * 1000, costUsd: 0.25 }));
    tally.add("a", incident({ pattern: "UNKNOWN", durationMs: 60_000, costUsd: 1 }));
    expect(tally.breakdown()).toEqual([
      {
        name: "a",
        incidents: 5,
        recovered: 4,
        autoRecoveryRate: 0.8,
        unknown: 1,
        unknownShare: 0.2,
        costUsd: 2,
        // Nearest rank of 1, 2, 3, 4 s: p50 the 2nd, p90 the 4th; the failed minute is not a recovery.
        mttrP50Seconds: 2,
        mttrP90Seconds: 4,
      },
    ]);
  });

  it("nothing recovered: rate 0, MTTR null", () => {
    const tally = new BreakdownTally();
    tally.add("t", incident({ outcome: "escalated", durationMs: 5_000 }));
    expect(tally.breakdown()[0]).toMatchObject({
      autoRecoveryRate: 0,
      mttrP50Seconds: null,
      mttrP90Seconds: null,
    });
  });

  it("the most incidents first, ties by name", () => {
    const tally = new BreakdownTally();
    for (const name of ["b", "c", "a", "c", "b", "d"]) tally.add(name, incident());
    expect(tally.breakdown().map((b) => `${b.name} ${b.incidents}`)).toEqual([
      "b 2",
      "c 2",
      "a 1",
      "d 1",
    ]);
  });

  it(`${MAX_KEYS} names tallied one by one; the rest summed under ${OTHER}, known names still their own`, () => {
    const tally = new BreakdownTally();
    for (let i = 0; i < MAX_KEYS; i++) tally.add(`tool-${i}`, incident());
    tally.add("late-1", incident({ outcome: "recovered", durationMs: 2_000, costUsd: 0.5 }));
    tally.add("late-2", incident({ pattern: "UNKNOWN", costUsd: 0.5 }));
    tally.add("tool-7", incident()); // already known: its own row
    const rows = tally.breakdown();
    expect(rows).toHaveLength(MAX_KEYS + 1);
    expect(rows.map((r) => r.name)).not.toContain("late-1");
    expect(rows.find((r) => r.name === "tool-7")?.incidents).toBe(2);
    expect(rows.find((r) => r.name === OTHER)).toEqual({
      name: OTHER,
      incidents: 2,
      recovered: 1,
      autoRecoveryRate: 0.5,
      unknown: 1,
      unknownShare: 0.5,
      costUsd: 1,
      mttrP50Seconds: 2,
      mttrP90Seconds: 2,
    });
  });

  it.each(["__proto__", "constructor", "toString", "hasOwnProperty"])(
    "a name like %s is just a name",
    (name) => {
      const tally = new BreakdownTally();
      tally.add(name, incident());
      tally.add(name, incident({ outcome: "recovered", durationMs: 1_000 }));
      expect(tally.breakdown()).toEqual([
        {
          name,
          incidents: 2,
          recovered: 1,
          autoRecoveryRate: 0.5,
          unknown: 0,
          unknownShare: 0,
          costUsd: 0,
          mttrP50Seconds: 1,
          mttrP90Seconds: 1,
        },
      ]);
    },
  );

  it("past 1,000 recoveries of a name, its percentiles come from the sketch, within 0.5 %", () => {
    const tally = new BreakdownTally();
    // 1..2000 s, shuffled.
    for (let i = 0; i < 2_000; i++)
      tally.add(
        "busy",
        incident({ outcome: "recovered", durationMs: (((i * 7919) % 2_000) + 1) * 1000 }),
      );
    const [row] = tally.breakdown();
    expect(Math.abs((row?.mttrP50Seconds ?? 0) - 1_000) / 1_000).toBeLessThan(0.005);
    expect(Math.abs((row?.mttrP90Seconds ?? 0) - 1_800) / 1_800).toBeLessThan(0.005);
    expect(row?.mttrP50Seconds).not.toBe(1_000); // folded: a bucket's point, not the value
  });
});

describe("the review's breakdowns: per agent and per tool from the same events", () => {
  it("an event counts once under its agent and once under its tool", () => {
    const r = reviewText(
      [
        event({ agent: "planner", tool: "search", outcome: "recovered", durationMs: 3_000 }),
        event({ agent: "planner", tool: "fetch" }),
        event({ agent: "writer", tool: "search", pattern: "TIMEOUT" }),
      ].join("\n"),
    );
    expect(
      r.byAgent.map((b) => [b.name, b.incidents, b.recovered, b.unknown, b.mttrP50Seconds]),
    ).toEqual([
      ["planner", 2, 1, 2, 3],
      ["writer", 1, 0, 0, null],
    ]);
    expect(
      r.byTool.map((b) => [b.name, b.incidents, b.recovered, b.unknown, b.mttrP50Seconds]),
    ).toEqual([
      ["search", 2, 1, 1, 3],
      ["fetch", 1, 0, 1, null],
    ]);
  });
});
