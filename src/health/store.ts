import type { FleetSync } from "../fleet.js";
import type { CallOutcome, TaskOutcome } from "../telemetry/conventions.js";
import type { WindowTotals } from "./window.js";

/**
 * One finished tool call: the same record that is written on the tool-call span and fed
 * to the signal store (one object, two sinks), so health works with or without an SDK.
 */
export interface CallRecord {
  agent: string;
  tool: string;
  outcome: CallOutcome;
  /** Wall time of the call in ms (0 for a blocked call). */
  durationMs: number;
  /** Set for LLM calls only: whether the response was empty. */
  empty?: boolean | undefined;
  /**
   * Attempts that failed, recovery included (default: 1 for an error, else 0). They count
   * against the success rate: a call that recovered on the secondary still shows the primary
   * failing.
   */
  failedAttempts?: number | undefined;
}

/** Failed attempts of a call record, with the default. */
export function failedAttempts(record: CallRecord): number {
  return record.failedAttempts ?? (record.outcome === "error" ? 1 : 0);
}

/** One finished task. */
export interface TaskRecord {
  agent: string;
  outcome: TaskOutcome;
}

/** Window sizes a store keeps; the same for every tool of an agent. */
export interface SignalWindows {
  /** Success rate and latency window, ms (default 10 min). */
  callWindowMs: number;
  /** Task completion window, ms (default 1 h). */
  taskWindowMs: number;
  /**
   * The most recent part of the call window, ms (default 1 min): once it holds enough healthy
   * calls, the success rate counts as recovered without waiting for the whole window to clear.
   */
  recentWindowMs: number;
  /** Buckets per time window (default 60). */
  buckets: number;
  /** How many recent LLM calls the empty-response rate looks at (default 100). */
  llmSampleSize: number;
}

export const DEFAULT_WINDOWS: SignalWindows = {
  callWindowMs: 10 * 60_000,
  taskWindowMs: 60 * 60_000,
  recentWindowMs: 60_000,
  buckets: 60,
  llmSampleSize: 100,
};

/** Signals of one scope (the whole agent, or one tool) at one instant. */
export interface ScopeSignals {
  /** ok = successful calls, failed = errors; blocked calls are not counted. */
  calls: WindowTotals;
  /** Calls over the most recent `recentWindowMs` only. */
  recent: { ok: number; failed: number };
  /** Over the last `llmSampleSize` LLM calls. */
  llm: { total: number; empty: number };
  /** Agent scope only (zero for tools). */
  tasks: { completed: number; failed: number };
}

/** Signals of an agent and of each of its tools. */
export interface AgentSignals {
  agent: ScopeSignals;
  tools: Map<string, ScopeSignals>;
}

/**
 * Where health signals live: in memory for one process (the default), in Redis for a fleet.
 * Recording must never block or throw: a store that cannot write degrades and says so.
 */
export interface SignalStore {
  recordCall(record: CallRecord, now: number): void;
  recordTask(record: TaskRecord, now: number): void;
  /** Signals of `agent` at `now`; synchronous for in-process stores. */
  read(agent: string, now: number): AgentSignals | Promise<AgentSignals>;
  close?(): Promise<void>;
  /**
   * For a shared store: tells when it loses its server and falls back to this process's memory,
   * and when it is back. Returns a function that stops listening.
   */
  onStateChange?(listener: (state: StoreState) => void): () => void;
  /** For a shared store: the other state the fleet shares (breakers, alert throttle). */
  readonly fleet?: FleetSync;
}

/** A shared store's connection: `degraded` while it runs on local memory (with the reason). */
export interface StoreState {
  degraded: boolean;
  reason?: string;
}
