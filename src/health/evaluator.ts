import type { Clock } from "../clock.js";
import { HEALTH_STATUSES, type HealthStatus } from "../telemetry/conventions.js";
import type { AgentSignals, ScopeSignals, SignalStore } from "./store.js";
import type { HealthThresholds } from "./thresholds.js";
import { histogramQuantile } from "./window.js";

export type SignalName = "success_rate" | "latency_p95" | "empty_response_rate" | "task_completion";

/** One signal of one scope. */
export interface SignalReading {
  signal: SignalName;
  status: HealthStatus;
  /** A share from 0 to 1, or ms for latency; null when there are fewer samples than required. */
  value: number | null;
  samples: number;
  /** Latency only: the baseline in ms the P95 is compared with (null until learned). */
  baselineMs?: number | null;
  /**
   * Success rate only: the rate over the recent part of the window, when it decided the status
   * (the dependency is back, so the signal recovers without waiting for the window to clear).
   */
  recent?: number;
}

/** Health of one scope: the worst of its signals. */
export interface ScopeHealth {
  status: HealthStatus;
  signals: SignalReading[];
}

/** Health of an agent (its own signals) and of each of its tools. */
export interface HealthReport extends ScopeHealth {
  agent: string;
  /** When it was computed (clock ms, a whole number: the time read, rounded down). */
  at: number;
  tools: Record<string, ScopeHealth>;
  /** True when the signal store could not be read and this is the last known report. */
  stale?: boolean;
}

/** A scope changed status: the agent as a whole (`tool` undefined) or one tool. */
export interface StatusChangeEvent {
  agent: string;
  tool: string | undefined;
  from: HealthStatus;
  to: HealthStatus;
  at: number;
  signals: SignalReading[];
}

export interface HealthEvaluatorOptions {
  agent: string;
  store: SignalStore;
  clock: Clock;
  cacheMs: number;
  baselineTauMs: number;
  /** Thresholds of the agent scope, and of one tool. */
  thresholds(tool: string | undefined): HealthThresholds;
  onChange(event: StatusChangeEvent): void;
  onStoreError(error: unknown): void;
}

/**
 * The longest `fresh()` (what `status()` reads) waits for a store that answers later, real ms; a
 * Redis store gives up on its own sooner (`commandTimeoutMs`, 500 ms by default).
 */
export const FRESH_READ_WAIT_MS = 1_000;

/** Key of a scope in the evaluator's maps (tool names are user text, so they get a prefix). */
const scopeKey = (tool: string | undefined) => (tool === undefined ? "agent" : `tool:${tool}`);

const severity = (s: HealthStatus) => HEALTH_STATUSES.indexOf(s);
const worst = (a: HealthStatus, b: HealthStatus) => (severity(b) > severity(a) ? b : a);

/** Status of a share where lower is worse (success rate, task completion). */
function lowIsBad(value: number, warning: number | null, critical: number | null): HealthStatus {
  if (critical !== null && value < critical) return "critical";
  if (warning !== null && value < warning) return "warning";
  return "healthy";
}

/** Status of a value where higher is worse (empty share, latency factor). */
function highIsBad(value: number, warning: number | null, critical: number | null): HealthStatus {
  if (critical !== null && value > critical) return "critical";
  if (warning !== null && value > warning) return "warning";
  return "healthy";
}

function share(
  signal: SignalName,
  good: number,
  bad: number,
  minSamples: number,
  judge: (value: number) => HealthStatus,
  ofBad = false,
): SignalReading {
  const samples = good + bad;
  if (samples === 0 || samples < minSamples) {
    return { signal, status: "healthy", value: null, samples };
  }
  const value = (ofBad ? bad : good) / samples;
  return { signal, status: judge(value), value, samples };
}

/**
 * Success rate over the call window; a degraded rate counts as recovered once the recent part
 * of the window alone has enough calls at a healthy rate, so read-only mode lifts about a minute
 * after a dependency comes back rather than after the whole 10 min window has cleared.
 */
