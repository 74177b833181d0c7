import type { Clock } from "../clock.js";
import { withDeadline } from "../deadline.js";
import { describeThrown, oneLine, redact } from "../telemetry/redact.js";
import type { Alert, Notifier } from "./notifier.js";
import { AlertThrottle, type AlertGate } from "./throttle.js";

export interface EscalatorOptions {
  notifiers: readonly Notifier[];
  /** One alert of a kind per period, ms (default 10 min). */
  throttleMs: number;
  /** Per notifier and alert, ms (default 5 s). */
  timeoutMs: number;
  clock: Clock;
  logger: { warn(message: string): void };
  /** Counts each alert per channel, sent or suppressed. */
  onAlert(channel: string, suppressed: boolean): void;
  /** The fleet's shared throttle; default one per process. */
  gate?: AlertGate | undefined;
}

export const DEFAULT_THROTTLE_MS = 10 * 60_000;
export const DEFAULT_NOTIFY_TIMEOUT_MS = 5_000;
const MAX_TITLE_LENGTH = 250;
const MAX_ALERT_TEXT_LENGTH = 4_000;

/**
 * Sends alerts to every notifier, throttled per kind, each send bounded by a timeout. A notifier
 * that fails or hangs is logged and never breaks the agent.
 */
export class Escalator {
  private readonly throttle: AlertGate;
  private readonly local: AlertThrottle;

  constructor(private readonly options: EscalatorOptions) {
    this.local = new AlertThrottle(options.throttleMs);
    this.throttle = options.gate ?? this.local;
  }

  /** True when at least one notifier took the alert. */
  async escalate(alert: Omit<Alert, "suppressed">): Promise<boolean> {
    const { notifiers, clock, logger } = this.options;
    const { send, suppressed } = await this.admit(alert.kind, alert.at);
    if (!send) {
      for (const n of notifiers) this.options.onAlert(n.channel, true);
      return false;
    }
    // Redacted again here, whoever built the alert: what reaches a channel is never raw text.
    const full: Alert = {
      ...alert,
      title: oneLine(redact(alert.title, MAX_TITLE_LENGTH)),
      text: redact(alert.text, MAX_ALERT_TEXT_LENGTH),
      suppressed,
    };
    const results = await Promise.all(
      notifiers.map(async (notifier) => {
        this.options.onAlert(notifier.channel, false);
        const controller = new AbortController();
        try {
          await withDeadline(() => notifier.send(full, controller.signal), {
            controller,
            timeoutMs: this.options.timeoutMs,
            timeoutError: () => new Error(`no answer within ${this.options.timeoutMs} ms`),
            clock,
          });
          return true;
        } catch (error) {
          logger.warn(
            `selfheal: ${notifier.channel} notifier failed (alert dropped): ${redact(describeThrown(error))}`,
          );
          return false;
        }
      }),
    );
    return results.includes(true);
  }

  /** The shared gate, or this process's throttle when the gate fails (never no decision). */
  private async admit(kind: string, at: number): Promise<{ send: boolean; suppressed: number }> {
    try {
      return await this.throttle.admit(kind, at, this.options.throttleMs);
    } catch {
      return this.local.admit(kind, at);
    }
  }
}
