import type { Clock } from "./clock.js";

export interface DeadlineOptions {
  /** Aborted with the reason when the deadline or the caller comes first. */
  controller: AbortController;
  /** No deadline when undefined. */
  timeoutMs: number | undefined;
  /** The error the call rejects with at the deadline. */
  timeoutError: () => unknown;
  /** The caller's signal: aborting it aborts the call with its reason. */
  callerSignal?: AbortSignal | undefined;
  clock: Clock;
}

/**
 * Runs `work` against a deadline and the caller's signal; whichever of the work, the deadline
 * and the caller comes first settles the call, and the other two are let go.
 *
 * The AbortController is referenced by its own timer until the call settles: on Node 20 a
 * signal from `AbortSignal.timeout()` or `AbortSignal.any()` can be garbage-collected before it
 * fires, leaving a hung call never aborted.
 * @see https://github.com/nodejs/node/issues/55428
 */
export function withDeadline<R>(work: () => R | Promise<R>, options: DeadlineOptions): Promise<R> {
  const { controller, timeoutMs, callerSignal, clock } = options;
  return new Promise<R>((resolve, reject) => {
    let settled = false;
    let cancelTimer: (() => void) | undefined;
    /** True the first time only: later outcomes are dropped. */
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      cancelTimer?.();
      callerSignal?.removeEventListener("abort", onCallerAbort);
      return true;
    };
    const abort = (reason: unknown) => {
      if (!settle()) return;
      controller.abort(reason);
      reject(reason);
    };
    const onCallerAbort = () => {
      abort(callerSignal?.reason);
    };
    if (callerSignal?.aborted) {
      abort(callerSignal.reason);
      return;
    }
    callerSignal?.addEventListener("abort", onCallerAbort, { once: true });
    if (timeoutMs !== undefined) {
      cancelTimer = clock.setTimer(timeoutMs, () => {
        abort(options.timeoutError());
      });
    }
    // The executor turns a synchronous throw into a rejection.
    new Promise<R>((run) => {
      run(work());
    }).then(
      (value) => {
        if (settle()) resolve(value);
      },
      (error: unknown) => {
        if (settle()) reject(error);
      },
    );
  });
}
