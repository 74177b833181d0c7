import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { consumeCallback } from "@langchain/core/callbacks/promises";
import { LANGCHAIN_RESTART_EVENT } from "../../telemetry/conventions.js";

/** The discard signal's name: the `type` of its custom stream chunk, and its callback event's name. */
export const STREAM_RESTART_EVENT = LANGCHAIN_RESTART_EVENT;

/**
 * The discard signal of a model call whose answer starts again (`afterFirstToken: "restart"`, or
 * an answer resent after its tokens were shown): drop the `discard` chunks of message `messageId`
 * received since the call began or since the last signal; the whole new answer follows, as a
 * message with another id. `agent.stream` yields it as a `custom` chunk (include `custom` in
 * `streamMode`); `streamEvents` as an `on_custom_event` named STREAM_RESTART_EVENT.
 */
export interface ModelStreamRestart {
  readonly type: typeof STREAM_RESTART_EVENT;
  /** The selfheal tool of the model calls (`model`). */
  readonly tool: string;
  /** Chunks to discard: those of the answer received since the call began or the last signal. */
  readonly discard: number;
  /** The id of the message those chunks belong to, as the `messages` stream showed it. */
  readonly messageId?: string;
  /** The attempt (1 = the first) that now answers. */
  readonly attempt: number;
  /** The provider that now answers, when the model calls have providers. */
  readonly provider?: string;
  /** What ended the discarded answer: the error's name (StreamStalledError, ...). */
  readonly reason: string;
}

/** True for selfheal's discard signal, as a custom stream chunk or a custom event's data. */
export function isModelStreamRestart(value: unknown): value is ModelStreamRestart {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { type?: unknown }).type === STREAM_RESTART_EVENT
  );
}

/**
 * Resolves once the callbacks LangChain queued before this call have run. Unless its handlers
 * are awaited (LANGCHAIN_CALLBACKS_BACKGROUND=false), LangChain queues every callback in one
 * queue, in order, one at a time: tokens handed to it reach the `messages` stream later. The
 * discard signal must follow the tokens it discards, so it waits for them.
 */
function afterQueuedCallbacks(): Promise<void> {
  return new Promise<void>((resolve) => {
    void consumeCallback(() => {
      resolve();
    }, false);
  });
}

/**
 * Sends the discard signal where a LangChain consumer sees it: the graph's stream writer
 * (`custom` stream mode), once the discarded tokens have reached the stream, and the model run's
 * callbacks (an `on_custom_event` in `streamEvents`), which keep the tokens' order themselves.
 */
export async function announceRestart(
  signal: ModelStreamRestart,
  writer: ((chunk: unknown) => void) | undefined,
  runManager: CallbackManagerForLLMRun | undefined,
): Promise<void> {
  if (writer) {
    await afterQueuedCallbacks();
    try {
      writer(signal);
    } catch {
      // the stream is closed (the run ended): nobody is left to tell
    }
  }
  await runManager?.handleCustomEvent(STREAM_RESTART_EVENT, signal);
}
