/**
 * The simulator's week, reviewed: every scenario played on its own day of one week (the
 * long-runs night on the last), written to one event log, then `selfheal report` on it with the
 * page, and the page shot in headless Chromium for the docs.
 *
 *   npx tsx scripts/review-week.ts [OUT_DIR]   (default docs/review)
 *
 * Writes OUT_DIR/week.jsonl, review.html, review.png (the whole page) and review-rules.json.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { run } from "../src/cli/run.js";
import { LONG_RUNS, runLongRuns } from "../src/sim/long-runs.js";
import { runScenario } from "../src/sim/run.js";
import { SCENARIOS } from "../src/sim/scenarios.js";

const out = resolve(process.argv[2] ?? "docs/review");
mkdirSync(out, { recursive: true });
const log = `${out}/week.jsonl`;
rmSync(log, { force: true });

const MONDAY = Date.UTC(2026, 10, 23); // 2026-11-23, 00:00 UTC
const DAY = 86_400_000;
const names = Object.keys(SCENARIOS);
for (const [i, name] of names.entries()) {
  const scenario = SCENARIOS[name];
  if (!scenario) continue;
  // Spread over the week's working hours: up to two scenarios a day, 09:00 and 14:00.
  const startMs = MONDAY + Math.floor(i / 2) * DAY + (i % 2 === 0 ? 9 : 14) * 3_600_000;
  await runScenario(scenario, { eventLog: log, startMs });
  console.log(`played ${name}`);
}
await runLongRuns(LONG_RUNS, { eventLog: log, startMs: MONDAY + 5 * DAY + 20 * 3_600_000 });
console.log("played long-runs");

const html = `${out}/review.html`;
const code = await run([
  "report",
  log,
  "--html",
  html,
  "--suggest-rules",
  `${out}/review-rules.json`,
  "--suggest-thresholds",
]);
if (code !== undefined && code !== 0) process.exit(code);
execFileSync(
  "chromium",
  [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--window-size=1000,5200",
    `--screenshot=${out}/review.png`,
    `file://${html}`,
  ],
  { stdio: "ignore" },
); // Chromium's complaints about D-Bus and the like
console.log(`wrote ${out}/review.png`);
