import { HealthCheckFailedError } from "../errors.js";
import type { HealthReport } from "../health/evaluator.js";
import type { CallMode } from "./call-context.js";

/** The agent's mode for a report: read-only while the agent as a whole is critical. */
export function modeOf(report: HealthReport): CallMode {
  return report.status === "critical" ? "read-only" : "normal";
}

/**
 * The error that refuses a write tool, or undefined when it may run. A write is refused while
 * the agent, or the tool itself, is critical; read tools always run.
 */
export function refuseWrite(
  report: HealthReport,
  tool: string,
): HealthCheckFailedError | undefined {
  if (report.status === "critical") return new HealthCheckFailedError(tool, "critical", undefined);
  if (report.tools[tool]?.status === "critical")
    return new HealthCheckFailedError(tool, "critical", tool);
  return undefined;
}
