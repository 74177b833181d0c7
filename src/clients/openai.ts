/**
 * `selfheal/openai`: streamed Chat Completions (OpenAI and every compatible server) healed by
 * `sh.stream`. `chatCompletionChunks` tells selfheal how to read a chunk (tokens, the finish
 * reason that completes the stream, usage); `sseChunks(response)` reads a `fetch` response's
 * Server-Sent Events into chunks. The OpenAI SDK's `stream: true` result is already an async
 * iterable of chunks: return it from the stream function as it is.
 *
 * ```ts
 * const chat = sh.stream("chat", { readOnly: true, providers: ["openai", "backup"], format: chatCompletionChunks },
 *   (messages, ctx) => client(ctx.provider).chat.completions.create({ model, messages, stream: true }, { signal: ctx.signal }));
 * for await (const chunk of chat(messages)) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
 * ```
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import type { ChunkInfo, StreamFormat } from "../index.js";

/** One chunk of a streamed Chat Completion, as far as selfheal reads it (the OpenAI SDK's type fits). */
export interface ChatCompletionChunk {
  id?: string;
  model?: string;
  choices: readonly {
    index?: number;
    delta?: {
      role?: string | null;
      content?: string | null;
      refusal?: string | null;
      /** Reasoning text of DeepSeek, vLLM and other compatible servers. */
      reasoning_content?: string | null;
      tool_calls?: readonly unknown[] | null;
    } | null;
    finish_reason?: string | null;
  }[];
  usage?: { completion_tokens?: number | null } | null;
}

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

/**
 * How selfheal reads Chat Completion chunks: content, a refusal or a tool call is an answer
 * token, reasoning a token (no answer on its own), `finish_reason` completes the stream (an end
 * without one is a cut; `length` and `content_filter` fail it unless `failOnFinish` says
 * otherwise), and `usage.completion_tokens` (with `stream_options: { include_usage: true }`)
 * are the output tokens.
 */
export const chatCompletionChunks: StreamFormat<ChatCompletionChunk> = {
  read(chunk) {
    const choice = chunk.choices[0];
    const outputTokens = chunk.usage?.completion_tokens ?? undefined;
    const finishReason = choice?.finish_reason ?? undefined;
    if (finishReason !== undefined || outputTokens !== undefined) {
      return { ...deltaInfo(choice?.delta), finishReason, outputTokens };
    }
    return deltaInfo(choice?.delta);
  },
  completion: "finish",
};

function deltaInfo(delta: ChatCompletionChunk["choices"][number]["delta"]): ChunkInfo | undefined {
  if (!delta) return undefined;
  if (delta.content || delta.refusal || (delta.tool_calls?.length ?? 0) > 0) {
    return delta.content && delta.content.trim() === "" && !delta.tool_calls?.length
      ? PROGRESS
      : ANSWER;
  }
  return delta.reasoning_content ? PROGRESS : undefined;
}

/** An SSE line longer than this errors the stream (a server that never ends a line). */
const MAX_EVENT_CHARS = 1024 * 1024;

/**
 * The chunks of a streamed Chat Completion from a `fetch` response (`stream: true`), in order,
 * ending at `data: [DONE]` or the end of the body. An event that is not JSON throws a
 * SyntaxError (a chunk may carry part of the answer: dropping it would pass a damaged answer as
 * whole). Check `response.ok` first: `if (!res.ok) throw await HttpResponseError.from(res)`.
 */
export async function* sseChunks(response: Response): AsyncGenerator<ChatCompletionChunk> {
  if (!response.body)
    throw new TypeError("selfheal: sseChunks(response): the response has no body");
  const events = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream({ maxBufferSize: MAX_EVENT_CHARS }))
    .getReader();
  try {
    for (;;) {
      const { done, value } = await events.read();
      if (done) return;
      if (value.data === "[DONE]") return;
      let chunk: unknown;
      try {
        chunk = JSON.parse(value.data);
      } catch (error) {
        throw new SyntaxError(
          `selfheal: a streamed event is not JSON (${(error as Error).message}): ${value.data.slice(0, 80)}`,
          { cause: error },
        );
      }
      yield asChunk(chunk);
    }
  } finally {
    // Also on an early end: the request behind the stream is cancelled.
    void events.cancel().catch(() => undefined);
  }
}

/** A parsed event as a chunk; an `{ error }` event (some servers stream errors) is thrown. */
function asChunk(value: unknown): ChatCompletionChunk {
  const o = value as { choices?: unknown; error?: unknown } | null;
  if (o && typeof o === "object" && o.error !== undefined && o.choices === undefined) {
    const error = o.error as { message?: unknown; code?: unknown; type?: unknown };
    throw Object.assign(
      new Error(typeof error.message === "string" ? error.message : "streamed error event"),
      { error, code: error.code, type: error.type },
    );
  }
  if (!o || typeof o !== "object" || !Array.isArray(o.choices)) {
    throw new SyntaxError("selfheal: a streamed event is not a chat.completion.chunk (no choices)");
  }
  return o as ChatCompletionChunk;
}
