/**
 * Each way a rollup or settings line can be malformed, named as the review names it: call
 * rollups, watchdog step rollups and limits, health settings. The good line beside each shows the
 * check lets the real thing through.
 */
import { describe, expect, it } from "vitest";
import { valueProblem } from "../../src/report/analyze.js";

const AT = Date.UTC(2026, 10, 23);
const calls = {
  type: "calls",
  at: AT,
  agent: "a",
  tool: "t",
  ok: 3,
  failed: 0,
  llm: 1,
  empty: 0,
  latencyMs: { "60": 3 },
};
const steps = {
  type: "watchdog",
  kind: "steps",
  at: AT,
  agent: "a",
  session: "s",
  stage: "plan",
  steps: 2,
  durationsMs: { "100": 2 },
};
const limits = { type: "watchdog", kind: "limits", at: AT, agent: "a", session: "s", stallMs: 0 };
const thresholds = { type: "thresholds", at: AT, agent: "a", thresholds: {}, tools: {} };

describe("malformed rollup and settings lines, each named", () => {
  it.each([
    ["a call rollup", calls, undefined],
    ["a count that is a string", { ...calls, ok: "3" }, "calls line: ok is not a count"],
    ["a negative count", { ...calls, failed: -1 }, "calls line: failed is not a count"],
    ["a fractional count", { ...calls, llm: 1.5 }, "calls line: llm is not a count"],
    ["an unsafe count", { ...calls, empty: 2 ** 53 }, "calls line: empty is not a count"],
    ["a tool that is a number", { ...calls, tool: 7 }, "calls line: tool is not a string"],
    [
      "buckets that are a list",
      { ...calls, latencyMs: [3] },
      "calls line: latencyMs: not an object",
    ],
    [
      "a bucket of zero calls",
      { ...calls, latencyMs: { "60": 0 } },
      "calls line: latencyMs: bucket 60 has no count",
    ],
    ["a step rollup", steps, undefined],
    ["a stage that is a number", { ...steps, stage: 1 }, "watchdog event: stage is not a string"],
    ["steps that are a string", { ...steps, steps: "2" }, "watchdog event: steps is not a count"],
    [
      "durations that are null",
      { ...steps, durationsMs: null },
      "watchdog event: durationsMs: not an object",
    ],
    [
      "a bucket past the last",
      { ...steps, durationsMs: { "401": 1 } },
      'watchdog event: durationsMs: bucket "401" is not one',
    ],
    ["limits of zero", limits, undefined],
    ["limits by stage", { ...limits, stageStallMs: { plan: 5 } }, undefined],
    [
      "a stall limit that is a string",
      { ...limits, stallMs: "90" },
      "watchdog event: stallMs is not a duration",
    ],
    [
      "a negative stall limit",
      { ...limits, stallMs: -1 },
      "watchdog event: stallMs is not a duration",
    ],
    [
      "a stall limit that is not a number",
      { ...limits, stallMs: null },
      "watchdog event: stallMs is not a duration",
    ],
    [
      "stage limits that are a list",
      { ...limits, stageStallMs: [5] },
      "watchdog event: stageStallMs is not an object",
    ],
    ["settings", thresholds, undefined],
    ["settings without tools", { ...thresholds, tools: undefined }, undefined],
    ["settings of no agent", { ...thresholds, agent: 1 }, "thresholds line: agent is not a string"],
    [
      "thresholds that are a list",
      { ...thresholds, thresholds: [] },
      "thresholds line: thresholds is not an object",
    ],
    [
      "thresholds that are null",
      { ...thresholds, thresholds: null },
      "thresholds line: thresholds is not an object",
    ],
    [
      "tools that are a string",
      { ...thresholds, tools: "t" },
      "thresholds line: tools is not an object",
    ],
  ])("%s", (_, line, problem) => {
    // Through JSON, as the reader gets it (an undefined field is left out).
    expect(valueProblem(JSON.parse(JSON.stringify(line)))).toBe(problem);
  });
});
