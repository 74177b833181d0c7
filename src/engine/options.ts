// The options of createSelfHealing. Each section (health, diagnosis, recovery, tool, call)
// lives in options/ with its own validation; this module composes them and stays the one the
// engine imports.
import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import { systemClock, type Clock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import { MemorySignalStore } from "../health/memory-store.js";
import type { SignalStore } from "../health/store.js";
import type { HealthThresholds, ThresholdOverrides } from "../health/thresholds.js";
import { DEFAULT_MAX_TEXT_LENGTH, safeLogger } from "../telemetry/redact.js";
import { resolveHealth, type HealthOptions } from "./options/health.js";
import {
  resolveDiagnosis,
  type DiagnosisOptions,
  type ResolvedDiagnosis,
} from "./options/diagnosis.js";
import {
  resolveRecovery,
  type RecoveryOptions,
  type ResolvedRecovery,
} from "./options/recovery.js";
import {
  knownKeys,
  nonEmptyString,
  numbers,
  object,
  optionalBoolean,
  show,
  withMethods,
} from "./options/validate.js";

export type { HealthOptions } from "./options/health.js";
export type { DiagnosisOptions } from "./options/diagnosis.js";
export type {
  Plans,
  RecoveryOptions,
  ResolvedRecovery,
  UnknownPolicy,
} from "./options/recovery.js";
export {
  validateToolOptions,
  type ToolFunction,
  type ToolKind,
  type ToolOptions,
  type ToolSpanMode,
} from "./options/tool.js";
export {
  DEFAULT_DEADLINE_MS,
  deadlineOf,
  validateCallOptions,
  type CallOptions,
} from "./options/call.js";
export { MAX_TIMER_MS } from "./options/validate.js";

/** Where selfheal writes its own warnings (a listener that threw, a store that failed). */
export interface Logger {
  warn(message: string): void;
}

export interface SelfHealingOptions {
  /** Agent name: the agent attribute (ATTR_AGENT_NAME) of every span and the `agent` label of every metric. */
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
  /**
   * A long run's heartbeat (`supervised()` or `heartbeat()` from `selfheal/watchdog`): each
   * call that ends moves it one step (stage `tool_call`, `lastTool` its tool).
   */
  heartbeat?: StepReporter;
}

/** What the engine needs of a heartbeat: one step more. */
export interface StepReporter {
  advance(beat: { stage: string; lastTool?: string }): unknown;
}

export interface ResolvedOptions extends ResolvedDiagnosis {
  agent: string;
  store: SignalStore;
  /** Whether `close()` releases the store: one the instance made, or one selfheal opened. */
  ownsStore: boolean;
  clock: Clock;
  tracerProvider: TracerProvider | undefined;
  meterProvider: MeterProvider | undefined;
  thresholds: HealthThresholds;
  toolThresholds: Record<string, ThresholdOverrides>;
  cacheMs: number;
  baselineTauMs: number;
  recovery: ResolvedRecovery;
  recordArguments: boolean;
  recordResults: boolean;
  maxErrorLength: number;
  logger: Logger;
  heartbeat: StepReporter | undefined;
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
  "heartbeat",
] as const satisfies readonly (keyof SelfHealingOptions)[];

/** Validates user options once, at construction; every message names the bad field. */
export function resolveOptions(input: unknown): ResolvedOptions {
  const o = object(input, "options");
  knownKeys(o, TOP_LEVEL, "");
  nonEmptyString(o.agent, "agent");
  if (typeof o.store === "string") {
    throw new SelfHealConfigError(
      "store",
      `expected an object, got string: a store is a SignalStore; for Redis, pass redisStore({ url: ${show(o.store)} }) from selfheal/redis (sh.close() closes the connection it opens)`,
    );
  }
  if (o.store !== undefined) withMethods(o.store, "store", ["recordCall", "recordTask", "read"]);
  if (o.clock !== undefined) withMethods(o.clock, "clock", ["now", "sleep", "setTimer"]);
  if (o.tracerProvider !== undefined)
    withMethods(o.tracerProvider, "tracerProvider", ["getTracer"]);
  if (o.meterProvider !== undefined) withMethods(o.meterProvider, "meterProvider", ["getMeter"]);
  optionalBoolean(o.recordArguments, "recordArguments");
  optionalBoolean(o.recordResults, "recordResults");
  numbers(o, { maxErrorLength: { min: 16, integer: true } }, "");
  if (o.logger !== undefined) withMethods(o.logger, "logger", ["warn"]);
  if (o.heartbeat !== undefined) withMethods(o.heartbeat, "heartbeat", ["advance"]);

  const { windows, ...health } = resolveHealth(o.health, o.store !== undefined);
  const diagnosis = resolveDiagnosis(o.diagnosis);
  const opts = o as unknown as SelfHealingOptions;
  const resolved: ResolvedOptions = {
    agent: opts.agent,
    store: opts.store ?? new MemorySignalStore(windows),
    ownsStore: opts.store === undefined,
    clock: opts.clock ?? systemClock,
    tracerProvider: opts.tracerProvider,
    meterProvider: opts.meterProvider,
    ...health,
    ...diagnosis,
    recovery: resolveRecovery(o.recovery), // after the store: the order of checks is unchanged
    recordArguments: opts.recordArguments ?? false,
    recordResults: opts.recordResults ?? false,
    maxErrorLength: opts.maxErrorLength ?? DEFAULT_MAX_TEXT_LENGTH,
    logger: safeLogger(opts.logger ?? console),
    heartbeat: opts.heartbeat,
  };
  // Held last, once every option passed: an instance that was never made holds nothing.
  const held = opts.store && holdersOf(opts.store);
  if (held) {
    held.count += 1;
    resolved.ownsStore = true;
  }
  return resolved;
}

/**
 * What a store selfheal opened for its user carries (`redisStore()` of `selfheal/redis`): how
 * many instances use it. Each instance made with it holds it, and the `close()` of the last one
 * closes it. A key from the global symbol registry, so two copies of the package agree.
 */
const HOLDERS = Symbol.for("selfheal:store-holders");

interface Holders {
  count: number;
}

/**
 * Marks a store as opened by selfheal: the instances made with it close it (the last one to
 * close). The store's own `close()` must close only what it opened (never a client the user
 * passed it).
 */
export function closedWithInstances<S extends object>(store: S): S {
  if (!Object.hasOwn(store, HOLDERS))
    Object.defineProperty(store, HOLDERS, { value: { count: 0 } satisfies Holders });
  return store;
}

function holdersOf(store: SignalStore): Holders | undefined {
  const held: unknown = (store as { [HOLDERS]?: unknown })[HOLDERS];
  if (typeof held !== "object" || held === null) return undefined;
  return typeof (held as Partial<Holders>).count === "number" ? (held as Holders) : undefined;
}

/**
 * An instance's `close()` lets its store go: the store it made is closed, one selfheal opened is
 * closed when no other instance holds it, one the user passed is left alone.
 */
export async function releaseStore(
  options: Pick<ResolvedOptions, "store" | "ownsStore">,
): Promise<void> {
  if (!options.ownsStore) return;
  const held = holdersOf(options.store);
  if (held) {
    held.count = Math.max(0, held.count - 1);
    if (held.count > 0) return;
  }
  await options.store.close?.();
}
