/**
 * How selfheal reads the chunks of a streamed Gemini answer (`generateContentStream` of
 * `@google/genai`, or the `streamGenerateContent?alt=sse` events of the REST API): which chunk
 * is a token, which carries the answer, the finish reason that completes the stream, and the
 * output tokens. Pure: no SDK is imported.
 */
import { GEMINI_CONTENT_POLICY } from "../diagnosis/rules.js";
import type { ChunkInfo, StreamFormat } from "../index.js";

/** One part of a Gemini candidate's content, as far as selfheal reads it. */
export interface GeminiPart {
  text?: string | undefined;
  /** The part is the model's thinking (with `thinkingConfig.includeThoughts`), not its answer. */
  thought?: boolean | undefined;
  functionCall?: unknown;
  executableCode?: unknown;
  codeExecutionResult?: unknown;
  inlineData?: unknown;
  fileData?: unknown;
}

/**
 * One chunk of a streamed Gemini answer, as far as selfheal reads it: the SDK's
 * `GenerateContentResponse` (2.x and 3.x) fits.
 */
export interface GeminiChunk {
  candidates?:
    | readonly {
        content?: { parts?: readonly GeminiPart[] | undefined } | undefined;
        finishReason?: string | undefined;
      }[]
    | undefined;
  /** Set instead of candidates when the prompt itself was blocked. */
  promptFeedback?: { blockReason?: string | undefined } | undefined;
  /** The model that answered (its version: `gemini-2.5-flash-001`). */
  modelVersion?: string | undefined;
  /** Running totals of the stream so far (each chunk carries them). */
  usageMetadata?:
    | {
        promptTokenCount?: number | undefined;
        candidatesTokenCount?: number | undefined;
        thoughtsTokenCount?: number | undefined;
      }
    | undefined;
}

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

/**
 * How selfheal reads Gemini chunks: text of the first candidate is an answer token (blank text a
 * token only), a `thought` part a token (no answer on its own), a function call, code, its
 * result or inline data an answer. A chunk with the candidate's `finishReason` completes the
 * stream (an end without one is a cut); a blocked prompt (`promptFeedback.blockReason`, no
 * candidates) finishes with its block reason. Output tokens are `candidatesTokenCount` plus
 * `thoughtsTokenCount` (what is billed as output, as OpenAI's `completion_tokens` count
 * reasoning), input tokens `promptTokenCount`, the answering model `modelVersion`. Finish
 * reasons other than STOP fail by default: GEMINI_FAIL_ON_FINISH.
 */
export const geminiChunks: StreamFormat<GeminiChunk> = Object.freeze({
  read(chunk: GeminiChunk): ChunkInfo | undefined {
    const candidate = chunk.candidates?.[0];
    const info = partsInfo(candidate?.content?.parts);
    const finishReason = candidate?.finishReason ?? chunk.promptFeedback?.blockReason ?? undefined;
    const usage = chunk.usageMetadata;
    const outputTokens = outputTokensOf(usage);
    // Every chunk may repeat the running usage: the engine keeps the last count.
    const inputTokens = usage?.promptTokenCount ?? undefined;
    if (finishReason === undefined && outputTokens === undefined && inputTokens === undefined)
      return info;
    return { ...info, finishReason, outputTokens, inputTokens };
  },
  completion: "finish" as const,
  responseModel: (chunk: GeminiChunk) => chunk.modelVersion,
});

/** What a chunk's parts carry: an answer beats a token, a token beats nothing. */
function partsInfo(parts: readonly GeminiPart[] | undefined): ChunkInfo | undefined {
  let info: ChunkInfo | undefined;
  for (const part of parts ?? []) {
    const read = partInfo(part);
    if (read === ANSWER) return ANSWER;
    info ??= read;
  }
  return info;
}

function partInfo(part: GeminiPart): ChunkInfo | undefined {
  if (
    part.functionCall != null ||
    part.executableCode != null ||
    part.codeExecutionResult != null ||
    part.inlineData != null ||
    part.fileData != null
  )
    return ANSWER;
  const text = part.text;
  // An empty text part only carries a thoughtSignature: no token.
  if (typeof text !== "string" || text === "") return undefined;
  return part.thought === true || text.trim() === "" ? PROGRESS : ANSWER;
}

/**
 * Whether a whole Gemini answer (`generateContent`'s response) is empty: no candidate has text
 * that is not blank and not thinking, a function call, code or data. An answer a content policy
 * withheld (`promptFeedback.blockReason`, a SAFETY, PROHIBITED_CONTENT, ... finish) is not empty
 * but the provider's verdict: asking again is withheld again.
 */
export function isEmptyGeminiAnswer(answer: GeminiChunk | null | undefined): boolean {
  if (answer?.promptFeedback?.blockReason != null) return false;
  const candidates = answer?.candidates;
  if (!Array.isArray(candidates)) return true;
  return !candidates.some(
    (candidate: NonNullable<GeminiChunk["candidates"]>[number] | null | undefined) =>
      partsInfo(candidate?.content?.parts) === ANSWER || withheld(candidate?.finishReason),
  );
}

const withheld = (reason: string | null | undefined): boolean =>
  typeof reason === "string" && GEMINI_CONTENT_POLICY.includes(reason.toLowerCase());

/** Output tokens as billed: the answer's and the thinking's. */
export function outputTokensOf(usage: GeminiChunk["usageMetadata"]): number | undefined {
  const answer = usage?.candidatesTokenCount;
  const thoughts = usage?.thoughtsTokenCount;
  if (answer == null && thoughts == null) return undefined;
  return (answer ?? 0) + (thoughts ?? 0);
}

/**
 * The finish and block reasons that mean a Gemini answer is incomplete or withheld, by default:
 * every one but STOP, and CONTINUATION (a long answer the SDK resumes itself, or that the caller
 * resumes from `continuationToken` with `automaticContinuation: false`). Content-policy reasons
 * (SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII, ...) are diagnosed CONTENT_POLICY and not retried;
 * the others (MAX_TOKENS, RECITATION, MALFORMED_FUNCTION_CALL, OTHER, ...) STREAM_TRUNCATED.
 */
export const GEMINI_FAIL_ON_FINISH: readonly string[] = Object.freeze([
  // FinishReason (candidates[0].finishReason)
  "FINISH_REASON_UNSPECIFIED",
  "MAX_TOKENS",
  "SAFETY",
  "RECITATION",
  "LANGUAGE",
  "OTHER",
  "BLOCKLIST",
  "PROHIBITED_CONTENT",
  "SPII",
  "MALFORMED_FUNCTION_CALL",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_OTHER",
  "NO_IMAGE",
  "IMAGE_RECITATION",
  "UNEXPECTED_TOOL_CALL",
  "TOO_MANY_TOOL_CALLS",
  "MISSING_THOUGHT_SIGNATURE",
  "MALFORMED_RESPONSE",
  "ESCALATION",
  "PUP_LIMITED_DISABLED",
  "MODEL_ARMOR",
  // BlockedReason (promptFeedback.blockReason) not above
  "BLOCKED_REASON_UNSPECIFIED",
  "JAILBREAK",
]);
