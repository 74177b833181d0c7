import type { Alert, Notifier } from "./notifier.js";
import { post } from "./post.js";

/**
 * Slack's control characters in mrkdwn and message text: `<!channel>` would ping everyone and
 * `<https://…|text>` would dress up a link, so error text carrying them is shown, not obeyed.
 * @see https://api.slack.com/reference/surfaces/formatting#escaping
 */
const escapeSlack = (text: string): string =>
  text.replace(/[&<>]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : "&gt;"));

/** Posts alerts to a Slack incoming webhook. */
export function slackNotifier(options: { webhookUrl: string }): Notifier {
  return {
    channel: "slack",
    send: (alert: Alert, signal: AbortSignal) =>
      post(
        options.webhookUrl,
        JSON.stringify({
          text: `:rotating_light: ${escapeSlack(alert.title)}`,
          blocks: [
            { type: "header", text: { type: "plain_text", text: alert.title.slice(0, 150) } },
            {
              type: "section",
              text: { type: "mrkdwn", text: escapeSlack(alert.text.slice(0, 2_900)) },
            },
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
