/** Lines of a recovery event log, as `selfheal report` reads them. */

/** The fields of a valid recovery event, with `over` laid on top (undefined ones are left out). */
export const eventFields = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  at: Date.UTC(2026, 0, 1),
  agent: "a",
  tool: "lookup",
  taskId: undefined,
  error: "boom",
  pattern: "UNKNOWN",
  confidence: 0,
  strategy: undefined,
  steps: [],
  attempts: 0,
  durationMs: 10,
  outcome: "failed",
  costUsd: 0,
  wastedRetries: 0,
  failoverCostDifferentialUsd: 0,
  provider: undefined,
  ...over,
});

/** One JSONL line of a recovery event. */
export const event = (over: Record<string, unknown> = {}) => JSON.stringify(eventFields(over));

/** One JSONL line of the watchdog (`selfheal watch --event-log`); `kind` and its fields in `over`. */
export const watchdogLine = (over: Record<string, unknown>) =>
  JSON.stringify({
    type: "watchdog",
    at: Date.UTC(2026, 0, 1),
    agent: "a",
    session: "s1",
    ...over,
  });
