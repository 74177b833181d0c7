import { describe, expect, it } from "vitest";
import {
  bucketOf,
  bucketPoint,
  Buckets,
  bucketsProblem,
  BUCKETS_PER_DOUBLING,
  MAX_BUCKET,
} from "../../src/telemetry/log-buckets.js";

describe("bucketOf and bucketPoint", () => {
  it("bucket 0 holds everything up to 1 ms, and what is not a duration", () => {
    for (const ms of [1, 0.999, 0.5, 0, -5, Number.NaN, -Infinity]) expect(bucketOf(ms)).toBe(0);
    expect(bucketPoint(0)).toBe(0);
    expect(bucketPoint(-3)).toBe(0);
  });

  it("bucket i holds (2^((i-1)/8), 2^(i/8)] ms: each upper edge in, the next value out", () => {
    expect(BUCKETS_PER_DOUBLING).toBe(8);
    expect(bucketOf(1.0001)).toBe(1);
    expect(bucketOf(2)).toBe(8);
    expect(bucketOf(2.0001)).toBe(9);
    expect(bucketOf(1024)).toBe(80);
    expect(bucketOf(1025)).toBe(81);
    expect(bucketOf(3_600_000)).toBe(175); // an hour
    for (let i = 1; i <= 200; i++) {
      const upper = 2 ** (i / 8);
      expect(bucketOf(upper * (1 - 1e-9)), `below ${i}`).toBe(i);
      expect(bucketOf(upper * (1 + 1e-9)), `above ${i}`).toBe(i + 1);
    }
  });

  it("caps at MAX_BUCKET (2^50 ms), however long, Infinity included", () => {
    expect(MAX_BUCKET).toBe(400);
    expect(bucketOf(2 ** 50)).toBe(400);
    expect(bucketOf(2 ** 60)).toBe(400);
    expect(bucketOf(Infinity)).toBe(400);
  });

  it("reads a bucket back as its geometric middle: within 4.5 % of any duration in it", () => {
    expect(bucketPoint(8)).toBeCloseTo(2 ** (7.5 / 8), 12);
    for (const ms of [1.01, 3, 17, 180, 999, 12_345, 3_600_000]) {
      const back = bucketPoint(bucketOf(ms));
      expect(Math.abs(back - ms) / ms, String(ms)).toBeLessThan(0.045);
    }
  });
});

describe("Buckets", () => {
  it("counts durations and totals, encodes lowest index first, reads nothing when empty", () => {
    const b = new Buckets();
    expect(b.total).toBe(0);
    expect(b.quantile(0.5)).toBeNull();
    expect(b.toJSON()).toEqual({});
    b.add(1024);
    b.add(0.2, 3);
    b.add(2);
    b.add(1024);
    expect(b.total).toBe(6);
    expect(JSON.stringify(b)).toBe('{"0":3,"8":1,"80":2}');
  });

  it("adds an encoded line's buckets to its own, counts included", () => {
    const b = new Buckets();
    b.add(2);
    b.addEncoded({ "8": 2, "80": 5 });
    b.addBucket(0, 1);
    expect(b.total).toBe(9);
    expect(b.toJSON()).toEqual({ "0": 1, "8": 3, "80": 5 });
  });

  it("gives the nearest-rank quantile as its bucket's point", () => {
    const b = new Buckets();
    b.add(10, 90); // bucket 27
    b.add(1000, 9); // bucket 80
    b.add(100_000, 1); // bucket 133
    expect(b.quantile(0.5)).toBe(bucketPoint(bucketOf(10)));
    expect(b.quantile(0.9)).toBe(bucketPoint(bucketOf(10))); // rank 90: the 90th is 10 ms
    expect(b.quantile(0.91)).toBe(bucketPoint(bucketOf(1000)));
    expect(b.quantile(0.99)).toBe(bucketPoint(bucketOf(1000)));
    expect(b.quantile(1)).toBe(bucketPoint(bucketOf(100_000)));
    // Out of (0, 1]: the first and the last.
    expect(b.quantile(0)).toBe(bucketPoint(bucketOf(10)));
    expect(b.quantile(2)).toBe(bucketPoint(bucketOf(100_000)));
  });

  it("reads quantiles in index order whatever order the buckets came in", () => {
    const b = new Buckets();
    b.add(5000);
    b.add(5);
    b.add(50);
    expect(b.quantile(1 / 3)).toBe(bucketPoint(bucketOf(5)));
    expect(b.quantile(2 / 3)).toBe(bucketPoint(bucketOf(50)));
    expect(Object.keys(b.toJSON())).toEqual([
      String(bucketOf(5)),
      String(bucketOf(50)),
      String(bucketOf(5000)),
    ]);
  });

  it("counts the durations above a limit by whole buckets: those in the limit's bucket are not", () => {
    const b = new Buckets();
    b.add(100, 4);
    b.add(101); // same bucket as 100 (bucket 54: (97.0, 103.7] ms)
    b.add(200, 2);
    b.add(0.5);
    expect(bucketOf(100)).toBe(bucketOf(101));
    expect(b.above(100)).toBe(2);
    expect(b.above(150)).toBe(2);
    expect(b.above(200)).toBe(0);
    expect(b.above(1)).toBe(7);
    expect(b.above(0)).toBe(7);
    expect(new Buckets().above(10)).toBe(0);
  });
});

describe("bucketsProblem", () => {
  it("accepts what Buckets writes, and an empty set", () => {
    const b = new Buckets();
    b.add(3, 2);
    b.add(2 ** 60);
    expect(bucketsProblem(b.toJSON())).toBeUndefined();
    expect(bucketsProblem({})).toBeUndefined();
    expect(bucketsProblem({ "0": 1, "400": Number.MAX_SAFE_INTEGER })).toBeUndefined();
  });

  it.each([
    [null, "not an object"],
    [[1, 2], "not an object"],
    ["12", "not an object"],
    [7, "not an object"],
    [{ "401": 1 }, 'bucket "401" is not one'],
    [{ "1000": 1 }, 'bucket "1000" is not one'],
    [{ "-1": 1 }, 'bucket "-1" is not one'],
    [{ "1.5": 1 }, 'bucket "1.5" is not one'],
    [{ " 1": 1 }, 'bucket " 1" is not one'],
    [{ "": 1 }, 'bucket "" is not one'],
    [{ p95: 1 }, 'bucket "p95" is not one'],
    [{ "3": 0 }, "bucket 3 has no count"],
    [{ "3": -2 }, "bucket 3 has no count"],
    [{ "3": 1.5 }, "bucket 3 has no count"],
    [{ "3": "4" }, "bucket 3 has no count"],
    [{ "3": null }, "bucket 3 has no count"],
    [{ "3": 2 ** 53 }, "bucket 3 has no count"],
    [{ "2": 1, "3": 0 }, "bucket 3 has no count"],
  ])("%j: %s", (value, problem) => {
    expect(bucketsProblem(value)).toBe(problem);
  });
});
