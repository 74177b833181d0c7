import { describe, expect, it } from "vitest";
import { clockText } from "../../src/sim/clock-text.js";

const HOUR = 3_600_000;

describe("clockText: virtual time as the demo shows it", () => {
  it("mm:ss in a run of an hour or so", () => {
    expect(clockText(0, 70 * 60_000)).toBe("00:00");
    expect(clockText(5 * 60_000 + 20_999, 70 * 60_000)).toBe("05:20");
    expect(clockText(70 * 60_000, 70 * 60_000)).toBe("70:00");
  });

  it("h:mm:ss in a long run: 8:44:55, never 524:55", () => {
    const at = 8 * HOUR + 44 * 60_000 + 55_000;
    expect(clockText(at, 12 * HOUR)).toBe("8:44:55");
    expect(clockText(12 * HOUR, 12 * HOUR)).toBe("12:00:00");
    expect(clockText(60_000, 12 * HOUR)).toBe("0:01:00");
  });
});
