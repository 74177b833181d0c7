import { AsyncLocalStorage } from "node:async_hooks";
import { trace } from "@opentelemetry/api";
import { SelfHealClosedError, SelfHealConfigError } from "../errors.js";
import { Diagnoser, type DiagnoseContext, type Diagnosis } from "../diagnosis/diagnoser.js";
import { DriftDetector, type UnknownSample } from "../diagnosis/drift.js";
import { StatusPageClient } from "../diagnosis/status-page.js";
import { HealthEvaluator, type HealthReport } from "../health/evaluator.js";
import { HealthSpanProcessor } from "../health/span-processor.js";
import { Escalator } from "../notify/escalator.js";
import { BreakerRegistry } from "../recovery/breaker.js";
import { RecoveryBudget } from "../recovery/budget.js";
import { JsonlLog } from "../recovery/event-log.js";
import { IdempotencyLedger } from "../recovery/idempotency.js";
import { mergeThresholds, type HealthThresholds } from "../health/thresholds.js";
import { INSTRUMENTATION_SCOPE, type TaskOutcome } from "../telemetry/conventions.js";
import { SelfHealMetrics } from "../telemetry/metrics.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { CallMode } from "./call-context.js";
import { Emitter, type Listener, type SelfHealEvents } from "./events.js";
import { modeOf } from "./guard.js";
import { startWarmups } from "./warmup.js";
import {
  resolveOptions,
  validateToolOptions,
  type SelfHealingOptions,
  type ToolFunction,
  type ToolOptions,
} from "./options.js";
import { DeadlineQueue } from "../deadline.js";
import type { Engine, TaskState } from "./engine.js";
import { instrumentTool, type WrappedTool } from "./tool.js";
import { agentStatus, type AgentStatus } from "./agent-status.js";

/** What a task function receives. */
export interface TaskContext {
  readonly id: string;
  /** `read-only` when the agent was critical as the task started: plan without writes. */
  readonly mode: CallMode;
  /** Health as the task started. */
  readonly health: HealthReport;
}

