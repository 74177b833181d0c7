/** Lines of a recovery event log (recovery.eventLog's JSONL), for the report command's tests. */

/** A valid recovery event line, with fields replaced. */
export const line = (over: Record<string, unknown> = {}): string =>
  JSON.stringify({
    at: Date.UTC(2026, 0, 1),
    agent: "a",
    tool: "lookup",
    error: "boom",
    pattern: "UNKNOWN",
    confidence: 0,
    steps: [{ strategy: "retry_once" }],
    attempts: 1,
    durationMs: 1000,
    outcome: "failed",
    costUsd: 0.001,
    wastedRetries: 1,
    failoverCostDifferentialUsd: 0,
    ...over,
  });

/** A valid line of the watchdog's (selfheal watch --event-log), with fields replaced. */
export const watchdogLine = (over: Record<string, unknown> = {}): string =>
  JSON.stringify({
    type: "watchdog",
    at: Date.UTC(2026, 0, 1),
    agent: "nightly",
    session: "agent",
    kind: "gave_up",
    reason: "3 rotations in 600 s",
    ...over,
  });
