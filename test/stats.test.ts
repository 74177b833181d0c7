import { describe, expect, it } from "vitest";
import { quantile } from "../src/stats.js";

describe("quantile (nearest rank)", () => {
  const ten = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

  it("null when there is nothing to rank", () => {
    expect(quantile([], 0)).toBeNull();
    expect(quantile([], 0.5)).toBeNull();
    expect(quantile([], 1)).toBeNull();
  });

  it.each([
    [0, 10],
    [0.05, 10],
    [0.1, 20],
    [0.25, 30],
    [0.5, 60],
    [0.59, 60],
    [0.9, 100],
    [0.95, 100],
    [0.99, 100],
    [1, 100],
  ])("q = %s of 10 values is %s", (q, expected) => {
    expect(quantile(ten, q)).toBe(expected);
  });

  it("one value is every quantile", () => {
    for (const q of [0, 0.5, 0.99, 1]) expect(quantile([7], q)).toBe(7);
  });

  it("two values: the upper from the median on", () => {
    expect(quantile([1, 3], 0)).toBe(1);
    expect(quantile([1, 3], 0.49)).toBe(1);
    expect(quantile([1, 3], 0.5)).toBe(3);
    expect(quantile([1, 3], 1)).toBe(3);
  });

  it("a zero is a value, not a missing one", () => {
    expect(quantile([0, 0, 5], 0.5)).toBe(0);
    expect(quantile([0, 0, 5], 0.9)).toBe(5);
  });
});
