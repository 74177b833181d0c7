import { describe, expect, it } from "vitest";
import type { Heartbeat } from "../../src/watchdog/heartbeat.js";
import { MAX_SKEW_MS } from "../../src/watchdog/reader.js";
import { DEFAULT_LIMITS, evaluate } from "../../src/watchdog/verdict.js";

/** The boundaries of the defaults, each pinned on both sides so a changed comparison fails. */
describe("verdict boundaries", () => {
  const now = Date.UTC(2026, 0, 1, 12);
  const hb = (over: Partial<Heartbeat> = {}): Heartbeat => ({
    v: 1,
    sessionId: "s",
    pid: 1,
    stage: "planning",
    stepIdx: 7,
    at: now,
    stepAt: now,
    startedAt: now - 3_600_000,
    ...over,
  });

  it("the stall limit (90 s): unmoved exactly 90 s is healthy, 1 ms more is stalled", () => {
    expect(DEFAULT_LIMITS.stallMs).toBe(90_000);
    expect(evaluate(hb({ stepAt: now - 90_000 }), undefined, now).verdict).toBe("healthy");
    expect(evaluate(hb({ stepAt: now - 90_001 }), undefined, now).verdict).toBe("stalled");
  });

  it("the start-up grace (60 s): 1 ms inside it no stall verdict; at 60 s exactly, stalled", () => {
    expect(DEFAULT_LIMITS.graceMs).toBe(60_000);
    // A short stall limit, so a step can be unmoved past it while still inside the grace.
    const limits = { ...DEFAULT_LIMITS, stallMs: 10_000 };
    const stuck = { stepAt: now - 20_000 };
    expect(
      evaluate(hb({ ...stuck, startedAt: now - 59_999 }), undefined, now, limits).verdict,
    ).toBe("healthy");
    expect(
      evaluate(hb({ ...stuck, startedAt: now - 60_000 }), undefined, now, limits).verdict,
    ).toBe("stalled");
    expect(
      evaluate(hb({ ...stuck, startedAt: now - 60_001 }), undefined, now, limits).verdict,
    ).toBe("stalled");
  });

  it("a startedAt further ahead than the skew allowance buys no grace: 10 min unmoved is stalled", () => {
    const stuck = { stepAt: now - 600_000 };
    expect(evaluate(hb({ ...stuck, startedAt: now + 600_000 }), undefined, now).verdict).toBe(
      "stalled",
    );
    expect(
      evaluate(hb({ ...stuck, startedAt: now + MAX_SKEW_MS + 1 }), undefined, now).verdict,
    ).toBe("stalled");
    // Within the allowance, the grace holds (two clocks a little apart).
    expect(evaluate(hb({ ...stuck, startedAt: now + MAX_SKEW_MS }), undefined, now).verdict).toBe(
      "healthy",
    );
  });

  it("the dead limit (30 s): silent exactly 30 s is not dead, 1 ms more is", () => {
    expect(evaluate(hb({ at: now - 30_000 }), undefined, now).verdict).not.toBe("session_dead");
    expect(evaluate(hb({ at: now - 30_001 }), undefined, now).verdict).toBe("session_dead");
  });
});
