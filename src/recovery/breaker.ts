import { RollingWindow } from "../health/window.js";

export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerOptions {
  /** How long the breaker stays open, ms (default 15 min). */
  openMs: number;
  /** The half-open probe's own timeout, ms (default 10 s): a hung probe cannot hold the lease. */
  probeTimeoutMs: number;
  /** Opens on its own when at least this share of recent attempts failed (default 0.5)... */
  failureRate: number;
  /** ...among at least this many attempts (default 5)... */
  minimumAttempts: number;
  /**
   * ...within this window, ms (default 5 min: long enough that a dependency timing out after
   * tens of seconds still gathers evidence at an agent's pace).
   */
  windowMs: number;
}

export const DEFAULT_BREAKER: BreakerOptions = {
  openMs: 15 * 60_000,
  probeTimeoutMs: 10_000,
  failureRate: 0.5,
  minimumAttempts: 5,
  windowMs: 5 * 60_000,
};

/** How much longer a probe's lease lasts than the probe's own timeout, ms. */
const PROBE_LEASE_MARGIN_MS = 1_000;

/** What a call may do now. */
export type Admission = "closed" | "probe" | "rejected";

/**
 * A circuit breaker for one dependency. It opens when the recovery plan says so or, where another
 * route can take the traffic, when the failure rate of recent attempts is too high; it turns half-open lazily, on the first call after
 * the open period, and lets exactly one probe through under a lease that expires with the probe's
 * timeout. The probe's success closes it; its failure reopens it.
 */
export class CircuitBreaker {
  private openUntil = 0;
  private isOpen = false;
  private probeLeaseUntil = 0;
  private window: RollingWindow;

  constructor(
    readonly dependency: string,
    private readonly options: BreakerOptions,
    private readonly onChange: (dependency: string, state: BreakerState) => void,
  ) {
    this.window = this.freshWindow();
  }

  state(now: number): BreakerState {
    if (!this.isOpen) return "closed";
    return now < this.openUntil ? "open" : "half_open";
  }

  /** Ms until the breaker admits a probe (0 when it would now). */
  retryAfterMs(now: number): number {
    return Math.max(0, this.openUntil - now, this.probeLeaseUntil - now);
  }

  /** Whether a call may go through now; a half-open breaker admits one probe at a time. */
  admit(now: number): Admission {
    const state = this.state(now);
    if (state === "closed") return "closed";
    if (state === "open" || now < this.probeLeaseUntil) return "rejected";
    // The lease outlives the probe's own timeout a little, so the probe's verdict lands first.
    this.probeLeaseUntil = now + this.options.probeTimeoutMs + PROBE_LEASE_MARGIN_MS;
    this.onChange(this.dependency, "half_open");
    return "probe";
  }

  /**
   * Records an attempt's outcome. `trip`: a high failure rate may open the breaker on its own;
   * callers allow it only where another route exists to take the traffic.
   */
  record(now: number, ok: boolean, probe: boolean, trip = true): void {
    if (probe) {
      this.probeLeaseUntil = 0;
      if (ok) this.close();
      else this.open(now);
      return;
    }
    // Late answers of calls admitted before it opened, and routes that may not trip, change nothing.
    if (this.isOpen || !trip) return;
    this.window.add(now, ok ? 1 : 0, ok ? 0 : 1);
    if (ok) return;
    const { ok: good, failed } = this.window.totals(now);
    const total = good + failed;
    if (total >= this.options.minimumAttempts && failed / total >= this.options.failureRate)
      this.open(now);
  }

  /** Opens the breaker for `ms` (default the configured open period). */
  open(now: number, ms = this.options.openMs): void {
    const wasOpen = this.state(now) === "open";
    this.isOpen = true;
    this.openUntil = Math.max(this.openUntil, now + ms);
    this.window = this.freshWindow();
    if (!wasOpen) this.onChange(this.dependency, "open"); // a plan re-opening an open breaker changes nothing
  }

  private close(): void {
    this.isOpen = false;
    this.openUntil = 0;
    this.window = this.freshWindow();
    this.onChange(this.dependency, "closed");
  }

  private freshWindow(): RollingWindow {
    return new RollingWindow({ windowMs: this.options.windowMs, buckets: 6, latency: false });
  }
}

/** The breakers of an instance, one per dependency (a provider, or a tool without one). */
export class BreakerRegistry {
  private readonly breakers = new Map<string, CircuitBreaker>();

  constructor(
    private readonly options: BreakerOptions,
    private readonly onChange: (dependency: string, state: BreakerState) => void,
  ) {}

  get(dependency: string): CircuitBreaker {
    let breaker = this.breakers.get(dependency);
    if (!breaker) {
      breaker = new CircuitBreaker(dependency, this.options, this.onChange);
      this.breakers.set(dependency, breaker);
    }
    return breaker;
  }

  /** State of every breaker, for the circuit-state gauge. */
  states(now: number): [string, BreakerState][] {
    return [...this.breakers].map(([dependency, b]) => [dependency, b.state(now)]);
  }
}
