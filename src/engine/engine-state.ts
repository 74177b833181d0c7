import { AsyncLocalStorage } from "node:async_hooks";
import { trace, type Tracer } from "@opentelemetry/api";
import { DeadlineQueue } from "../deadline.js";
import { Diagnoser } from "../diagnosis/diagnoser.js";
import { DriftDetector } from "../diagnosis/drift.js";
import { StatusPageClient } from "../diagnosis/status-page.js";
import { HealthEvaluator, type HealthReport } from "../health/evaluator.js";
import { mergeThresholds, type HealthThresholds } from "../health/thresholds.js";
import { Escalator } from "../notify/escalator.js";
import { BreakerRegistry } from "../recovery/breaker.js";
import { JsonlLog } from "../recovery/event-log.js";
import { IdempotencyLedger } from "../recovery/idempotency.js";
import { INSTRUMENTATION_SCOPE } from "../telemetry/conventions.js";
import { SelfHealMetrics } from "../telemetry/metrics.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import { CallRollup } from "./call-rollup.js";
import type { Engine, TaskState } from "./engine.js";
import { Emitter, type RecoveryEvent, type SelfHealEvents } from "./events.js";
import type { ResolvedOptions } from "./options.js";
import { thresholdsLine } from "./thresholds-line.js";

/**
 * The state an instance's calls share (the Engine every stage reads): built once from the
 * resolved options, each part wired to the events it reports.
 */
export class EngineState implements Engine {
  readonly events: Emitter<SelfHealEvents>;
  readonly health: HealthEvaluator;
  readonly diagnoser: Diagnoser;
  readonly drift: DriftDetector;
  readonly breakers: BreakerRegistry;
  readonly metrics: SelfHealMetrics;
  readonly tracer: Tracer;
  readonly tasks = new AsyncLocalStorage<TaskState>();
  readonly routesByTool = new Map<string, readonly string[]>();
  readonly ledger: IdempotencyLedger;
  readonly escalator: Escalator;
  readonly deadlines: DeadlineQueue;
  readonly eventLog: JsonlLog | undefined;
  readonly callRollup: CallRollup | undefined;
  /** Set by close(): no call is accepted after it. */
  closing: Promise<void> | undefined;
  /** When recovery degraded the agent to read-only (undefined: not degraded). */
  private degradedAt: number | undefined;
  private readonly warned = new Set<string>();
  /** Whether the shared store runs on local memory now (what its state listener last heard). */
  private storeDegraded = false;
  /** Stops listening to the store's state (close()). */
  readonly stopStoreWatch: (() => void) | undefined;

  constructor(readonly options: ResolvedOptions) {
    const { agent, clock, logger, recovery } = options;
    this.events = new Emitter<SelfHealEvents>(logger);
    this.health = healthEvaluator(options, this.events);
    this.diagnoser = new Diagnoser({
      rules: options.rules,
      clock,
      statusPages: options.statusPages,
      statusPageClient: new StatusPageClient({
        clock,
        timeoutMs: options.statusPageTimeoutMs,
        cacheMs: options.statusPageCacheMs,
        ...(options.statusPageFetch && { fetch: options.statusPageFetch }),
      }),
    });
    this.drift = new DriftDetector(
      options.drift,
      (event) => {
        this.events.emit("diagnoser-drift", { ...event, agent });
      },
      options.store.fleet?.drift?.(agent, options.drift.window),
    );
    this.breakers = new BreakerRegistry(
      recovery.breaker,
      (dependency, state) => {
        this.events.emit("circuit-change", { agent, dependency, state, at: clock.now() });
      },
      options.store.fleet?.breakers,
    );
    this.metrics = new SelfHealMetrics(
      agent,
      options.meterProvider,
      () => this.health.last?.status,
      () => this.breakers.states(clock.now()),
      // Read without lifting read-only mode: lifting is for the next call's guard to decide.
      () =>
        this.health.last &&
        (this.degradedAt !== undefined || this.health.last.status === "critical"),
      // 0 with a store that is not shared: it is never away.
      () => this.storeDegraded,
    );
    this.stopStoreWatch = options.store.onStateChange?.((state) => {
      this.storeDegraded = state.degraded;
      this.events.emit("store-degraded", {
        agent,
        ...state,
        at: clock.now(),
      });
    });
    this.tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(
      INSTRUMENTATION_SCOPE,
    );
    this.ledger = new IdempotencyLedger(recovery.ledger);
    this.escalator = new Escalator({
      notifiers: recovery.notifiers,
      throttleMs: recovery.throttleMs,
      timeoutMs: recovery.notifyTimeoutMs,
      clock,
      logger,
      onAlert: (channel, suppressed) => {
        this.metrics.escalation(channel, suppressed);
      },
      gate: options.store.fleet?.alerts,
    });
    this.deadlines = new DeadlineQueue(clock);
    this.eventLog =
      recovery.eventLog === undefined ? undefined : new JsonlLog(recovery.eventLog, logger);
    // The settings in effect first, then the calls they judged, minute by minute.
    this.eventLog?.append(thresholdsLine(options, clock.now()));
    this.callRollup = this.eventLog && new CallRollup(this.eventLog);
  }

  closed(): boolean {
    return this.closing !== undefined;
  }

  warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.options.logger.warn(message);
  }

  degraded(report: HealthReport): boolean {
    if (this.degradedAt === undefined) return false;
    // Lifted by evidence: a report made after degrading, healthy on enough calls.
    const rate = report.signals.find((r) => r.signal === "success_rate");
    if (report.at > this.degradedAt && report.status === "healthy" && rate?.value != null) {
      this.degradedAt = undefined;
      return false;
    }
    return true;
  }

  degrade(): void {
    this.degradedAt ??= this.options.clock.now();
    this.health.invalidate(); // the next read must be a report made after this moment
  }

  recordRecovery(event: RecoveryEvent): void {
    this.events.emit("recovery", event);
    this.eventLog?.append(event);
  }
}

/** The health evaluator, with each tool's thresholds merged once and its events wired. */
function healthEvaluator(
  options: ResolvedOptions,
  events: Emitter<SelfHealEvents>,
): HealthEvaluator {
  const thresholds = new Map<string | undefined, HealthThresholds>();
  return new HealthEvaluator({
    agent: options.agent,
    store: options.store,
    clock: options.clock,
    cacheMs: options.cacheMs,
    baselineTauMs: options.baselineTauMs,
    thresholds: (tool) => {
      let t = thresholds.get(tool);
      if (!t) {
        const own = tool === undefined ? undefined : options.toolThresholds[tool];
        t = mergeThresholds(options.thresholds, own);
        thresholds.set(tool, t);
      }
      return t;
    },
    onChange: (event) => {
      events.emit("status-change", event);
    },
    onStoreError: (error) => {
      options.logger.warn(
        `selfheal: signal store read failed, keeping last status: ${redact(describeThrown(error))}`,
      );
    },
  });
}
