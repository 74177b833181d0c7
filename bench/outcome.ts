/**
 * Outcome benchmark: every scenario through (a) no recovery, (b) retry-only with p-retry 6,
 * (c) cockatiel 3 retry + circuit breaker + fallback, (d) selfheal, side by side on the same
 * seeded simulation. Run: npm run bench:outcome (writes bench/results/outcome.json).
 */
import { runScenario } from "../src/sim/run.js";
import { SCENARIOS } from "../src/sim/scenarios.js";
import { BASELINES } from "./baselines.js";
import { report } from "./harness.js";

const rows: Record<string, unknown>[] = [];
for (const scenario of Object.values(SCENARIOS)) {
  const policies = [
    ...Object.entries(BASELINES).map(([name, create]) => ({ name, create })),
    undefined,
  ];
  for (const policy of policies) {
    const r = await runScenario(scenario, policy ? { policy } : {});
    rows.push({
      scenario: r.scenario,
      policy: r.policy,
      "user-visible failures": r.user_visible_failures,
      pages: r.pages,
      "auto-recovery": r.auto_recovery_rate,
      "MTTR s": r.mttr_seconds,
      "recovery $": r.recovery_cost_usd,
      "drift alerts": r.drift_events,
    });
  }
}
const selfheal = rows.filter((r) => r.policy === "selfheal");
const summary = {
  "scenarios where selfheal has the fewest user-visible failures": selfheal.filter((s) =>
    rows
      .filter((r) => r.scenario === s.scenario)
      .every(
        (r) => (r["user-visible failures"] as number) >= (s["user-visible failures"] as number),
      ),
  ).length,
  scenarios: selfheal.length,
};
report("outcome", rows, summary);
