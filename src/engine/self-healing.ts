import { SelfHealClosedError, SelfHealConfigError } from "../errors.js";
import type { DiagnoseContext, Diagnosis } from "../diagnosis/diagnoser.js";
import type { UnknownSample } from "../diagnosis/drift.js";
import type { HealthReport } from "../health/evaluator.js";
import { HealthSpanProcessor } from "../health/span-processor.js";
import { RecoveryBudget } from "../recovery/budget.js";
import type { TaskOutcome } from "../telemetry/conventions.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { CallMode } from "./call-context.js";
import { EngineState } from "./engine-state.js";
import type { TaskState } from "./engine.js";
import type { Listener, SelfHealEvents } from "./events.js";
import { modeOf } from "./guard.js";
import { startWarmups } from "./warmup.js";
import {
  releaseStore,
  resolveOptions,
  validateToolOptions,
  type SelfHealingOptions,
  type ToolFunction,
  type ToolOptions,
} from "./options.js";
import { instrumentTool, type WrappedTool } from "./tool.js";
import { instrumentStream, type HealedStreamFunction } from "./stream.js";
import { splitStreamOptions, type StreamFunction, type StreamOptions } from "./options/stream.js";
import { nonEmptyString } from "./options/validate.js";
import type { StreamMode } from "../telemetry/conventions.js";
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
  /**
   * Wraps a stream function (an LLM's streamed answer): each call is one selfheal call until the
   * stream completes, bounded by time to first token, idle gaps and the deadline, its completion
   * checked. Before the first token a failure is retried or failed over; after it,
   * `afterFirstToken` decides (`fail`, `restart`, `buffer`).
   */
  stream<A, C, M extends StreamMode = "fail">(
    name: string,
    options: StreamOptions<A, C, M>,
    fn: StreamFunction<A, C>,
  ): HealedStreamFunction<A, C, M>;
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
  return new Instance(new EngineState(resolveOptions(options)));
}

/** One agent's selfheal: the public face of its engine. */
class Instance implements SelfHealing {
  private readonly toolNames = new Set<string>();
  private readonly stopWarmups: () => void;

  constructor(private readonly engine: EngineState) {
    const { recovery, clock, logger } = engine.options;
    this.stopWarmups = startWarmups(
      recovery,
      engine.breakers,
      clock,
      logger,
      (provider, ok, error) => {
        engine.events.emit("warmup", {
          provider,
          ok,
          at: clock.now(),
          ...(error !== undefined && { error }),
        });
      },
    );
  }

  tool<A, R>(
    name: string,
    toolOptions: ToolOptions<A, R>,
    fn: ToolFunction<A, R>,
  ): WrappedTool<A, R> {
    this.register("tool", name, toolOptions, fn);
    return instrumentTool(this.engine, name, toolOptions, fn);
  }

  stream<A, C, M extends StreamMode = "fail">(
    name: string,
    options: StreamOptions<A, C, M>,
    fn: StreamFunction<A, C>,
  ): HealedStreamFunction<A, C, M> {
    if (this.engine.closed()) throw new SelfHealClosedError(`stream("${name}") was registered`);
    nonEmptyString(name, "stream(name)");
    const { tool, limits } = splitStreamOptions<A, C>(name, options);
    this.register("stream", name, tool, fn);
    return instrumentStream<A, C, M>(this.engine, name, tool, limits, fn);
  }

  /** Checks a tool's (or stream's) options and takes its name, once per instance. */
  private register(kind: string, name: string, options: unknown, fn: unknown): void {
    const { engine } = this;
    if (engine.closed()) throw new SelfHealClosedError(`${kind}("${name}") was registered`);
    validateToolOptions(name, options, fn, engine.options.recovery.providers);
    if (this.toolNames.has(name)) {
      throw new SelfHealConfigError(
        `${kind}("${name}")`,
        "a tool or stream of this name is already registered: two would share one health scope and breaker; give each its own name",
      );
    }
    this.toolNames.add(name);
  }

  async task<T>(id: string, fn: (task: TaskContext) => T | Promise<T>): Promise<T> {
    const { engine } = this;
    if (engine.closed()) throw new SelfHealClosedError(`task("${id}") was started`);
    if (typeof id !== "string" || id === "")
      throw new SelfHealConfigError("task(id)", "expected a non-empty string");
    if (typeof fn !== "function")
      throw new SelfHealConfigError(`task("${id}")`, "the last argument must be the task function");
    const report = await engine.health.current();
    const state: TaskState = {
      id,
      mode: modeOf(report, engine.degraded(report)),
      budget: await this.budget(id),
    };
    try {
      const result = await engine.tasks.run(state, fn, { id, mode: state.mode, health: report });
      this.recordTask("completed");
      return result;
    } catch (error) {
      this.recordTask("failed");
      throw error;
    }
  }

  async status(): Promise<AgentStatus> {
    const { engine } = this;
    if (engine.closed()) throw new SelfHealClosedError("status() was called");
    // Asked on purpose: never the cached report of before the calls just made (health.fresh).
    const report = await engine.health.fresh();
    const readOnly = modeOf(report, engine.degraded(report)) === "read-only";
    const now = engine.options.clock.now();
    return agentStatus(report, readOnly, engine.breakers, engine.routesByTool, now);
  }

  on<K extends keyof SelfHealEvents>(event: K, listener: Listener<SelfHealEvents[K]>): () => void {
    if (typeof listener !== "function")
      throw new SelfHealConfigError(`on("${event}")`, "expected a listener function");
    return this.engine.events.on(event, listener);
  }

  diagnose(error: unknown, context?: Partial<DiagnoseContext>): Promise<Diagnosis> {
    const tool = context?.tool ?? "";
    return this.engine.diagnoser.diagnose(error, { tool, provider: context?.provider });
  }

  unknownSamples(tool?: string): UnknownSample[] {
    return this.engine.drift.samples(tool);
  }

  spanProcessor(): HealthSpanProcessor {
    const { engine } = this;
    const { store, clock, agent, logger } = engine.options;
    return new HealthSpanProcessor({
      store,
      clock,
      defaultAgent: agent,
      logger,
      onRecord: (record, now) => {
        engine.callRollup?.record(record, now);
        engine.health.noteRecord();
      },
    });
  }

  close(): Promise<void> {
    const { engine } = this;
    engine.closing ??= (async () => {
      this.stopWarmups();
      engine.stopStoreWatch?.();
      engine.events.clear();
      engine.callRollup?.close(); // the open minute; calls in flight write their own
      await engine.eventLog?.flush();
      await releaseStore(engine.options); // what selfheal opened, never the user's client
    })();
    return engine.closing;
  }

  /** A task's budget: its own, or the fleet's record of it (what other workers already spent). */
  private async budget(taskId: string): Promise<RecoveryBudget> {
    const { recovery, store } = this.engine.options;
    const sync = store.fleet?.budgets;
    if (!sync) return new RecoveryBudget(recovery.budgetUsd);
    const budget = new RecoveryBudget(recovery.budgetUsd, { sync, taskId });
    budget.spentUsd = await sync.spent(taskId).catch(() => 0);
    return budget;
  }

  private recordTask(outcome: TaskOutcome): void {
    const { store, agent, clock, logger } = this.engine.options;
    try {
      store.recordTask({ agent, outcome }, clock.now());
      this.engine.health.noteRecord();
    } catch (error) {
      logger.warn(
        `selfheal: signal store failed to record a task: ${redact(describeThrown(error))}`,
      );
    }
    this.engine.metrics.task(outcome);
  }
}
