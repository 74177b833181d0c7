import { performance } from "node:perf_hooks";
/**
 * Injected time. Everything that reads the time or waits goes through a Clock, so tests and the
 * simulator can run an hour of outage in milliseconds with a virtual clock
 * (`VirtualClock` in `selfheal/testing`).
 */
export interface Clock {
  /** Milliseconds since the Unix epoch; may carry a fraction. selfheal's spans are dated by it. */
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason if it is aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls `callback` once after `ms`; returns a function that cancels it. An `unref` timer does
   * not keep the process alive (background work such as warm-up probes).
   */
  setTimer(ms: number, callback: () => void, options?: { unref?: boolean }): () => void;
}

/** The reason a signal was aborted with, or a standard AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** Read once: the getter is slow enough to show on the per-call path. */
const timeOrigin = performance.timeOrigin;
/** The module's own binding: the `performance` global is a lazy getter, paid on every read. */
const monotonic = performance.now.bind(performance);

/**
 * Node.js runs a timer of at most 2^31-1 ms; a longer one fires after 1 ms instead. Options are
 * refused past it, and delays derived from them (a doubled timeout, a default deadline of 3 x
 * the timeout) are armed in pieces of at most it, so they fire late rather than at once.
 */
const LONGEST_TIMER_MS = 2 ** 31 - 1;
const timerMs = (ms: number): number => Math.min(ms, LONGEST_TIMER_MS);

const hiResNow = (): number => timeOrigin + monotonic();

/**
 * Runs `callback` once `hiResNow()` has moved `ms` on. Node fires a timer by the event loop's
 * whole-millisecond time, up to 1 ms before a sub-millisecond clock has moved `ms`; a caller that
 * waited out a cooldown must find it over, so an early timer waits out the rest. Returns a cancel.
 */
function after(ms: number, callback: () => void, unref: boolean): () => void {
  const due = hiResNow() + ms;
  let timer: ReturnType<typeof setTimeout>;
  const arm = (delay: number): void => {
    timer = setTimeout(() => {
      const left = due - hiResNow();
      if (left > 0) arm(Math.ceil(left));
      else callback();
    }, timerMs(delay));
    if (unref) timer.unref();
  };
  arm(ms);
  return () => {
    clearTimeout(timer);
  };
}

/** Wall-clock time with sub-millisecond resolution, and real timers. */
export const systemClock: Clock = {
  now: hiResNow,
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => {
        cancel();
        reject(abortReason(signal as AbortSignal));
      };
      const cancel = after(
        ms,
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        false,
      );
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  setTimer(ms, callback, options) {
    return after(ms, callback, options?.unref === true);
  },
};

/**
 * The system clock read from the wall clock each time: for timestamps another process compares
 * with its own (the watchdog's files). `systemClock` counts from the process's start on the
 * monotonic clock, which a clock step or a suspended machine leaves behind the wall clock.
 */
export const wallClock: Clock = { ...systemClock, now: () => Date.now() };
