import { createSelfHealing, type SelfHealingOptions } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";

/** A selfheal instance on virtual time with a logger that keeps what it is told. */
export function virtualInstance(options: Partial<SelfHealingOptions> = {}) {
  const clock = new VirtualClock();
  const warnings: string[] = [];
  const sh = createSelfHealing({
    agent: "test-agent",
    clock,
    logger: { warn: (m) => warnings.push(m) },
    ...options,
  });
  return { sh, clock, warnings };
}
