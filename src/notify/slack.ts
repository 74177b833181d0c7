import type { Alert, Notifier } from "./notifier.js";
import { post } from "./post.js";

/** Posts alerts to a Slack incoming webhook. */
export function slackNotifier(options: { webhookUrl: string }): Notifier {
  return {
    channel: "slack",
    send: (alert: Alert, signal: AbortSignal) =>
      post(
        options.webhookUrl,
        JSON.stringify({
          text: `:rotating_light: ${alert.title}`,
          blocks: [
            { type: "header", text: { type: "plain_text", text: alert.title.slice(0, 150) } },
            { type: "section", text: { type: "mrkdwn", text: alert.text.slice(0, 2_900) } },
            ...(alert.suppressed
              ? [
                  {
                    type: "context",
                    elements: [
                      { type: "mrkdwn", text: `${alert.suppressed} similar alerts suppressed` },
                    ],
                  },
                ]
              : []),
          ],
        }),
        "application/json",
        signal,
      ),
  };
}
