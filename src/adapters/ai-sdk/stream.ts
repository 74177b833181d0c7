import type { CallContext } from "../../index.js";
import type { LanguageModelV3, ModelCallOptions, StreamPart, StreamResult } from "./types.js";

/**
 * Parts that show the model answered: text, a tool call starting, a file. Until one comes
 * nothing has reached the caller, so a failure or an empty end can still be retried.
 */
function isAnswerPart(part: StreamPart): boolean {
  switch (part.type) {
    case "text-delta":
      return part.delta.trim() !== "";
    case "tool-input-start":
    case "tool-call":
    case "tool-approval-request":
    case "file":
      return true;
    default:
      return false;
  }
}

/**
 * An abort signal for a stream that outlives its attempt: aborted by the attempt (timeout,
 * recovery moving on) while it runs, and by the caller's signal for as long as the stream is
 * read. An AbortController with listeners rather than `AbortSignal.any`, which Node 20 may
 * collect before it fires (nodejs/node#55428).
 */
function linkedAbort(attempt: AbortSignal, caller: AbortSignal | undefined) {
  const controller = new AbortController();
  const forward = (source: AbortSignal) => () => {
    controller.abort(source.reason);
  };
  const onAttempt = forward(attempt);
  const onCaller = caller && forward(caller);
  attempt.addEventListener("abort", onAttempt, { once: true });
  if (caller && onCaller) caller.addEventListener("abort", onCaller, { once: true });
  if (attempt.aborted) onAttempt();
  if (caller?.aborted) onCaller?.();
  return {
    signal: controller.signal,
    /** The attempt is over: from now on only the caller aborts the stream. */
    detachAttempt: () => {
      attempt.removeEventListener("abort", onAttempt);
    },
    /** The stream is over: nothing aborts it any more. */
    release: () => {
      attempt.removeEventListener("abort", onAttempt);
      if (caller && onCaller) caller.removeEventListener("abort", onCaller);
    },
  };
}

/** A model stream read up to its first answer part: the parts read, and the rest to come. */
export class PeekedStream {
  constructor(
    private readonly result: StreamResult,
    private readonly head: readonly StreamPart[],
    private readonly reader: ReadableStreamDefaultReader<StreamPart>,
    /** Whether an answer part came; false: the stream ended without one (an empty answer). */
    readonly answered: boolean,
    private readonly release: () => void,
  ) {}

  /** `recordResults` shows the parts read during the call. */
  toJSON(): unknown {
    return this.head;
  }

  /** The stream the SDK reads: the parts already read, then the rest as it comes. */
  resume(): StreamResult {
    const { head, reader } = this;
    let next = 0;
    const stream = new ReadableStream<StreamPart>({
      pull: async (controller) => {
        const buffered = head[next];
        if (buffered !== undefined) {
          next++;
          controller.enqueue(buffered);
          return;
        }
        try {
          const read = await reader.read();
          if (read.done) {
            this.release();
            controller.close();
          } else controller.enqueue(read.value);
        } catch (error) {
          this.release();
          controller.error(error);
        }
      },
      cancel: async (reason) => {
        this.release();
        await reader.cancel(reason);
      },
    });
    return { ...this.result, stream };
  }
}

/**
 * One streaming attempt, read until its first answer part: an error part before it fails the
 * attempt (so recovery can retry or fail over; nothing reached the caller yet), an end without
 * one is an empty answer. After the first answer part the stream is the caller's: a later error
 * part reaches the SDK as it is.
 */
export async function peekStream(
  model: LanguageModelV3,
  params: ModelCallOptions,
  ctx: CallContext,
): Promise<PeekedStream> {
  const abort = linkedAbort(ctx.signal, params.abortSignal);
  let reader: ReadableStreamDefaultReader<StreamPart> | undefined;
  // A timed-out attempt stops reading; the late answer is dropped.
  const stop = () => {
    void reader?.cancel(ctx.signal.reason).catch(() => undefined);
  };
  ctx.signal.addEventListener("abort", stop, { once: true });
  try {
    const result = await model.doStream({ ...params, abortSignal: abort.signal });
    if (ctx.signal.aborted) {
      // The attempt ended while the provider answered (one that ignores its signal): nobody
      // will read this stream, so it is cancelled rather than left open and read in the dark.
      void result.stream.cancel(ctx.signal.reason).catch(() => undefined);
      throw ctx.signal.reason;
    }
    reader = result.stream.getReader();
    const head: StreamPart[] = [];
    for (;;) {
      const read = await reader.read();
      if (read.done) {
        abort.release();
        return new PeekedStream(result, head, reader, false, abort.release);
      }
      const part = read.value;
      if (part.type === "error") throw part.error;
      head.push(part);
      if (isAnswerPart(part)) {
        abort.detachAttempt();
        return new PeekedStream(result, head, reader, true, abort.release);
      }
    }
  } catch (error) {
    stop();
    abort.release();
    throw error;
  } finally {
    ctx.signal.removeEventListener("abort", stop);
  }
}
