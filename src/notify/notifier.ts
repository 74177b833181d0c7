/** One alert to a human. */
export interface Alert {
  /** Alerts of one kind are throttled together, e.g. `support-bot/charge/SERVICE_DOWN`. */
  kind: string;
  title: string;
  /** Redacted. */
  text: string;
  agent: string;
  tool: string;
  at: number;
  /** Alerts of this kind suppressed by the throttle since the last one sent. */
  suppressed: number;
}

/** A channel to humans. Sending may throw; selfheal catches, times out and logs it. */
export interface Notifier {
  /** The channel label of the escalations metric, e.g. slack. */
  readonly channel: string;
  send(alert: Alert, signal: AbortSignal): Promise<void>;
}
