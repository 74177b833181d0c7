import { RollingWindow } from "../health/window.js";

export type BreakerState = "closed" | "open" | "half_open";

export interface BreakerOptions {
  /**
   * The first open period, ms (default 5 s). Each probe that fails doubles it, up to
   * `maxOpenMs`, and so does tripping again within `windowMs` of a probe that closed it; a
   * breaker closed for a whole window starts over (Envoy's ejection time x ejections, Polly's
   * break-duration generator): a blip costs seconds, a dead or sickly dependency backs off to
   * minutes.
   */
  baseOpenMs: number;
  /** The longest open period, ms (default 5 min). */
  maxOpenMs: number;
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
  baseOpenMs: 5_000,
  maxOpenMs: 5 * 60_000,
  probeTimeoutMs: 10_000,
  failureRate: 0.5,
  minimumAttempts: 5,
  windowMs: 5 * 60_000,
};

/**
 * The longest a call that finds every route open waits for the half-open probe, ms (default
 * `recovery.maxProbeWaitMs`): a breaker exists so callers do not wait. Any longer and the call
 * fails at once with when to try again.
 */
export const DEFAULT_MAX_PROBE_WAIT_MS = 2_000;

/** How much longer a probe's lease lasts than the probe's own timeout, ms. */
const PROBE_LEASE_MARGIN_MS = 1_000;

/** What a call may do now. */
export type Admission = "closed" | "probe" | "rejected";

/** A breaker's state as the fleet shares it. */
export interface BreakerVerdict {
  open: boolean;
  /** Open until (clock ms; the fleet shares one clock: the system's). */
  until: number;
  /** Opens in a row (the adaptive period's exponent). */
  opens: number;
  at: number;
}

/**
 * Shares breakers across a fleet (`selfheal/redis`): a verdict reached by one worker (open, or a
 * probe's close or reopen) is published to all, and the half-open probe is a fleet-wide lease,
 * so exactly one worker probes. Calls stay synchronous: `mayProbe` answers from what the sync
 * already knows and fetches the lease in the background.
 */
export interface BreakerSync {
  /** This worker reached a verdict: tell the others. */
  publish(dependency: string, verdict: BreakerVerdict): void;
  /** Whether this worker holds the probe lease of `dependency` now (asks for it if not). */
  mayProbe(dependency: string, now: number, leaseMs: number): boolean;
  /** Where verdicts of other workers are applied. */
  attach(apply: (dependency: string, verdict: BreakerVerdict) => void): void;
}

/** How soon a worker without the fleet's probe lease looks again, ms. */
const FLEET_LEASE_POLL_MS = 200;

/**
 * A circuit breaker for one dependency. It opens when the recovery plan says so or, where another
 * route can take the traffic, when the failure rate of recent attempts is too high. The open
 * period adapts: short at first, doubled by each failed probe, capped. It turns half-open lazily,
 * on the first call after the open period, and lets exactly one probe through under a lease that
 * expires with the probe's timeout. The probe's success closes it; its failure reopens it.
 *
 * Apart from opening, a route can cool down: a throttled dependency (429) is left alone for its
 * Retry-After, then used again without a probe. Throttling is not an outage.
 */
export class CircuitBreaker {
  private openUntil = 0;
  private isOpen = false;
  /** Opens in a row: forgotten once the breaker has stayed closed for a window. */
  private opens = 0;
  private closedAt = 0;
  private probeLeaseUntil = 0;
  private coolUntil = 0;
  /** Set once a tool with another route uses this dependency: only then may it trip on its own. */
  private mayTrip = false;
  private window: RollingWindow;

  constructor(
    readonly dependency: string,
    private readonly options: BreakerOptions,
    private readonly onChange: (dependency: string, state: BreakerState) => void,
    private readonly sync?: BreakerSync,
  ) {
    this.window = this.freshWindow();
  }

  state(now: number): BreakerState {
    if (!this.isOpen) return "closed";
    return now < this.openUntil ? "open" : "half_open";
  }

  /** Ms until the breaker admits a call or a probe (0 when it would now). */
  retryAfterMs(now: number): number {
    const open = this.isOpen ? Math.max(this.openUntil - now, this.probeLeaseUntil - now) : 0;
    return Math.max(0, open, this.coolUntil - now);
  }

