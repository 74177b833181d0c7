/**
 * Anthropic's streamed Messages events (`client.messages.create({ stream: true })`, the events a
 * `MessageStream` yields, or the `event:`/`data:` pairs of the wire) as selfheal reads them.
 * Pure: no SDK is loaded.
 */
import type { ChunkInfo, StreamFormat } from "../index.js";

/**
 * One streamed Messages event, as far as selfheal reads it. The SDK's `RawMessageStreamEvent`
 * fits, and so do the wire's `ping` and `error` events, which the SDK's stream handles itself
 * (it drops pings and throws an `APIError` at an `error` event).
 */
export interface AnthropicMessageEvent {
  type: string;
  /** `message_start`: the message so far (model, usage with the input tokens). */
  message?: {
    model?: string;
    usage?: {
      input_tokens?: number | null;
      cache_creation_input_tokens?: number | null;
      cache_read_input_tokens?: number | null;
    } | null;
  } | null;
  /** `content_block_start`: the block that begins (`text`, `thinking`, `tool_use`, ...). */
  content_block?: { type: string; text?: string; thinking?: string; data?: string } | null;
  /** `content_block_delta`: the block's increment; `message_delta`: the stop reason. */
  delta?: {
    type?: string;
    text?: string;
    thinking?: string;
    partial_json?: string;
    stop_reason?: string | null;
  } | null;
  /** `message_delta`: cumulative usage, `output_tokens` the whole answer's. */
  usage?: { output_tokens?: number | null } | null;
  /** `error`: `{ type: "overloaded_error", message }`. */
  error?: { type?: string; message?: string } | null;
}

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

/**
 * Stop reasons that mean a streamed answer is incomplete, by default: cut at `max_tokens` or at
 * the context window (STREAM_TRUNCATED), or stopped by the safety classifiers (`refusal`,
 * CONTENT_POLICY: never retried). `end_turn`, `tool_use`, `stop_sequence` and `pause_turn` (a
 * server-tool turn to continue) complete the stream.
 */
export const ANTHROPIC_FAIL_ON_FINISH: readonly string[] = Object.freeze([
  "max_tokens",
  "model_context_window_exceeded",
  "refusal",
]);

/**
 * How selfheal reads Anthropic's Messages events: text and tool use (its input JSON included)
 * are answer tokens, thinking is a token that is no answer on its own, `message_delta`'s
 * `stop_reason` completes the stream (an end without one is a cut; the reasons of
 * ANTHROPIC_FAIL_ON_FINISH fail it unless `failOnFinish` says otherwise) with its
 * `usage.output_tokens`, and an `error` event is the provider's failure, diagnosed as itself
 * (`overloaded_error`: SERVICE_DOWN, `rate_limit_error`: RATE_LIMIT). `message_start` names the
 * answering model and the input tokens (the cache's included); it, `content_block_stop`,
 * `message_stop` and `ping` carry no token, though any event shows the stream is not silent.
 *
 * Completion is `finish-and-end`: the stop reason says how the answer ended, and `message_stop`
 * must follow it, so a stream cut between the two is cut.
 */
export const anthropicMessageEvents: StreamFormat<AnthropicMessageEvent> = Object.freeze({
  read(event: AnthropicMessageEvent): ChunkInfo | undefined {
    switch (event.type) {
      case "content_block_delta":
        return deltaInfo(event.delta);
      case "content_block_start":
        return blockInfo(event.content_block);
      case "message_start": {
        const inputTokens = messageInputTokens(event.message?.usage);
        return inputTokens === undefined ? undefined : { inputTokens };
      }
      case "message_stop":
        return END;
      case "message_delta": {
        const finishReason = event.delta?.stop_reason ?? undefined;
        const outputTokens = tokenCount(event.usage?.output_tokens);
        return finishReason === undefined && outputTokens === undefined
          ? undefined
          : { finishReason, outputTokens };
      }
      case "error":
        return { error: streamedError(event) };
      default:
        return undefined;
    }
  },
  completion: "finish-and-end" as const,
  responseModel: (event: AnthropicMessageEvent) =>
    event.type === "message_start" ? event.message?.model : undefined,
});

const END: ChunkInfo = Object.freeze({ end: true });

/**
 * The input tokens of a request: every input token it used, read from the cache or written to
 * it too (the GenAI conventions' `gen_ai.usage.input_tokens` for Anthropic).
 */
export function messageInputTokens(
  usage:
    | {
        input_tokens?: number | null;
        cache_creation_input_tokens?: number | null;
        cache_read_input_tokens?: number | null;
      }
    | null
    | undefined,
): number | undefined {
  const input = tokenCount(usage?.input_tokens);
  if (input === undefined) return undefined;
  return (
    input +
    (tokenCount(usage?.cache_creation_input_tokens) ?? 0) +
    (tokenCount(usage?.cache_read_input_tokens) ?? 0)
  );
}

/** A token count from the wire: a whole number, not negative; anything else is no count. */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** Text: an answer unless blank (blank text is progress, an empty delta nothing). */
function textInfo(text: string | undefined): ChunkInfo | undefined {
  if (!text) return undefined;
  return text.trim() === "" ? PROGRESS : ANSWER;
}

function deltaInfo(delta: AnthropicMessageEvent["delta"]): ChunkInfo | undefined {
  switch (delta?.type) {
    case "text_delta":
      return textInfo(delta.text);
    case "input_json_delta":
      return ANSWER;
    case "thinking_delta":
      return delta.thinking ? PROGRESS : undefined;
    case "signature_delta":
    case undefined:
      return undefined;
    default:
      // citations_delta, and kinds the API adds later: the model is producing.
      return PROGRESS;
  }
}

function blockInfo(block: AnthropicMessageEvent["content_block"]): ChunkInfo | undefined {
  switch (block?.type) {
    case "text":
      return textInfo(block.text);
    case "tool_use":
    case "server_tool_use":
      return ANSWER;
    case "thinking":
      return block.thinking ? PROGRESS : undefined;
    case undefined:
      return undefined;
    default:
      // redacted_thinking, server tools' results, and kinds the API adds later.
      return PROGRESS;
  }
}

/** An `error` event as an error the diagnoser reads by its type (as the SDK's APIError). */
function streamedError(event: AnthropicMessageEvent): Error {
  const body = event.error ?? undefined;
  const message =
    typeof body?.message === "string" && body.message !== ""
      ? body.message
      : "streamed error event";
  return Object.assign(new Error(message), { type: body?.type, error: event });
}