/** A selfheal instance: wraps tools, runs tasks, reports health. */
export interface SelfHealing {
  /** Wraps a tool: each call becomes a tool-call span (SPAN_TOOL_CALL) and a health signal. */
  tool<A, R>(name: string, options: ToolOptions<A, R>, fn: ToolFunction<A, R>): WrappedTool<A, R>;
  /** Runs one agent task; its outcome feeds the task completion signal. */
  task<T>(id: string, fn: (task: TaskContext) => T | Promise<T>): Promise<T>;
  /**
   * Current health (cached for `health.cacheMs`), with what recovery is doing: read-only mode,
   * open circuits per tool. Never `healthy` while writes are refused.
   */
  status(): Promise<AgentStatus>;
  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof SelfHealEvents>(event: K, listener: Listener<SelfHealEvents[K]>): () => void;
  /**
   * Classifies an error with this instance's rules and status pages, as a failed call would be
   * (without recording it). `context.tool` picks the status page.
   */
  diagnose(error: unknown, context?: Partial<DiagnoseContext>): Promise<Diagnosis>;
  /** The latest UNKNOWN error texts (redacted), of one tool or of all: what to write rules for. */
  unknownSamples(tool?: string): UnknownSample[];
  /**
   * An OpenTelemetry SpanProcessor that feeds this instance's health from other
   * instrumentations' GenAI spans (`execute_tool`, chat). Add it to your tracer provider.
   */
  spanProcessor(): HealthSpanProcessor;
  /** Stops accepting calls and releases what the instance owns. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Creates a selfheal instance for one agent. Options are validated here, once: a bad one throws
 * `SelfHealConfigError` naming the field.
 */
export function createSelfHealing(options: SelfHealingOptions): SelfHealing {
  const resolved = resolveOptions(options);
  const { agent, clock, store, logger } = resolved;
  const events = new Emitter<SelfHealEvents>(logger);
  const thresholdCache = new Map<string | undefined, HealthThresholds>();
  const thresholdsOf = (tool: string | undefined): HealthThresholds => {
    let t = thresholdCache.get(tool);
    if (!t) {
      t = mergeThresholds(
        resolved.thresholds,
        tool === undefined ? undefined : resolved.toolThresholds[tool],
      );
      thresholdCache.set(tool, t);
    }
    return t;
  };
  const health = new HealthEvaluator({
    agent,
    store,
    clock,
    cacheMs: resolved.cacheMs,
    baselineTauMs: resolved.baselineTauMs,
    thresholds: thresholdsOf,
    onChange: (event) => {
      events.emit("status-change", event);
    },
    onStoreError: (error) => {
      logger.warn(
        `selfheal: signal store read failed, keeping last status: ${redact(describeThrown(error))}`,
      );
    },
  });
  let closed: Promise<void> | undefined;
  const diagnoser = new Diagnoser({
    rules: resolved.rules,
    clock,
    statusPages: resolved.statusPages,
    statusPageClient: new StatusPageClient({
      clock,
      timeoutMs: resolved.statusPageTimeoutMs,
      cacheMs: resolved.statusPageCacheMs,
      ...(resolved.statusPageFetch && { fetch: resolved.statusPageFetch }),
    }),
  });
  const drift = new DriftDetector(resolved.drift, (event) => {
    events.emit("diagnoser-drift", { ...event, agent });
  });
  const recovery = resolved.recovery;
  const breakers = new BreakerRegistry(recovery.breaker, (dependency, state) => {
    events.emit("circuit-change", { agent, dependency, state, at: clock.now() });
  });
  const metrics = new SelfHealMetrics(
    agent,
    resolved.meterProvider,
    () => health.last?.status,
    () => breakers.states(clock.now()),
    // Read without lifting read-only mode: lifting is for the next call's guard to decide.
    () => health.last && (degradedAt !== undefined || health.last.status === "critical"),
  );
  const eventLog =
    recovery.eventLog === undefined ? undefined : new JsonlLog(recovery.eventLog, logger);
  const warned = new Set<string>();
  /** When recovery degraded the agent to read-only (undefined: not degraded). */
  let degradedAt: number | undefined;
  const engine: Engine = {
    options: resolved,
    diagnoser,
    drift,
    tracer: (resolved.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_SCOPE),
    metrics,
    health,
    events,
    tasks: new AsyncLocalStorage<TaskState>(),
    breakers,
    routesByTool: new Map(),
    ledger: new IdempotencyLedger(recovery.ledger),
    escalator: new Escalator({
      notifiers: recovery.notifiers,
      throttleMs: recovery.throttleMs,
      timeoutMs: recovery.notifyTimeoutMs,
      clock,
      logger,
      onAlert: (channel, suppressed) => {
        metrics.escalation(channel, suppressed);
      },
    }),
    deadlines: new DeadlineQueue(clock),
    closed: () => closed !== undefined,
    warnOnce(tool, message) {
      if (warned.has(tool)) return;
      warned.add(tool);
      logger.warn(message);
    },
    degraded(report) {
      if (degradedAt === undefined) return false;
      // Lifted by evidence: a report made after degrading, healthy on enough calls.
      const rate = report.signals.find((r) => r.signal === "success_rate");
      if (report.at > degradedAt && report.status === "healthy" && rate?.value != null) {
        degradedAt = undefined;
        return false;
      }
      return true;
    },
    degrade() {
      degradedAt ??= clock.now();
      health.invalidate(); // the next read must be a report made after this moment
    },
    recordRecovery(event) {
      events.emit("recovery", event);
      eventLog?.append(event);
    },
  };
  const stopWarmups = startWarmups(recovery, breakers, clock, logger, (provider, ok, error) => {
    events.emit("warmup", { provider, ok, at: clock.now(), ...(error !== undefined && { error }) });
  });

  const recordTask = (outcome: TaskOutcome) => {
    try {
      store.recordTask({ agent, outcome }, clock.now());
    } catch (error) {
      logger.warn(
        `selfheal: signal store failed to record a task: ${redact(describeThrown(error))}`,
      );
    }
    engine.metrics.task(outcome);
  };

  const toolNames = new Set<string>();

  return {
    tool(name, toolOptions, fn) {
      if (closed) throw new SelfHealClosedError(`tool("${name}") was registered`);
      validateToolOptions(name, toolOptions, fn, recovery.providers);
      if (toolNames.has(name)) {
        throw new SelfHealConfigError(
          `tool("${name}")`,
          "a tool of this name is already registered: two tools would share one health scope and breaker; give each its own name",
        );
      }
      toolNames.add(name);
      return instrumentTool(engine, name, toolOptions, fn);
    },

    async task(id, fn) {
      if (closed) throw new SelfHealClosedError(`task("${id}") was started`);
      if (typeof id !== "string" || id === "")
        throw new SelfHealConfigError("task(id)", "expected a non-empty string");
      if (typeof fn !== "function")
        throw new SelfHealConfigError(
          `task("${id}")`,
          "the last argument must be the task function",
        );
      const report = await health.current();
      const state: TaskState = {
        id,
        mode: modeOf(report, engine.degraded(report)),
        budget: new RecoveryBudget(recovery.budgetUsd),
      };
      try {
        const result = await engine.tasks.run(state, fn, { id, mode: state.mode, health: report });
        recordTask("completed");
        return result;
      } catch (error) {
        recordTask("failed");
        throw error;
      }
    },

    async status() {
      if (closed) throw new SelfHealClosedError("status() was called");
      const report = await health.current();
      const readOnly = modeOf(report, engine.degraded(report)) === "read-only";
      return agentStatus(report, readOnly, breakers, engine.routesByTool, clock.now());
    },

    on(event, listener) {
      if (typeof listener !== "function")
        throw new SelfHealConfigError(`on("${event}")`, "expected a listener function");
      return events.on(event, listener);
    },

    diagnose(error, context) {
      return diagnoser.diagnose(error, { tool: context?.tool ?? "", provider: context?.provider });
    },

    unknownSamples(tool) {
      return drift.samples(tool);
    },

    spanProcessor() {
      return new HealthSpanProcessor({ store, clock, defaultAgent: agent, logger });
    },

    close() {
      closed ??= (async () => {
        stopWarmups();
        events.clear();
        await eventLog?.flush();
        if (resolved.ownsStore) await store.close?.();
      })();
      return closed;
    },
  };
}
