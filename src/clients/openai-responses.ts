/**
 * OpenAI Responses (`client.responses.create`) as selfheal reads it: the stream format of its
 * events, and what an answer says (empty or not, usage). Read by shape: `openai` is not imported.
 */
import type { ChunkInfo, StreamFormat } from "../index.js";

/** An output item of a response, as far as selfheal reads it. */
export interface ResponseOutputItem {
  type?: string;
  content?: readonly { type?: string; text?: string | null }[] | null;
}

/** Token counts of a response. */
export interface ResponseUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
}

/** A response (`object: "response"`), as far as selfheal reads it (the SDK's `Response` fits). */
export interface ResponseObject {
  model?: string;
  status?: string | null;
  output?: readonly ResponseOutputItem[] | null;
  usage?: ResponseUsage | null;
  incomplete_details?: { reason?: string | null } | null;
  error?: { code?: string | null; message?: string | null } | null;
}

/**
 * One event of a streamed response (`stream: true`), as far as selfheal reads it: the SDK's
 * `ResponseStreamEvent` fits.
 */
export interface ResponseEvent {
  type: string;
  delta?: unknown;
  item?: ResponseOutputItem | null;
  response?: ResponseObject | null;
  /** An `error` event's. */
  code?: string | null;
  message?: string | null;
}

/**
 * The reasons (`incomplete_details.reason`) of a `response.incomplete` that fail a stream by
 * default: cut at the output limit or the message limit, or by the content filter (diagnosed
 * CONTENT_POLICY). Pass it as `failOnFinish` when you stream Responses through `sh.stream`.
 */
export const RESPONSES_FAIL_ON_FINISH: readonly string[] = Object.freeze([
  "max_output_tokens",
  "max_messages",
  "content_filter",
]);

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

/** Output items that are no answer on their own: reasoning, and a message until it has text. */
const NOT_ANSWERS: ReadonlySet<string | undefined> = new Set(["reasoning", "message"]);

/**
 * How selfheal reads Responses events: output text, a refusal, a tool call's arguments or any
 * output item but reasoning and a message (tool calls, hosted ones included) are answer tokens,
 * reasoning text a token; `response.completed` completes the stream (an end without it is a cut);
 * `response.incomplete` finishes it with its reason (`max_output_tokens`, `content_filter`: see
 * RESPONSES_FAIL_ON_FINISH); `response.failed` and an `error` event are the provider's failure,
 * diagnosed as itself. `usage.output_tokens` of the final response are the output tokens.
 */
export const responseEvents: StreamFormat<ResponseEvent> = {
  read(event) {
    switch (event.type) {
      case "response.output_text.delta":
        return typeof event.delta === "string" && event.delta.trim() === "" ? PROGRESS : ANSWER;
      case "response.refusal.delta":
      case "response.function_call_arguments.delta":
      case "response.custom_tool_call_input.delta":
        return ANSWER;
      case "response.output_item.added":
        return NOT_ANSWERS.has(event.item?.type) ? undefined : ANSWER;
      case "response.reasoning_text.delta":
      case "response.reasoning_summary_text.delta":
        return PROGRESS;
      case "response.completed":
      case "response.incomplete":
        return finished(event.response);
      case "response.failed":
        return { error: responseError(event.response?.error, event.type) };
      case "error":
        return { error: responseError(event, event.type) };
      default:
        return undefined;
    }
  },
  completion: "finish",
  // response.created comes first, naming the model.
  responseModel: (event) => event.response?.model,
};

/** A final response: its status or incomplete reason is the finish reason, with its tokens. */
function finished(response: ResponseObject | null | undefined): ChunkInfo {
  const finishReason =
    response?.status === "incomplete"
      ? (response.incomplete_details?.reason ?? "incomplete")
      : (response?.status ?? "completed");
  const outputTokens = response?.usage?.output_tokens;
  const inputTokens = response?.usage?.input_tokens;
  return {
    finishReason,
    ...(typeof outputTokens === "number" && { outputTokens }),
    ...(typeof inputTokens === "number" && { inputTokens }),
  };
}

/** A failure the stream reported in band, with its code for diagnosis (`rate_limit_exceeded`). */
function responseError(
  source: { code?: string | null; message?: string | null } | null | undefined,
  type: string,
): Error {
  const message = typeof source?.message === "string" ? source.message : `streamed ${type} event`;
  const error = new Error(message);
  error.name = "ResponseStreamError";
  return typeof source?.code === "string" ? Object.assign(error, { code: source.code }) : error;
}

/**
 * An answer says something or calls a tool: a message with text that is not blank or a refusal,
 * or any output item but reasoning (a tool call, hosted or not; an unknown new item counts too:
 * better than retrying a call that acted).
 */
function isAnswer(item: ResponseOutputItem): boolean {
  if (item.type === "reasoning") return false;
  if (item.type !== "message") return true;
  return (item.content ?? []).some(
    (part) => part.type === "refusal" || (part.type === "output_text" && !!part.text?.trim()),
  );
}

/** Empty: no output item that answers (reasoning alone is no answer). */
export function isEmptyResponsesAnswer(answer: unknown): boolean {
  const output = (answer as ResponseObject | null)?.output;
  return !Array.isArray(output) || !output.some(isAnswer);
}
