import { HumanEscalationRequiredError } from "../../errors.js";
import type { Strategy } from "../strategy.js";

/** Alerts humans through the notifiers (throttled), then ends the call with a typed error. */
export const escalateToHuman: Strategy = {
  name: "escalate_to_human",
  reexecutes: false,
  sameRoute: false,
  shared: true,
  async run(run) {
    const notified = await run.escalate();
    return {
      kind: "stop",
      error: new HumanEscalationRequiredError(run.tool, run.last.diagnosis.pattern, notified, {
        cause: run.last.error,
      }),
    };
  },
};
