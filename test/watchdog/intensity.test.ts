import { describe, expect, it } from "vitest";
import { RestartIntensity } from "../../src/watchdog/intensity.js";

describe("restart intensity", () => {
  const options = { maxRestarts: 3, periodMs: 60_000, baseBackoffMs: 1_000, maxBackoffMs: 3_000 };

  it("backs off between restarts and gives up past the limit in the period (a crash loop stops)", () => {
    const limit = new RestartIntensity(options);
    const t0 = 1_000_000;
    expect(limit.next(t0)).toEqual({ restart: true, waitMs: 1_000, inPeriod: 1 });
    expect(limit.next(t0 + 2_000)).toEqual({ restart: true, waitMs: 2_000, inPeriod: 2 });
    expect(limit.next(t0 + 5_000)).toEqual({ restart: true, waitMs: 3_000, inPeriod: 3 });
    const fourth = limit.next(t0 + 9_000);
    expect(fourth.restart).toBe(false);
    expect(!fourth.restart && fourth.reason).toBe(
      "3 restarts in the last 60 s (limit 3): giving up",
    );
  });

  it("forgets restarts older than the period", () => {
    const limit = new RestartIntensity(options);
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i++) limit.next(t0 + i);
    expect(limit.next(t0 + 10).restart).toBe(false);
    // The first restart happened at t0 + 1 s (after its backoff): a period later it is forgotten.
    expect(limit.next(t0 + 1_000 + 60_000)).toMatchObject({ restart: true, inPeriod: 3 });
  });

  it("a restart without backoff (a context reset's) counts as any other, and doubles the next backoff", () => {
    const limit = new RestartIntensity(options);
    const t0 = 1_000_000;
    expect(limit.next(t0, false)).toEqual({ restart: true, waitMs: 0, inPeriod: 1 });
    expect(limit.next(t0 + 1_000)).toEqual({ restart: true, waitMs: 2_000, inPeriod: 2 });
    expect(limit.next(t0 + 5_000, false)).toEqual({ restart: true, waitMs: 0, inPeriod: 3 });
    expect(limit.next(t0 + 6_000).restart).toBe(false);
    // Recorded when it happened: a period after the unbacked-off restart, it is forgotten.
    expect(limit.next(t0 + 60_000)).toMatchObject({ restart: true, inPeriod: 3 });
  });
});
