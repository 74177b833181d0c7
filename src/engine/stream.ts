import type { Attributes } from "@opentelemetry/api";
import {
  isStreamFirstTokenTimeoutError,
  isStreamStalledError,
  isStreamTruncatedError,
  StreamInterruptedError,
} from "../errors.js";
import {
  ATTR_GEN_AI_REQUEST_STREAM,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
  ATTR_STREAM_CHUNKS,
  ATTR_STREAM_FIRST_TOKEN_MS,
  ATTR_STREAM_MODE,
  ATTR_STREAM_RESTARTS,
  type StreamMode,
} from "../telemetry/conventions.js";
import type { AttemptControl, CallContext } from "./call-context.js";
import type { Engine } from "./engine.js";
import { validateCallOptions, type CallOptions, type ToolOptions } from "./options.js";
import type { ResolvedStreamLimits, StreamFunction, StreamToolOptions } from "./options/stream.js";
import { StreamAttempt, type StreamAnswer, type StreamSink } from "./stream-attempt.js";
import { StreamChannel, StreamRestart } from "./stream-channel.js";
import { toolRuntime, wrapRuntime, type CallResult } from "./tool.js";

/** How a healed stream went, once it ended. */
export interface StreamResult {
  outcome: "success" | "recovered";
  /** The provider that answered (undefined for a stream without providers). */
  provider: string | undefined;
  /** Attempts made, the first included. */
  attempts: number;
  /** Chunks of the answer. */
  chunks: number;
  /** StreamRestart markers the reader was given. */
  restarts: number;
  /** The answering attempt's time to first token, ms (undefined: no token came). */
  firstTokenMs: number | undefined;
  finishReason: string | undefined;
  outputTokens: number | undefined;
}

/**
 * A healed stream: iterate it once for the chunks. With `afterFirstToken: "restart"` it also
 * yields StreamRestart markers. Stopping early (break) cancels the stream and its request.
 */
export interface HealedStream<T> extends AsyncIterable<T> {
  /** Settles when the stream ends: how it went, or its error (never an unhandled rejection). */
  readonly result: Promise<StreamResult>;
}

/** What a stream yields: its chunks, and StreamRestart markers under `restart`. */
export type StreamItem<C, M extends StreamMode> = M extends "restart" ? C | StreamRestart : C;

/** A stream function healed by `sh.stream`: same arguments, plus optional per-call options. */
export type HealedStreamFunction<A, C, M extends StreamMode = "fail"> = (
  args: A,
  options?: CallOptions,
) => HealedStream<StreamItem<C, M>>;

/**
 * One streamed call: the argument its attempts receive (the caller's arguments, and the channel
 * they push chunks into), and what hands its end to the reader.
 */
class StreamCall<A, C> implements StreamSink<C> {
  readonly channel: StreamChannel<C | StreamRestart>;
  readonly controller = new AbortController();
  readonly buffering: boolean;
  readonly result: Promise<StreamResult>;
  /** What ended the last failed attempt (the cause a StreamRestart names). */
  lastFailure: unknown;
  #resolve!: (result: StreamResult) => void;
  #reject!: (error: unknown) => void;
  #unlink: (() => void) | undefined;

  constructor(
    readonly args: A,
    private readonly name: string,
    private readonly limits: ResolvedStreamLimits<C>,
  ) {
    this.buffering = limits.mode === "buffer";
    this.channel = new StreamChannel((reason) => {
      this.controller.abort(reason);
    });
    this.result = new Promise<StreamResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.result.catch(() => undefined); // the reader sees the error; `result` is optional to await
    this.channel.result = this.result;
  }

  /** The caller's signal aborts this call too. */
  link(signal: AbortSignal | undefined): void {
    if (!signal) return;
    const forward = () => {
      this.controller.abort(signal.reason);
    };
    if (signal.aborted) forward();
    else {
      signal.addEventListener("abort", forward, { once: true });
      this.#unlink = () => {
        signal.removeEventListener("abort", forward);
      };
    }
  }

  get restarts(): number {
    return this.channel.restarts;
  }

  begin(ctx: Pick<AttemptControl, "attempt" | "provider" | "commit">): void {
    if (this.limits.mode === "fail") ctx.commit();
    else if (this.limits.mode === "restart" && this.channel.delivered > 0) {
      const { delivered } = this.channel;
      this.channel.restart(
        new StreamRestart(delivered, ctx.attempt, ctx.provider, this.lastFailure),
      );
    }
  }

  push(chunk: C): void {
    this.channel.push(chunk);
  }

  /** The call answered: chunks still held go to the reader, then its end. */
  answered({ value, outcome, provider, attempts }: CallResult<StreamAnswer<C>>): void {
    if (value.held.length > 0) {
      this.begin({ attempt: attempts, provider, commit: () => undefined });
      for (const chunk of value.held) this.channel.push(chunk);
    }
    this.channel.end();
    this.#unlink?.();
    this.#resolve({
      outcome,
      provider,
      attempts,
      chunks: value.chunks,
      restarts: this.channel.restarts,
      firstTokenMs: value.firstTokenMs,
      finishReason: value.finishReason,
      outputTokens: value.outputTokens,
    });
  }

  /** The call failed: with part of the answer delivered, the reader learns how much. */
  failed(error: unknown): void {
    const { delivered } = this.channel;
    // The caller gave up (its signal, or it stopped reading): its own reason, nothing to explain.
    const thrown =
      delivered > 0 && !this.controller.signal.aborted
        ? new StreamInterruptedError(this.name, delivered, { cause: error })
        : error;
    this.channel.fail(thrown);
    this.#unlink?.();
    this.#reject(thrown);
  }

  /**
   * `recordArguments` shows the caller's arguments, as JSON.stringify would show them: their own
   * `toJSON` first (JSON.stringify calls a toJSON once, not again on what it returned).
   */
  toJSON(): unknown {
    const args = this.args as { toJSON?: unknown } | null | undefined;
    return typeof args?.toJSON === "function" ? (args.toJSON as () => unknown)() : args;
  }
}