function successRate(s: ScopeSignals, t: HealthThresholds): SignalReading {
  const { warning, critical, minSamples } = t.successRate;
  const judge = (v: number) => lowIsBad(v, warning, critical);
  const whole = share("success_rate", s.calls.ok, s.calls.failed, minSamples, judge);
  if (whole.status === "healthy") return whole;
  const recent = share("success_rate", s.recent.ok, s.recent.failed, minSamples, judge);
  if (recent.value === null || recent.status !== "healthy") return whole;
  return { ...whole, status: "healthy", recent: recent.value };
}

/**
 * Turns raw signals into `healthy | warning | critical`, per agent and per tool. The result is
 * cached for `cacheMs`; every evaluation compares with the previous one and reports transitions.
 * A store that answers later (Redis) is read stale-while-revalidate: once there is a report, a
 * caller gets it at once and the new one is read in the background, so only the first read of
 * an evaluator waits on the store. The call path reads through `current()` (the cache keeps it
 * cheap); a reader that asks on purpose (`status()`) reads through `fresh()`, which reads again
 * once records came after the cached report (a status read right after calls counts them).
 */
export class HealthEvaluator {
  private cached: HealthReport | undefined;
  /** The cached report must not be served as fresh (see invalidate). */
  private expired = false;
  /** A record reached the store since the last read of it began (see noteRecord). */
  private recorded = false;
  private pending: Promise<HealthReport> | undefined;
  private readonly previous = new Map<string, HealthStatus>();
  private readonly baselines = new Map<string, { ms: number; at: number }>();

  constructor(private readonly options: HealthEvaluatorOptions) {}

  /**
   * The cached report when fresh; otherwise a new one (synchronous for in-process stores). With
   * a store that answers later, stale-while-revalidate: the new report if the store answers
   * within this event-loop turn (an in-process store), else the last report, while the new one
   * is read in the background. Only the very first read (no report yet) waits for the store.
   * Callers that already read the clock pass `now`.
   */
  current(now = this.options.clock.now()): HealthReport | Promise<HealthReport> {
    const cached = this.cached;
    if (cached && !this.expired && now - cached.at < this.options.cacheMs) return cached;
    const next = this.refresh(now);
    if (!(next instanceof Promise) || !cached) return next;
    return Promise.race([
      next.catch(() => cached), // a throwing onStoreError: the last report
      new Promise<HealthReport>((resolve) => {
        setImmediate(() => {
          resolve(cached);
        });
      }),
    ]);
  }

  /**
   * For a reader that asks on purpose (`status()`): the cached report while it is fresh and no
   * record reached the store since it was read; otherwise a new one. From a store that answers
   * later (Redis) it waits for the read (one already in flight is shared) at most
   * FRESH_READ_WAIT_MS of real time: a hung store never holds the reader, who then gets the last
   * report marked `stale`. The call path keeps `current()`: one flag set per record is all this
   * costs it.
   */
  fresh(now = this.options.clock.now()): HealthReport | Promise<HealthReport> {
    const cached = this.cached;
    if (cached && !this.expired && !this.recorded && now - cached.at < this.options.cacheMs)
      return cached;
    const next = this.refresh(now);
    if (!(next instanceof Promise)) return next;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<HealthReport>((resolve) => {
      // Real time, not the injected clock: a virtual clock may stand still while the store hangs.
      timer = setTimeout(() => {
        const last = this.cached ?? {
          agent: this.options.agent,
          status: "healthy",
          signals: [],
          tools: {},
          at: Math.floor(now),
        };
        resolve({ ...last, stale: true });
      }, FRESH_READ_WAIT_MS);
      timer.unref();
    });
    return Promise.race([next, late]).finally(() => {
      clearTimeout(timer);
    });
  }

  /** A call or task was recorded in the store: `fresh()` reads it again. */
  noteRecord(): void {
    this.recorded = true;
  }

  /** The last report computed, without evaluating. */
  get last(): HealthReport | undefined {
    return this.cached;
  }

  /**
   * The next read evaluates. With a store that answers later, the last report (made before this
   * moment) is still what callers get until the new one is read: they do not wait.
   */
  invalidate(): void {
    this.expired = true;
  }

