/**
 * What the fake provider asks of one provider API's wire format: its path, its bodies, its
 * errors and its stream events. The request path (parse, refuse, fault, answer) and the fault
 * table stay in fake-provider.ts; a module per API only shapes bytes.
 */
import type { FaultKind, FaultOptions } from "../faults.js";

/** The APIs the fake provider speaks, one module each under src/testing/wire/. */
export type WireApiName = "chat_completions" | "responses" | "anthropic_messages" | "gemini";

/** A request's path matched by an API: what the path itself says about the request. */
export interface PathMatch {
  /** The model named in the path (Gemini's `models/{model}:…`). */
  model?: string;
  /** The path says whether the answer streams (Gemini's `:streamGenerateContent`). */
  stream?: boolean;
}

/** One answer, the same for every API: what each module turns into its own bodies and events. */
export interface Answer {
  /** The model the request named, echoed as the providers do ("fake-model" without one). */
  model: string;
  /** The answer's tokens: joined, its text; counted, its output tokens. */
  tokens: readonly string[];
  /** Cut by the output token limit (`finish_length`): the finish says so, not "stop". */
  truncated: boolean;
  /** The request's number on this server (from 1), for ids. */
  n: number;
  /** The parsed request body (Chat Completions reads `stream_options` from it). */
  body: Readonly<Record<string, unknown>>;
}

/** A complete HTTP answer: status, headers (content-type included) and body text. */
export interface WireReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The SSE text of one streamed answer, event by event; each call returns whole events. */
export interface StreamEvents {
  /** Sent with the headers, before the first token (Chat's role chunk, Anthropic's message_start). */
  head(): string[];
  /** The event carrying token `index` (from 0). */
  token(text: string, index: number): string;
  /** After the last token: the finish reason and usage (no_done sends these). */
  finish(): string[];
  /** What completes the stream, left out by `no_done` ([DONE], response.completed, message_stop). */
  done(): string[];
  /** `malformed_event`: one extra event cut mid-JSON. */
  malformed(): string;
  /** `stream_error`: the API's error event in a stream that has begun (an overload). */
  error(message: string | undefined): string;
}

/** One provider API's wire format. Adding an API is one module implementing this. */
export interface WireApi {
  readonly name: WireApiName;
  /** Whether a POST to `path` (no query string) is this API's, and what the path says. */
  match(path: string): PathMatch | undefined;
  /** Headers on every answer of this API (request ids). */
  headers(n: number): Record<string, string>;
  /** The request's conversation ends with the model's own turn (an assistant prefill). */
  endsWithAssistant(body: Readonly<Record<string, unknown>>): boolean;
  /** The answer to a body that is not a JSON object (`n`: the request's number). */
  notJson(n: number): WireReply;
  /** The answer to a prefill under `rejectPrefill`. */
  prefillRefused(n: number): WireReply;
  /**
   * The answer a fault is served as when the API answers it in full at once: an HTTP error for
   * the error faults (and, where the API does so, a 200 such as Gemini's blocked prompt);
   * undefined for the faults that are not (timeouts, resets, stream faults, answers).
   */
  fault(kind: FaultKind, options: FaultOptions, stream: boolean, n: number): WireReply | undefined;
  /** The JSON body of a plain (not streamed) answer. */
  body(answer: Answer): unknown;
  /** `malformed_json`: a body cut mid-JSON. */
  readonly cutBody: string;
  /** The events of a streamed answer. */
  stream(answer: Answer): StreamEvents;
}

/** The headers of every streamed answer. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

/** A WireReply of a JSON body. */
export function jsonReply(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): WireReply {
  return {
    status,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  };
}

/** One SSE event: a `data:` line, after an `event:` line when the API names its events. */
export function sseEvent(data: unknown, event?: string, end = "\n\n"): string {
  return `${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}${end}`;
}

/** The `role` of the last item of `list` when it is an array of objects, else undefined. */
export function lastRole(list: unknown): unknown {
  if (!Array.isArray(list)) return undefined;
  const last: unknown = list.at(-1);
  return typeof last === "object" && last !== null && "role" in last ? last.role : undefined;
}

/** Prompt tokens every answer reports (the fake provider does not count the request). */
export const PROMPT_TOKENS = 10;
