import {
  isStreamRestart,
  type ChunkInfo,
  type HealedStream,
  type StreamFormat,
  type StreamRestart,
} from "../../index.js";
import { STREAM_DEFAULTS } from "../../engine/options/stream.js";
import { AI_SDK_RESTART_TYPE } from "../../telemetry/conventions.js";
import type { StreamPart } from "./types.js";

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

type Delta = Extract<StreamPart, { delta: string }>;
type Finish = Extract<StreamPart, { type: "finish" }>;
type ErrorPart = Extract<StreamPart, { type: "error" }>;

/**
 * The AI SDK's stream parts (v3 and v4) as selfheal reads them: text, reasoning and tool input
 * are tokens (reasoning alone is no answer; v4's `reasoning-file` is reasoning), the `finish`
 * part is the terminal signal with the unified finish reason and output tokens, an `error` part
 * is the provider's in-band failure. The rest (`stream-start`, `response-metadata`, `source`,
 * `raw`, v4's `ping` heartbeats and provider `custom` blocks) is no token: it is held until one
 * comes, though any part shows the stream is not silent.
 */
export const AI_SDK_PARTS: StreamFormat<StreamPart> = {
  read(part: StreamPart): ChunkInfo | undefined {
    switch (part.type) {
      case "text-delta": {
        const { delta } = part as Delta;
        return delta === "" ? undefined : delta.trim() === "" ? PROGRESS : ANSWER;
      }
      case "reasoning-delta":
        return (part as Delta).delta === "" ? undefined : PROGRESS;
      case "reasoning-file":
        return PROGRESS;
      case "tool-input-start":
      case "tool-input-delta":
      case "tool-call":
      case "tool-approval-request":
      case "file":
        return ANSWER;
      case "finish": {
        const { finishReason, usage } = part as Finish;
        return { finishReason: finishReason.unified, outputTokens: usage.outputTokens.total };
      }
      case "error":
        return { error: (part as ErrorPart).error };
      default:
        return undefined;
    }
  },
  completion: "finish",
};

/**
 * The unified finish reasons that mean an AI SDK answer is incomplete, by default: those of any
 * stream, and v4's `interrupted` (the provider's stream ended without a completion signal).
 */
export const AI_SDK_FAIL_ON_FINISH: readonly string[] = Object.freeze([
  ...STREAM_DEFAULTS.failOnFinish,
  "interrupted",
]);

/** The `raw` part a restart becomes when the caller asked for raw chunks (`includeRawChunks`). */
export interface RestartRawValue {
  type: typeof AI_SDK_RESTART_TYPE;
  /** Stream parts to discard: every part since the start or the previous restart. */
  discard: number;
  attempt: number;
  provider: string | undefined;
}

/**
 * Whether a `fullStream` part is selfheal's restart (`afterFirstToken: "restart"`, with
 * `includeRawChunks: true`): drop the text you hold, the whole answer follows.
 */
export function isRestartPart(part: {
  type: string;
  rawValue?: unknown;
}): part is { type: "raw"; rawValue: RestartRawValue } {
  return (
    part.type === "raw" &&
    (part.rawValue as { type?: unknown } | null)?.type === AI_SDK_RESTART_TYPE
  );
}

/**
 * The healed stream as the SDK reads it, its first item already read (the call waited for it,
 * so the answering attempt's response metadata is known). A StreamRestart becomes a `raw` part
 * (with `includeRawChunks`) and a call of `onRestart`; a failure errors the stream.
 */
export function toReadableStream(
  healed: HealedStream<StreamPart | StreamRestart>,
  first: IteratorResult<StreamPart | StreamRestart>,
  iterator: AsyncIterator<StreamPart | StreamRestart>,
  raw: boolean,
  onRestart: ((restart: StreamRestart) => void) | undefined,
): ReadableStream<StreamPart> {
  let pending: IteratorResult<StreamPart | StreamRestart> | undefined = first;
  /** The next part to enqueue, or undefined when a restart gave none (raw chunks off). */
  const asPart = (item: StreamPart | StreamRestart): StreamPart | undefined => {
    if (!isStreamRestart(item)) return item;
    onRestart?.(item);
    if (!raw) return undefined;
    const rawValue: RestartRawValue = {
      type: AI_SDK_RESTART_TYPE,
      discard: item.discard,
      attempt: item.attempt,
      provider: item.provider,
    };
    return { type: "raw", rawValue };
  };
  return new ReadableStream<StreamPart>({
    pull: async (controller) => {
      for (;;) {
        const step: IteratorResult<StreamPart | StreamRestart> = pending ?? (await iterator.next());
        pending = undefined;
        if (step.done) {
          controller.close();
          return;
        }
        const part = asPart(step.value);
        if (part !== undefined) {
          controller.enqueue(part);
          return;
        }
      }
    },
    cancel: async () => {
      await iterator.return?.();
      await healed.result.catch(() => undefined);
    },
  });
}

/**
 * A ReadableStream as an async iterable whose return() cancels it at once, even mid-read (a
 * generator's return() would wait for the read), so an abandoned attempt frees its request.
 */
export function readParts(stream: ReadableStream<StreamPart>): AsyncIterableIterator<StreamPart> {
  const reader = stream.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<StreamPart>>,
    return: () => {
      void reader.cancel().catch(() => undefined);
      return Promise.resolve({ done: true, value: undefined });
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
