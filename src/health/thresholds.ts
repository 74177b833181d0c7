/**
 * Health thresholds: the one table of defaults (README "Health signals" repeats it).
 * A `null` level is off.
 */
export interface HealthThresholds {
  /** Share of successful calls over the call window (default 10 min). Lower is worse. */
  successRate: { warning: number | null; critical: number | null; minSamples: number };
  /**
   * P95 latency over the call window as a multiple of the learned baseline. Higher is worse.
   * `baselineMs` fixes the baseline instead of learning it.
   */
  latency: {
    warningFactor: number | null;
    criticalFactor: number | null;
    minSamples: number;
    baselineMs: number | null;
  };
  /** Share of empty responses among the last 100 LLM calls. Higher is worse. */
  emptyResponses: { warning: number | null; critical: number | null; minSamples: number };
  /** Share of tasks completed over the task window (default 1 h). Lower is worse. */
  taskCompletion: { warning: number | null; critical: number | null; minSamples: number };
}

export const DEFAULT_THRESHOLDS: HealthThresholds = {
  successRate: { warning: 0.8, critical: 0.5, minSamples: 10 },
  latency: { warningFactor: 3, criticalFactor: null, minSamples: 20, baselineMs: null },
  emptyResponses: { warning: 0.05, critical: 0.2, minSamples: 20 },
  taskCompletion: { warning: null, critical: 0.7, minSamples: 5 },
};

/** Time constant of the learned P95 baseline (an exponentially weighted mean, 1 h). */
export const DEFAULT_BASELINE_TAU_MS = 60 * 60_000;
/** How long a computed status is reused. */
export const DEFAULT_STATUS_CACHE_MS = 5_000;

/** Each threshold group, with every field optional. */
export type ThresholdOverrides = {
  [K in keyof HealthThresholds]?: Partial<HealthThresholds[K]>;
};

/** Defaults, then the agent's overrides, then the tool's. */
export function mergeThresholds(
  base: HealthThresholds,
  ...overrides: (ThresholdOverrides | undefined)[]
): HealthThresholds {
  const out: HealthThresholds = {
    successRate: { ...base.successRate },
    latency: { ...base.latency },
    emptyResponses: { ...base.emptyResponses },
    taskCompletion: { ...base.taskCompletion },
  };
  for (const o of overrides) {
    if (!o) continue;
    Object.assign(out.successRate, o.successRate);
    Object.assign(out.latency, o.latency);
    Object.assign(out.emptyResponses, o.emptyResponses);
    Object.assign(out.taskCompletion, o.taskCompletion);
  }
  return out;
}
