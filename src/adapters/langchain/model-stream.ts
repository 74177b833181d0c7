import { callbackHandlerPrefersStreaming } from "@langchain/core/callbacks/base";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import type { ChatGenerationChunk } from "@langchain/core/outputs";
import type { AttemptControl } from "../../engine/call-context.js";
import {
  STREAM_DEFAULTS,
  type ResolvedStreamLimits,
  type StreamFormat,
} from "../../engine/options/stream.js";
import { StreamAttempt, type StreamSink } from "../../engine/stream-attempt.js";
import { isStreamRestart, StreamChannel, StreamRestart } from "../../engine/stream-channel.js";
import { StreamInterruptedError, StreamTruncatedError, type CallContext } from "../../index.js";
import { LinkedSignal } from "./linked-signal.js";
import type { LangChainStreamSettings } from "./options.js";
import { finishReasonOf, normalizeFinishReason } from "./stream-format.js";
import { announceRestart, STREAM_RESTART_EVENT } from "./stream-restart.js";
import type { ModelCallOptions, ModelTap, StreamOpener } from "./tapped-model.js";
import { errorName } from "./tool-calls.js";

type RunManager = CallbackManagerForLLMRun | undefined;
type Item = ChatGenerationChunk | StreamRestart;

/** Stream settings with the core's defaults (docs/streams.md); finish reasons normalized. */
export function streamLimits<C>(
  settings: LangChainStreamSettings,
  format: StreamFormat<C>,
): ResolvedStreamLimits<C> {
  const failOnFinish = settings.failOnFinish ?? STREAM_DEFAULTS.failOnFinish;
  return {
    format,
    firstTokenMs: settings.firstTokenMs ?? STREAM_DEFAULTS.firstTokenMs,
    idleMs: settings.idleMs ?? STREAM_DEFAULTS.idleMs,
    mode: settings.afterFirstToken ?? STREAM_DEFAULTS.afterFirstToken,
    failOnFinish: new Set(failOnFinish.map(normalizeFinishReason)),
  };
}

/**
 * One model call's streams, across its attempts: how much of an answer reached the caller (the
 * discard signal's count, StreamInterruptedError's), and a tap for each attempt.
 */
export class ModelStream {
  /** Chunks handed to the caller since the call began or the last discard signal. */
  private delivered = 0;
  /** The answer the caller holds was cut: its stream did not complete. */
  private partial = false;
  /** The id of the message the caller holds chunks of. */
  private messageId: string | undefined;
  /** What ended the last stream that failed (the cause the discard signal names). */
  private lastFailure: unknown;

  constructor(
    readonly tool: string,
    readonly limits: ResolvedStreamLimits<ChatGenerationChunk>,
    private readonly writer: ((chunk: unknown) => void) | undefined,
  ) {}

  /** The tap of one attempt (the context is the engine's attempt, as `sh.stream` reads it). */
  tap(ctx: CallContext): AttemptTap {
    return new AttemptTap(this, ctx as AttemptControl);
  }

  /**
   * An attempt hands its first chunks to the caller (at its first token, or at its end): after
   * chunks of another answer, the discard signal goes first. Under `fail` a first token commits
   * the call: nothing resends it.
   */
  begin(ctx: AttemptControl, channel: StreamChannel<Item>, atFirstToken: boolean): void {
    if (this.delivered > 0) {
      channel.push(new StreamRestart(this.delivered, ctx.attempt, ctx.provider, this.lastFailure));
      this.delivered = 0;
    }
    if (atFirstToken && this.limits.mode === "fail") ctx.commit();
  }

  pushed(): void {
    this.delivered++;
    this.partial = true;
  }

  emitted(chunk: ChatGenerationChunk): void {
    const id = chunk.message.id;
    if (this.messageId === undefined && typeof id === "string") this.messageId = id;
  }

  completed(): void {
    this.partial = false;
  }

  failed(error: unknown): void {
    this.lastFailure = error;
  }

  /** Tells the caller to drop the chunks `marker` counts, before the new answer's first chunk. */
  async announce(marker: StreamRestart, runManager: RunManager): Promise<void> {
    const { messageId } = this;
    this.messageId = undefined;
    await announceRestart(
      {
        type: STREAM_RESTART_EVENT,
        tool: this.tool,
        discard: marker.discard,
        ...(messageId !== undefined && { messageId }),
        attempt: marker.attempt,
        ...(marker.provider !== undefined && { provider: marker.provider }),
        reason: errorName(marker.cause),
      },
      this.writer,
      runManager,
    );
  }

  /**
   * What the caller gets for a call that failed: with part of an answer shown (its stream cut),
   * a StreamInterruptedError saying how many chunks; a caller who gave up gets its own reason.
   */
  failure(error: unknown, cancelled: boolean): unknown {
    if (cancelled || !this.partial || this.delivered === 0) return error;
    return new StreamInterruptedError(this.tool, this.delivered, { cause: error });
  }
}

