import type { Clock } from "../clock.js";
import { ToolTimeoutError } from "../errors.js";
import type { AttemptContext } from "./call-context.js";
import type { ToolFunction } from "./options.js";

/**
 * Runs one attempt against a deadline and the caller's signal; whichever of the tool, the
 * deadline and the caller comes first settles the call, and the other two are let go.
 *
 * The AbortController is referenced by its own timer until the call settles: on Node 20 a
 * signal from `AbortSignal.timeout()` or `AbortSignal.any()` can be garbage-collected before it
 * fires, leaving a hung call never aborted.
 * @see https://github.com/nodejs/node/issues/55428
 */
export function runWithDeadline<A, R>(
  fn: ToolFunction<A, R>,
  args: A,
  ctx: AttemptContext,
  controller: AbortController,
  tool: string,
  timeoutMs: number | undefined,
  callerSignal: AbortSignal | undefined,
  clock: Clock,
): Promise<R> {
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
        abort(new ToolTimeoutError(tool, timeoutMs));
      });
    }
    // The executor turns a synchronous throw of the tool into a rejection.
    new Promise<R>((run) => {
      run(fn(args, ctx));
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
