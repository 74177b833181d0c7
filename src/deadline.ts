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

/** The method a DeadlineQueue calls when a deadline falls due (a symbol: it is no one's API). */
export const EXPIRE = Symbol("expire");

/** What a deadline is for: told once when it falls due, unless cleared first. */
export interface Expiring {
  [EXPIRE](): void;
}

/** A deadline in a DeadlineQueue. */
export interface Deadline {
  readonly at: number;
  readonly target: Expiring;
  prev: Deadline | undefined;
  next: Deadline | undefined;
  /** Undefined once expired or cleared. */
  lane: Lane | undefined;
}

/** Deadlines of one duration, in the order they fall due (a clock only moves forward). */
interface Lane {
  readonly ms: number;
  head: Deadline | undefined;
  tail: Deadline | undefined;
}

/** Empty lanes kept for reuse. */
const MAX_IDLE_LANES = 16;

/**
 * The deadlines of calls in flight on one timer, as Node.js keeps its own timers: a FIFO list per
 * duration, so adding or clearing one is O(1) and allocates one small object. A timer per call
 * (a Timeout object, a timer-list insertion, a clearTimeout) measured about a quarter of a
 * call's cost with no SDK.
 *
 * The timer is armed for the earliest deadline and left alone while calls come and go; once no
 * deadline is left it is cancelled at the end of that event-loop turn (setImmediate), so calls in
 * a row do not arm and cancel a timer each, and the queue never keeps a process alive after its
 * last call.
 */
export class DeadlineQueue {
  private readonly lanes = new Map<number, Lane>();
  private size = 0;
  private armedAt = Number.POSITIVE_INFINITY;
  private cancelTimer: (() => void) | undefined;
  private disarmPending = false;

  constructor(private readonly clock: Clock) {}

  /** Tells `target` at `now + ms` unless the returned deadline is cleared first. */
  add(ms: number, now: number, target: Expiring): Deadline {
    let lane = this.lanes.get(ms);
    if (!lane) this.lanes.set(ms, (lane = { ms, head: undefined, tail: undefined }));
    const deadline: Deadline = { at: now + ms, target, prev: lane.tail, next: undefined, lane };
    if (lane.tail) lane.tail.next = deadline;
    else lane.head = deadline;
    lane.tail = deadline;
    this.size++;
    if (deadline.at < this.armedAt) this.arm(deadline.at, now);
    return deadline;
  }

  /** Forgets a deadline (its call settled); safe to call twice. */
  clear(deadline: Deadline): void {
    if (!this.unlink(deadline) || this.size > 0 || this.disarmPending) return;
    this.disarmPending = true;
    setImmediate(() => {
      this.disarmPending = false;
      if (this.size === 0) this.disarm();
    });
  }

  private unlink(deadline: Deadline): boolean {
    const lane = deadline.lane;
    if (!lane) return false;
    if (deadline.prev) deadline.prev.next = deadline.next;
    else lane.head = deadline.next;
    if (deadline.next) deadline.next.prev = deadline.prev;
    else lane.tail = deadline.prev;
    deadline.lane = deadline.prev = deadline.next = undefined;
    this.size--;
    // Lanes of the usual durations stay; odd ones (a recovery attempt's time left) go.
    if (!lane.head && this.lanes.size > MAX_IDLE_LANES) this.lanes.delete(lane.ms);
    return true;
  }

  /** Expires what is due, then arms the timer for the earliest deadline left. */
  private rearm(now: number): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const lane of this.lanes.values()) {
      let head = lane.head;
      while (head && head.at <= now) {
        this.unlink(head);
        head.target[EXPIRE]();
        head = lane.head;
      }
      if (head && head.at < earliest) earliest = head.at;
    }
    // An expiry may have added a deadline (an abort listener starting a call), arming the timer
    // for it; a lane passed over before that is not in `earliest`.
    if (earliest < this.armedAt) this.arm(earliest, now);
  }

  private arm(at: number, now: number): void {
    this.disarm();
    this.armedAt = at;
    this.cancelTimer = this.clock.setTimer(at - now, () => {
      this.cancelTimer = undefined;
      this.armedAt = Number.POSITIVE_INFINITY;
      this.rearm(this.clock.now());
    });
  }

  private disarm(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
  }
}
