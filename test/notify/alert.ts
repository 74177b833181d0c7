import type { Alert } from "../../src/notify/index.js";

/** An alert as recovery sends one, before the throttle counts what it held back. */
export const alert: Omit<Alert, "suppressed"> = {
  kind: "bot/charge/SERVICE_DOWN",
  title: "bot: charge is failing (SERVICE_DOWN)",
  text: "Recovery ran out of options. Last error: HTTP 503",
  agent: "bot",
  tool: "charge",
  at: 0,
};
