export { slackNotifier } from "./slack.js";
export { webhookNotifier } from "./webhook.js";
export { pushoverNotifier, PUSHOVER_URL } from "./pushover.js";
export type { Alert, Notifier } from "./notifier.js";