/**
 * What a stream's answer says on its call span. A model call's (`llm`) adds the GenAI
 * conventions' finish reasons and time to first chunk; its tokens are the answering attempt's
 * usage, which the call's end writes (the format's output tokens are reported as usage).
 */
function describeAnswer(llm: boolean) {
  return (answer: StreamAnswer<unknown>): Attributes => {
    const attributes: Attributes = {
      [ATTR_STREAM_CHUNKS]: answer.chunks,
      [ATTR_STREAM_RESTARTS]: answer.restarts,
    };
    if (answer.firstTokenMs !== undefined)
      attributes[ATTR_STREAM_FIRST_TOKEN_MS] = answer.firstTokenMs;
    if (!llm) return attributes;
    if (answer.firstChunkMs !== undefined)
      attributes[ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = answer.firstChunkMs / 1000;
    if (answer.finishReason !== undefined)
      attributes[ATTR_GEN_AI_RESPONSE_FINISH_REASONS] = [answer.finishReason];
    return attributes;
  };
}

/** What a stream's own failure says on its call span: how far it got. */
function describeFailure(error: unknown): Attributes | undefined {
  const failure =
    isStreamTruncatedError(error) ||
    isStreamStalledError(error) ||
    isStreamFirstTokenTimeoutError(error)
      ? error
      : undefined;
  if (!failure) return undefined;
  const { chunks, firstTokenMs } = failure.progress;
  return firstTokenMs === undefined
    ? { [ATTR_STREAM_CHUNKS]: chunks }
    : { [ATTR_STREAM_CHUNKS]: chunks, [ATTR_STREAM_FIRST_TOKEN_MS]: firstTokenMs };
}

/**
 * Heals a stream function: each call is a selfheal call that lasts until the stream completes.
 * Each attempt is read through a StreamAttempt (first-token and idle limits, completion check);
 * before the first token an attempt fails, is diagnosed and recovered like any call; after it,
 * `afterFirstToken` decides.
 */
export function instrumentStream<A, C, M extends StreamMode>(
  engine: Engine,
  name: string,
  tool: StreamToolOptions<A>,
  limits: ResolvedStreamLimits<C>,
  fn: StreamFunction<A, C>,
): HealedStreamFunction<A, C, M> {
  const attempt = (call: StreamCall<A, C>, ctx: CallContext): Promise<StreamAnswer<C>> =>
    new StreamAttempt(name, limits, ctx as AttemptControl, call)
      .run(() => fn(call.args, ctx))
      .catch((error: unknown) => {
        call.lastFailure = error;
        throw error;
      });
  const { idempotencyKey: key, ...rest } = tool;
  const options: ToolOptions<StreamCall<A, C>, StreamAnswer<C>> = {
    ...rest,
    isEmpty: (answer) => !answer.answered,
    // An idempotency key function receives the caller's arguments, as with sh.tool.
    ...(key && { idempotencyKey: (call: StreamCall<A, C>) => key(call.args) }),
  };
  const llm = tool.kind === "llm";
  const runtime = toolRuntime(engine, name, options, attempt, {
    // A model request made in streaming mode (GenAI conventions); a plain tool's stream is not one.
    attributes: llm
      ? { [ATTR_STREAM_MODE]: limits.mode, [ATTR_GEN_AI_REQUEST_STREAM]: true }
      : { [ATTR_STREAM_MODE]: limits.mode },
    describe: describeAnswer(llm),
    describeError: describeFailure,
    streamed: true,
  });
  engine.metrics.registerStream(runtime.labels);
  const wrapped = wrapRuntime(engine, runtime);
  return (args, callOptions) => {
    const call = new StreamCall(args, name, limits);
    try {
      const checked = validateCallOptions(name, callOptions);
      call.link(checked.signal);
      wrapped.detailed(call, { ...checked, signal: call.controller.signal }).then(
        (result) => {
          call.answered(result);
        },
        (error: unknown) => {
          call.failed(error);
        },
      );
    } catch (error) {
      call.failed(error);
    }
    return call.channel as unknown as HealedStream<StreamItem<C, M>>;
  };
}
