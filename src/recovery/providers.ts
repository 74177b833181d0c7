/**
 * A provider, declared once (`recovery.providers`) with its settings and price; tools list it by
 * name in `providers`, and each attempt gets it as `ctx.providerConfig`.
 */
export interface ProviderConfig {
  name: string;
  /** The model to ask for on this provider (the tool reads `ctx.providerConfig.model`). */
  model?: string;
  /** The provider's API root, e.g. `https://api.openai.com/v1`. */
  baseUrl?: string;
  /** Price per 1,000 tokens reported through `ctx.reportUsage` (input and output alike). */
  usdPer1kTokens?: number;
  /** Price of a call that reports nothing (and the expected cost of the next attempt). */
  usdPerCall?: number;
  /**
   * Keeps a secondary warm: called every `warmupIntervalMs` (default 15 min) on an unref'd timer;
   * the outcome counts in the provider's breaker, so a dead secondary is skipped by failover.
   */
  warmup?: (signal: AbortSignal) => Promise<unknown>;
}

/** Token counts an attempt reports. */
export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
}

/** Cost of one attempt: reported cost, else tokens at the provider's price, else its per-call price. */
export function attemptCost(
  provider: ProviderConfig | undefined,
  reportedUsd: number | undefined,
  usage: Usage | undefined,
): number {
  if (reportedUsd !== undefined) return reportedUsd;
  if (usage && provider?.usdPer1kTokens !== undefined) {
    return (
      (((usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)) / 1000) * provider.usdPer1kTokens
    );
  }
  return provider?.usdPerCall ?? 0;
}
