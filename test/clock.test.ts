import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { abortReason, systemClock, wallClock } from "../src/clock.js";

afterEach(() => {
  // Spies first: a setTimeout spy set over the fake timers restores the fake one, which the real
  // timers must then replace (the other way round, every later sleep of the file never ended).
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/** The Node.js Timeout objects the clock arms from here on (for hasRef: does it keep the process alive). */
function armedTimeouts(): () => NodeJS.Timeout[] {
  const spy = vi.spyOn(globalThis, "setTimeout");
  return () => spy.mock.results.map((r) => (r as { value: unknown }).value as NodeJS.Timeout);
}

/**
 * A fresh systemClock whose high-resolution time is `mono()` (plus the process's time origin) and
 * whose timers are vitest's fake setTimeout: the time the timer fires and the time the clock reads
 * can then be set apart, as Node.js's whole-millisecond timers and the sub-millisecond clock are.
 */
async function steppedClock(mono: () => number) {
  vi.spyOn(performance, "now").mockImplementation(mono);
  vi.resetModules();
  const { systemClock: clock } = await import("../src/clock.js");
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  return { clock, origin: performance.timeOrigin };
}

describe("abortReason", () => {
  it("the signal's reason, or a standard AbortError when it has none", () => {
    const reason = new Error("caller gave up");
    expect(abortReason(AbortSignal.abort(reason))).toBe(reason);
    expect(abortReason(AbortSignal.abort("just a string"))).toBe("just a string");
    const fallback = abortReason({ aborted: true, reason: undefined } as AbortSignal);
    expect(fallback).toBeInstanceOf(DOMException);
    expect(fallback).toMatchObject({ name: "AbortError", message: "This operation was aborted" });
  });
});

describe("wallClock", () => {
  it("reads Date.now and has the system clock's timers", async () => {
    // A fresh copy: the clocks are built when the module loads.
    vi.resetModules();
    const { wallClock: fresh } = await import("../src/clock.js");
    const before = Date.now();
    const now = fresh.now();
    expect(Number.isInteger(now)).toBe(true);
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
    await fresh.sleep(1);
    await new Promise<void>((resolve) => fresh.setTimer(1, resolve));
  });
});

describe("systemClock", () => {
  it("now() reads the process's time origin plus the monotonic clock; wallClock reads Date.now", () => {
    const before = Date.now();
    const wall = wallClock.now();
    expect(wall).toBeGreaterThanOrEqual(before);
    expect(wall).toBeLessThanOrEqual(Date.now());
    expect(Number.isInteger(wall)).toBe(true);
    const now = systemClock.now();
    expect(Math.abs(now - Date.now())).toBeLessThan(60_000);
    expect(now - performance.timeOrigin).toBeLessThanOrEqual(performance.now());
  });

  it("a sleep of n ms ends with now() at least n ms on (a cooldown waited out is over)", async () => {
    const short: number[] = [];
    for (let i = 0; i < 60; i++) {
      const ms = 1 + (i % 4);
      const start = systemClock.now();
      await systemClock.sleep(ms);
      if (systemClock.now() - start < ms) short.push(ms);
    }
    expect(short).toEqual([]);
  });

  it("a timer fires with now() at least n ms on, and a cancelled one never fires", async () => {
    const start = systemClock.now();
    const firedAt = await new Promise<number>((resolve) => {
      systemClock.setTimer(3, () => {
        resolve(systemClock.now());
      });
    });
    expect(firedAt - start).toBeGreaterThanOrEqual(3);
    let fired = false;
    const cancel = systemClock.setTimer(1, () => {
      fired = true;
    });
    cancel();
    await systemClock.sleep(5);
    expect(fired).toBe(false);
  });

  it("an aborted sleep rejects with the signal's reason and leaves no listener", async () => {
    const controller = new AbortController();
    const sleeping = systemClock.sleep(10_000, controller.signal);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    controller.abort(new Error("caller gave up"));
    await expect(sleeping).rejects.toThrow("caller gave up");
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("a sleep on a signal already aborted rejects at once with its reason", async () => {
    const reason = new Error("already gone");
    const armed = armedTimeouts();
    await expect(systemClock.sleep(1, AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(armed()).toHaveLength(0);
  });

  it("a sleep that ends leaves no listener on the signal", async () => {
    const controller = new AbortController();
    await systemClock.sleep(1, controller.signal);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    expect(controller.signal.aborted).toBe(false);
  });

  it("a sleep keeps the process alive; a timer does unless it is unref", async () => {
    const armed = armedTimeouts();
    const sleeping = systemClock.sleep(1);
    const cancels = [
      systemClock.setTimer(1_000, () => undefined),
      systemClock.setTimer(1_000, () => undefined, {}),
      systemClock.setTimer(1_000, () => undefined, { unref: false }),
      systemClock.setTimer(1_000, () => undefined, { unref: true }),
    ];
    expect(armed().map((t) => t.hasRef())).toEqual([true, true, true, true, false]);
    for (const cancel of cancels) cancel();
    await sleeping;
  });

  it("a timer that fires before the clock has moved its time waits out the rest", async () => {
    let mono = 1_000;
    const { clock, origin } = await steppedClock(() => mono);
    const fired: number[] = [];
    clock.setTimer(10, () => fired.push(clock.now() - origin));
    // Node fires by the event loop's whole milliseconds: the clock is still 0.4 ms short.
    mono = 1_009.6;
    vi.advanceTimersByTime(10);
    expect(fired).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    mono = 1_010;
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([1_010]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a timer that fires with the clock exactly at its time runs at once", async () => {
    let mono = 500;
    const { clock } = await steppedClock(() => mono);
    let fired = 0;
    clock.setTimer(20, () => fired++);
    mono = 520;
    vi.advanceTimersByTime(20);
    expect(fired).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a sleep whose timer fires early resolves only once the clock has moved its time", async () => {
    let mono = 0;
    const { clock } = await steppedClock(() => mono);
    let done = false;
    const sleeping = clock.sleep(5).then(() => (done = true));
    mono = 4.5;
    await vi.advanceTimersByTimeAsync(5);
    expect(done).toBe(false);
    mono = 5;
    await vi.advanceTimersByTimeAsync(1);
    await sleeping;
    expect(done).toBe(true);
  });

  it("a delay past 2^31-1 ms is armed in pieces and fires late, never at once", async () => {
    let mono = 0;
    const { clock } = await steppedClock(() => mono);
    const longest = 2 ** 31 - 1;
    const delays = vi.spyOn(globalThis, "setTimeout");
    let fired = 0;
    const cancel = clock.setTimer(longest + 5_000, () => fired++);
    mono = 1;
    vi.advanceTimersByTime(1);
    expect(fired).toBe(0);
    mono = longest;
    vi.advanceTimersByTime(longest - 1);
    expect(fired).toBe(0);
    expect(vi.getTimerCount()).toBe(1);
    mono = longest + 4_999;
    vi.advanceTimersByTime(4_999);
    expect(fired).toBe(0);
    mono = longest + 5_000;
    vi.advanceTimersByTime(1);
    expect(fired).toBe(1);
    // Armed twice: the longest timer Node runs, then the rest (no 1 ms timer over and over).
    expect(delays.mock.calls.map((call) => call[1])).toEqual([longest, 5_000]);
    cancel();
  });

  it("cancelling a re-armed timer stops it", async () => {
    let mono = 0;
    const { clock } = await steppedClock(() => mono);
    let fired = 0;
    const cancel = clock.setTimer(10, () => fired++);
    mono = 9.5;
    vi.advanceTimersByTime(10);
    cancel();
    mono = 20;
    vi.advanceTimersByTime(100);
    expect(fired).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a re-armed timer keeps the process alive or not as the first did", async () => {
    let mono = 0;
    const { clock } = await steppedClock(() => mono);
    const armed = armedTimeouts();
    const cancels = [
      clock.setTimer(10, () => undefined, { unref: true }),
      clock.setTimer(10, () => undefined),
    ];
    mono = 9.5;
    vi.advanceTimersByTime(10);
    expect(vi.getTimerCount()).toBe(2);
    expect(armed().map((t) => t.hasRef())).toEqual([false, true, false, true]);
    for (const cancel of cancels) cancel();
  });
});
