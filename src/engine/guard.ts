import { HealthCheckFailedError, ReadOnlyModeError } from "../errors.js";
import type { HealthReport } from "../health/evaluator.js";
import type { CallMode } from "./call-context.js";

/** The agent's mode: read-only while the agent is critical or recovery degraded it. */
export function modeOf(report: HealthReport, degraded: boolean): CallMode {
  return degraded || report.status === "critical" ? "read-only" : "normal";
}

/**
 * The error that refuses a write tool, or undefined when it may run. A write is refused while
 * the agent is critical, and while recovery keeps it read-only; read tools always run. A tool's
 * own critical status does not refuse its writes: refused calls would leave it no evidence to
 * recover on (it would stay critical until its whole window cleared); its failures are recovery's
 * to handle (backoff, failover, its breaker).
 */
export function refuseWrite(
  report: HealthReport,
  tool: string,
  degraded: boolean,
): HealthCheckFailedError | ReadOnlyModeError | undefined {
  if (report.status === "critical") return new HealthCheckFailedError(tool, "critical");
  if (degraded) return new ReadOnlyModeError(tool);
  return undefined;
}
