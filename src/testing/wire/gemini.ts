/**
 * Gemini (`POST /v1beta/models/{model}:generateContent`, and `:streamGenerateContent?alt=sse`;
 * `/v1/` too): a `GenerateContentResponse`, or SSE chunks of the same shape (`data:` only,
 * `\r\n\r\n` between events, usage running on each chunk) whose last carries the candidate's
 * `finishReason`; no other end marker. Errors as Google's `{ error: { code, message, status,
 * details } }` (a 429's wait as a RetryInfo detail, no header). As the Gemini API does, a bad key
 * is a 400 with ErrorInfo `API_KEY_INVALID` and a refused prompt a 200 with
 * `promptFeedback.blockReason` and no candidates.
 */
import type { FaultKind, FaultOptions } from "../faults.js";
import {
  jsonReply,
  lastRole,
  PROMPT_TOKENS,
  sseEvent,
  SSE_HEADERS,
  type Answer,
  type PathMatch,
  type WireApi,
  type WireReply,
} from "./types.js";

const RESPONSE_ID = "fake-response";
/** Gemini ends each SSE event with CRLF CRLF. */
const END = "\r\n\r\n";

/** `/v1beta/models/{model}:{action}` (or `/v1/`): the model and whether it streams. */
function match(path: string): PathMatch | undefined {
  const prefix = ["/v1beta/models/", "/v1/models/"].find((p) => path.startsWith(p));
  if (!prefix) return undefined;
  const rest = path.slice(prefix.length);
  const colon = rest.lastIndexOf(":");
  const action = rest.slice(colon + 1);
  const stream =
    action === "streamGenerateContent" ? true : action === "generateContent" ? false : undefined;
  if (colon <= 0 || stream === undefined) return undefined;
  try {
    const model = decodeURIComponent(rest.slice(0, colon));
    return model.includes("/") ? undefined : { model, stream };
  } catch {
    return undefined; // a malformed %-escape
  }
}

const googleError = (
  code: number,
  status: string,
  message: string,
  details: unknown[] = [],
): WireReply =>
  jsonReply(code, { error: { code, message, status, ...(details.length ? { details } : {}) } });

const type = (name: string) => `type.googleapis.com/google.rpc.${name}`;

/** Each error fault as the Gemini API answers it: code, status, message. */
const ERRORS: Partial<Record<FaultKind, [number, string, string]>> = {
  rate_limit: [
    429,
    "RESOURCE_EXHAUSTED",
    "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
  ],
  http_500: [
    500,
    "INTERNAL",
    "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
  ],
  http_502: [502, "UNAVAILABLE", "Bad Gateway"],
  http_503: [503, "UNAVAILABLE", "The service is currently unavailable."],
  overloaded: [503, "UNAVAILABLE", "The model is overloaded. Please try again later."],
  context_length: [
    400,
    "INVALID_ARGUMENT",
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
  ],
  auth: [400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."],
};

/** The `details` Google adds to an error fault. */
function detailsOf(kind: FaultKind, options: FaultOptions): unknown[] {
  if (kind === "auth")
    return [
      {
        "@type": type("ErrorInfo"),
        reason: "API_KEY_INVALID",
        domain: "googleapis.com",
        metadata: { service: "generativelanguage.googleapis.com" },
      },
    ];
  if (kind !== "rate_limit") return [];
  return [
    {
      "@type": type("QuotaFailure"),
      violations: [
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
          quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        },
      ],
    },
    ...(options.retryAfterSeconds === undefined
      ? []
      : [{ "@type": type("RetryInfo"), retryDelay: `${options.retryAfterSeconds}s` }]),
  ];
}

function usage(candidatesTokens: number | undefined) {
  return candidatesTokens === undefined
    ? { promptTokenCount: PROMPT_TOKENS, totalTokenCount: PROMPT_TOKENS }
    : {
        promptTokenCount: PROMPT_TOKENS,
        candidatesTokenCount: candidatesTokens,
        totalTokenCount: PROMPT_TOKENS + candidatesTokens,
      };
}

/** One GenerateContentResponse: a candidate with `text` (no parts when undefined). */
function chunk(
  answer: Answer,
  text: string | undefined,
  outputTokens: number,
  finishReason?: string,
) {
  return {
    candidates: [
      {
        content: { ...(text === undefined ? {} : { parts: [{ text }] }), role: "model" },
        ...(finishReason === undefined ? {} : { finishReason }),
        index: 0,
      },
    ],
    usageMetadata: usage(outputTokens),
    modelVersion: answer.model,
    responseId: RESPONSE_ID,
  };
}

const finishReason = (answer: Answer) => (answer.truncated ? "MAX_TOKENS" : "STOP");

export const gemini: WireApi = {
  name: "gemini",
  match,
  headers: () => ({}),
  endsWithAssistant: (body) => lastRole(body.contents) === "model",
  notJson: () =>
    googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unexpected token."),
  prefillRefused: () =>
    googleError(
      400,
      "INVALID_ARGUMENT",
      "Please ensure that multiturn requests end with a user role or a function response.",
    ),
  fault(kind, options, stream) {
    if (kind === "content_policy") {
      // Gemini refuses a prompt with a 200 that has no candidates, streamed as one chunk.
      const blocked = {
        promptFeedback: {
          blockReason: "SAFETY",
          ...(options.message === undefined ? {} : { blockReasonMessage: options.message }),
        },
        usageMetadata: usage(undefined),
        responseId: RESPONSE_ID,
      };
      return stream
        ? {
            status: 200,
            headers: { ...SSE_HEADERS },
            body: sseEvent(blocked, undefined, END),
          }
        : jsonReply(200, blocked);
    }
    const entry = ERRORS[kind];
    if (!entry) return undefined;
    const [code, status, message] = entry;
    return googleError(code, status, options.message ?? message, detailsOf(kind, options));
  },
  body(answer) {
    const text = answer.tokens.join("");
    return chunk(answer, text || undefined, answer.tokens.length, finishReason(answer));
  },
  cutBody: '{"candidates":[{"content":{"parts":[',
  stream(answer) {
    const n = answer.tokens.length;
    return {
      head: () => [],
      token: (text, index) => sseEvent(chunk(answer, text, index + 1), undefined, END),
      finish: () => [],
      // The finish reason is Gemini's only end marker: no_done leaves this chunk out.
      done: () => [
        sseEvent(chunk(answer, n > 0 ? "" : undefined, n, finishReason(answer)), undefined, END),
      ],
      malformed: () => `data: {"candidates":[{"content":{"parts":[{"text":${END}`,
      // Google's clients throw an ApiError with the chunk's code for an error chunk.
      error: (message) =>
        sseEvent(
          {
            error: {
              code: 503,
              message: message ?? "The model is overloaded. Please try again later.",
              status: "UNAVAILABLE",
            },
          },
          undefined,
          END,
        ),
    };
  },
};
