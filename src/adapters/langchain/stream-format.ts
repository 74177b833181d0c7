import type { AIMessageChunk } from "@langchain/core/messages";
import type { ChatGenerationChunk } from "@langchain/core/outputs";
import type { ChunkInfo, StreamFormat } from "../../index.js";

/**
 * When a model's stream is complete: `finish` once a chunk carried a finish reason (a stream that
 * just ends was cut), `end` when it ends (for a model that reports no finish reason).
 */
export type StreamCompletion = "finish" | "end";
export const STREAM_COMPLETIONS: readonly StreamCompletion[] = ["finish", "end"];

/** Where LangChain providers put a message's finish reason, in the order read. */
const FINISH_KEYS = ["finish_reason", "stop_reason", "finishReason", "stopReason", "done_reason"];

/**
 * Providers' words for an answer cut by its token limit or withheld by a filter, in the
 * vocabulary `failOnFinish` and the diagnosis rules use (`length`, `content_filter`). Other
 * reasons are kept as the provider said them, lowercased.
 */
const NORMAL_REASONS: Readonly<Record<string, string>> = {
  // Anthropic, Google, Bedrock, the OpenAI Responses API, Mistral
  max_tokens: "length",
  max_output_tokens: "length",
  model_length: "length",
  // Google, Bedrock, Anthropic (a streaming classifier's refusal)
  safety: "content_filter",
  prohibited_content: "content_filter",
  blocklist: "content_filter",
  spii: "content_filter",
  image_safety: "content_filter",
  content_filtered: "content_filter",
  guardrail_intervened: "content_filter",
  refusal: "content_filter",
};

/** Content block types that show the model producing but are not an answer on their own. */
const SILENT_BLOCKS = new Set(["reasoning", "thinking", "redacted_thinking"]);

type Bag = Record<string, unknown> | undefined;

const bag = (value: unknown): Bag =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;

/** The provider's finish reason, normalized (`length`, `content_filter`, else lowercased). */
export function normalizeFinishReason(reason: string): string {
  const lower = reason.toLowerCase();
  return NORMAL_REASONS[lower] ?? lower;
}

/**
 * The finish reason a chunk (or a whole message) carries: `finish_reason` (OpenAI and the
 * OpenAI-compatible), `stop_reason` (Anthropic, in `additional_kwargs`), `finishReason` (Google),
 * `stopReason` (Bedrock), `done_reason` (Ollama), or the OpenAI Responses API's final status.
 */
export function finishReasonOf(message: unknown, generationInfo?: unknown): string | undefined {
  const m = bag(message);
  const bags = [bag(generationInfo), bag(m?.response_metadata), bag(m?.additional_kwargs)];
  for (const b of bags) {
    if (!b) continue;
    for (const key of FINISH_KEYS) {
      const value = b[key];
      if (typeof value === "string" && value !== "") return normalizeFinishReason(value);
    }
  }
  return responsesStatus(bag(m?.response_metadata));
}

/**
 * The OpenAI Responses API says how a response ended in its status (its last streamed chunk
 * carries the response's fields): `completed`, or `incomplete` with the reason.
 */
function responsesStatus(metadata: Bag): string | undefined {
  if (metadata?.object !== "response") return undefined;
  switch (metadata.status) {
    case "completed":
      return "stop";
    case "incomplete": {
      const reason = bag(metadata.incomplete_details)?.reason;
      return typeof reason === "string" ? normalizeFinishReason(reason) : "length";
    }
    case "failed":
      return "error";
    default:
      return undefined;
  }
}

/** Whether a chunk shows the model producing (`token`) and carries answer content (`answer`). */
function producing(message: Bag): { token: boolean; answer: boolean } {
  let token = false;
  let answer = false;
  const note = (t: boolean, a: boolean) => {
    token ||= t;
    answer ||= a;
  };
  const calls = message?.tool_call_chunks;
  if (Array.isArray(calls) && calls.length > 0) note(true, true);
  const content = message?.content;
  if (typeof content === "string") note(content !== "", content.trim() !== "");
  else if (Array.isArray(content)) for (const block of content) note(...blockProduces(block));
  const reasoning = bag(message?.additional_kwargs)?.reasoning_content;
  if (typeof reasoning === "string" && reasoning !== "") note(true, false);
  return { token, answer };
}

function blockProduces(block: unknown): [token: boolean, answer: boolean] {
  if (typeof block === "string") return [block !== "", block.trim() !== ""];
  const b = bag(block);
  if (!b) return [false, false];
  if (b.type === "text") {
    const text = typeof b.text === "string" ? b.text : "";
    return [text !== "", text.trim() !== ""];
  }
  if (typeof b.type === "string" && SILENT_BLOCKS.has(b.type)) return [true, false];
  // A tool call starting or its arguments, an image, a file, a citation: part of the answer.
  return [true, true];
}

/** What one streamed message chunk says, in the core's terms. */
export function readMessageChunk(
  message: unknown,
  generationInfo?: unknown,
  withUsage = true,
): ChunkInfo {
  const m = bag(message);
  const { token, answer } = producing(m);
  const finishReason = finishReasonOf(m, generationInfo);
  const outputTokens = withUsage ? bag(m?.usage_metadata)?.output_tokens : undefined;
  return {
    token,
    answer,
    finishReason,
    outputTokens: typeof outputTokens === "number" ? outputTokens : undefined,
  };
}

/**
 * The format of a chat model's own stream (`_streamResponseChunks`), read inside a model call.
 * Usage is left out: the call reports the whole answer's usage itself.
 */
export function generationChunkFormat(
  completion: StreamCompletion,
): StreamFormat<ChatGenerationChunk> {
  return {
    read: (chunk) => readMessageChunk(chunk.message, chunk.generationInfo, false),
    completion,
  };
}

/** The format of `model.stream()`: AIMessageChunks, generation info merged into their metadata. */
export function messageChunkFormat(completion: StreamCompletion): StreamFormat<AIMessageChunk> {
  return { read: (chunk) => readMessageChunk(chunk), completion };
}
