import { SelfHealConfigError } from "../../errors.js";
import { checkPlan, type PlanStep } from "../../diagnosis/rules.js";
import type { Notifier } from "../../notify/notifier.js";
import { DEFAULT_NOTIFY_TIMEOUT_MS, DEFAULT_THROTTLE_MS } from "../../notify/escalator.js";
import { DEFAULT_BACKOFF, type BackoffOptions } from "../../recovery/backoff.js";
import {
  DEFAULT_BREAKER,
  DEFAULT_MAX_PROBE_WAIT_MS,
  type BreakerOptions,
} from "../../recovery/breaker.js";
import {
  DEFAULT_LEDGER,
  type LedgerOptions,
  type WhenFleetDown,
} from "../../recovery/idempotency.js";
import {
  DEFAULT_EVENT_LOG_KEEP,
  DEFAULT_EVENT_LOG_MAX_BYTES,
  eventLogProblem,
  type EventLogOptions,
  type ResolvedEventLog,
} from "../../recovery/event-log.js";
import type { ProviderConfig } from "../../recovery/providers.js";
import { PATTERNS, type Pattern } from "../../telemetry/conventions.js";
import {
  knownKeys,
  ms,
  nonEmptyString,
  number,
  numberGroup,
  numbers,
  object,
  optionalChoice,
  optionalFunction,
  optionalList,
  optionalObject,
  optionalString,
  show,
  type NumberRule,
  type NumberRules,
  type Plain,
} from "./validate.js";

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
  /**
   * A call that finds every route of its tool open (or cooling down after a 429) waits for the
   * half-open probe only when it is due within this many ms (default 2000); otherwise it fails at
   * once with `CircuitOpenError`, whose `retryAfterMs` says when to try again. 0: never wait.
   */
  maxProbeWaitMs?: number;
  /** Recovery spend allowed per task, USD (default 1). */
  budgetUsd?: number;
  /**
   * Idempotency ledger: `ttlMs` 24 h, `maxEntries` 10000, `whenFleetDown` `"refuse"` (a keyed
   * write that cannot ask the fleet's ledger waits for it up to `fleetWaitMs`, 3 s, within its
   * deadline, then fails with `FleetUnavailableError`, nothing sent; `"local"`: it decides with
   * this worker's own ledger).
   */
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
  maxProbeWaitMs: number;
  budgetUsd: number;
  ledger: LedgerOptions;
  notifiers: Notifier[];
  throttleMs: number;
  notifyTimeoutMs: number;
  warmupIntervalMs: number;
  eventLog: ResolvedEventLog | undefined;
  random: () => number;
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
  "maxProbeWaitMs",
  "budgetUsd",
  "ledger",
  "notifiers",
  "throttleMs",
  "notifyTimeoutMs",
  "warmupIntervalMs",
  "eventLog",
  "random",
] as const satisfies readonly (keyof RecoveryOptions)[];

const UNKNOWN_POLICIES: readonly UnknownPolicy[] = ["retry-once", "none"];

const PROVIDER_KEYS = [
  "name",
  "model",
  "baseUrl",
  "usdPer1kTokens",
  "usdPerCall",
  "warmup",
] as const satisfies readonly (keyof ProviderConfig)[];
const PRICE_RULES = { usdPer1kTokens: { min: 0 }, usdPerCall: { min: 0 } } satisfies NumberRules;

const BACKOFF_RULES = {
  baseMs: ms(1),
  factor: { min: 1 },
  maxAttempts: { min: 1, max: 100, integer: true },
  jitter: { min: 0, max: 1 },
  maxRetryAfterMs: ms(0),
} satisfies Record<keyof BackoffOptions, NumberRule>;

const BREAKER_RULES = {
  baseOpenMs: ms(1),
  maxOpenMs: ms(1),
  probeTimeoutMs: ms(1),
  failureRate: { min: 0, max: 1 },
  minimumAttempts: { min: 1, integer: true },
  windowMs: ms(1_000),
} satisfies Record<keyof BreakerOptions, NumberRule>;