  /** Reads the store and evaluates; a read already in flight is shared (never two at once). */
  private refresh(now: number): HealthReport | Promise<HealthReport> {
    if (this.pending) return this.pending;
    // Records made from here on are the next read's: the flag goes down before this one starts.
    this.recorded = false;
    let read: AgentSignals | Promise<AgentSignals>;
    try {
      read = this.options.store.read(this.options.agent, now);
    } catch (error) {
      return this.fallback(error, now);
    }
    if (!(read instanceof Promise)) return this.evaluate(read, now);
    this.pending = read.then(
      (signals) => this.evaluate(signals, now),
      (error: unknown) => this.fallback(error, now),
    );
    return this.pending.finally(() => {
      this.pending = undefined;
    });
  }

  private fallback(error: unknown, now: number): HealthReport {
    this.options.onStoreError(error);
    // Keep the last known status rather than guess; retry after one cache period.
    const base = this.cached ?? {
      agent: this.options.agent,
      status: "healthy",
      signals: [],
      tools: {},
    };
    this.cached = { ...base, at: Math.floor(now), stale: true };
    this.expired = false;
    return this.cached;
  }

  private evaluate(signals: AgentSignals, now: number): HealthReport {
    const agent = this.scope(undefined, signals.agent, this.options.thresholds(undefined), now);
    const tools: Record<string, ScopeHealth> = {};
    for (const [name, toolSignals] of signals.tools) {
      tools[name] = this.scope(name, toolSignals, this.options.thresholds(name), now);
    }
    const report: HealthReport = {
      agent: this.options.agent,
      at: Math.floor(now), // whole ms: read as a timestamp
      ...agent,
      tools,
    };
    this.cached = report;
    this.expired = false;
    this.emitChanges(report, now);
    return report;
  }

  private scope(
    tool: string | undefined,
    s: ScopeSignals,
    t: HealthThresholds,
    now: number,
  ): ScopeHealth {
    const key = scopeKey(tool);
    const readings: SignalReading[] = [
      successRate(s, t),
      this.latency(key, s, t, now),
      share(
        "empty_response_rate",
        s.llm.total - s.llm.empty,
        s.llm.empty,
        t.emptyResponses.minSamples,
        (v) => highIsBad(v, t.emptyResponses.warning, t.emptyResponses.critical),
        true,
      ),
    ];
    if (tool === undefined) {
      readings.push(
        share(
          "task_completion",
          s.tasks.completed,
          s.tasks.failed,
          t.taskCompletion.minSamples,
          (v) => lowIsBad(v, t.taskCompletion.warning, t.taskCompletion.critical),
        ),
      );
    }
    return {
      status: readings.reduce<HealthStatus>((w, r) => worst(w, r.status), "healthy"),
      signals: readings,
    };
  }

  /**
   * P95 against a baseline. The baseline is learned as a time-weighted moving average of the
   * P95, fed only while latency looks normal, so an incident does not teach it that slow is fine.
   */
  private latency(key: string, s: ScopeSignals, t: HealthThresholds, now: number): SignalReading {
    const samples = s.calls.ok + s.calls.failed;
    const p95 = histogramQuantile(s.calls.latency, 0.95);
    const learned = this.baselines.get(key);
    const baseline = t.latency.baselineMs ?? learned?.ms ?? null;
    if (p95 === undefined || samples < t.latency.minSamples) {
      return {
        signal: "latency_p95",
        status: "healthy",
        value: null,
        samples,
        baselineMs: baseline,
      };
    }
    const status = baseline
      ? highIsBad(p95 / baseline, t.latency.warningFactor, t.latency.criticalFactor)
      : "healthy";
    if (t.latency.baselineMs === null && status === "healthy") {
      const ms = learned
        ? learned.ms +
          (p95 - learned.ms) * (1 - Math.exp(-(now - learned.at) / this.options.baselineTauMs))
        : p95;
      this.baselines.set(key, { ms, at: now });
    }
    return { signal: "latency_p95", status, value: p95, samples, baselineMs: baseline };
  }

  private emitChanges(report: HealthReport, at: number): void {
    const scopes: [string | undefined, ScopeHealth][] = [
      [undefined, report],
      ...Object.entries(report.tools),
    ];
    for (const [tool, health] of scopes) {
      const key = scopeKey(tool);
      const from = this.previous.get(key) ?? "healthy";
      if (from === health.status) continue;
      this.previous.set(key, health.status);
      this.options.onChange({
        agent: report.agent,
        tool,
        from,
        to: health.status,
        at,
        signals: health.signals,
      });
    }
  }
}
