import { HumanEscalationRequiredError } from "../../errors.js";
import type { Strategy } from "../strategy.js";

/**
 * Alerts humans through the notifiers (throttled), then ends the call with a typed error that
 * says whether anyone was told (with no notifier configured, nobody is, and the error says so).
 */
export const escalateToHuman: Strategy = {
  name: "escalate_to_human",
  reexecutes: false,
  sameRoute: false,
  shared: true,
  async run(run) {
    const { notified, notifierConfigured } = await run.escalate();
    return {
      kind: "stop",
      error: new HumanEscalationRequiredError(run.tool, run.last.diagnosis.pattern, notified, {
        cause: run.last.error,
        notifierConfigured,
      }),
    };
  },
};