const LEDGER_RULES = {
  ttlMs: ms(1),
  maxEntries: { min: 1, integer: true },
  fleetWaitMs: ms(1),
} satisfies Record<Exclude<keyof LedgerOptions, "whenFleetDown">, NumberRule>;

const LEDGER_KEYS = [
  "ttlMs",
  "maxEntries",
  "whenFleetDown",
  "fleetWaitMs",
] as const satisfies readonly (keyof LedgerOptions)[];

const FLEET_DOWN_CHOICES: readonly WhenFleetDown[] = ["refuse", "local"];

/** The numbers directly under `recovery` (`deadlineMs` is checked on its own, earlier). */
const SCALAR_RULES = {
  maxTimeoutDoublings: { min: 1, max: 10, integer: true },
  baseTimeoutMs: ms(1),
  maxProbeWaitMs: ms(0),
  budgetUsd: { min: 0 },
  throttleMs: ms(0),
  notifyTimeoutMs: ms(1),
  warmupIntervalMs: ms(1_000),
} satisfies NumberRules;

/** Chains by pattern, for every tool (`recovery.plans`) or one (`plans` in its options). */
export function plans(value: unknown, field: string): Plans {
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

function resolveProviders(value: unknown): Map<string, ProviderConfig> {
  const providers = new Map<string, ProviderConfig>();
  // forEach, not for…of: a hole in a sparse list is skipped, as it always was.
  optionalList(value, "recovery.providers", "providers").forEach((item, i) => {
    const field = `recovery.providers[${i}]`;
    const p = object(item, field);
    knownKeys(p, PROVIDER_KEYS, field);
    nonEmptyString(p.name, `${field}.name`);
    optionalString(p.model, `${field}.model`);
    if (p.baseUrl !== undefined && (typeof p.baseUrl !== "string" || !URL.canParse(p.baseUrl))) {
      throw new SelfHealConfigError(`${field}.baseUrl`, `expected a URL, got ${show(p.baseUrl)}`);
    }
    if (providers.has(p.name))
      throw new SelfHealConfigError(`${field}.name`, `"${p.name}" is listed twice`);
    numbers(p, PRICE_RULES, field);
    optionalFunction(p.warmup, `${field}.warmup`);
    providers.set(p.name, p as unknown as ProviderConfig);
  });
  return providers;
}

function resolveBreaker(value: unknown): BreakerOptions {
  const breaker = optionalObject(value, "recovery.breaker");
  // Before the unknown-key check, so the old name gets a migration hint, not "unknown option".
  if (breaker.openMs !== undefined) {
    throw new SelfHealConfigError(
      "recovery.breaker.openMs",
      "the open period now adapts: set baseOpenMs (first open, default 5000) and maxOpenMs (cap, default 300000)",
    );
  }
  numberGroup(breaker, BREAKER_RULES, "recovery.breaker");
  const options = { ...DEFAULT_BREAKER, ...(breaker as Partial<BreakerOptions>) };
  if (options.maxOpenMs < options.baseOpenMs) {
    throw new SelfHealConfigError(
      "recovery.breaker.maxOpenMs",
      `must be >= baseOpenMs (${options.baseOpenMs}), got ${options.maxOpenMs}`,
    );
  }
  return options;
}

/** `recovery.ledger`: its numbers, and what a keyed write does when the fleet cannot be asked. */
function resolveLedger(value: unknown): LedgerOptions {
  const field = "recovery.ledger";
  const ledger = optionalObject(value, field);
  knownKeys(ledger, LEDGER_KEYS, field);
  numbers(ledger, LEDGER_RULES, field);
  const whenFleetDown = optionalChoice(
    ledger.whenFleetDown,
    FLEET_DOWN_CHOICES,
    `${field}.whenFleetDown`,
  );
  return {
    ttlMs: (ledger.ttlMs as number | undefined) ?? DEFAULT_LEDGER.ttlMs,
    maxEntries: (ledger.maxEntries as number | undefined) ?? DEFAULT_LEDGER.maxEntries,
    whenFleetDown: whenFleetDown ?? DEFAULT_LEDGER.whenFleetDown,
    fleetWaitMs: (ledger.fleetWaitMs as number | undefined) ?? DEFAULT_LEDGER.fleetWaitMs,
  };
}

function resolveNotifiers(value: unknown): Notifier[] {
  const list = optionalList(value, "recovery.notifiers", "notifiers");
  list.forEach((n, i) => {
    const notifier = object(n, `recovery.notifiers[${i}]`);
    if (typeof notifier.send !== "function" || typeof notifier.channel !== "string") {
      throw new SelfHealConfigError(
        `recovery.notifiers[${i}]`,
        "expected { channel, send() } (see selfheal/notify)",
      );
    }
  });
  return list as Notifier[];
}

/** `recovery.eventLog`: a path, or { path, maxBytes, keep }; the file must be writable now. */
function resolveEventLog(value: unknown): ResolvedEventLog {
  const field = "recovery.eventLog";
  const o: Plain = typeof value === "string" ? { path: value } : object(value, field);
  knownKeys(o, ["path", "maxBytes", "keep"], field);
  nonEmptyString(o.path, typeof value === "string" ? field : `${field}.path`);
  numbers(
    o,
    { maxBytes: { min: 1, integer: true }, keep: { min: 1, max: 1000, integer: true } },
    field,
  );
  const problem = eventLogProblem(o.path);
  if (problem !== undefined) throw new SelfHealConfigError(field, `cannot write: ${problem}`);
  return {
    path: o.path,
    maxBytes: (o.maxBytes as number | undefined) ?? DEFAULT_EVENT_LOG_MAX_BYTES,
    keep: (o.keep as number | undefined) ?? DEFAULT_EVENT_LOG_KEEP,
  };
}

/** `options.recovery`; the order of checks decides which bad field is reported first. */
export function resolveRecovery(input: unknown): ResolvedRecovery {
  const r = optionalObject(input, "recovery");
  knownKeys(r, RECOVERY_KEYS, "recovery");
  const providers = resolveProviders(r.providers);
  const backoff = numberGroup(r.backoff, BACKOFF_RULES, "recovery.backoff");
  const breaker = resolveBreaker(r.breaker);
  if (r.deadlineMs !== undefined) number(r.deadlineMs, "recovery.deadlineMs", ms(1));
  const unknown = optionalChoice(r.unknown, UNKNOWN_POLICIES, "recovery.unknown");
  const ledger = resolveLedger(r.ledger);
  numbers(r, SCALAR_RULES, "recovery");
  const notifiers = resolveNotifiers(r.notifiers);
  const eventLog = r.eventLog === undefined ? undefined : resolveEventLog(r.eventLog);
  optionalFunction(r.random, "recovery.random");
  return {
    providers,
    plans: r.plans === undefined ? {} : plans(r.plans, "recovery.plans"),
    backoff: { ...DEFAULT_BACKOFF, ...(backoff as Partial<BackoffOptions>) },
    maxTimeoutDoublings: (r.maxTimeoutDoublings as number | undefined) ?? 3,
    baseTimeoutMs: (r.baseTimeoutMs as number | undefined) ?? 30_000,
    breaker,
    deadlineMs: r.deadlineMs as number | undefined,
    unknown: unknown ?? "retry-once",
    maxProbeWaitMs: (r.maxProbeWaitMs as number | undefined) ?? DEFAULT_MAX_PROBE_WAIT_MS,
    budgetUsd: (r.budgetUsd as number | undefined) ?? 1,
    ledger,
    notifiers,
    throttleMs: (r.throttleMs as number | undefined) ?? DEFAULT_THROTTLE_MS,
    notifyTimeoutMs: (r.notifyTimeoutMs as number | undefined) ?? DEFAULT_NOTIFY_TIMEOUT_MS,
    warmupIntervalMs: (r.warmupIntervalMs as number | undefined) ?? 15 * 60_000,
    eventLog,
    random: (r.random as (() => number) | undefined) ?? Math.random,
  };
}
