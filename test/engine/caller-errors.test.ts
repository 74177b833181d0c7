// What a failed call rejects with, as docs/api.md lists it: the tool's own error, the same
// object, unless recovery escalates (or runs out of budget), which wraps it as `cause`.
import { describe, expect, it } from "vitest";
import { isHumanEscalationRequiredError, isToolTimeoutError } from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

/** A read-only tool on the default plans that throws a new `fault()` on every attempt. */
function failing(fault: () => unknown) {
  const { sh, clock } = virtualInstance({ recovery: { random: () => 0 } });
  const thrown: unknown[] = [];
  const t = sh.tool("lookup", { readOnly: true }, () => {
    const error = fault();
    thrown.push(error);
    throw error;
  });
  const call = () => clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
  return { call, thrown };
}

describe("what a failed call rejects with", () => {
  it("a pattern with no plan (CONTENT_POLICY): the tool's error, the same object", async () => {
    const { call, thrown } = failing(() => thrownFault("content_policy"));
    const error = await call();
    expect(thrown).toHaveLength(1);
    expect(error).toBe(thrown[0]);
  });

  it.each([
    ["an error without status or code (UNKNOWN)", () => new Error("the index is rebuilding")],
    ["an outage told by wording alone", () => new Error("503 Service Unavailable")],
    ["a string", () => "nope"],
  ])("%s: every step gave up, the last attempt's error itself", async (_what, fault) => {
    const { call, thrown } = failing(fault);
    const error = await call();
    expect(thrown.length).toBeGreaterThan(1); // the quick retry was sent
    expect(error).toBe(thrown.at(-1));
  });

  it("an outage with a status (503): HumanEscalationRequiredError, the last error its cause", async () => {
    const { call, thrown } = failing(() => thrownFault("http_503"));
    const error = await call();
    expect(isHumanEscalationRequiredError(error)).toBe(true);
    if (!isHumanEscalationRequiredError(error)) return;
    expect(error.cause).toBe(thrown.at(-1));
    expect([error.pattern, error.notified, error.notifierConfigured]).toEqual([
      "SERVICE_DOWN",
      false,
      false,
    ]);
  });

  it("a tool that keeps timing out: HumanEscalationRequiredError, its ToolTimeoutError the cause", async () => {
    const { sh, clock } = virtualInstance({ recovery: { random: () => 0 } });
    const t = sh.tool("lookup", { readOnly: true, timeoutMs: 1_000 }, () => new Promise(() => {}));
    const error = await clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
    expect(isHumanEscalationRequiredError(error) && error.pattern).toBe("TIMEOUT");
    expect(isToolTimeoutError((error as Error).cause)).toBe(true);
  });
});
