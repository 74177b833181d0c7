/**
 * clockText at the edge of HOURS_FROM_MS: a run exactly that long is the first to show hours,
 * one a millisecond shorter still shows minutes past 60.
 */
import { describe, expect, it } from "vitest";
import { clockText, HOURS_FROM_MS } from "../../src/sim/clock-text.js";

describe("clockText: where hours start", () => {
  it("a run of exactly HOURS_FROM_MS shows h:mm:ss; one a millisecond shorter, mm:ss", () => {
    const at = 99 * 60_000 + 59_000;
    expect(clockText(at, HOURS_FROM_MS)).toBe("1:39:59");
    expect(clockText(at, HOURS_FROM_MS - 1)).toBe("99:59");
  });
});
