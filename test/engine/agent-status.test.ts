/**
 * What `status()` answers, from a health report and the breakers (src/engine/agent-status.ts):
 * never `healthy` while writes are refused or every route of a tool is open; the breakers that
 * are not closed, for the agent and per tool.
 */
import { describe, expect, it } from "vitest";
import { agentStatus } from "../../src/engine/agent-status.js";
import type { HealthReport, SignalReading } from "../../src/health/evaluator.js";
import type { BreakerRegistry, BreakerState } from "../../src/recovery/breaker.js";

const reading: SignalReading = {
  signal: "success_rate",
  value: 0.99,
  status: "healthy",
  samples: 40,
};

/** A report where the agent and `tools` have the given statuses. */
function report(
  status: HealthReport["status"],
  tools: Record<string, HealthReport["status"]> = {},
): HealthReport {
  return {
    agent: "a",
    at: 1_000,
    status,
    signals: [reading],
    tools: Object.fromEntries(
      Object.entries(tools).map(([tool, s]) => [tool, { status: s, signals: [reading] }]),
    ),
  };
}

const breakers = (states: Record<string, BreakerState>) =>
  ({ states: () => Object.entries(states) }) as unknown as BreakerRegistry;

describe("agentStatus", () => {
  it("a tool seen only through spans keeps its health, with no circuits of ours", () => {
    const s = agentStatus(
      report("healthy", { spanned: "warning" }),
      false,
      breakers({}),
      new Map(),
      0,
    );
    expect(s.tools).toEqual({ spanned: { status: "warning", signals: [reading], circuits: {} } });
  });

  it("a registered tool not called yet is healthy with no signals; its routes read closed", () => {
    const s = agentStatus(
      report("healthy"),
      false,
      breakers({}),
      new Map([["search", ["search:p", "search:q"]]]),
      0,
    );
    expect(s.tools.search).toEqual({
      status: "healthy",
      signals: [],
      circuits: { "search:p": "closed", "search:q": "closed" },
    });
    expect(s.circuits).toEqual({});
  });

  it("a tool whose every route is open is at least a warning; one route closed is enough", () => {
    const routes = new Map([
      ["search", ["search:p", "search:q"]],
      ["lookup", ["lookup:p", "lookup:q"]],
      ["fetch", ["fetch"]],
    ]);
    const s = agentStatus(
      report("healthy", { search: "healthy", lookup: "healthy", fetch: "critical" }),
      false,
      breakers({
        "search:p": "open",
        "search:q": "half_open",
        "lookup:p": "open",
        "lookup:q": "closed",
        fetch: "open",
      }),
      routes,
      0,
    );
    expect(s.tools.search?.status).toBe("warning");
    expect(s.tools.search?.circuits).toEqual({ "search:p": "open", "search:q": "half_open" });
    expect(s.tools.lookup?.status).toBe("healthy");
    expect(s.tools.fetch?.status).toBe("critical"); // already worse than a warning
    // The agent's breakers that are not closed.
    expect(s.circuits).toEqual({
      "search:p": "open",
      "search:q": "half_open",
      "lookup:p": "open",
      fetch: "open",
    });
    expect(s.status).toBe("healthy");
  });

  it("read-only makes a healthy agent a warning, and leaves a critical one critical", () => {
    for (const [status, shown] of [
      ["healthy", "warning"],
      ["warning", "warning"],
      ["critical", "critical"],
    ] as const) {
      const s = agentStatus(report(status), true, breakers({}), new Map(), 0);
      expect(s.status).toBe(shown);
      expect(s.readOnly).toBe(true);
    }
    expect(agentStatus(report("healthy"), false, breakers({}), new Map(), 0)).toMatchObject({
      status: "healthy",
      readOnly: false,
      agent: "a",
      at: 1_000,
    });
  });
});
