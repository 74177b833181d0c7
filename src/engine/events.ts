import type { AdviceOutcome } from "../diagnosis/advisor.js";
import type { Diagnosis } from "../diagnosis/diagnoser.js";
import type { DriftEvent } from "../diagnosis/drift.js";
import type { StatusChangeEvent } from "../health/evaluator.js";
import type { BreakerState } from "../recovery/breaker.js";
import type { CallRecord } from "../health/store.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { RecoveryOutcome, StrategyName } from "../telemetry/conventions.js";
import type { Logger } from "./options.js";

/** A finished recovery, as listeners and the JSONL log get it. */
export interface RecoveryEvent {
  at: number;
  agent: string;
  tool: string;
  taskId: string | undefined;
  /** The first error, redacted and cut. */
  error: string;
  pattern: string;
  confidence: number;
  /** The strategy that ended the recovery (the last one run). */
  strategy: StrategyName | undefined;
  /** Every step, in order, with `skipped: reason` for those not run. */
  steps: { strategy: StrategyName; skipped?: string }[];
  /** Recovery attempts (the first, failed attempt not included). */
  attempts: number;
  /** From the first error to the end of recovery, ms. */
  durationMs: number;
  outcome: RecoveryOutcome;
  /** Spend of the recovery attempts, USD. */
  costUsd: number;
  /**
   * Recovery attempts that could not help: all of them when the call got no real answer (it
   * failed, or only the fallback answered). Same-route retries of a non-retryable pattern would
   * count too; the attempt guard never makes them.
   */
  wastedRetries: number;
  /** Extra spend of attempts on secondaries over the primary's price, USD. */
  failoverCostDifferentialUsd: number;
  /** The provider that answered, when the call recovered. */
  provider: string | undefined;
  /** HTTP status of the first error, when it had one: what a suggested rule can match on. */
  status?: number;
  /** First error code or type of the first error (lower-cased, cut), when it had one. */
  code?: string;
}

/** A finished tool call, as recorded (error text redacted). */
export interface ToolCallEvent extends CallRecord {
  at: number;
  taskId: string | undefined;
  /** `error.type` of a failed or blocked call. */
  errorType?: string;
  /** Redacted, truncated error text of a failed or blocked call. */
  error?: string;
}

/** A failure was diagnosed. */
export interface DiagnosisEvent extends Diagnosis {
  agent: string;
  tool: string;
  at: number;
  /** Redacted, cut error text. */
  message: string;
  taskId: string | undefined;
}

/** Events of a selfheal instance, by name. */
export interface SelfHealEvents {
  "status-change": StatusChangeEvent;
  "tool-call": ToolCallEvent;
  diagnosis: DiagnosisEvent;
  /** The UNKNOWN share crossed its threshold: error wording probably changed. */
  "diagnoser-drift": DriftEvent & { agent: string };
  /** The `escalateUnknown` advisor answered (or failed to) about an UNKNOWN error. */
  "diagnosis-advice": AdviceOutcome & { agent: string; at: number };
  /** A failed call's recovery finished (recovered, failed, escalated or out of budget). */
  recovery: RecoveryEvent;
  /** A dependency's circuit breaker changed state. */
  "circuit-change": { agent: string; dependency: string; state: BreakerState; at: number };
  /**
   * A shared signal store lost its server (`degraded: true`: this worker now reads its own
   * memory) or got it back.
   */
  "store-degraded": { agent: string; degraded: boolean; reason?: string; at: number };
  /** A warm-up probe of a secondary provider finished. */
  warmup: { provider: string; ok: boolean; at: number; error?: string };
}

export type Listener<T> = (event: T) => void;

/**
 * A small typed emitter. A listener that throws is reported to the logger and never reaches
 * the tool call that emitted the event.
 */
export class Emitter<Events extends object> {
  private readonly listeners = new Map<keyof Events, Set<Listener<never>>>();

  constructor(private readonly logger: Logger) {}

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(name: K, listener: Listener<Events[K]>): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  /** Whether anyone listens: lets callers skip building an event nobody reads. */
  has(name: keyof Events): boolean {
    return (this.listeners.get(name)?.size ?? 0) > 0;
  }

  emit<K extends keyof Events>(name: K, event: Events[K]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as Listener<Events[K]>)(event);
      } catch (error) {
        this.logger.warn(
          `selfheal: a "${String(name)}" listener threw (ignored): ${redact(describeThrown(error))}`,
        );
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
