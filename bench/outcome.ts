/**
 * Outcome benchmark: every scenario through (a) no recovery, (b) p-retry 9 with failover, (c)
 * cockatiel 4 retry + circuit breaker + fallback, (d) selfheal, side by side on the same seeded
 * simulation, scored by one rule for all. Run: npm run bench:outcome (writes
 * bench/results/outcome.json).
 */
import { report } from "./harness.js";
import { outcomeTable } from "./outcome-table.js";

const { rows, summary } = await outcomeTable();
report("outcome", rows, summary);
