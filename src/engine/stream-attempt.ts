import type { Clock } from "../clock.js";
import {
  StreamFirstTokenTimeoutError,
  StreamStalledError,
  StreamTruncatedError,
  type StreamProgress,
} from "../errors.js";
import type { AttemptControl } from "./call-context.js";
import type { ResolvedStreamLimits } from "./options/stream.js";

/** How one streamed attempt ended well: what the call's end and its span need. */
export interface StreamAnswer<C> {
  /** Chunks not handed to the caller yet: all of them when buffering, or a tokenless stream's. */
  readonly held: C[];
  readonly chunks: number;
  /** Whether an answer chunk came (false: an empty answer). */
  readonly answered: boolean;
  readonly firstTokenMs: number | undefined;
  /** From the attempt's start to its first chunk of any kind, ms (GenAI's time to first chunk). */
  readonly firstChunkMs: number | undefined;
  readonly finishReason: string | undefined;
  readonly outputTokens: number | undefined;
  /** StreamRestart markers the reader had been given when this attempt completed. */
  readonly restarts: number;
}

/** The caller's side, as an attempt hands chunks to it. */
export interface StreamSink<C> {
  /** `buffer`: chunks are held until the stream is complete. */
  readonly buffering: boolean;
  readonly restarts: number;
  /** The attempt hands its first chunks over (at its first token, or at its end). */
  begin(ctx: AttemptControl): void;
  push(chunk: C): void;
}

/**
 * Reads one attempt's stream to its end, bounded by the time to first token and the idle gap
 * after it, and checks that it completed. Whichever comes first of the end, a failure of the
 * source, a limit and the attempt's abort (deadline, caller) settles it once; a limit aborts the
 * attempt's signal, so the request behind the stream is cancelled.
 *
 * One timer at a time, re-armed lazily: a chunk only notes its time, and the idle timer, when it
 * fires early, waits out the rest of the gap (a timer per chunk would cost more than the chunk).
 */
