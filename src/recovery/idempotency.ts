/**
 * What a keyed write does when the fleet's ledger (`selfheal/redis`) cannot be asked (Redis
 * away, too slow): `"refuse"` waits for it up to `fleetWaitMs` (within the call's deadline), then
 * fails with `FleetUnavailableError` having sent nothing; `"local"` decides with this worker's
 * own ledger.
 */
export type WhenFleetDown = "refuse" | "local";

export interface LedgerOptions {
  /** How long a result is kept, ms (default 24 h). */
  ttlMs: number;
  /** Most results kept; the oldest go first (default 10,000). */
  maxEntries: number;
  /**
   * When the fleet's ledger cannot be asked (default `"refuse"`): `"refuse"` waits for Redis up
   * to `fleetWaitMs`, then fails with `FleetUnavailableError` (nothing sent): one charge per key
   * in the fleet. `"local"` sends after asking only this worker's own ledger: at most one charge
   * per worker and key while Redis is away, shared when it is back.
   */
  whenFleetDown: WhenFleetDown;
  /**
   * The longest a keyed write waits for a fleet that cannot be asked (or is still taking back
   * what a restart lost), ms; the call's deadline, if sooner, ends it first. Counted from the
   * fleet's last answer: waiting on another worker's send (`busy`) is bounded by the deadline
   * only. Default 3,000: the 2 s restart grace plus two command timeouts of the Redis store.
   */
  fleetWaitMs: number;
}

export const DEFAULT_LEDGER: LedgerOptions = {
  ttlMs: 24 * 3_600_000,
  maxEntries: 10_000,
  whenFleetDown: "refuse",
  fleetWaitMs: 3_000,
};

interface Entry {
  value: unknown;
  at: number;
}

const idOf = (tool: string, key: string) => `${tool}\u0000${key}`;

/** A fleet's answer to a worker about to send a keyed write. */
export type Claim =
  /** No one sent it: this call does, holding the key until it shares its result or lets go. */
  | { kind: "mine" }
  /** Another worker sent it and it succeeded: its stored result. */
  | { kind: "done"; value: unknown }
  /** Another worker is sending it now: ask again in `retryMs` at the latest. */
  | { kind: "busy"; retryMs: number }
  /**
   * Redis lost its state (a restart without persistence) moments ago and the workers are still
   * putting back what they hold: ask again in `retryMs`.
   */
  | { kind: "settle"; retryMs: number }
  /**
   * Another worker claimed it and went silent past its deadline without sharing a result or
   * letting go (it crashed): whether it was sent is unknown. Only a strict claim hears this.
   */
  | { kind: "lost" };

/**
 * The idempotency ledger of a fleet (`selfheal/redis`): a key is claimed before the write goes
 * out, so of the workers sending the same key one sends and the others reuse its result.
 */
export interface LedgerSync {
  /** One call's write of `key`: its claims, its share and its release go through the handle. */
  write(tool: string, key: string): FleetWrite;
  /** Whether the fleet is known to be away now (a claim would fail, or wait out a timeout). */
  away(): boolean;
}

/** One call's keyed write, as the fleet sees it. */
export interface FleetWrite {
  /**
   * Asks the fleet (one round trip); throws when it cannot be asked. `leaseMs`: how long this
   * call may hold the key while sending (its deadline). `holdMs`: strict claims only, how long a
   * key whose sender went silent stays held (the result's lifetime); without it such a key is
   * free again once the sender's lease has passed.
   */
  claim(leaseMs: number, holdMs?: number): Promise<Claim>;
  /**
   * The write succeeded: its result is kept for `ttlMs` for every worker and the key let go.
   * Fired, not awaited (the claim keeps the key held until it lands); kept and sent again when
   * Redis is back if it cannot be sent now.
   */
  complete(value: unknown, ttlMs: number): void;
  /** The write failed (or was never sent): the key is free for another attempt. Fired too. */
  release(): void;
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
