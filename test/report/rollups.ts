/**
 * Logs of call rollups and watchdog steps, as the engine and the supervisor write them, built
 * minute by minute from functions of time: the inputs of `--suggest-thresholds`.
 */
import { Buckets } from "../../src/telemetry/log-buckets.js";

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
/** Monday 23 November 2026, 00:00 UTC. */
export const WEEK_START = Date.UTC(2026, 10, 23);

/** One minute of one tool: how many calls answered, failed attempts, LLM calls, empty ones. */
export interface Minute {
  ok: number;
  failed?: number;
  llm?: number;
  empty?: number;
  /** Each call's latency, ms. */
  latencies: number[];
}

/** A `calls` line. */
export function callsLine(at: number, agent: string, tool: string, m: Minute): string {
  const latency = new Buckets();
  for (const ms of m.latencies) latency.add(ms);
  return JSON.stringify({
    type: "calls",
    at,
    agent,
    tool,
    ok: m.ok,
    failed: m.failed ?? 0,
    llm: m.llm ?? 0,
    empty: m.empty ?? 0,
    latencyMs: latency.toJSON(),
  });
}

/** Lines for every minute from `from` to `to` (excluded) that `minute` gives calls for. */
export function callsLines(
  agent: string,
  tool: string,
  from: number,
  to: number,
  minute: (at: number) => Minute | undefined,
): string[] {
  const lines: string[] = [];
  for (let at = from; at < to; at += MINUTE) {
    const m = minute(at);
    if (m) lines.push(callsLine(at, agent, tool, m));
  }
  return lines;
}

/** `n` latencies spread evenly (deterministic) from `low` to `high` ms. */
export const spread = (n: number, low: number, high: number): number[] =>
  Array.from({ length: n }, (_, i) => low + ((high - low) * i) / Math.max(1, n - 1));

/** A recovery event of `tool` at `at` (what marks its window an incident window). */
export function incidentLine(at: number, agent: string, tool: string, pattern = "TIMEOUT"): string {
  return JSON.stringify({
    at,
    agent,
    tool,
    taskId: undefined,
    error: "upstream timed out",
    pattern,
    confidence: 0.9,
    strategy: "backoff",
    steps: [{ strategy: "backoff" }],
    attempts: 1,
    durationMs: 2_000,
    outcome: "recovered",
    costUsd: 0,
    wastedRetries: 0,
    failoverCostDifferentialUsd: 0,
  });
}

/** A watchdog `steps` line: the durations of the steps completed in a minute, in one stage. */
export function stepsLine(at: number, agent: string, stage: string, durations: number[]): string {
  const d = new Buckets();
  for (const ms of durations) d.add(ms);
  return JSON.stringify({
    type: "watchdog",
    kind: "steps",
    at,
    agent,
    session: "s1",
    stage,
    steps: durations.length,
    durationsMs: d.toJSON(),
  });
}
