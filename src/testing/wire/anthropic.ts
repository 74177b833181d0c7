/**
 * Anthropic Messages (`POST /v1/messages`): a `message`, or SSE `message_start`,
 * `content_block_start`, `ping`, `content_block_delta`s, `content_block_stop`, `message_delta`
 * (stop_reason, usage) and `message_stop`; errors as `{ type: "error", error: { type, message },
 * request_id }` with a `request-id` header on every answer (and `retry-after` on a 429 that has
 * one). A truncated answer stops with `max_tokens`; `overloaded` is Anthropic's 529.
 */
import type { FaultKind, FaultOptions } from "../faults.js";
import {
  jsonReply,
  lastRole,
  PROMPT_TOKENS,
  sseEvent,
  type Answer,
  type WireApi,
  type WireReply,
} from "./types.js";

const MESSAGE_ID = "msg_fake";

const requestId = (n: number) => `req_fake_${n}`;

function error(
  n: number,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): WireReply {
  return jsonReply(
    status,
    { type: "error", error: { type, message }, request_id: requestId(n) },
    { "request-id": requestId(n), ...headers },
  );
}

/** Each error fault as Anthropic answers it: status, error type, message. */
const ERRORS: Partial<Record<FaultKind, [number, string, string]>> = {
  rate_limit: [
    429,
    "rate_limit_error",
    "This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.",
  ],
  http_500: [500, "api_error", "Internal server error"],
  http_502: [502, "api_error", "Bad gateway"],
  http_503: [503, "api_error", "Service unavailable"],
  overloaded: [529, "overloaded_error", "Overloaded"],
  context_length: [
    400,
    "invalid_request_error",
    "prompt is too long: 208310 tokens > 200000 maximum",
  ],
  content_policy: [400, "invalid_request_error", "Output blocked by content filtering policy"],
  auth: [401, "authentication_error", "invalid x-api-key"],
};

function usage(outputTokens: number) {
  return {
    input_tokens: PROMPT_TOKENS,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: outputTokens,
    service_tier: "standard",
  };
}

const stopReason = (answer: Answer) => (answer.truncated ? "max_tokens" : "end_turn");

/** The message; `content` holds one text block unless the answer is empty. */
function message(answer: Answer, over: boolean) {
  const text = answer.tokens.join("");
  return {
    id: MESSAGE_ID,
    type: "message",
    role: "assistant",
    model: answer.model,
    content: over && text ? [{ type: "text", text }] : [],
    stop_reason: over ? stopReason(answer) : null,
    stop_sequence: null,
    usage: usage(over ? answer.tokens.length : 1),
  };
}

export const anthropicMessages: WireApi = {
  name: "anthropic_messages",
  match: (path) => (path === "/v1/messages" ? {} : undefined),
  headers: (n) => ({ "request-id": requestId(n) }),
  endsWithAssistant: (body) => lastRole(body.messages) === "assistant",
  notJson: (n) =>
    error(n, 400, "invalid_request_error", "There was an error parsing the body of your request."),
  prefillRefused: (n) =>
    error(
      n,
      400,
      "invalid_request_error",
      "This model does not support assistant message prefill. The conversation must end with a user message.",
    ),
  fault(kind: FaultKind, options: FaultOptions, _stream: boolean, n: number) {
    const entry = ERRORS[kind];
    if (!entry) return undefined;
    const [status, type, message] = entry;
    const retryAfter =
      kind === "rate_limit" && options.retryAfterSeconds !== undefined
        ? { "retry-after": String(options.retryAfterSeconds) }
        : {};
    return error(n, status, type, options.message ?? message, retryAfter);
  },
  body: (answer) => message(answer, true),
  cutBody: `{"id":"${MESSAGE_ID}","type":"message","role":"assistant","content":[`,
  stream(answer) {
    const event = (type: string, fields: Record<string, unknown> = {}) =>
      sseEvent({ type, ...fields }, type);
    // An empty answer has no content block, as its message has none.
    const block = answer.tokens.length > 0;
    return {
      head: () => [
        event("message_start", { message: message(answer, false) }),
        ...(block
          ? [event("content_block_start", { index: 0, content_block: { type: "text", text: "" } })]
          : []),
        event("ping"),
      ],
      token: (text) =>
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text } }),
      finish: () => [
        ...(block ? [event("content_block_stop", { index: 0 })] : []),
        event("message_delta", {
          delta: { stop_reason: stopReason(answer), stop_sequence: null },
          usage: { output_tokens: answer.tokens.length },
        }),
      ],
      done: () => [event("message_stop")],
      error: (message) =>
        event("error", {
          error: { type: "overloaded_error", message: message ?? "Overloaded" },
          request_id: requestId(answer.n),
        }),
      malformed: () =>
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":\n\n',
    };
  },
};
