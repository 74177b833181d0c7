import type { Alert, Notifier } from "./notifier.js";
import { post } from "./post.js";

export const PUSHOVER_URL = "https://api.pushover.net/1/messages.json";

/** Sends alerts as Pushover messages (high priority). `url` is for tests. */
export function pushoverNotifier(options: { token: string; user: string; url?: string }): Notifier {
  return {
    channel: "pushover",
    send: (alert: Alert, signal: AbortSignal) =>
      post(
        options.url ?? PUSHOVER_URL,
        new URLSearchParams({
          token: options.token,
          user: options.user,
          title: alert.title.slice(0, 250),
          message:
            `${alert.text}${alert.suppressed ? `\n(${alert.suppressed} similar suppressed)` : ""}`.slice(
              0,
              1_024,
            ),
          priority: "1",
        }).toString(),
        "application/x-www-form-urlencoded",
        signal,
      ),
  };
}
