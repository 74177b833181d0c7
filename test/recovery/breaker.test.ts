import { describe, expect, it } from "vitest";
import { CircuitBreaker, DEFAULT_BREAKER, type BreakerState } from "../../src/recovery/breaker.js";

const S = 1_000;

function breaker(options: Partial<typeof DEFAULT_BREAKER> = {}) {
  const changes: BreakerState[] = [];
  const b = new CircuitBreaker("dep", { ...DEFAULT_BREAKER, ...options }, (_, state) => {
    changes.push(state);
  });
  return { b, changes };
}

/** Ms the breaker stays open from `now` (its retryAfterMs right after opening). */
const openFor = (b: CircuitBreaker, now: number) => b.retryAfterMs(now);

describe("adaptive circuit breaker", () => {
  it("opens for 5 s first; each failed probe doubles the period up to the 5 min cap", () => {
    const { b } = breaker();
    let now = 0;
    b.open(now);
    const periods = [openFor(b, now)];
    for (let i = 0; i < 9; i++) {
      now += periods.at(-1) ?? 0;
      expect(b.admit(now)).toBe("probe");
      b.record(now, false, true);
      periods.push(openFor(b, now));
    }
    expect(periods).toEqual([5, 10, 20, 40, 80, 160, 300, 300, 300, 300].map((s) => s * S));
  });

  it("a successful probe closes it; tripping again soon keeps growing, after a quiet window it starts over", () => {
    const { b, changes } = breaker();
    b.open(0);
    expect(b.admit(5 * S)).toBe("probe");
    b.record(5 * S, true, true); // closed after 5 s
    expect(b.state(5 * S)).toBe("closed");
    b.open(60 * S); // trips again a minute later: the dependency is still unwell
    expect(openFor(b, 60 * S)).toBe(10 * S);
    expect(b.admit(70 * S)).toBe("probe");
    b.record(70 * S, true, true);
    b.open(70 * S + 5 * 60 * S); // a whole window closed: a new incident
    expect(openFor(b, 70 * S + 5 * 60 * S)).toBe(5 * S);
    expect(changes).toEqual(["open", "half_open", "closed", "open", "half_open", "closed", "open"]);
  });

  it("re-opening an open breaker changes nothing; a Retry-After longer than the period wins, capped", () => {
    const { b, changes } = breaker();
    b.open(0, 30 * S);
    expect(openFor(b, 0)).toBe(30 * S);
    b.open(1 * S, 120 * S);
    expect(openFor(b, 1 * S)).toBe(29 * S);
    expect(changes).toEqual(["open"]);
    const capped = breaker().b;
    capped.open(0, 3_600 * S);
    expect(openFor(capped, 0)).toBe(300 * S);
  });

  it("one probe at a time: a second caller is refused while the lease runs", () => {
    const { b } = breaker();
    b.open(0);
    expect(b.admit(5 * S)).toBe("probe");
    expect(b.admit(5 * S + 1)).toBe("rejected");
    expect(b.admit(5 * S + DEFAULT_BREAKER.probeTimeoutMs)).toBe("rejected"); // lease margin
    expect(b.retryAfterMs(5 * S + 1)).toBeGreaterThan(DEFAULT_BREAKER.probeTimeoutMs);
  });

  it("a cooldown refuses calls for its length with no probe after it, and never opens the breaker", () => {
    const { b, changes } = breaker();
    b.coolDown(0, 3 * S);
    expect(b.admit(1 * S)).toBe("rejected");
    expect(b.retryAfterMs(1 * S)).toBe(2 * S);
    expect(b.admit(3 * S)).toBe("closed");
    expect(b.state(3 * S)).toBe("closed");
    b.coolDown(3 * S, 3_600 * S);
    expect(b.retryAfterMs(3 * S)).toBe(300 * S); // capped like an open period
    expect(changes).toEqual([]);
  });

  it("trips on its own only once allowed (a tool with another route uses the dependency)", () => {
    const single = breaker().b;
    for (let i = 0; i < 10; i++) single.record(i * S, false, false);
    expect(single.state(10 * S)).toBe("closed");
    expect(single.recentFailures(10 * S)).toBe(10);
    const shared = breaker().b;
    shared.allowTrip();
    for (let i = 0; i < 5; i++) shared.record(i * S, false, false);
    expect(shared.state(5 * S)).toBe("open");
  });
});
