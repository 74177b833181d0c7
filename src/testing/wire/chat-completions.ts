/**
 * OpenAI Chat Completions (`POST /v1/chat/completions`): a `chat.completion`, or SSE
 * `chat.completion.chunk`s ending with `data: [DONE]`; errors as OpenAI's `{ error }` body.
 */
import { httpFault, type ApiErrorBody } from "../faults.js";
import {
  jsonReply,
  lastRole,
  PROMPT_TOKENS,
  sseEvent,
  type Answer,
  type WireApi,
  type WireReply,
} from "./types.js";

/** OpenAI's answer to a body that is not JSON. */
const NOT_JSON =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)";

export const PREFILL_REFUSED =
  "Assistant message prefill is not supported: the conversation must end with a user message.";

/** An OpenAI-style error answer (Chat Completions and Responses share it). */
export function openaiError(
  status: number,
  error: ApiErrorBody,
  headers: Record<string, string> = {},
): WireReply {
  return jsonReply(status, { error }, headers);
}

/** OpenAI's 400 for a body that is not JSON, and for a refused prefill (`param` names where). */
export function openaiInvalid(message: string, param: string | null): WireReply {
  return openaiError(400, { message, type: "invalid_request_error", code: null, param });
}

export const openaiNotJson = (): WireReply => openaiInvalid(NOT_JSON, null);

/** OpenAI's HTTP faults (the table of faults.ts), or undefined for the rest. */
export function openaiFault(...[kind, options]: Parameters<WireApi["fault"]>) {
  const http = httpFault(kind, options);
  return http && openaiError(http.status, http.body, http.headers);
}

/** The error a stream that has begun can end with (no status: the 200 has gone out). */
export const SERVER_ERROR: ApiErrorBody = {
  message: "The server had an error while processing your request.",
  type: "server_error",
  code: null,
  param: null,
};

/** OpenAI's request id header. */
export const openaiHeaders = (n: number) => ({ "x-request-id": `req_fake_${n}` });

function usage(completionTokens: number) {
  return {
    prompt_tokens: PROMPT_TOKENS,
    completion_tokens: completionTokens,
    total_tokens: PROMPT_TOKENS + completionTokens,
  };
}

function wantsUsage(body: Answer["body"]): boolean {
  const options = body.stream_options;
  return (
    typeof options === "object" &&
    options !== null &&
    "include_usage" in options &&
    options.include_usage === true
  );
}

const finishReason = (answer: Answer) => (answer.truncated ? "length" : "stop");

export const chatCompletions: WireApi = {
  name: "chat_completions",
  match: (path) => (path === "/v1/chat/completions" ? {} : undefined),
  headers: openaiHeaders,
  endsWithAssistant: (body) => lastRole(body.messages) === "assistant",
  notJson: openaiNotJson,
  prefillRefused: () => openaiInvalid(PREFILL_REFUSED, "messages"),
  fault: openaiFault,
  body: (answer) => ({
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 0,
    model: answer.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: answer.tokens.join("") },
        finish_reason: finishReason(answer),
      },
    ],
    usage: usage(answer.tokens.length),
  }),
  cutBody: '{"id":"chatcmpl-fake","choices":[{"message":',
  stream(answer) {
    const includeUsage = wantsUsage(answer.body);
    const head = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0 };
    const chunk = (delta: Record<string, string>, reason: string | null) =>
      sseEvent({
        ...head,
        model: answer.model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: reason }],
        // As OpenAI: with include_usage every chunk but the last carries `usage: null`.
        ...(includeUsage ? { usage: null } : {}),
      });
    return {
      head: () => [chunk({ role: "assistant", content: "" }, null)],
      token: (text) => chunk({ content: text }, null),
      finish: () => [
        chunk({}, finishReason(answer)),
        ...(includeUsage
          ? [
              sseEvent({
                ...head,
                model: answer.model,
                choices: [],
                usage: usage(answer.tokens.length),
              }),
            ]
          : []),
      ],
      done: () => ["data: [DONE]\n\n"],
      malformed: () => 'data: {"choices":[{"delta":{"content":\n\n',
      // OpenAI's SDKs throw an APIError for a chunk that holds an `error`.
      error: (message) =>
        sseEvent({ error: { ...SERVER_ERROR, message: message ?? SERVER_ERROR.message } }),
    };
  },
};
