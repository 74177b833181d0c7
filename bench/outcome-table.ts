/**
 * The outcome table: every scenario through every baseline and selfheal, scored by the same
 * rules (src/sim/score.ts). Deterministic: every policy's randomness is seeded.
 */
import { runScenario } from "../src/sim/run.js";
import { SCENARIOS } from "../src/sim/scenarios.js";
import { BASELINES } from "./baselines.js";

export type OutcomeRow = Record<string, string | number | null>;

export async function outcomeTable(): Promise<{
  rows: OutcomeRow[];
  summary: Record<string, number>;
}> {
  const rows: OutcomeRow[] = [];
  const policies = [
    ...Object.entries(BASELINES).map(([name, create]) => ({ name, create })),
    undefined,
  ];
  for (const scenario of Object.values(SCENARIOS)) {
    for (const policy of policies) {
      const r = await runScenario(scenario, policy ? { policy } : {});
      rows.push({
        scenario: r.scenario,
        policy: r.policy,
        "user-visible failures": r.userVisibleFailures,
        pages: r.pages,
        "auto-recovery": r.autoRecoveryRate,
        "MTTR s": r.mttrSeconds,
        "spend $": r.spendUsd,
        "recovery $": r.recoveryCostUsd,
        "wasted retries": r.wastedRetries,
        "double charges": r.doubleCharges,
        "false trips": r.falseTrips,
        "drift alerts": r.driftEvents,
      });
    }
  }
  /** Scenarios where selfheal's figure is the lowest (ties included) of the policies given. */
  const bestOf = (column: string, against = (_policy: unknown) => true) =>
    rows.filter(
      (s) =>
        s.policy === "selfheal" &&
        rows
          .filter((r) => r.scenario === s.scenario && against(r.policy))
          .every((r) => (r[column] as number) >= (s[column] as number)),
    ).length;
  return {
    rows,
    summary: {
      scenarios: Object.keys(SCENARIOS).length,
      "selfheal has the fewest user-visible failures (ties included)":
        bestOf("user-visible failures"),
      // Sending nothing again is cheap: spend is compared among the policies that recover.
      "selfheal has the lowest spend of the recovering policies (ties included)": bestOf(
        "spend $",
        (policy) => policy !== "no recovery",
      ),
      "selfheal has the fewest wasted retries (ties included)": bestOf("wasted retries"),
      "selfheal has the fewest pages (ties included)": bestOf("pages"),
    },
  };
}
