import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import { systemClock, type Clock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import { MemorySignalStore } from "../health/memory-store.js";
import { DEFAULT_WINDOWS, type SignalStore, type SignalWindows } from "../health/store.js";
import {
  DEFAULT_BASELINE_TAU_MS,
  DEFAULT_STATUS_CACHE_MS,
  DEFAULT_THRESHOLDS,
  mergeThresholds,
  type HealthThresholds,
  type ThresholdOverrides,
} from "../health/thresholds.js";
import { boundedJson, DEFAULT_MAX_TEXT_LENGTH, redact, safeLogger } from "../telemetry/redact.js";
import { DEFAULT_ADVICE_TIMEOUT_MS, type EscalateUnknown } from "../diagnosis/advisor.js";
import { DEFAULT_DRIFT, type DriftOptions } from "../diagnosis/drift.js";
import { compileRules, DEFAULT_RULES, type CompiledRule, type Rule } from "../diagnosis/rules.js";
import {
  DEFAULT_STATUS_PAGE_CACHE_MS,
  DEFAULT_STATUS_PAGE_TIMEOUT_MS,
} from "../diagnosis/status-page.js";
import type { Notifier } from "../notify/notifier.js";
import { DEFAULT_NOTIFY_TIMEOUT_MS, DEFAULT_THROTTLE_MS } from "../notify/escalator.js";
import { DEFAULT_BACKOFF, type BackoffOptions } from "../recovery/backoff.js";
import { DEFAULT_BREAKER, type BreakerOptions } from "../recovery/breaker.js";
import { DEFAULT_LEDGER, type LedgerOptions } from "../recovery/idempotency.js";
import {
  DEFAULT_EVENT_LOG_KEEP,
  DEFAULT_EVENT_LOG_MAX_BYTES,
  eventLogProblem,
  type EventLogOptions,
  type ResolvedEventLog,
} from "../recovery/event-log.js";
import type { ProviderConfig } from "../recovery/providers.js";
import { checkPlan, type PlanStep } from "../diagnosis/rules.js";
import { PATTERNS, type Pattern } from "../telemetry/conventions.js";
import type { CallContext } from "./call-context.js";

/** Where selfheal writes its own warnings (a listener that threw, a store that failed). */
export interface Logger {
  warn(message: string): void;
}

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

export interface DiagnosisOptions {
  /**
   * The rule table, first match wins: a list replaces the defaults; a function receives the
   * defaults and returns the table (to add, replace or reorder rules).
   */
  rules?: readonly Rule[] | ((defaults: readonly Rule[]) => readonly Rule[]);
  /** Statuspage root URL by tool or provider name, e.g. `{ openai: "https://status.openai.com" }`. */
  statusPages?: Record<string, string>;
  /** Per status page request, ms (default 2000). */
  statusPageTimeoutMs?: number;
  /** How long a status page answer is reused, ms (default 30 s). */
  statusPageCacheMs?: number;
  /** UNKNOWN share watch: `threshold` (0.05), `window` (100), `minSamples` (20), `keepSamples` (20). */
  drift?: Partial<DriftOptions>;
  /** Optional second opinion on UNKNOWN errors (an LLM, say): advisory, off the call path. */
  escalateUnknown?: EscalateUnknown;
  /** Time box of `escalateUnknown`, ms (default 5000). */
  escalateTimeoutMs?: number;
  /** The fetch status pages are read with (default the global one; the simulator fakes it). */
  fetch?: typeof fetch;
}

/** The default deadline of a call, ms, when its tool's timeout is at most a third of it. */
export const DEFAULT_DEADLINE_MS = 60_000;

/**
 * The longest a call may take, recovery included: the call's own `deadlineMs`, else the tool's,
 * else `recovery.deadlineMs`, else the larger of 60 s and 3 x the attempt timeout.
 */
export function deadlineOf(
  callMs: number | undefined,
  toolMs: number | undefined,
  recoveryMs: number | undefined,
  timeoutMs: number | undefined,
): number {
  return callMs ?? toolMs ?? recoveryMs ?? Math.max(DEFAULT_DEADLINE_MS, 3 * (timeoutMs ?? 0));
}

/** What recovery does with an error no rule knows. */
export type UnknownPolicy = "retry-once" | "none";

/** Recovery chains by pattern, overriding the rules' chains. */
export type Plans = Partial<Record<Pattern, readonly PlanStep[]>>;

export interface RecoveryOptions {
  /** Providers tools can fail over to, with prices; a tool lists its own in `providers`. */
  providers?: ProviderConfig[];
  /** Chains by pattern for every tool (a tool's own `plans` win). */
  plans?: Plans;
  /** exponential_backoff_with_jitter: `baseMs` 1000, `factor` 2, `maxAttempts` 5, `jitter` 0.3, `maxRetryAfterMs` 60000. */
  backoff?: Partial<BackoffOptions>;
  /** retry_with_longer_timeout: doublings (default 3). */
  maxTimeoutDoublings?: number;
  /** retry_with_longer_timeout: the timeout doubled when a tool has none, ms (default 30000). */
  baseTimeoutMs?: number;
  /**
   * `baseOpenMs` 5 s doubling per failed probe up to `maxOpenMs` 5 min, `probeTimeoutMs` 10 s,
   * `failureRate` 0.5 over `minimumAttempts` 5 in `windowMs` 5 min.
   */
  breaker?: Partial<BreakerOptions>;
  /**
   * The longest a call may take, recovery included, ms (default: the larger of 60 s and 3 x the
   * tool's `timeoutMs`). A tool's or a call's own `deadlineMs` wins.
   */
  deadlineMs?: number;
  /**
   * What to do with an error no rule knows (UNKNOWN): `"retry-once"` (default) retries a call
   * that may run again (a read, or a write with an idempotency key) once on the same route, then
   * on the next provider; `"none"` passes the error on. Either way it counts for drift.
   */
  unknown?: UnknownPolicy;
  /** Recovery spend allowed per task, USD (default 1). */
  budgetUsd?: number;
  /** Idempotency ledger: `ttlMs` 24 h, `maxEntries` 10000. */
  ledger?: Partial<LedgerOptions>;
  /** Where escalations go (`selfheal/notify`); none by default. */
  notifiers?: Notifier[];
  /** One alert of a kind per period, ms (default 10 min). */
  throttleMs?: number;
  /** Per notifier send, ms (default 5000). */
  notifyTimeoutMs?: number;
  /** Warm-up probe period for providers with `warmup`, ms (default 15 min). */
  warmupIntervalMs?: number;
  /**
   * Append every recovery event to this JSONL file; as an object, rotate it: past `maxBytes`
   * (default 50 MB) it becomes `path.1`, older ones shift, up to `keep` (default 5) are kept.
   */
  eventLog?: string | EventLogOptions;
  /** Source of jitter (default Math.random); the simulator passes a seeded one. */
  random?: () => number;
}

export interface SelfHealingOptions {
  /** Agent name: `gen_ai.agent.name` and the `agent` label of every metric. */
  agent: string;
  /** Signal store; default an in-memory store (no server). */
  store?: SignalStore;
  /** Time source; default the system clock. Tests and the simulator pass a virtual one. */
  clock?: Clock;
  /** Default the global tracer provider (a no-op until an SDK is registered). */
  tracerProvider?: TracerProvider;
  /** Default the global meter provider. */
  meterProvider?: MeterProvider;
  health?: HealthOptions;
  diagnosis?: DiagnosisOptions;
  recovery?: RecoveryOptions;
  /** Put tool arguments (redacted, truncated) on spans. Off by default: they may hold user data. */
  recordArguments?: boolean;
  /** Put tool results (redacted, truncated) on spans. Off by default. */
  recordResults?: boolean;
  /** Longest error text written on a span, in characters (default 1024). */
  maxErrorLength?: number;
  /** Default `console`. */
  logger?: Logger;
}

export type ToolKind = "tool" | "llm";

export interface ToolOptions<A = unknown, R = unknown> {
  /** Required: whether the tool only reads. Write tools are refused while health is critical. */
  readOnly: boolean;
  /** `llm` tools feed the empty-response signal. Default `tool`. */
  kind?: ToolKind;
  /** Abort an attempt after this many ms (the tool's signal is aborted, the attempt fails). */
  timeoutMs?: number;
  /** The longest a call may take, recovery included, ms (default `recovery.deadlineMs`). */
  deadlineMs?: number;
  /** Key that makes a write safe to repeat; reaches the tool on every attempt. */
  idempotencyKey?: (args: A) => string | undefined;
  /** For `llm` tools: whether a result counts as empty. Default: see `isEmptyResponse`. */
  isEmpty?: (result: R) => boolean;
  /** Provider behind the tool (`gen_ai.provider.name`), e.g. `openai`. */
  provider?: string;
  /** `gen_ai.tool.type` (`function`, `extension`, `datastore`); not set when omitted. */
  type?: string;
  /**
   * Providers this tool can use, primary first, each declared in `recovery.providers`: the call
   * context's `provider` says which one to call. Default: `[provider]` when set.
   */
  providers?: readonly string[];
  /** Recovery chains by pattern for this tool. */
  plans?: Plans;
  /**
   * A canned answer for when no route can answer: every route's circuit is open, or recovery
   * ran out of routes and the plan reached `circuit_break`. Not failover: another provider goes
   * in `providers`.
   */
  cannedAnswer?: (args: A, error: unknown) => R | Promise<R>;
}

/** Options passed by the caller of a wrapped tool, per call. */
export interface CallOptions {
  /** Aborting it aborts the call. */
  signal?: AbortSignal;
  /** Overrides the tool's `idempotencyKey(args)`. */
  idempotencyKey?: string;
  /** The model's id for this tool call (`gen_ai.tool.call.id`). */
  toolCallId?: string;
  /** Overrides the tool's `timeoutMs` for this call. */
  timeoutMs?: number;
  /** Overrides the tool's `deadlineMs` for this call: the whole call, recovery included. */
  deadlineMs?: number;
}

export type ToolFunction<A, R> = (args: A, context: CallContext) => R | Promise<R>;

/** Options after validation, with every default filled in. */
export interface ResolvedRecovery {
  providers: Map<string, ProviderConfig>;
  plans: Plans;
  backoff: BackoffOptions;
  maxTimeoutDoublings: number;
  baseTimeoutMs: number;
  breaker: BreakerOptions;
  /** Undefined: the default (the larger of 60 s and 3 x the tool's timeout). */
  deadlineMs: number | undefined;
  unknown: UnknownPolicy;
  budgetUsd: number;
  ledger: LedgerOptions;
  notifiers: Notifier[];
  throttleMs: number;
  notifyTimeoutMs: number;
  warmupIntervalMs: number;
  eventLog: ResolvedEventLog | undefined;
  random: () => number;
}

export interface ResolvedOptions {
  agent: string;
  store: SignalStore;
  ownsStore: boolean;
  clock: Clock;
  tracerProvider: TracerProvider | undefined;
  meterProvider: MeterProvider | undefined;
  thresholds: HealthThresholds;
  toolThresholds: Record<string, ThresholdOverrides>;
  cacheMs: number;
  baselineTauMs: number;
  rules: CompiledRule[];
  statusPages: Record<string, string>;
  statusPageTimeoutMs: number;
  statusPageCacheMs: number;
  drift: DriftOptions;
  escalateUnknown: EscalateUnknown | undefined;
  escalateTimeoutMs: number;
  statusPageFetch: typeof fetch | undefined;
  recovery: ResolvedRecovery;
  recordArguments: boolean;
  recordResults: boolean;
  maxErrorLength: number;
  logger: Logger;
}

// ---- validation ----------------------------------------------------------------------------

type Plain = Record<string, unknown>;

/** A bad value, briefly, for an error message. */
function show(value: unknown): string {
  return redact(boundedJson(value) ?? typeof value, 80); // redacted before it is cut
}

function isPlain(value: unknown): value is Plain {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What a value is, for "expected …, got …" messages: `null` and arrays by name. */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

function object(value: unknown, field: string): Plain {
  if (!isPlain(value))
    throw new SelfHealConfigError(field, `expected an object, got ${kindOf(value)}`);
  return value;
}

/** An object with the methods selfheal calls on it, each named when missing. */
function withMethods(value: unknown, field: string, methods: readonly string[]): void {
  const o = object(value, field);
  for (const method of methods) {
    if (typeof o[method] !== "function")
      throw new SelfHealConfigError(field, `missing method ${method}()`);
  }
}

/**
 * The longest timer Node.js runs: a longer delay is replaced by 1 ms with a warning
 * (TimeoutOverflowWarning), so a timeout of 2^31 ms would fire at once on every call.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

function knownKeys(value: Plain, allowed: readonly string[], field: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new SelfHealConfigError(
        field ? `${field}.${key}` : key,
        `unknown option (known: ${allowed.join(", ")})`,
      );
    }
  }
}

interface NumberRule {
  min?: number;
  max?: number;
  integer?: boolean;
  nullable?: boolean;
}

function number(value: unknown, field: string, rule: NumberRule = {}): void {
  if (value === null && rule.nullable) return;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new SelfHealConfigError(
      field,
      `expected a finite number${rule.nullable ? " or null" : ""}, got ${String(value)}`,
    );
  }
  if (rule.integer && !Number.isInteger(value))
    throw new SelfHealConfigError(field, `expected an integer, got ${value}`);
  if (rule.min !== undefined && value < rule.min)
    throw new SelfHealConfigError(field, `must be >= ${rule.min}, got ${value}`);
  if (rule.max !== undefined && value > rule.max) {
    const why =
      rule.max === MAX_TIMER_MS ? " (the longest timer Node.js runs, about 24.8 days)" : "";
    throw new SelfHealConfigError(field, `must be <= ${rule.max}${why}, got ${value}`);
  }
}

function nonEmptyString(value: unknown, field: string): asserts value is string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new SelfHealConfigError(field, `expected a non-empty string, got ${show(value)}`);
  }
}

function optionalFunction(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== "function") {
    throw new SelfHealConfigError(field, `expected a function, got ${typeof value}`);
  }
}

function optionalBoolean(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== "boolean") {
    throw new SelfHealConfigError(field, `expected true or false, got ${show(value)}`);
  }
}

const SHARE = { min: 0, max: 1, nullable: true };
const COUNT = { min: 0, integer: true };
/** A duration in ms, at least `min`, at most the longest timer Node.js runs. */
const ms = (min: number): NumberRule => ({ min, max: MAX_TIMER_MS });

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
  const groups: Record<keyof HealthThresholds, Record<string, NumberRule>> = {
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
  for (const [group, rules] of Object.entries(groups)) {
    if (o[group] === undefined) continue;
    const g = object(o[group], `${field}.${group}`);
    knownKeys(g, Object.keys(rules), `${field}.${group}`);
    for (const [key, rule] of Object.entries(rules)) {
      if (g[key] !== undefined) number(g[key], `${field}.${group}.${key}`, rule);
    }
  }
  return o;
}

const TOP_LEVEL = [
  "agent",
  "store",
  "clock",
  "tracerProvider",
  "meterProvider",
  "health",
  "diagnosis",
  "recovery",
  "recordArguments",
  "recordResults",
  "maxErrorLength",
  "logger",
] as const satisfies readonly (keyof SelfHealingOptions)[];

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

/** Validates user options once, at construction; every message names the bad field. */
export function resolveOptions(input: unknown): ResolvedOptions {
  const o = object(input, "options");
  knownKeys(o, TOP_LEVEL, "");
  nonEmptyString(o.agent, "agent");
  if (o.store !== undefined) withMethods(o.store, "store", ["recordCall", "recordTask", "read"]);
  if (o.clock !== undefined) withMethods(o.clock, "clock", ["now", "sleep", "setTimer"]);
  if (o.tracerProvider !== undefined)
    withMethods(o.tracerProvider, "tracerProvider", ["getTracer"]);
  if (o.meterProvider !== undefined) withMethods(o.meterProvider, "meterProvider", ["getMeter"]);
  optionalBoolean(o.recordArguments, "recordArguments");
  optionalBoolean(o.recordResults, "recordResults");
  if (o.maxErrorLength !== undefined)
    number(o.maxErrorLength, "maxErrorLength", { min: 16, integer: true });
  if (o.logger !== undefined) withMethods(o.logger, "logger", ["warn"]);

  const health = o.health === undefined ? {} : object(o.health, "health");
  knownKeys(health, HEALTH_KEYS, "health");
  const overrides = validateThresholds(
    Object.fromEntries(Object.entries(health).filter(([k]) => k in DEFAULT_THRESHOLDS)),
    "health",
  );
  if (health.cacheMs !== undefined) number(health.cacheMs, "health.cacheMs", ms(0));
  if (health.baselineTauMs !== undefined)
    number(health.baselineTauMs, "health.baselineTauMs", ms(1));
  const windows = health.windows === undefined ? {} : object(health.windows, "health.windows");
  knownKeys(windows, Object.keys(DEFAULT_WINDOWS), "health.windows");
  for (const key of ["callWindowMs", "taskWindowMs", "recentWindowMs"]) {
    if (windows[key] !== undefined) number(windows[key], `health.windows.${key}`, ms(1_000));
  }
  const callWindowMs = (windows.callWindowMs as number | undefined) ?? DEFAULT_WINDOWS.callWindowMs;
  const recentWindowMs =
    (windows.recentWindowMs as number | undefined) ?? DEFAULT_WINDOWS.recentWindowMs;
  if (recentWindowMs > callWindowMs) {
    throw new SelfHealConfigError(
      "health.windows.recentWindowMs",
      `must not exceed callWindowMs (${callWindowMs}), got ${recentWindowMs}`,
    );
  }
  if (windows.buckets !== undefined)
    number(windows.buckets, "health.windows.buckets", { min: 1, max: 3_600, integer: true });
  if (windows.llmSampleSize !== undefined) {
    number(windows.llmSampleSize, "health.windows.llmSampleSize", {
      min: 1,
      max: 100_000,
      integer: true,
    });
  }
  const tools = health.tools === undefined ? {} : object(health.tools, "health.tools");
  const thresholds = mergeThresholds(DEFAULT_THRESHOLDS, overrides);
  checkThresholdOrder(thresholds, "health");
  const toolThresholds: Record<string, ThresholdOverrides> = {};
  for (const [name, value] of Object.entries(tools)) {
    toolThresholds[name] = validateThresholds(value, `health.tools.${name}`);
    checkThresholdOrder(mergeThresholds(thresholds, toolThresholds[name]), `health.tools.${name}`);
  }
  if (o.store !== undefined && health.windows !== undefined) {
    throw new SelfHealConfigError(
      "health.windows",
      "set window sizes on the store you pass, not here",
    );
  }

  const diagnosis = resolveDiagnosis(o.diagnosis);
  const opts = o as unknown as SelfHealingOptions;
  return {
    agent: opts.agent,
    store: opts.store ?? new MemorySignalStore(windows),
    ownsStore: opts.store === undefined,
    clock: opts.clock ?? systemClock,
    tracerProvider: opts.tracerProvider,
    meterProvider: opts.meterProvider,
    thresholds,
    toolThresholds,
    cacheMs: (health.cacheMs as number | undefined) ?? DEFAULT_STATUS_CACHE_MS,
    baselineTauMs: (health.baselineTauMs as number | undefined) ?? DEFAULT_BASELINE_TAU_MS,
    ...diagnosis,
    recovery: resolveRecovery(o.recovery),
    recordArguments: opts.recordArguments ?? false,
    recordResults: opts.recordResults ?? false,
    maxErrorLength: opts.maxErrorLength ?? DEFAULT_MAX_TEXT_LENGTH,
    logger: safeLogger(opts.logger ?? console),
  };
}

const DIAGNOSIS_KEYS = [
  "rules",
  "statusPages",
  "statusPageTimeoutMs",
  "statusPageCacheMs",
  "drift",
  "escalateUnknown",
  "escalateTimeoutMs",
  "fetch",
] as const satisfies readonly (keyof DiagnosisOptions)[];

function resolveDiagnosis(input: unknown) {
  const d = input === undefined ? {} : object(input, "diagnosis");
  knownKeys(d, DIAGNOSIS_KEYS, "diagnosis");
  let rules: unknown = DEFAULT_RULES;
  if (typeof d.rules === "function") {
    rules = (d.rules as (defaults: readonly Rule[]) => unknown)(DEFAULT_RULES);
  } else if (d.rules !== undefined) {
    rules = d.rules;
  }
  const pages = d.statusPages === undefined ? {} : object(d.statusPages, "diagnosis.statusPages");
  for (const [key, url] of Object.entries(pages)) {
    const field = `diagnosis.statusPages.${key}`;
    if (typeof url !== "string" || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new SelfHealConfigError(field, `expected an http(s) URL, got ${show(url)}`);
    }
  }
  for (const key of ["statusPageTimeoutMs", "statusPageCacheMs", "escalateTimeoutMs"]) {
    if (d[key] !== undefined) number(d[key], `diagnosis.${key}`, ms(1));
  }
  const drift = d.drift === undefined ? {} : object(d.drift, "diagnosis.drift");
  knownKeys(drift, Object.keys(DEFAULT_DRIFT), "diagnosis.drift");
  if (drift.threshold !== undefined)
    number(drift.threshold, "diagnosis.drift.threshold", { min: 0, max: 1 });
  for (const key of ["window", "minSamples", "keepSamples"]) {
    if (drift[key] !== undefined)
      number(drift[key], `diagnosis.drift.${key}`, { min: 1, max: 100_000, integer: true });
  }
  optionalFunction(d.escalateUnknown, "diagnosis.escalateUnknown");
  optionalFunction(d.fetch, "diagnosis.fetch");
  return {
    rules: compileRules(rules),
    statusPages: pages as Record<string, string>,
    statusPageTimeoutMs:
      (d.statusPageTimeoutMs as number | undefined) ?? DEFAULT_STATUS_PAGE_TIMEOUT_MS,
    statusPageCacheMs: (d.statusPageCacheMs as number | undefined) ?? DEFAULT_STATUS_PAGE_CACHE_MS,
    drift: { ...DEFAULT_DRIFT, ...(drift as Partial<DriftOptions>) },
    escalateUnknown: d.escalateUnknown as EscalateUnknown | undefined,
    escalateTimeoutMs: (d.escalateTimeoutMs as number | undefined) ?? DEFAULT_ADVICE_TIMEOUT_MS,
    statusPageFetch: d.fetch as typeof fetch | undefined,
  };
}

const RECOVERY_KEYS = [
  "providers",
  "plans",
  "backoff",
  "maxTimeoutDoublings",
  "baseTimeoutMs",
  "breaker",
  "deadlineMs",
  "unknown",
  "budgetUsd",
  "ledger",
  "notifiers",
  "throttleMs",
  "notifyTimeoutMs",
  "warmupIntervalMs",
  "eventLog",
  "random",
] as const satisfies readonly (keyof RecoveryOptions)[];

function plans(value: unknown, field: string): Plans {
  const o = object(value, field);
  for (const [pattern, plan] of Object.entries(o)) {
    if (!PATTERNS.includes(pattern as Pattern)) {
      throw new SelfHealConfigError(
        `${field}.${pattern}`,
        `unknown pattern (known: ${PATTERNS.join(", ")})`,
      );
    }
    checkPlan(plan, `${field}.${pattern}`);
  }
  return o;
}

/** Numbers of a group: each key of `rules` that is set must satisfy its rule. */
function numbers(group: Plain, rules: Record<string, NumberRule>, field: string): void {
  knownKeys(group, Object.keys(rules), field);
  for (const [key, rule] of Object.entries(rules)) {
    if (group[key] !== undefined) number(group[key], `${field}.${key}`, rule);
  }
}

/** `recovery.eventLog`: a path, or { path, maxBytes, keep }; the file must be writable now. */
function resolveEventLog(value: unknown): ResolvedEventLog {
  const field = "recovery.eventLog";
  const o: Plain = typeof value === "string" ? { path: value } : object(value, field);
  knownKeys(o, ["path", "maxBytes", "keep"], field);
  nonEmptyString(o.path, typeof value === "string" ? field : `${field}.path`);
  if (o.maxBytes !== undefined) number(o.maxBytes, `${field}.maxBytes`, { min: 1, integer: true });
  if (o.keep !== undefined) number(o.keep, `${field}.keep`, { min: 1, max: 1000, integer: true });
  const problem = eventLogProblem(o.path);
  if (problem !== undefined) throw new SelfHealConfigError(field, `cannot write: ${problem}`);
  return {
    path: o.path,
    maxBytes: (o.maxBytes as number | undefined) ?? DEFAULT_EVENT_LOG_MAX_BYTES,
    keep: (o.keep as number | undefined) ?? DEFAULT_EVENT_LOG_KEEP,
  };
}

function resolveRecovery(input: unknown): ResolvedRecovery {
  const r = input === undefined ? {} : object(input, "recovery");
  knownKeys(r, RECOVERY_KEYS, "recovery");
  const providers = new Map<string, ProviderConfig>();
  if (r.providers !== undefined) {
    if (!Array.isArray(r.providers))
      throw new SelfHealConfigError("recovery.providers", "expected a list of providers");
    (r.providers as unknown[]).forEach((value, i) => {
      const p = object(value, `recovery.providers[${i}]`);
      knownKeys(
        p,
        ["name", "model", "baseUrl", "usdPer1kTokens", "usdPerCall", "warmup"],
        `recovery.providers[${i}]`,
      );
      nonEmptyString(p.name, `recovery.providers[${i}].name`);
      if (p.model !== undefined) nonEmptyString(p.model, `recovery.providers[${i}].model`);
      if (p.baseUrl !== undefined && (typeof p.baseUrl !== "string" || !URL.canParse(p.baseUrl))) {
        throw new SelfHealConfigError(
          `recovery.providers[${i}].baseUrl`,
          `expected a URL, got ${show(p.baseUrl)}`,
        );
      }
      if (providers.has(p.name))
        throw new SelfHealConfigError(
          `recovery.providers[${i}].name`,
          `"${p.name}" is listed twice`,
        );
      for (const key of ["usdPer1kTokens", "usdPerCall"]) {
        if (p[key] !== undefined) number(p[key], `recovery.providers[${i}].${key}`, { min: 0 });
      }
      optionalFunction(p.warmup, `recovery.providers[${i}].warmup`);
      providers.set(p.name, p as unknown as ProviderConfig);
    });
  }
  const group = (key: string) => (r[key] === undefined ? {} : object(r[key], `recovery.${key}`));
  const backoff = group("backoff");
  numbers(
    backoff,
    {
      baseMs: ms(1),
      factor: { min: 1 },
      maxAttempts: { min: 1, max: 100, integer: true },
      jitter: { min: 0, max: 1 },
      maxRetryAfterMs: ms(0),
    },
    "recovery.backoff",
  );
  const breaker = group("breaker");
  if (breaker.openMs !== undefined) {
    throw new SelfHealConfigError(
      "recovery.breaker.openMs",
      "the open period now adapts: set baseOpenMs (first open, default 5000) and maxOpenMs (cap, default 300000)",
    );
  }
  numbers(
    breaker,
    {
      baseOpenMs: ms(1),
      maxOpenMs: ms(1),
      probeTimeoutMs: ms(1),
      failureRate: { min: 0, max: 1 },
      minimumAttempts: { min: 1, integer: true },
      windowMs: ms(1_000),
    },
    "recovery.breaker",
  );
  const breakerOptions = { ...DEFAULT_BREAKER, ...(breaker as Partial<BreakerOptions>) };
  if (breakerOptions.maxOpenMs < breakerOptions.baseOpenMs) {
    throw new SelfHealConfigError(
      "recovery.breaker.maxOpenMs",
      `must be >= baseOpenMs (${breakerOptions.baseOpenMs}), got ${breakerOptions.maxOpenMs}`,
    );
  }
  if (r.deadlineMs !== undefined) number(r.deadlineMs, "recovery.deadlineMs", ms(1));
  if (r.unknown !== undefined && r.unknown !== "retry-once" && r.unknown !== "none") {
    throw new SelfHealConfigError(
      "recovery.unknown",
      `expected "retry-once" or "none", got ${show(r.unknown)}`,
    );
  }
  const ledger = group("ledger");
  numbers(ledger, { ttlMs: ms(1), maxEntries: { min: 1, integer: true } }, "recovery.ledger");
  numbers(
    Object.fromEntries(
      [
        "maxTimeoutDoublings",
        "baseTimeoutMs",
        "budgetUsd",
        "throttleMs",
        "notifyTimeoutMs",
        "warmupIntervalMs",
      ]
        .filter((k) => r[k] !== undefined)
        .map((k) => [k, r[k]]),
    ),
    {
      maxTimeoutDoublings: { min: 1, max: 10, integer: true },
      baseTimeoutMs: ms(1),
      budgetUsd: { min: 0 },
      throttleMs: ms(0),
      notifyTimeoutMs: ms(1),
      warmupIntervalMs: ms(1_000),
    },
    "recovery",
  );
  if (r.notifiers !== undefined) {
    if (!Array.isArray(r.notifiers))
      throw new SelfHealConfigError("recovery.notifiers", "expected a list of notifiers");
    (r.notifiers as unknown[]).forEach((n, i) => {
      const notifier = object(n, `recovery.notifiers[${i}]`);
      if (typeof notifier.send !== "function" || typeof notifier.channel !== "string") {
        throw new SelfHealConfigError(
          `recovery.notifiers[${i}]`,
          "expected { channel, send() } (see selfheal/notify)",
        );
      }
    });
  }
  const eventLog = r.eventLog === undefined ? undefined : resolveEventLog(r.eventLog);
  optionalFunction(r.random, "recovery.random");
  return {
    providers,
    plans: r.plans === undefined ? {} : plans(r.plans, "recovery.plans"),
    backoff: { ...DEFAULT_BACKOFF, ...(backoff as Partial<BackoffOptions>) },
    maxTimeoutDoublings: (r.maxTimeoutDoublings as number | undefined) ?? 3,
    baseTimeoutMs: (r.baseTimeoutMs as number | undefined) ?? 30_000,
    breaker: breakerOptions,
    deadlineMs: r.deadlineMs as number | undefined,
    unknown: r.unknown ?? "retry-once",
    budgetUsd: (r.budgetUsd as number | undefined) ?? 1,
    ledger: { ...DEFAULT_LEDGER, ...(ledger as Partial<LedgerOptions>) },
    notifiers: (r.notifiers as Notifier[] | undefined) ?? [],
    throttleMs: (r.throttleMs as number | undefined) ?? DEFAULT_THROTTLE_MS,
    notifyTimeoutMs: (r.notifyTimeoutMs as number | undefined) ?? DEFAULT_NOTIFY_TIMEOUT_MS,
    warmupIntervalMs: (r.warmupIntervalMs as number | undefined) ?? 15 * 60_000,
    eventLog,
    random: (r.random as (() => number) | undefined) ?? Math.random,
  };
}

const TOOL_KEYS = [
  "readOnly",
  "kind",
  "timeoutMs",
  "deadlineMs",
  "idempotencyKey",
  "isEmpty",
  "provider",
  "type",
  "providers",
  "plans",
  "cannedAnswer",
] as const satisfies readonly (keyof ToolOptions)[];

/** Validates the options of one tool; `readOnly` has no default on purpose. */
export function validateToolOptions(
  name: unknown,
  input: unknown,
  fn: unknown,
  knownProviders: ReadonlyMap<string, unknown>,
): void {
  nonEmptyString(name, "tool(name)");
  const field = `tool("${name}").options`;
  const o = object(input, field);
  if (o.fallback !== undefined) {
    throw new SelfHealConfigError(
      `${field}.fallback`,
      "renamed to cannedAnswer (the answer given when no route can answer); failover to another provider is `providers`",
    );
  }
  knownKeys(o, TOOL_KEYS, field);
  if (typeof o.readOnly !== "boolean") {
    throw new SelfHealConfigError(
      `${field}.readOnly`,
      "required: say whether the tool writes (readOnly: false) or only reads (readOnly: true); write tools are refused while health is critical",
    );
  }
  if (o.kind !== undefined && o.kind !== "tool" && o.kind !== "llm") {
    throw new SelfHealConfigError(`${field}.kind`, `expected "tool" or "llm", got ${show(o.kind)}`);
  }
  if (o.timeoutMs !== undefined) number(o.timeoutMs, `${field}.timeoutMs`, ms(1));
  if (o.deadlineMs !== undefined) number(o.deadlineMs, `${field}.deadlineMs`, ms(1));
  optionalFunction(o.idempotencyKey, `${field}.idempotencyKey`);
  optionalFunction(o.isEmpty, `${field}.isEmpty`);
  if (o.provider !== undefined) nonEmptyString(o.provider, `${field}.provider`);
  if (o.type !== undefined) nonEmptyString(o.type, `${field}.type`);
  if (o.providers !== undefined) {
    if (!Array.isArray(o.providers) || o.providers.length === 0) {
      throw new SelfHealConfigError(
        `${field}.providers`,
        "expected a non-empty list of provider names, primary first",
      );
    }
    for (const p of o.providers as unknown[]) {
      if (typeof p !== "string" || !knownProviders.has(p)) {
        throw new SelfHealConfigError(
          `${field}.providers`,
          `${show(p)} is not declared in recovery.providers`,
        );
      }
    }
  }
  if (o.plans !== undefined) plans(o.plans, `${field}.plans`);
  optionalFunction(o.cannedAnswer, `${field}.cannedAnswer`);
  if (typeof fn !== "function")
    throw new SelfHealConfigError(`tool("${name}")`, "the last argument must be the tool function");
}

/** Validates per-call options of a wrapped tool. */
const NO_CALL_OPTIONS: CallOptions = Object.freeze({});

export function validateCallOptions(tool: string, input: unknown): CallOptions {
  if (input === undefined) return NO_CALL_OPTIONS;
  const field = `${tool}(args, options)`;
  const o = object(input, field);
  knownKeys(o, ["signal", "idempotencyKey", "toolCallId", "timeoutMs", "deadlineMs"], field);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new SelfHealConfigError(`${field}.signal`, "expected an AbortSignal");
  }
  if (o.idempotencyKey !== undefined) nonEmptyString(o.idempotencyKey, `${field}.idempotencyKey`);
  if (o.toolCallId !== undefined) nonEmptyString(o.toolCallId, `${field}.toolCallId`);
  if (o.timeoutMs !== undefined) number(o.timeoutMs, `${field}.timeoutMs`, ms(1));
  if (o.deadlineMs !== undefined) number(o.deadlineMs, `${field}.deadlineMs`, ms(1));
  return o;
}
