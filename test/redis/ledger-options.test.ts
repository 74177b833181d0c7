/**
 * `recovery.ledger.whenFleetDown` and `fleetWaitMs`: validated once, named in errors, "refuse"
 * and 3 s by default.
 */
import { describe, expect, it } from "vitest";
import {
  createSelfHealing,
  FleetUnavailableError,
  isFleetUnavailableError,
  isSelfHealConfigError,
} from "../../src/index.js";
import { resolveRecovery } from "../../src/engine/options/recovery.js";
import { DEFAULT_LEDGER } from "../../src/recovery/idempotency.js";

describe("recovery.ledger.whenFleetDown", () => {
  it('defaults to "refuse", with the other ledger defaults', () => {
    expect(DEFAULT_LEDGER).toEqual({
      ttlMs: 24 * 3_600_000,
      maxEntries: 10_000,
      whenFleetDown: "refuse",
      fleetWaitMs: 3_000,
    });
    expect(resolveRecovery(undefined).ledger).toEqual(DEFAULT_LEDGER);
    expect(resolveRecovery({ ledger: { ttlMs: 5 } }).ledger).toEqual({
      ...DEFAULT_LEDGER,
      ttlMs: 5,
    });
  });

  it.each(["refuse", "local"] as const)("takes %s", (mode) => {
    expect(resolveRecovery({ ledger: { whenFleetDown: mode } }).ledger.whenFleetDown).toBe(mode);
  });

  it.each([
    ["a typo", "locale", /expected "refuse" or "local", got "locale"/],
    ["a boolean", true, /expected "refuse" or "local", got true/],
    ["null", null, /expected "refuse" or "local", got null/],
  ])("rejects %s, naming the field", (_, value, message) => {
    let error: unknown;
    try {
      createSelfHealing({ agent: "a", recovery: { ledger: { whenFleetDown: value as never } } });
    } catch (e) {
      error = e;
    }
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as { field: string }).field).toBe("recovery.ledger.whenFleetDown");
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toContain("`recovery.ledger.whenFleetDown`");
  });

  it("an unknown ledger key lists whenFleetDown among the known ones", () => {
    expect(() => resolveRecovery({ ledger: { whenFleetdown: "local" } })).toThrow(
      /recovery\.ledger\.whenFleetdown.*unknown option \(known: ttlMs, maxEntries, whenFleetDown, fleetWaitMs\)/,
    );
  });

  it("numbers are still checked", () => {
    expect(() => resolveRecovery({ ledger: { ttlMs: 0, whenFleetDown: "local" } })).toThrow(
      /recovery\.ledger\.ttlMs.*must be >= 1/,
    );
  });
});

describe("recovery.ledger.fleetWaitMs", () => {
  it("takes a wait in ms", () => {
    expect(resolveRecovery({ ledger: { fleetWaitMs: 250 } }).ledger.fleetWaitMs).toBe(250);
  });

  it.each([
    ["zero", 0, /must be >= 1/],
    ["a negative wait", -5, /must be >= 1/],
    ["a string", "3s", /number/],
    ["Infinity", Number.POSITIVE_INFINITY, /.+/],
    ["NaN", Number.NaN, /.+/],
  ])("rejects %s, naming the field", (_, value, message) => {
    let error: unknown;
    try {
      createSelfHealing({ agent: "a", recovery: { ledger: { fleetWaitMs: value as never } } });
    } catch (e) {
      error = e;
    }
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as { field: string }).field).toBe("recovery.ledger.fleetWaitMs");
    expect((error as Error).message).toContain("`recovery.ledger.fleetWaitMs`");
    expect((error as Error).message).toMatch(message);
  });
});

describe("FleetUnavailableError", () => {
  it("says how long the call waited when it knows", () => {
    const e = new FleetUnavailableError("charge", false, { waitedMs: 2_999.6 });
    expect(e.waitedMs).toBe(2_999.6);
    expect(e.cause).toBeUndefined();
    expect(e.message).toBe(
      'selfheal: write "charge" not sent: the fleet\'s idempotency ledger could not be asked within 3000 ms; nothing was sent',
    );
  });

  it("has a stable code and a guard that works across package copies", () => {
    const e = new FleetUnavailableError("charge", true, { cause: new Error("ECONNREFUSED") });
    expect(e.code).toBe("SELFHEAL_FLEET_UNAVAILABLE");
    expect(e.name).toBe("FleetUnavailableError");
    expect(e.message).toBe(
      "selfheal: write \"charge\" not sent: the fleet's idempotency ledger could not be asked within the call's deadline (another worker was sending it when last asked); nothing was sent",
    );
    expect(isFleetUnavailableError(e)).toBe(true);
    // A copy from another package instance: the marker and the code, not instanceof.
    const copy = Object.assign(Object.create(null) as object, {
      [Symbol.for("selfheal:error")]: true,
      code: "SELFHEAL_FLEET_UNAVAILABLE",
    });
    expect(isFleetUnavailableError(copy)).toBe(true);
    expect(isFleetUnavailableError(new Error("SELFHEAL_FLEET_UNAVAILABLE"))).toBe(false);
    expect(isFleetUnavailableError({ code: "SELFHEAL_FLEET_UNAVAILABLE" })).toBe(false);
  });
});
