import { abortReason, systemClock, type Clock } from "../clock.js";
import { FAULT_KINDS, thrownFault, type FaultKind, type FaultOptions } from "./faults.js";
import { seededRandom } from "./random.js";

/** When an injection applies. Exactly one of `first`, `during` or `probability`. */
export type Trigger =
  /** The first N calls counted from when the injection was added. */
  | { first: number }
  /** Calls made while the clock is in [fromMs, toMs), ms since the injector was created. */
  | { during: { fromMs: number; toMs: number } }
  /** Each call with this probability, from the injector's seeded generator. */
  | { probability: number };

export interface Injection extends FaultOptions {
  kind: FaultKind;
  trigger: Trigger;
}

/** The fault chosen for one call, if any. */
export interface Decision {
  call: number;
  fault: Injection | undefined;
}

export interface FailureInjectorOptions {
  /** Time source for `during` windows and delays (default system clock). */
  clock?: Clock;
  /** Seed of the `probability` generator (default 1). */
  seed?: number;
}

/**
 * Injects provider faults into any async function, for tests, staging and the simulator:
 * rate limits (with or without Retry-After), timeouts, hangs until aborted, empty answers,
 * 500/502/503, overloads, connection resets, malformed JSON, context length, content policy and
 * auth errors, for the first N calls, a window of (virtual) time, or at random from a seed.
 * The first injection whose trigger fires decides; calls are counted. The stream faults
 * (`slow_first_token`, `stream_cut`, `stream_stall`, `malformed_event`, `no_done`) and the
 * truncated answer (`finish_length`) are decided here too but served only by the fake provider.
 */
export class FailureInjector {
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly startedAt: number;
  private readonly injections: { injection: Injection; fromCall: number }[] = [];
  /** Calls seen. */
  calls = 0;
  /** Faults injected, by kind. */
  readonly injected = new Map<FaultKind, number>();

  constructor(options: FailureInjectorOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.random = seededRandom(options.seed ?? 1);
    this.startedAt = this.clock.now();
  }

  /** Adds an injection; returns a function that removes it. */
  inject(kind: FaultKind, trigger: Trigger, options: FaultOptions = {}): () => void {
    if (!FAULT_KINDS.includes(kind))
      throw new TypeError(
        `unknown fault kind ${JSON.stringify(kind)} (known: ${FAULT_KINDS.join(", ")})`,
      );
    validateTrigger(trigger);
    validateOptions(options);
    const entry = { injection: { ...options, kind, trigger }, fromCall: this.calls };
    this.injections.push(entry);
    return () => {
      const i = this.injections.indexOf(entry);
      if (i >= 0) this.injections.splice(i, 1);
    };
  }

  /** Removes every injection. */
  clear(): void {
    this.injections.length = 0;
  }

  /** Counts one call and picks its fault. The fake HTTP provider serves the same decisions. */
  next(): Decision {
    const call = ++this.calls;
    const elapsed = this.clock.now() - this.startedAt;
    for (const { injection, fromCall } of this.injections) {
      const t = injection.trigger;
      const fires =
        "first" in t
          ? call - fromCall <= t.first
          : "during" in t
            ? elapsed >= t.during.fromMs && elapsed < t.during.toMs
            : this.random() < t.probability;
      if (fires) {
        this.injected.set(injection.kind, (this.injected.get(injection.kind) ?? 0) + 1);
        return { call, fault: injection };
      }
    }
    return { call, fault: undefined };
  }

  /**
   * Wraps `fn`: each call first asks `next()`; a fault throws (or returns `""` for `empty`, or
   * waits for the call's `signal` for `hang`) instead of calling `fn`. A stream-only fault, or
   * `finish_length`, rejects with an error naming the fake provider (see `thrownFault`).
   */
  wrap<A, R, C extends { signal?: AbortSignal } | undefined>(
    fn: (args: A, context: C) => R | Promise<R>,
  ): (args: A, context: C) => Promise<R> {
    return async (args, context) => {
      const { fault } = this.next();
      if (!fault) return fn(args, context);
      const signal = context?.signal;
      switch (fault.kind) {
        case "empty":
          return "" as R;
        case "hang":
          return new Promise<R>((_resolve, reject) => {
            if (signal?.aborted) reject(abortReason(signal));
            signal?.addEventListener("abort", () => {
              reject(abortReason(signal));
            });
          });
        case "timeout":
          if (fault.delayMs) await this.clock.sleep(fault.delayMs, signal);
          throw thrownFault(fault.kind, fault);
        default:
          throw thrownFault(fault.kind, fault);
      }
    };
  }
}

function validateTrigger(trigger: Trigger): void {
  const keys = Object.keys(trigger);
  if (keys.length !== 1)
    throw new TypeError("a trigger has exactly one of first, during, probability");
  if ("first" in trigger && !(Number.isInteger(trigger.first) && trigger.first >= 0)) {
    throw new TypeError("trigger.first must be a whole number >= 0");
  }
  if ("during" in trigger && !(trigger.during.fromMs <= trigger.during.toMs)) {
    throw new TypeError("trigger.during needs fromMs <= toMs");
  }
  if ("probability" in trigger && !(trigger.probability >= 0 && trigger.probability <= 1)) {
    throw new TypeError("trigger.probability must be between 0 and 1");
  }
}

function validateOptions(options: FaultOptions): void {
  const { afterTokens, atToken, silentMs } = options;
  if (afterTokens !== undefined && !(Number.isInteger(afterTokens) && afterTokens >= 0))
    throw new TypeError("afterTokens must be a whole number >= 0");
  if (atToken !== undefined && !(Number.isInteger(atToken) && atToken >= 1))
    throw new TypeError("atToken must be a whole number >= 1");
  if (silentMs !== undefined && !(silentMs >= 0 && silentMs < Infinity))
    throw new TypeError("silentMs must be a finite number of ms >= 0");
}
