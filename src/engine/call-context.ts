import type { Clock } from "../clock.js";
import type { ProviderConfig, Usage } from "../recovery/providers.js";
import { modelReport, type ModelReport } from "../telemetry/gen-ai.js";

/** Whether the agent may write: `read-only` while health is critical. */
export type CallMode = "normal" | "read-only";

/** What a tool receives with each call. */
export interface CallContext {
  /** Aborted when the call times out or the caller aborts: pass it to fetch and SDK calls. */
  readonly signal: AbortSignal;
  /** The time budget of this attempt, if any. */
  readonly timeoutMs: number | undefined;
  /** Provider to use for this attempt (`gen_ai.provider.name`). */
  readonly provider: string | undefined;
  /** That provider as declared in `recovery.providers` (model, base URL, price). */
  readonly providerConfig: ProviderConfig | undefined;
  readonly mode: CallMode;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The same on every attempt of one logical call; undefined when the tool has none. */
  readonly idempotencyKey: string | undefined;
  /** The model's id for this call, when the caller passed one. */
  readonly toolCallId: string | undefined;
  /** Id of the enclosing `task()`, if any. */
  readonly taskId: string | undefined;
  /** Reports what this attempt cost, in USD (counts against the task's recovery budget). */
  reportCost(usd: number): void;
  /** Reports the tokens this attempt used; priced with the provider's `usdPer1kTokens`. */
  reportUsage(usage: Usage): void;
  /**
   * Reports the model request this attempt made (operation, provider, request and response
   * model), for the call's span and the GenAI metrics; fields reported later win (the response
   * model once the answer names it).
   */
  reportModel(model: ModelReport): void;
}

/** What selfheal's own layers (streams) may do to an attempt beyond what a tool sees. */
export interface AttemptControl extends CallContext {
  /** The engine's clock: a stream's limits run on it. */
  readonly clock: Clock;
  /** Ends the attempt's work: its signal is aborted with `reason`. */
  abort(reason: unknown): void;
  /** Part of the answer reached the caller: nothing may resend the call. */
  commit(): void;
  /**
   * A streamed attempt's first token came `ms` after it started: the stream metrics count it
   * (time to first token, and the tool's failures by pattern from then on).
   */
  firstToken(ms: number): void;
}

/**
 * The call context of one attempt. The AbortController is created only when the tool reads
 * `signal` (an AbortController costs about a microsecond): a deadline or an abort before then is
 * kept and handed to the controller when it is made.
 */
export abstract class AttemptContext implements AttemptControl {
  constructor(
    readonly timeoutMs: number | undefined,
    readonly provider: string | undefined,
    readonly mode: CallMode,
    readonly attempt: number,
    readonly idempotencyKey: string | undefined,
    readonly toolCallId: string | undefined,
    readonly taskId: string | undefined,
    readonly providerConfig: ProviderConfig | undefined,
  ) {}

  private controller: AbortController | undefined;
  private aborted = false;
  private reason: unknown;

  /** What the tool reported about this attempt's cost. */
  reportedUsd: number | undefined;
  usage: Usage | undefined;
  /** What the tool reported about its model request (`reportModel`). */
  model: ModelReport | undefined;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** The attempt is over (deadline, caller's abort): tells the tool through `signal`. */
  abort(reason: unknown): void {
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }

  abstract readonly clock: Clock;
  abstract commit(): void;
  abstract firstToken(ms: number): void;

  reportCost(usd: number): void {
    if (Number.isFinite(usd) && usd >= 0) this.reportedUsd = (this.reportedUsd ?? 0) + usd;
  }

  reportUsage(usage: Usage): void {
    const sum = (a: number | undefined, b: number | undefined) =>
      a === undefined ? b : b === undefined ? a : a + b;
    // A count never reported stays unknown (not 0): a stream that reports output tokens only.
    const inputTokens = sum(this.usage?.inputTokens, usage.inputTokens);
    const outputTokens = sum(this.usage?.outputTokens, usage.outputTokens);
    this.usage = {
      ...(inputTokens !== undefined && { inputTokens }),
      ...(outputTokens !== undefined && { outputTokens }),
    };
  }

  reportModel(report: ModelReport): void {
    this.model = modelReport(this.model, report);
  }
}
