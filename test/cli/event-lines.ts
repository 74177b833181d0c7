/**
 * Lines of a recovery event log (recovery.eventLog's JSONL) for the report command's tests: the
 * report suites' builders (test/report/events.ts) with the defaults these tests read.
 */
import { event, watchdogLine as reportWatchdogLine } from "../report/events.js";

/** A valid recovery event line (one retry, a second, a tenth of a cent), with fields replaced. */
export const line = (over: Record<string, unknown> = {}): string =>
  event({
    steps: [{ strategy: "retry_once" }],
    attempts: 1,
    durationMs: 1000,
    costUsd: 0.001,
    wastedRetries: 1,
    ...over,
  });

/** A valid line of the watchdog's (selfheal watch --event-log), with fields replaced. */
export const watchdogLine = (over: Record<string, unknown> = {}): string =>
  reportWatchdogLine({
    agent: "nightly",
    session: "agent",
    kind: "gave_up",
    reason: "3 rotations in 600 s",
    ...over,
  });
