/** A small world for the simulator's unit tests: one agent, an hour, the faults given. */
import type { Fault, Scenario } from "../../src/sim/scenarios.js";

export const MIN = 60_000;
export const openai = { name: "openai", latencyMs: 800, usdPerCall: 0.002 };
export const anthropic = { name: "anthropic", latencyMs: 1_100, usdPerCall: 0.003 };
export const payments = { name: "payments", latencyMs: 200, usdPerCall: 0.0005 };

/**
 * An hour's scenario of one agent, a task a minute, openai as its LLM and payments as its API,
 * whose only fault (if any) is `fault` on `dependency` from the start to `toMs`; `over` on top.
 */
export function testScenario(
  fault: Fault | undefined,
  dependency: string,
  toMs: number,
  over: Partial<Scenario> = {},
): Scenario {
  return {
    name: "test",
    description: "",
    durationMs: 60 * MIN,
    seed: 1,
    agents: 1,
    taskEveryMs: MIN,
    llm: [openai],
    api: payments,
    faults: fault ? [{ dependency, fromMs: 0, toMs, fault }] : [],
    ...over,
  };
}
