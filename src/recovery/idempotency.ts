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

/**
 * Results of writes that succeeded, by tool and idempotency key: a call repeated with the key of
 * a write that already went through gets the stored result, and the tool is not called again.
 */
export class IdempotencyLedger {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly options: LedgerOptions) {}

  get(tool: string, key: string, now: number): { value: unknown } | undefined {
    const id = `${tool}\u0000${key}`;
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (now - entry.at >= this.options.ttlMs) {
      this.entries.delete(id);
      return undefined;
    }
    return { value: entry.value };
  }

  set(tool: string, key: string, value: unknown, now: number): void {
    const id = `${tool}\u0000${key}`;
    this.entries.delete(id);
    this.entries.set(id, { value, at: now });
    if (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }
}
