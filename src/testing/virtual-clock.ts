import { abortReason, type Clock } from "../clock.js";

interface Timer {
  at: number;
  seq: number;
  callback: () => void;
}

/**
 * A clock whose time moves only when told to. `advance(ms)` fires due timers in time order and
 * lets promise chains settle between them, so an hour of retries and backoff runs in milliseconds.
 */
export class VirtualClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: Timer[] = [];

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, callback: () => void): () => void {
    const timer: Timer = { at: this.current + (ms > 0 ? ms : 0), seq: this.seq++, callback };
    this.timers.push(timer);
    return () => {
      const i = this.timers.indexOf(timer);
      if (i >= 0) this.timers.splice(i, 1);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => {
        cancel();
        reject(abortReason(signal as AbortSignal));
      };
      const cancel = this.setTimer(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Number of timers waiting to fire. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await settle();
    for (;;) {
      const next = this.nextDue(target);
      if (!next) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.current = Math.max(this.current, next.at);
      next.callback();
      await settle();
    }
    this.current = target;
    await settle();
  }

  /** Advances time in steps of `stepMs` until `promise` settles or `maxMs` have passed. */
  async run<T>(promise: Promise<T>, { stepMs = 1_000, maxMs = 24 * 3_600_000 } = {}): Promise<T> {
    const state = { done: false };
    const tracked = promise.finally(() => {
      state.done = true;
    });
    // Observe rejections now; the caller gets them from the returned promise.
    tracked.catch(() => undefined);
    for (let spent = 0; !state.done && spent < maxMs; spent += stepMs) await this.advance(stepMs);
    return tracked;
  }

  private nextDue(target: number): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers) {
      if (t.at > target) continue;
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Lets every queued promise callback run (one macrotask turn). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