  /** Whether a call may go through now; a half-open breaker admits one probe at a time. */
  admit(now: number): Admission {
    if (now < this.coolUntil) return "rejected";
    const state = this.state(now);
    if (state === "closed") return "closed";
    if (state === "open" || now < this.probeLeaseUntil) return "rejected";
    // The lease outlives the probe's own timeout a little, so the probe's verdict lands first.
    const leaseMs = this.options.probeTimeoutMs + PROBE_LEASE_MARGIN_MS;
    if (this.sync && !this.sync.mayProbe(this.dependency, now, leaseMs)) {
      // Another worker probes (or the lease is being asked for): its verdict will come.
      this.probeLeaseUntil = now + FLEET_LEASE_POLL_MS;
      return "rejected";
    }
    this.probeLeaseUntil = now + leaseMs;
    this.onChange(this.dependency, "half_open");
    return "probe";
  }

  /** Lets a high failure rate open the breaker on its own: another route can take the traffic. */
  allowTrip(): void {
    this.mayTrip = true;
  }

  /** Whether failures can open it (another route can take its traffic): then successes count too. */
  get canTrip(): boolean {
    return this.mayTrip;
  }

  /**
   * Records an attempt's outcome: `ok`, or a failure that counts against the route (the caller
   * decides which failures do: see route-outcome.ts). A probe's outcome closes or reopens it.
   */
  record(now: number, ok: boolean, probe: boolean): void {
    if (probe) {
      this.probeLeaseUntil = 0;
      if (ok) this.close(now);
      else this.open(now);
      return;
    }
    // Late answers of calls admitted before it opened change nothing.
    if (this.isOpen) return;
    this.window.add(now, ok ? 1 : 0, ok ? 0 : 1);
    if (ok || !this.mayTrip) return;
    const { ok: good, failed } = this.window.totals(now);
    const total = good + failed;
    if (total >= this.options.minimumAttempts && failed / total >= this.options.failureRate)
      this.open(now);
  }

  /** Failed attempts recorded in the window (recent evidence that the route is down). */
  recentFailures(now: number): number {
    return this.window.totals(now).failed;
  }

  /**
   * Opens the breaker for its current open period (at least `atLeastMs`, e.g. a Retry-After),
   * capped at `maxOpenMs`. Re-opening an open breaker changes nothing: only failed probes grow
   * the period.
   */
  open(now: number, atLeastMs = 0): void {
    if (this.state(now) === "open") return;
    const { baseOpenMs, maxOpenMs, windowMs } = this.options;
    // A dependency that trips again soon after a probe closed it is still unwell: its open
    // period keeps growing. One that stayed closed for a window starts over (Envoy's decay).
    if (!this.isOpen && now - this.closedAt >= windowMs) this.opens = 0;
    this.opens++;
    const period = Math.min(maxOpenMs, Math.max(atLeastMs, baseOpenMs * 2 ** (this.opens - 1)));
    this.isOpen = true;
    this.openUntil = now + period;
    this.window = this.freshWindow();
    this.onChange(this.dependency, "open");
    this.sync?.publish(this.dependency, {
      open: true,
      until: this.openUntil,
      opens: this.opens,
      at: now,
    });
  }

  /** Another worker's verdict: taken as is (it is not published again). */
  apply(verdict: BreakerVerdict): void {
    this.probeLeaseUntil = 0;
    this.opens = verdict.opens;
    if (verdict.open) {
      if (this.isOpen && this.openUntil >= verdict.until) return;
      this.isOpen = true;
      this.openUntil = verdict.until;
      this.window = this.freshWindow();
      this.onChange(this.dependency, "open");
    } else if (this.isOpen) {
      this.isOpen = false;
      this.openUntil = 0;
      this.closedAt = verdict.at;
      this.window = this.freshWindow();
      this.onChange(this.dependency, "closed");
    }
  }

  /** Leaves the route alone for `ms` (a throttle's Retry-After), capped at `maxOpenMs`. */
  coolDown(now: number, ms: number): void {
    this.coolUntil = Math.max(this.coolUntil, now + Math.min(ms, this.options.maxOpenMs));
  }

  private close(now: number): void {
    this.isOpen = false;
    this.openUntil = 0;
    this.closedAt = now;
    this.window = this.freshWindow();
    this.onChange(this.dependency, "closed");
    this.sync?.publish(this.dependency, { open: false, until: 0, opens: this.opens, at: now });
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
    private readonly sync?: BreakerSync,
  ) {
    sync?.attach((dependency, verdict) => {
      this.get(dependency).apply(verdict);
    });
  }

  get(dependency: string): CircuitBreaker {
    let breaker = this.breakers.get(dependency);
    if (!breaker) {
      breaker = new CircuitBreaker(dependency, this.options, this.onChange, this.sync);
      this.breakers.set(dependency, breaker);
    }
    return breaker;
  }

  /** State of every breaker, for the circuit-state gauge. */
  states(now: number): [string, BreakerState][] {
    return [...this.breakers].map(([dependency, b]) => [dependency, b.state(now)]);
  }
}
