/**
 * The option checks every group shares (src/engine/options/validate.ts): numbers against their
 * rule, and the typo a misspelt key most likely is, which unknown-key errors name.
 */
import { describe, expect, it } from "vitest";
import { number, typoOf } from "../../src/engine/options/validate.js";
import { configError } from "../helpers/engine.js";

/** The message of the SelfHealConfigError `fn` throws. */
const refused = (fn: () => unknown): string => configError(fn).message;

describe("number", () => {
  it("takes a finite number within its bounds, bounds included", () => {
    expect(() => {
      number(5, "x", { min: 5, max: 5, integer: true });
    }).not.toThrow();
    expect(() => {
      number(-1e300, "x");
    }).not.toThrow();
    expect(() => {
      number(null, "x", { nullable: true });
    }).not.toThrow();
  });

  it.each([
    ["a string", "5", {}, "expected a finite number, got 5"],
    ["NaN", Number.NaN, {}, "expected a finite number, got NaN"],
    ["Infinity", Infinity, { nullable: true }, "expected a finite number or null, got Infinity"],
    ["null when not nullable", null, {}, "expected a finite number, got null"],
    ["a fraction where an integer is due", 1.5, { integer: true }, "expected an integer, got 1.5"],
    ["under the minimum", 4.99, { min: 5 }, "must be >= 5, got 4.99"],
    ["over the maximum", 10.01, { max: 10 }, "must be <= 10, got 10.01"],
    [
      "over the longest timer",
      2 ** 31,
      { max: 2 ** 31 - 1 },
      "must be <= 2147483647 (the longest timer Node.js runs, about 24.8 days), got 2147483648",
    ],
  ])("refuses %s", (_name, value, rule, message) => {
    expect(
      refused(() => {
        number(value, "group.field", rule);
      }),
    ).toContain(message);
    expect(
      refused(() => {
        number(value, "group.field", rule);
      }),
    ).toContain("group.field");
  });
});

describe("typoOf", () => {
  const keys = ["timeoutMs", "retries", "agent", "store", "deadlineMs"];

  it("names the key one edit away, regardless of case", () => {
    expect(typoOf("timeoutMS", keys)).toBe("timeoutMs");
    expect(typoOf("retrys", keys)).toBeUndefined(); // two edits (y to i, an e): 6 letters allow one
    expect(typoOf("agnet", keys)).toBe("agent"); // a swap of neighbours is one edit
    expect(typoOf("stroe", keys)).toBe("store");
    expect(typoOf("agents", keys)).toBe("agent"); // one insert
    expect(typoOf("agen", ["agent"])).toBeUndefined(); // 4 letters: too short to tell
  });

  it("allows two edits from 8 letters on, one from 5, none under 5", () => {
    expect(typoOf("timoutMz", keys)).toBe("timeoutMs"); // 8 letters, two edits
    expect(typoOf("deadlinMz", keys)).toBe("deadlineMs");
    expect(typoOf("retrXYs", keys)).toBeUndefined(); // 7 letters, two edits
    expect(typoOf("stXre", keys)).toBe("store"); // 5 letters, one edit
    expect(typoOf("sXXre", keys)).toBeUndefined();
    expect(typoOf("stor", ["store"])).toBeUndefined(); // 4 letters
  });

  it("prefers the closest candidate, the first of equals", () => {
    expect(typoOf("abcdefgh", ["abcdefXY", "abcdefgX"])).toBe("abcdefgX");
    expect(typoOf("abcdefgh", ["abcdefgX", "abcdefgY"])).toBe("abcdefgX");
  });

  it("names nothing for an exact key, nor for names far apart in length or very long", () => {
    expect(typoOf("agent", keys)).toBeUndefined();
    expect(typoOf("Agent", ["agent", "Agent"])).toBeUndefined(); // exact, second in the list
    expect(typoOf("timeout", ["timeoutMsXX"])).toBeUndefined(); // 4 letters longer
    expect(typoOf("timeout", ["timeoutMsX"])).toBeUndefined(); // 3 longer: far apart
    expect(typoOf("timeouts", ["timeoutMsX"])).toBe("timeoutMsX"); // 2 longer: two inserts
    const long = "x".repeat(65);
    expect(typoOf(long, [`${"x".repeat(64)}y`])).toBeUndefined();
    expect(typoOf("x".repeat(63), ["x".repeat(64)])).toBe("x".repeat(64));
  });

  it("counts letters added or dropped at the start as edits too", () => {
    expect(typoOf("XXstore", ["store"])).toBeUndefined(); // two dropped, 7 letters allow one
    expect(typoOf("store", ["XXstore"])).toBeUndefined(); // two added, 5 letters allow one
    expect(typoOf("Xstore", ["store"])).toBe("store");
    expect(typoOf("store", ["Xstore"])).toBe("Xstore");
    expect(typoOf("abcdefgh", ["XYZabcdefgh"])).toBeUndefined(); // three added: far apart
    expect(typoOf("XYabcdefgh", ["abcdefgh"])).toBe("abcdefgh"); // two dropped, 10 letters
  });

  it("compares names up to 64 letters, either side", () => {
    const x = (n: number) => "x".repeat(n);
    expect(typoOf(x(64), [`${x(63)}y`])).toBe(`${x(63)}y`);
    expect(typoOf(`${x(63)}y`, [x(64)])).toBe(x(64));
    expect(typoOf(x(63), [x(65)])).toBeUndefined(); // the candidate is too long to compare
    expect(typoOf(x(65), [x(63)])).toBeUndefined();
  });

  it("a swap counts once only between neighbours", () => {
    expect(typoOf("acbde", ["abcde"])).toBe("abcde");
    expect(typoOf("adcbe", ["abcde"])).toBeUndefined(); // b and d are not neighbours: two edits
    expect(typoOf("ab", ["ba"])).toBeUndefined(); // too short to tell
    expect(typoOf("eabcd", ["abcde"])).toBeUndefined(); // a rotation is two edits
  });

  it("counts swaps, inserts, deletes and replaces anywhere in the word", () => {
    expect(typoOf("bacde", ["abcde"])).toBe("abcde"); // swap at the start
    expect(typoOf("abced", ["abcde"])).toBe("abcde"); // swap at the end
    expect(typoOf("abcdef", ["bcdef"])).toBe("bcdef"); // delete at the start
    expect(typoOf("Xbcde", ["abcde"])).toBe("abcde"); // replace at the start
    expect(typoOf("abcdX", ["abcde"])).toBe("abcde"); // replace at the end
    expect(typoOf("badce", ["abcde"])).toBeUndefined(); // two swaps: two edits, 5 letters
    expect(typoOf("bacdefgh", ["abcdefhg"])).toBe("abcdefhg"); // two swaps, 8 letters
  });
});
