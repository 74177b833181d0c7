/**
 * OpenAI Responses (`POST /v1/responses`): a `response` object, or SSE events named by their
 * `type` (`response.created` … `response.output_text.delta` … `response.completed`, no
 * `[DONE]`); a truncated answer is `status: "incomplete"` with `incomplete_details`, its stream
 * ends with `response.incomplete`. Errors as OpenAI's `{ error }` body.
 */
import {
  openaiFault,
  openaiHeaders,
  openaiInvalid,
  openaiNotJson,
  PREFILL_REFUSED,
  SERVER_ERROR,
} from "./chat-completions.js";
import { lastRole, PROMPT_TOKENS, sseEvent, type Answer, type WireApi } from "./types.js";

const RESPONSE_ID = "resp_fake";
const ITEM_ID = "msg_fake";

function usage(outputTokens: number) {
  return {
    input_tokens: PROMPT_TOKENS,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: PROMPT_TOKENS + outputTokens,
  };
}

type Status = "in_progress" | "completed" | "incomplete";

const textPart = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text });

function message(status: Status, content: ReturnType<typeof textPart>[]) {
  return { id: ITEM_ID, type: "message", status, content, role: "assistant" };
}

/** The `response` object at `status`: no output nor usage while in progress. */
function response(answer: Answer, status: Status) {
  const over = status !== "in_progress";
  return {
    id: RESPONSE_ID,
    object: "response",
    created_at: 0,
    status,
    background: false,
    completed_at: status === "completed" ? 0 : null,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: null,
    max_output_tokens: null,
    model: answer.model,
    output: over ? [message(status, [textPart(answer.tokens.join(""))])] : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: "text" }, verbosity: "medium" },
    tool_choice: "auto",
    tools: [],
    top_p: 1,
    truncation: "disabled",
    usage: over ? usage(answer.tokens.length) : null,
    user: null,
    metadata: {},
  };
}

const finalStatus = (answer: Answer): Status => (answer.truncated ? "incomplete" : "completed");

export const responses: WireApi = {
  name: "responses",
  match: (path) => (path === "/v1/responses" ? {} : undefined),
  headers: openaiHeaders,
  endsWithAssistant: (body) => lastRole(body.input) === "assistant",
  notJson: openaiNotJson,
  prefillRefused: () => openaiInvalid(PREFILL_REFUSED, "input"),
  fault: openaiFault,
  body: (answer) => response(answer, finalStatus(answer)),
  cutBody: `{"id":"${RESPONSE_ID}","object":"response","output":[{"content":`,
  stream(answer) {
    let sequence = 0;
    const event = (type: string, fields: Record<string, unknown>) =>
      sseEvent({ type, sequence_number: sequence++, ...fields }, type);
    const at = { item_id: ITEM_ID, output_index: 0, content_index: 0 };
    const text = answer.tokens.join("");
    const status = finalStatus(answer);
    return {
      head: () => [
        event("response.created", { response: response(answer, "in_progress") }),
        event("response.in_progress", { response: response(answer, "in_progress") }),
        event("response.output_item.added", { output_index: 0, item: message("in_progress", []) }),
        event("response.content_part.added", { ...at, part: textPart("") }),
      ],
      token: (delta) => event("response.output_text.delta", { ...at, delta, logprobs: [] }),
      finish: () => [
        event("response.output_text.done", { ...at, text, logprobs: [] }),
        event("response.content_part.done", { ...at, part: textPart(text) }),
        event("response.output_item.done", {
          output_index: 0,
          item: message(status, [textPart(text)]),
        }),
      ],
      done: () => [event(`response.${status}`, { response: response(answer, status) })],
      malformed: () =>
        `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"${ITEM_ID}","delta":\n\n`,
      error: (message) =>
        event("error", {
          code: "server_error",
          message: message ?? SERVER_ERROR.message,
          param: null,
        }),
    };
  },
};
