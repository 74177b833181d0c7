import { HealthCheckFailedError, ReadOnlyModeError } from "../errors.js";
import type { HealthReport } from "../health/evaluator.js";
import type { CallMode } from "./call-context.js";

/** The agent's mode: read-only while the agent is critical or recovery degraded it. */
export function modeOf(report: HealthReport, degraded: boolean): CallMode {
  return degraded || report.status === "critical" ? "read-only" : "normal";
}

/**
 * The error that refuses a write tool, or undefined when it may run. A write is refused while
 * the agent, or the tool itself, is critical, and while recovery keeps the agent read-only;
 * read tools always run.
 */
export function refuseWrite(
  report: HealthReport,
  tool: string,
  degraded: boolean,
): HealthCheckFailedError | ReadOnlyModeError | undefined {
  if (report.status === "critical") return new HealthCheckFailedError(tool, "critical", undefined);
  if (report.tools[tool]?.status === "critical")
    return new HealthCheckFailedError(tool, "critical", tool);
  if (degraded) return new ReadOnlyModeError(tool);
  return undefined;
}
