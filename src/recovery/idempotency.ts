export interface LedgerOptions {
  /** How long a result is kept, ms (default 24 h). */
  ttlMs: number;
  /** Most results kept; the oldest go first (default 10,000). */
  maxEntries: number;
}

export const DEFAULT_LEDGER: LedgerOptions = { ttlMs: 24 * 3_600_000, maxEntries: 10_000 };

interface Entry {
  value: unknown;
  at: number;
}

const idOf = (tool: string, key: string) => `${tool}\u0000${key}`;

/** A fleet's answer to a worker about to send a keyed write. */
export type Claim =
  /** No one sent it: this worker does, holding the key until it completes or releases it. */
  | { kind: "mine" }
  /** Another worker sent it and it succeeded: its stored result. */
  | { kind: "done"; value: unknown }
  /** Another worker is sending it now. */
  | { kind: "busy" };

/**
 * The idempotency ledger of a fleet (`selfheal/redis`): a key is claimed before the write goes
 * out, so of the workers sending the same key one sends and the others reuse its result.
 */
export interface LedgerSync {
  /** Claims `key` for `leaseMs` (the call's deadline: a worker that dies lets it go). */
  claim(tool: string, key: string, leaseMs: number): Promise<Claim>;
  /** The write succeeded: its result is kept for `ttlMs` for every worker. */
  complete(tool: string, key: string, value: unknown, ttlMs: number): Promise<void>;
  /** The write failed: the key is free for another attempt. */
  release(tool: string, key: string): Promise<void>;
}

/**
 * Writes by tool and idempotency key: a call repeated with the key of a write that already went
 * through gets the stored result, one with the key of a write still in flight shares its outcome,
 * and the tool is not called again.
 */
export class IdempotencyLedger {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<{ value: unknown }>>();

  constructor(private readonly options: LedgerOptions) {}

  /** The answer of this write: stored when it succeeded, or the promise of it in flight. */
  find(
    tool: string,
    key: string,
    now: number,
  ): { value: unknown } | Promise<{ value: unknown }> | undefined {
    return this.get(tool, key, now) ?? this.inflight.get(idOf(tool, key));
  }

  /** Registers a write in flight; the returned function forgets it. */
  track(tool: string, key: string, pending: Promise<{ value: unknown }>): () => void {
    const id = idOf(tool, key);
    this.inflight.set(id, pending);
    return () => {
      this.inflight.delete(id);
    };
  }

  get(tool: string, key: string, now: number): { value: unknown } | undefined {
    const id = idOf(tool, key);
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (now - entry.at >= this.options.ttlMs) {
      this.entries.delete(id);
      return undefined;
    }
    return { value: entry.value };
  }

  set(tool: string, key: string, value: unknown, now: number): void {
    const id = idOf(tool, key);
    this.entries.delete(id);
    this.entries.set(id, { value, at: now });
    if (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }
}
