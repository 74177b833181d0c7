import type { Alert, Notifier } from "./notifier.js";
import { post } from "./post.js";

/** POSTs each alert as JSON to any URL (PagerDuty bridges, Opsgenie, your own service). */
export function webhookNotifier(options: {
  url: string;
  headers?: Record<string, string>;
}): Notifier {
  return {
    channel: "webhook",
    send: (alert: Alert, signal: AbortSignal) =>
      post(options.url, JSON.stringify(alert), "application/json", signal, options.headers),
  };
}
