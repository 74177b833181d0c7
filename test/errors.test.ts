import { describe, expect, it } from "vitest";
import {
  HealthCheckFailedError,
  isHealthCheckFailedError,
  isSelfHealClosedError,
  isSelfHealConfigError,
  isSelfHealError,
  isToolTimeoutError,
  SelfHealClosedError,
  SelfHealConfigError,
  ToolTimeoutError,
} from "../src/index.js";

describe("error classes", () => {
  it("each has a stable code and a guard that accepts only it", () => {
    const errors = [
      [new SelfHealConfigError("agent", "bad"), "SELFHEAL_CONFIG", isSelfHealConfigError],
      [
        new HealthCheckFailedError("t", "critical"),
        "SELFHEAL_HEALTH_CHECK_FAILED",
        isHealthCheckFailedError,
      ],
      [new ToolTimeoutError("t", 5), "SELFHEAL_TOOL_TIMEOUT", isToolTimeoutError],
      [new SelfHealClosedError("x"), "SELFHEAL_CLOSED", isSelfHealClosedError],
    ] as const;
    for (const [error, code] of errors) {
      expect(error.code).toBe(code);
      expect(isSelfHealError(error)).toBe(true);
      for (const [other, , otherGuard] of errors) expect(otherGuard(error)).toBe(other === error);
    }
    expect(isSelfHealError(new Error("x"))).toBe(false);
    expect(isSelfHealError("SELFHEAL_CONFIG")).toBe(false);
  });

  it("guards work across duplicate copies of the package (no instanceof)", () => {
    // What a second copy's error looks like: same marker symbol and code, different class.
    const foreign = Object.assign(new Error("from another copy"), {
      code: "SELFHEAL_TOOL_TIMEOUT",
      [Symbol.for("selfheal:error")]: true,
    });
    expect(isToolTimeoutError(foreign)).toBe(true);
    expect(foreign instanceof ToolTimeoutError).toBe(false);
  });
});
