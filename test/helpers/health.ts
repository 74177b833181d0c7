/** A HealthEvaluator for tests: agent "a" on a VirtualClock at T0, its changes and store errors kept. */
import {
  HealthEvaluator,
  type HealthReport,
  type StatusChangeEvent,
} from "../../src/health/evaluator.js";
import type { SignalStore } from "../../src/health/store.js";
import { DEFAULT_THRESHOLDS, type HealthThresholds } from "../../src/health/thresholds.js";
import { VirtualClock } from "../../src/testing/index.js";

/** Where the evaluator's clock starts: a whole number of buckets of any window size. */
export const T0 = Date.UTC(2026, 0, 1);
export const TAU_MS = 3_600_000;
export const CACHE_MS = 5_000;

/** An evaluator of agent "a" over `store`, with the default thresholds unless told otherwise. */
export function evaluator(
  store: SignalStore,
  thresholds: (tool: string | undefined) => HealthThresholds = () => DEFAULT_THRESHOLDS,
  onStoreError: (error: unknown) => void = () => undefined,
) {
  const changes: StatusChangeEvent[] = [];
  const errors: unknown[] = [];
  const clock = new VirtualClock(T0);
  const h = new HealthEvaluator({
    agent: "a",
    store,
    clock,
    cacheMs: CACHE_MS,
    baselineTauMs: TAU_MS,
    thresholds,
    onChange: (e) => changes.push(e),
    onStoreError: (e) => {
      errors.push(e);
      onStoreError(e);
    },
  });
  return { h, changes, errors, clock };
}

/** The report of a synchronous read (an in-process store). */
export function sync(report: HealthReport | Promise<HealthReport>): HealthReport {
  if (report instanceof Promise) throw new Error("expected a synchronous report");
  return report;
}
