import type { HealthReport, ScopeHealth } from "../health/evaluator.js";
import type { BreakerRegistry, BreakerState } from "../recovery/breaker.js";
import type { HealthStatus } from "../telemetry/conventions.js";

/** A tool's health, with the state of each of its routes' breakers. */
export interface ToolStatus extends ScopeHealth {
  /** Breaker state by dependency (a provider, or the tool itself when it has none). */
  circuits: Record<string, BreakerState>;
}

/** What `status()` answers: health, and what recovery is doing about it. */
export interface AgentStatus extends HealthReport {
  /** Write tools are refused now (the agent is critical, or recovery made it read-only). */
  readOnly: boolean;
  /** Breakers that are not closed, by dependency. */
  circuits: Record<string, BreakerState>;
  tools: Record<string, ToolStatus>;
}

const atLeastWarning = (status: HealthStatus): HealthStatus =>
  status === "healthy" ? "warning" : status;

/**
 * Health as the signals say, made to tell the truth about recovery: the agent is never
 * `healthy` while its writes are refused, nor a tool while every one of its routes is open.
 */
export function agentStatus(
  report: HealthReport,
  readOnly: boolean,
  breakers: BreakerRegistry,
  routesByTool: ReadonlyMap<string, readonly string[]>,
  now: number,
): AgentStatus {
  const states = new Map(breakers.states(now));
  // Tools seen only through the span processor have health but no routes of ours.
  const tools: Record<string, ToolStatus> = {};
  for (const [tool, health] of Object.entries(report.tools))
    tools[tool] = { ...health, circuits: {} };
  for (const [tool, routes] of routesByTool) {
    const health = report.tools[tool] ?? { status: "healthy", signals: [] };
    const circuits = Object.fromEntries(routes.map((d) => [d, states.get(d) ?? "closed"]));
    const blocked = routes.every((d) => (states.get(d) ?? "closed") !== "closed");
    tools[tool] = {
      ...health,
      status: blocked ? atLeastWarning(health.status) : health.status,
      circuits,
    };
  }
  return {
    ...report,
    status: readOnly ? atLeastWarning(report.status) : report.status,
    readOnly,
    circuits: Object.fromEntries([...states].filter(([, s]) => s !== "closed")),
    tools,
  };
}