export class StreamAttempt<C> {
  #settled = false;
  #resolve!: (answer: StreamAnswer<C>) => void;
  #reject!: (error: unknown) => void;
  #iterator: AsyncIterator<C> | undefined;
  #cancelTimer: (() => void) | undefined;
  readonly #started: number;
  #lastAt: number;
  #chunks = 0;
  #firstTokenAt: number | undefined;
  #firstChunkAt: number | undefined;
  #answered = false;
  #finishReason: string | undefined;
  #outputTokens: number | undefined;
  #inputTokens: number | undefined;
  /** Whether the API's end event came after the finish reason (`completion: "finish-and-end"`). */
  #ended = false;
  /** Whether a chunk named the answering model (the format is asked until one does). */
  #modelNamed = false;
  /** The last failure the source reported in band. */
  #error: unknown;
  #held: C[] = [];
  readonly #onAbort = () => {
    this.#fail(this.ctx.signal.reason, false);
  };

  private readonly clock: Clock;

  constructor(
    private readonly tool: string,
    private readonly limits: ResolvedStreamLimits<C>,
    private readonly ctx: AttemptControl,
    private readonly sink: StreamSink<C>,
  ) {
    this.clock = ctx.clock;
    this.#started = this.#lastAt = this.clock.now();
  }

  run(open: () => AsyncIterable<C> | Promise<AsyncIterable<C>>): Promise<StreamAnswer<C>> {
    const settled = new Promise<StreamAnswer<C>>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    const { signal } = this.ctx;
    if (signal.aborted) {
      this.#onAbort();
      return settled;
    }
    signal.addEventListener("abort", this.#onAbort, { once: true });
    this.#arm(this.limits.firstTokenMs);
    void this.#pump(open);
    return settled;
  }

  async #pump(open: () => AsyncIterable<C> | Promise<AsyncIterable<C>>): Promise<void> {
    try {
      const source = await open();
      const given: unknown = source;
      const iterate = (given as Partial<AsyncIterable<C>> | null)?.[Symbol.asyncIterator];
      if (typeof iterate !== "function") {
        throw new TypeError(
          `selfheal: stream "${this.tool}" must return an async iterable (an SDK stream, a ReadableStream, an async generator), got ${given === null ? "null" : typeof given}`,
        );
      }
      const iterator = iterate.call(source);
      this.#iterator = iterator;
      if (this.#isSettled()) {
        this.#close(); // the attempt ended while the source was opening
        return;
      }
      for (;;) {
        const step = await iterator.next();
        if (this.#isSettled()) return;
        if (step.done) {
          this.#complete();
          return;
        }
        this.#chunk(step.value);
      }
    } catch (error) {
      if (this.#isSettled()) return;
      // After a token the stream was cut, whatever the source says; its error is the cause.
      this.#fail(
        this.#firstTokenAt === undefined
          ? error
          : new StreamTruncatedError(this.tool, "cut", this.#progress(), { cause: error }),
        false,
      );
    }
  }

  #chunk(chunk: C): void {
    this.#chunks++;
    this.#lastAt = this.clock.now();
    if (this.#chunks === 1) this.#firstChunkAt = this.#lastAt;
    const { format } = this.limits;
    if (!this.#modelNamed && format.responseModel !== undefined) {
      const model = format.responseModel(chunk);
      if (typeof model === "string" && model !== "") {
        this.#modelNamed = true;
        this.ctx.reportModel({ responseModel: model });
      }
    }
    const info = format.read(chunk);
    if (info !== undefined) {
      if (info.finishReason !== undefined) {
        this.#finishReason = info.finishReason;
        this.#ended = false;
      }
      if (info.end) this.#ended = this.#finishReason !== undefined;
      if (info.outputTokens !== undefined) this.#outputTokens = info.outputTokens;
      if (info.inputTokens !== undefined) this.#inputTokens = info.inputTokens;
      if (info.error !== undefined) this.#error = info.error;
      if (info.answer) this.#answered = true;
      if (info.token && this.#firstTokenAt === undefined) this.#firstToken();
    }
    if (this.#firstTokenAt === undefined || this.sink.buffering) this.#held.push(chunk);
    else this.sink.push(chunk);
  }

  #firstToken(): void {
    const at = this.#lastAt;
    this.#firstTokenAt = at;
    this.ctx.firstToken(at - this.#started);
    this.#cancelTimer?.();
    this.#arm(this.limits.idleMs);
    if (this.sink.buffering) return;
    this.sink.begin(this.ctx);
    for (const held of this.#held) this.sink.push(held);
    this.#held = [];
  }

  #arm(ms: number): void {
    this.#cancelTimer = this.clock.setTimer(ms, this.#onTimer);
  }

  readonly #onTimer = (): void => {
    this.#cancelTimer = undefined;
    if (this.#settled) return;
    if (this.#firstTokenAt === undefined) {
      this.#fail(
        new StreamFirstTokenTimeoutError(this.tool, this.limits.firstTokenMs, this.#progress()),
        true,
      );
      return;
    }
    const quiet = this.clock.now() - this.#lastAt;
    if (quiet >= this.limits.idleMs) {
      this.#fail(new StreamStalledError(this.tool, this.limits.idleMs, this.#progress()), true);
    } else this.#arm(this.limits.idleMs - quiet);
  };

  #complete(): void {
    const reason = this.#finishReason;
    const { completion } = this.limits.format;
    const cut =
      (reason === undefined && completion !== "end") ||
      (completion === "finish-and-end" && !this.#ended);
    if (cut) {
      this.#fail(this.#incomplete("cut"), false);
      return;
    }
    if (reason !== undefined && this.limits.failOnFinish.has(reason)) {
      this.#fail(this.#incomplete(reason), false);
      return;
    }
    if (!this.#settle()) return;
    if (this.#outputTokens !== undefined)
      this.ctx.reportUsage({ outputTokens: this.#outputTokens });
    this.#resolve({
      held: this.#held,
      chunks: this.#chunks,
      answered: this.#answered,
      firstTokenMs:
        this.#firstTokenAt === undefined ? undefined : this.#firstTokenAt - this.#started,
      firstChunkMs:
        this.#firstChunkAt === undefined ? undefined : this.#firstChunkAt - this.#started,
      finishReason: reason,
      outputTokens: this.#outputTokens,
      restarts: this.sink.restarts,
    });
  }

  /** An end that is not a completion: the in-band error before a token, else a truncation. */
  #incomplete(type: string): unknown {
    const error = this.#error;
    if (error !== undefined && this.#firstTokenAt === undefined) return error;
    const progress = this.#progress();
    return error === undefined
      ? new StreamTruncatedError(this.tool, type, progress)
      : new StreamTruncatedError(this.tool, type, progress, { cause: error });
  }

  #progress(): StreamProgress {
    return {
      chunks: this.#chunks,
      firstTokenMs:
        this.#firstTokenAt === undefined ? undefined : this.#firstTokenAt - this.#started,
    };
  }

  /** Ends the attempt with `error`; `abort`: tell the source through the attempt's signal. */
  #fail(error: unknown, abort: boolean): void {
    if (!this.#settle()) return;
    if (abort) this.ctx.abort(error);
    this.#close();
    this.#reject(error);
  }

  /** Read through a method: a limit or an abort may settle the attempt while the pump awaits. */
  #isSettled(): boolean {
    return this.#settled;
  }

  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#cancelTimer?.();
    this.ctx.signal.removeEventListener("abort", this.#onAbort);
    // A failed attempt's prompt was read and billed too.
    if (this.#inputTokens !== undefined) this.ctx.reportUsage({ inputTokens: this.#inputTokens });
    return true;
  }

  /** Lets the source go: not awaited, since a generator stuck in an await never answers it. */
  #close(): void {
    const iterator = this.#iterator;
    if (!iterator?.return) return;
    try {
      void Promise.resolve(iterator.return()).catch(() => undefined);
    } catch {
      // a source whose return() throws has nothing left to release
    }
  }
}
