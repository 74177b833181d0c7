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
  readonly mode: CallMode;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The same on every attempt of one logical call; undefined when the tool has none. */
  readonly idempotencyKey: string | undefined;
  /** The model's id for this call, when the caller passed one. */
  readonly toolCallId: string | undefined;
  /** Id of the enclosing `task()`, if any. */
  readonly taskId: string | undefined;
}

/**
 * The call context of one attempt. The AbortController is created only when someone reads
 * `signal` or a deadline needs it, so calls without a timeout allocate none.
 */
export class AttemptContext implements CallContext {
  constructor(
    readonly timeoutMs: number | undefined,
    readonly provider: string | undefined,
    readonly mode: CallMode,
    readonly attempt: number,
    readonly idempotencyKey: string | undefined,
    readonly toolCallId: string | undefined,
    readonly taskId: string | undefined,
    private controller?: AbortController,
  ) {}

  get signal(): AbortSignal {
    return (this.controller ??= new AbortController()).signal;
  }
}
