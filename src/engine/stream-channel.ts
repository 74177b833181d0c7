/** Survives duplicate copies of the package, as the error classes' marker does. */
const RESTART = Symbol.for("selfheal:stream-restart");

/**
 * Yielded by a stream with `afterFirstToken: "restart"` before a new answer: discard every chunk
 * received since the stream began or since the last StreamRestart; the whole answer follows again.
 */
export class StreamRestart {
  readonly [RESTART] = true;
  constructor(
    /** Chunks to discard: those received since the start or the last restart. */
    readonly discard: number,
    /** The attempt (1 = the first) that now answers. */
    readonly attempt: number,
    /** The provider that now answers (undefined for a stream without providers). */
    readonly provider: string | undefined,
    /** What ended the attempt whose chunks are discarded. */
    readonly cause: unknown,
  ) {}
}

/** True for a StreamRestart from any copy of the package. */
export const isStreamRestart = (value: unknown): value is StreamRestart =>
  typeof value === "object" &&
  value !== null &&
  (value as Record<symbol, unknown>)[RESTART] === true;

type Waiter<T> = {
  resolve: (result: IteratorResult<T>) => void;
  reject: (error: unknown) => void;
};

const DONE: IteratorResult<never> = Object.freeze({ value: undefined, done: true });

/**
 * The caller's side of a healed stream: a queue the attempts push chunks into and the caller
 * iterates, once. Attempts read their source as fast as it sends (a slow reader never makes a
 * provider look stalled); what the reader has not taken waits here.
 */
export class StreamChannel<T> implements AsyncIterableIterator<T> {
  private queue: T[] = [];
  private head = 0;
  private waiter: Waiter<T> | undefined;
  private state: "open" | "ended" | "failed" | "taken" = "open";
  private error: unknown;
  /** Chunks pushed since the start or the last restart. */
  delivered = 0;
  restarts = 0;
  /** How the stream went (set by its call). */
  result!: Promise<unknown>;

  /** `cancel` runs when the reader stops early (break, return): the call is aborted. */
  constructor(private readonly cancel: (reason: unknown) => void) {}

  push(item: T): void {
    if (this.state !== "open") return;
    this.delivered++;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      waiter.resolve({ value: item, done: false });
    } else this.queue.push(item);
  }

  /** A new answer begins: the reader gets the restart marker, then the new chunks. */
  restart(marker: T): void {
    this.restarts++;
    this.push(marker);
    this.delivered = 0;
  }

  end(): void {
    if (this.state !== "open") return;
    this.state = "ended";
    this.waiter?.resolve(DONE);
    this.waiter = undefined;
  }

  fail(error: unknown): void {
    if (this.state !== "open") return;
    this.state = "failed";
    this.error = error;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      this.state = "taken";
      waiter.reject(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.head < this.queue.length) {
      const value = this.queue[this.head++] as T;
      if (this.head === this.queue.length) {
        this.queue = [];
        this.head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    switch (this.state) {
      case "open":
        return new Promise((resolve, reject) => {
          this.waiter = { resolve, reject };
        });
      case "failed":
        this.state = "taken"; // the error is thrown once; the iteration is over after it
        return Promise.reject(this.error);
      default:
        return Promise.resolve(DONE);
    }
  }

  /** The reader stopped early: the stream is cancelled (its attempt aborted) and emptied. */
  return(): Promise<IteratorResult<T>> {
    if (this.state === "open") this.cancel(new StreamCancelledReason());
    this.state = "taken";
    this.queue = [];
    this.head = 0;
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/** Why a stream's call was aborted when its reader stopped early (not a failure of the route). */
export class StreamCancelledReason extends Error {
  override readonly name = "AbortError";
  constructor() {
    super("selfheal: the stream's reader stopped before its end");
  }
}
