/**
 * Cost of one diagnosis, side by side in one process: the common path (a 429 from the OpenAI
 * SDK), a 503, an error that walks the whole table to UNKNOWN, and a 1 MB hostile message.
 * Compare ratios between versions, not absolute numbers.
 *
 * Run: npm run bench:diagnosis   (writes bench/results/diagnosis.json)
 */
import { createSelfHealing } from "../dist/index.js";
import { thrownFault } from "../dist/testing/index.js";
import { measure, report } from "./harness.js";

const BATCH = 100;
const ROUNDS = 7;

const sh = createSelfHealing({ agent: "bench" });
const cases: Record<string, unknown> = {
  "429 (OpenAI SDK shape)": thrownFault("rate_limit", { retryAfterSeconds: 2 }),
  "503 (OpenAI SDK shape)": thrownFault("http_503"),
  "UNKNOWN (walks every rule)": new Error("the flux capacitor is misaligned"),
  "1 MB hostile message": new Error(`${"(a+)+".repeat(170_000)}@`),
};

const plans: Partial<Record<string, unknown>> = {};
const rateLimit = cases["429 (OpenAI SDK shape)"];
const ns = await measure(
  {
    ...Object.fromEntries(
      Object.entries(cases).map(([name, error]) => [name, () => sh.diagnose(error, { tool: "t" })]),
    ),
    // The failing path's choice, as a call makes it: the tool's plan, the instance's, the rule's.
    "429 diagnosis + plan choice": async () => {
      const d = await sh.diagnose(rateLimit, { tool: "t" });
      return plans[d.pattern] ?? d.strategies;
    },
  },
  { batch: BATCH, rounds: ROUNDS },
);
const us = Object.fromEntries(Object.entries(ns).map(([k, v]) => [k, v / 1000]));
const common = us["429 (OpenAI SDK shape)"] ?? NaN;
const rows = Object.entries(us).map(([name, value]) => ({
  case: name,
  "µs/diagnosis": +value.toFixed(2),
  "x 429": +(value / common).toFixed(2),
}));
const summary = {
  "429 diagnosis, µs (target < 10)": +common.toFixed(2),
  "429 diagnosis + plan choice, µs (target < 10)": +(
    us["429 diagnosis + plan choice"] ?? NaN
  ).toFixed(2),
};
report("diagnosis", rows, summary, { batch: BATCH, rounds: ROUNDS, microseconds: us });
await sh.close();
