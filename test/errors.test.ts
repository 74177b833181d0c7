import { describe, expect, it } from "vitest";
import {
  HealthCheckFailedError,
  HumanEscalationRequiredError,
  isHumanEscalationRequiredError,
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

describe("HumanEscalationRequiredError says whether anyone was told", () => {
  const cause = new Error("HTTP 503");
  it.each([
    [true, true, /could not be recovered; escalated to a human$/],
    [
      false,
      true,
      /it needs a human, but no alert went out for it \(one of its kind was sent within recovery\.throttleMs, or the notifiers failed: see the log\)$/,
    ],
    [
      false,
      false,
      /it needs a human, but no notifier is configured, so nobody was alerted \(set recovery\.notifiers: slackNotifier, webhookNotifier or pushoverNotifier from selfheal\/notify\)$/,
    ],
  ])("notified %s, a notifier configured %s", (notified, notifierConfigured, message) => {
    const error = new HumanEscalationRequiredError("lookup", "SERVICE_DOWN", notified, {
      cause,
      notifierConfigured,
    });
    expect(error.message).toMatch(message);
    expect(error.message).not.toMatch(notified ? /nobody|no alert/ : /escalated to a human/);
    expect(error).toMatchObject({ notified, notifierConfigured, cause });
    expect(isHumanEscalationRequiredError(error)).toBe(true);
  });

  it("a notifier is taken as configured unless the error says otherwise (errors made before the field)", () => {
    const error = new HumanEscalationRequiredError("t", "AUTH", true, { cause });
    expect(error.notifierConfigured).toBe(true);
  });
});
