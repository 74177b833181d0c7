/** DurationSketch.histogram: counts per bin [edges[i], edges[i+1]), exact and folded. */
import { describe, expect, it } from "vitest";
import { MTTR_BINS_SECONDS } from "../../src/report/analyze.js";
import { DurationSketch } from "../../src/report/sketch.js";

const EDGES = [0, 1, 2, 5, 10];

const sketchOf = (values: number[], exactLimit?: number) => {
  const s = new DurationSketch(exactLimit);
  for (const v of values) s.add(v);
  return s;
};

describe("DurationSketch.histogram, values kept exactly", () => {
  it.each([
    ["a bin's lower edge is in it", [0, 1, 2, 5, 10], [1, 1, 1, 1, 1]],
    ["its upper edge is in the next", [0.999, 1.999, 4.999, 9.999], [1, 1, 1, 1, 0]],
    ["the last bin is open", [10, 1e6, Number.MAX_VALUE], [0, 0, 0, 0, 3]],
    ["below the first edge: the first bin", [-3, -0.5], [2, 0, 0, 0, 0]],
    ["repeats count each time", [3, 3, 3, 0.5], [1, 0, 3, 0, 0]],
  ])("%s", (_, values, counts) => {
    expect(sketchOf(values).histogram(EDGES)).toEqual(counts);
  });

  it("empty: a zero per bin", () => {
    expect(new DurationSketch().histogram(MTTR_BINS_SECONDS)).toEqual(
      MTTR_BINS_SECONDS.map(() => 0),
    );
  });

  it("one edge: everything in its one bin", () => {
    expect(sketchOf([-1, 0, 7]).histogram([5])).toEqual([3]);
  });

  it("the counts sum to the values added", () => {
    const values = Array.from({ length: 1_000 }, (_, i) => (i * 37) % 700);
    const counts = sketchOf(values).histogram(MTTR_BINS_SECONDS);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1_000);
  });
});

describe("DurationSketch.histogram, values folded into buckets", () => {
  // A limit of 2: the third value folds them all.
  it("zeros and negatives count at 0: the first bin", () => {
    expect(sketchOf([0, -4, 0, 3], 2).histogram(EDGES)).toEqual([3, 0, 1, 0, 0]);
  });

  it("a value counts at its bucket's point, within 0.5 %: away from an edge, its own bin", () => {
    expect(sketchOf([0.5, 1.5, 3, 7, 100, 100], 2).histogram(EDGES)).toEqual([1, 1, 1, 1, 2]);
  });

  it("a value on an edge may read just below it (its bucket's point): the bin before", () => {
    // 2 folds into the bucket (1.01^69, 1.01^70] whose point is 1.9968...: bin [1, 2).
    const point = (2 * 1.01 ** Math.ceil(Math.log(2) / Math.log(1.01))) / 2.01;
    expect(point).toBeLessThan(2);
    expect(sketchOf([2, 2, 2], 2).histogram(EDGES)).toEqual([0, 3, 0, 0, 0]);
  });

  it("folded or not, the same values give the same counts away from the edges", () => {
    const values = Array.from({ length: 500 }, (_, i) => 0.25 + ((i * 7) % 40) * 0.5);
    const edges = [0, 3.1, 7.1, 15.1];
    expect(sketchOf(values, 10).histogram(edges)).toEqual(sketchOf(values).histogram(edges));
  });

  it("a value added after the fold goes to its bucket", () => {
    const s = sketchOf([1.5, 1.5, 1.5], 2);
    s.add(50);
    s.add(0);
    expect(s.histogram(EDGES)).toEqual([1, 3, 0, 0, 1]);
    expect(s.count).toBe(5);
  });
});

describe("DurationSketch: the exact limit is the constructor's", () => {
  it("percentiles exact up to the limit given, folded past it", () => {
    const s = sketchOf([3, 1, 2], 3);
    expect(s.quantile(0.5)).toBe(2);
    s.add(4);
    expect(s.quantile(0.5)).not.toBe(2);
    expect(Math.abs((s.quantile(0.5) ?? 0) - 2) / 2).toBeLessThan(0.005);
  });
});

describe("DurationSketch: folded values far out of the usual range", () => {
  // The usual range (about 1 µs to 11 days) is an array; a value outside it, a map entry.
  const rel = (a: number | null, b: number) => Math.abs((a ?? NaN) - b) / b;

  it("keeps their order with the rest: each percentile within 0.5 %", () => {
    const s = sketchOf([1e8, 0.5, 1e-9, 2e-9, 3e9], 2);
    expect(rel(s.quantile(0.2), 1e-9)).toBeLessThan(0.005);
    expect(rel(s.quantile(0.4), 2e-9)).toBeLessThan(0.005);
    expect(rel(s.quantile(0.6), 0.5)).toBeLessThan(0.005);
    expect(rel(s.quantile(0.8), 1e8)).toBeLessThan(0.005);
    expect(rel(s.quantile(1), 3e9)).toBeLessThan(0.005);
  });

  it("counts them in their bins", () => {
    expect(sketchOf([1e-9, 1e8, 1e8, 3], 2).histogram(EDGES)).toEqual([1, 0, 1, 0, 2]);
  });

  it("the array's two ends and the buckets just past them", () => {
    // Half steps: each value well inside its bucket (γ^i with i = -1400 and 1399 are the ends).
    const g = (e: number) => 1.01 ** e;
    const values = [g(1399.5), g(-1400.5), g(1398.5), g(-1401.5)];
    const s = sketchOf(values, 2);
    const sorted = [...values].sort((a, b) => a - b);
    for (const [k, v] of sorted.entries())
      expect(rel(s.quantile((k + 1) / 4), v)).toBeLessThan(0.01);
    expect(s.histogram([0])).toEqual([4]);
  });
});
