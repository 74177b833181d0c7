import { DEFAULT_WINDOWS, type SignalWindows } from "../health/store.js";
import { mergeThresholds, type HealthThresholds } from "../health/thresholds.js";
import type { ResolvedOptions } from "./options.js";

/**
 * The event-log line an instance writes once, when it is made: the health settings in effect,
 * so `selfheal report --suggest-thresholds` compares the calls it reads with what was set.
 */
export interface ThresholdsLine {
  /** Tells it from recovery events (which have no `type`). */
  type: "thresholds";
  /** When the instance was made, ms since the epoch on its clock. */
  at: number;
  /** The instance's agent. */
  agent: string;
  /** The agent's thresholds: defaults, then `health`'s overrides. */
  thresholds: HealthThresholds;
  /** Each tool named in `health.tools`: the agent's thresholds, then the tool's overrides. */
  tools: Record<string, HealthThresholds>;
  /**
   * The success-rate and latency window, ms: the signal store's (the built-in ones say it), or
   * the default for a store that does not.
   */
  callWindowMs: number;
  /** Time constant of the learned latency baseline, ms. */
  baselineTauMs: number;
}

/** The settings line of an instance made with `options`, at `at`. */
export function thresholdsLine(options: ResolvedOptions, at: number): ThresholdsLine {
  const tools = Object.fromEntries(
    Object.entries(options.toolThresholds).map(([name, own]) => [
      name,
      mergeThresholds(options.thresholds, own),
    ]),
  );
  // Not part of the SignalStore interface; the memory and Redis stores carry theirs.
  const windows = (options.store as { windows?: Partial<SignalWindows> }).windows;
  return {
    type: "thresholds",
    at,
    agent: options.agent,
    thresholds: options.thresholds,
    tools,
    callWindowMs: windows?.callWindowMs ?? DEFAULT_WINDOWS.callWindowMs,
    baselineTauMs: options.baselineTauMs,
  };
}
