import { describe, expect, it } from "vitest";
import * as conventions from "../src/telemetry/conventions.js";
import { README, readmeTable } from "./helpers/readme.js";

/** The values of the conventions' constants whose names start with `prefix`. */
const constants = (prefix: string): string[] =>
  Object.entries(conventions)
    .filter(([name, value]) => name.startsWith(prefix) && typeof value === "string")
    .map(([, value]) => value as string);

/** The first column of a README table, without its backticks. */
const names = (firstColumn: string): string[] =>
  readmeTable(firstColumn).map(([cell]) => (cell ?? "").replace(/`/g, ""));

describe("the README's telemetry tables match src/telemetry/conventions.ts", () => {
  it("spans: every SPAN_* constant is a row of the span table, and every row is one", () => {
    const spans = constants("SPAN_");
    expect(spans.length).toBeGreaterThan(0);
    expect(names("span").sort()).toEqual([...spans].sort());
  });

  it("metrics: every METRIC_* constant is a row of the metric table, and every row is one", () => {
    expect(names("metric").sort()).toEqual([...constants("METRIC_")].sort());
  });

  it("span names are written in full in the status table (no `.error` shorthand)", () => {
    for (const span of constants("SPAN_")) expect(README).toContain(`\`${span}\``);
    expect(README).not.toMatch(/\/ `\.error` \//);
  });
});
