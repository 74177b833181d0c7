import { SelfHealConfigError } from "../../errors.js";
import { DEFAULT_WINDOWS, type SignalWindows } from "../../health/store.js";
import {
  DEFAULT_BASELINE_TAU_MS,
  DEFAULT_STATUS_CACHE_MS,
  DEFAULT_THRESHOLDS,
  mergeThresholds,
  type HealthThresholds,
  type ThresholdOverrides,
} from "../../health/thresholds.js";
import {
  COUNT,
  knownKeys,
  MAX_TIMER_MS,
  ms,
  numberGroup,
  numbers,
  object,
  optionalObject,
  SHARE,
  type NumberRules,
  type Plain,
} from "./validate.js";

export interface HealthOptions extends ThresholdOverrides {
  /** Window sizes (the same for every tool). */
  windows?: Partial<SignalWindows>;
  /** How long a computed status is reused, ms (default 5000). */
  cacheMs?: number;
  /** Time constant of the learned latency baseline, ms (default 1 h). */
  baselineTauMs?: number;
  /** Per-tool threshold overrides, by tool name. */
  tools?: Record<string, ThresholdOverrides>;
}

/** The health options after validation, with every default filled in. */
export interface ResolvedHealth {
  thresholds: HealthThresholds;
  toolThresholds: Record<string, ThresholdOverrides>;
  cacheMs: number;
  baselineTauMs: number;
  /** For the default in-memory store; ignored (and refused) when a store is passed. */
  windows: Partial<SignalWindows>;
}

const HEALTH_KEYS = [
  "successRate",
  "latency",
  "emptyResponses",
  "taskCompletion",
  "windows",
  "cacheMs",
  "baselineTauMs",
  "tools",
] as const satisfies readonly (keyof HealthOptions)[];

const THRESHOLD_RULES: Record<keyof HealthThresholds, NumberRules> = {
  successRate: { warning: SHARE, critical: SHARE, minSamples: COUNT },
  latency: {
    warningFactor: { min: 1, nullable: true },
    criticalFactor: { min: 1, nullable: true },
    minSamples: COUNT,
    baselineMs: { min: 0, max: MAX_TIMER_MS, nullable: true },
  },
  emptyResponses: { warning: SHARE, critical: SHARE, minSamples: COUNT },
  taskCompletion: { warning: SHARE, critical: SHARE, minSamples: COUNT },
};

/** Sizes in ms first: `recentWindowMs` is compared with `callWindowMs` before the counts. */
const WINDOW_MS_RULES = {
  callWindowMs: ms(1_000),
  taskWindowMs: ms(1_000),
  recentWindowMs: ms(1_000),
} satisfies NumberRules;
const WINDOW_COUNT_RULES = {
  buckets: { min: 1, max: 3_600, integer: true },
  llmSampleSize: { min: 1, max: 100_000, integer: true },
} satisfies NumberRules;

/**
 * Levels of one threshold group in the order they must come: `lowerIsWorse` groups (rates of
 * success) need warning >= critical, the others (rates of trouble, latency factors)
 * warning <= critical. A level that is off (null) is not compared.
 */
const THRESHOLD_ORDER: Record<
  keyof HealthThresholds,
  { warning: string; critical: string; lowerIsWorse: boolean }
> = {
  successRate: { warning: "warning", critical: "critical", lowerIsWorse: true },
  latency: { warning: "warningFactor", critical: "criticalFactor", lowerIsWorse: false },
  emptyResponses: { warning: "warning", critical: "critical", lowerIsWorse: false },
  taskCompletion: { warning: "warning", critical: "critical", lowerIsWorse: true },
};

/** Thresholds after merging (defaults, agent, tool): each warning level before its critical one. */
function checkThresholdOrder(t: HealthThresholds, field: string): void {
  for (const [group, order] of Object.entries(THRESHOLD_ORDER)) {
    const levels = t[group as keyof HealthThresholds] as unknown as Record<string, number | null>;
    const warning = levels[order.warning];
    const critical = levels[order.critical];
    if (warning === null || warning === undefined || critical === null || critical === undefined)
      continue;
    const wrong = order.lowerIsWorse ? warning < critical : warning > critical;
    if (wrong) {
      const relation = order.lowerIsWorse ? ">=" : "<=";
      throw new SelfHealConfigError(
        `${field}.${group}.${order.warning}`,
        `must be ${relation} ${order.critical} (${critical}, after defaults are applied): ` +
          `warning comes before critical, got ${warning}`,
      );
    }
  }
}

function validateThresholds(value: unknown, field: string): ThresholdOverrides {
  const o = object(value, field);
  for (const [group, rules] of Object.entries(THRESHOLD_RULES)) {
    numberGroup(o[group], rules, `${field}.${group}`);
  }
  return o;
}

function validateWindows(health: Plain): Partial<SignalWindows> {
  const windows = optionalObject(health.windows, "health.windows");
  knownKeys(windows, Object.keys(DEFAULT_WINDOWS), "health.windows");
  numbers(windows, WINDOW_MS_RULES, "health.windows");
  const callWindowMs = (windows.callWindowMs as number | undefined) ?? DEFAULT_WINDOWS.callWindowMs;
  const recentWindowMs =
    (windows.recentWindowMs as number | undefined) ?? DEFAULT_WINDOWS.recentWindowMs;
  if (recentWindowMs > callWindowMs) {
    throw new SelfHealConfigError(
      "health.windows.recentWindowMs",
      `must not exceed callWindowMs (${callWindowMs}), got ${recentWindowMs}`,
    );
  }
  numbers(windows, WINDOW_COUNT_RULES, "health.windows");
  return windows;
}

/** `options.health`; `hasStore`: a store of the user's own, which owns its window sizes. */
export function resolveHealth(input: unknown, hasStore: boolean): ResolvedHealth {
  const health = optionalObject(input, "health");
  knownKeys(health, HEALTH_KEYS, "health");
  const overrides = validateThresholds(
    Object.fromEntries(Object.entries(health).filter(([k]) => k in DEFAULT_THRESHOLDS)),
    "health",
  );
  numbers(health, { cacheMs: ms(0), baselineTauMs: ms(1) }, "health");
  const windows = validateWindows(health);
  const tools = optionalObject(health.tools, "health.tools");
  const thresholds = mergeThresholds(DEFAULT_THRESHOLDS, overrides);
  checkThresholdOrder(thresholds, "health");
  const toolThresholds: Record<string, ThresholdOverrides> = {};
  for (const [name, value] of Object.entries(tools)) {
    toolThresholds[name] = validateThresholds(value, `health.tools.${name}`);
    checkThresholdOrder(mergeThresholds(thresholds, toolThresholds[name]), `health.tools.${name}`);
  }
  if (hasStore && health.windows !== undefined) {
    throw new SelfHealConfigError(
      "health.windows",
      "set window sizes on the store you pass, not here",
    );
  }
  return {
    thresholds,
    toolThresholds,
    cacheMs: (health.cacheMs as number | undefined) ?? DEFAULT_STATUS_CACHE_MS,
    baselineTauMs: (health.baselineTauMs as number | undefined) ?? DEFAULT_BASELINE_TAU_MS,
    windows,
  };
}
