/**
 * An abort signal that follows other signals until released: an AbortController with listeners,
 * removed on `release()`, rather than `AbortSignal.any` (on Node 20 a combined signal can be
 * garbage-collected before it fires, nodejs/node#55428).
 */
export class LinkedSignal {
  private readonly controller = new AbortController();
  private readonly unlinks: (() => void)[] = [];

  constructor(...sources: (AbortSignal | undefined)[]) {
    for (const source of sources) this.follow(source);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Aborts this signal when `source` aborts, until released. */
  follow(source: AbortSignal | undefined): void {
    if (!source || source === this.controller.signal || this.controller.signal.aborted) return;
    if (source.aborted) {
      this.controller.abort(source.reason);
      return;
    }
    const onAbort = () => {
      this.controller.abort(source.reason);
    };
    source.addEventListener("abort", onAbort, { once: true });
    this.unlinks.push(() => {
      source.removeEventListener("abort", onAbort);
    });
  }

  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  /** Stops following: the sources keep no reference to this signal. */
  release(): void {
    for (const unlink of this.unlinks.splice(0)) unlink();
  }
}