/** One attempt of a model call, as its streams went. */
export class AttemptTap implements ModelTap {
  private streamed = false;
  private failedWith: { error: unknown } | undefined;

  constructor(
    private readonly call: ModelStream,
    private readonly ctx: AttemptControl,
  ) {}

  get signal(): AbortSignal {
    return this.ctx.signal;
  }

  stream(
    open: StreamOpener,
    options: ModelCallOptions,
    runManager: RunManager,
    asEvents: boolean,
  ): AsyncGenerator<ChatGenerationChunk> {
    this.streamed = true;
    const shown = asEvents || isShown(runManager);
    return readModelStream(this.call, this.ctx, open, options, runManager, shown, (error) => {
      this.failedWith ??= { error };
    });
  }

  /**
   * The attempt's verdict on the answer LangChain made: a failed stream fails it (LangChain
   * throws it already; a model that swallowed it must not pass a cut answer off as whole), and a
   * whole answer that finished for a reason in `failOnFinish` (`length`) is truncated.
   */
  verify(answer: unknown): void {
    if (this.failedWith) throw this.failedWith.error;
    if (this.streamed) return; // its stream's end was checked
    const reason = finishReasonOf(answer);
    if (reason !== undefined && this.call.limits.failOnFinish.has(reason))
      throw new StreamTruncatedError(this.call.tool, reason, {
        chunks: 1,
        firstTokenMs: undefined,
      });
  }
}

/**
 * One stream of a model, as LangChain reads it from `_streamResponseChunks`. The core's
 * StreamAttempt reads the model's own stream (first-token and idle limits on the attempt's
 * signal, completion checked); what it lets through goes to LangChain, which aggregates the
 * answer, and to the caller as tokens. The model's own token callbacks are muted: selfheal
 * sends each token when the chunk reaches the caller, so `buffer` holds them back and `restart`
 * puts the discard signal before the new answer's. A failed stream throws its error here, after
 * the chunks the caller already has: LangChain reports it (handleLLMError) and the attempt
 * fails with it.
 */
async function* readModelStream(
  call: ModelStream,
  ctx: AttemptControl,
  open: StreamOpener,
  options: ModelCallOptions,
  runManager: RunManager,
  shown: boolean,
  onFailure: (error: unknown) => void,
): AsyncGenerator<ChatGenerationChunk> {
  // The model's request follows LangChain's signal and the attempt's (a limit aborts it).
  const link = new LinkedSignal(options.signal, ctx.signal);
  // LangChain stopped reading (its own abort): the request is cancelled.
  const channel = new StreamChannel<Item>((reason) => {
    link.abort(reason);
  });
  const sink: StreamSink<ChatGenerationChunk> = {
    // Tokens nobody is shown are held as under `buffer`: any failure is retried unseen.
    buffering: !shown || call.limits.mode === "buffer",
    restarts: 0,
    begin: (c) => {
      call.begin(c, channel, true);
    },
    push: (chunk) => {
      if (shown) call.pushed();
      channel.push(chunk);
    },
  };
  new StreamAttempt(call.tool, call.limits, ctx, sink)
    .run(() => open({ ...options, signal: link.signal }, runManager && mutedTokens(runManager)))
    .then(
      (answer) => {
        if (answer.held.length > 0) {
          call.begin(ctx, channel, false);
          for (const chunk of answer.held) sink.push(chunk);
        }
        call.completed();
        channel.end();
      },
      (error: unknown) => {
        call.failed(error);
        onFailure(error);
        channel.fail(error);
      },
    );
  try {
    for await (const item of channel) {
      if (isStreamRestart(item)) {
        await call.announce(item, runManager);
        continue;
      }
      yield item;
      // As providers do: after the yield, once LangChain gave the chunk its message id.
      await runManager?.handleLLMNewToken(item.text, undefined, undefined, undefined, undefined, {
        chunk: item,
      });
      call.emitted(item);
    }
  } finally {
    link.release();
  }
}

/**
 * Whether the stream's tokens reach someone as they come: a callback handler that prefers
 * streaming (streamMode `messages`, `streamEvents`, `streamLog`) is why LangChain streams at
 * all. A model that streams inside `_generate` (`streaming: true`) under `agent.invoke` shows
 * its tokens to nobody.
 */
function isShown(runManager: RunManager): boolean {
  return runManager?.handlers.some(callbackHandlerPrefersStreaming) ?? false;
}

/** The model's run manager with its token callback muted: selfheal sends the tokens. */
function mutedTokens(runManager: CallbackManagerForLLMRun): CallbackManagerForLLMRun {
  return Object.create(runManager, {
    handleLLMNewToken: { value: () => Promise.resolve() },
  }) as CallbackManagerForLLMRun;
}
