/**
 * A small Anthropic Messages server on 127.0.0.1 for the `selfheal/anthropic` suites: POST
 * /v1/messages answered as the API does (a JSON Message, or SSE `event:`/`data:` pairs), its
 * error body `{"type":"error","error":{"type","message"}}` with `request-id` and `retry-after`
 * headers, and the faults a stream meets (cut, stalled, an `error` event mid-stream). Each
 * request takes the next scripted answer; the last one repeats.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { readBody, startServer } from "../helpers/http-server.js";

export interface SseEvent {
  event: string;
  data: unknown;
}

export type Answer =
  /** A JSON Message. */
  | { kind: "message"; message: Record<string, unknown>; headers?: Record<string, string> }
  /** An API error: status, `error.type`, message, headers (`retry-after`, ...). */
  | {
      kind: "error";
      status: number;
      type: string;
      message?: string;
      headers?: Record<string, string>;
      details?: Record<string, unknown>;
    }
  /**
   * An SSE stream of `events`. `cutAfter`: the socket is destroyed after that many events;
   * `stallAfter`: nothing more is sent after that many (the connection stays open).
   */
  | { kind: "stream"; events: readonly SseEvent[]; cutAfter?: number; stallAfter?: number }
  /** Headers never come. */
  | { kind: "hang" };

export interface Received {
  body: Record<string, unknown>;
  headers: IncomingMessage["headers"];
}

export const REQUEST_ID = "req_011CSHoEeqs5C35K2UUqR7Fy";

let ids = 0;

/** A Message as the API returns it. */
export function message(
  text: string,
  options: {
    model?: string;
    stopReason?: string;
    inputTokens?: number;
    outputTokens?: number;
    content?: readonly Record<string, unknown>[];
  } = {},
): Record<string, unknown> {
  return {
    id: `msg_${String(++ids).padStart(24, "0")}`,
    type: "message",
    role: "assistant",
    model: options.model ?? "claude-sonnet-4-5",
    content: options.content ?? (text === "" ? [] : [{ type: "text", text, citations: null }]),
    stop_reason: options.stopReason ?? "end_turn",
    stop_sequence: null,
    usage: {
      input_tokens: options.inputTokens ?? 12,
      output_tokens: options.outputTokens ?? 7,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      service_tier: "standard",
    },
  };
}

/**
 * The events of a streamed answer, as the API sends them: `message_start`, a `ping`, one text
 * block in `words`, `message_delta` with the stop reason and the cumulative output tokens,
 * `message_stop`. `thinking` puts a thinking block (with its signature) first; `toolUse` a
 * tool_use block (its input in two JSON deltas) last.
 */
export function messageEvents(
  words: readonly string[],
  options: {
    model?: string;
    stopReason?: string;
    inputTokens?: number;
    outputTokens?: number;
    thinking?: readonly string[];
    toolUse?: { name: string; input: Record<string, unknown> };
  } = {},
): SseEvent[] {
  const events: SseEvent[] = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: {
          ...message("", { ...options, outputTokens: 1 }),
          content: [],
          stop_reason: null,
        },
      },
    },
    { event: "ping", data: { type: "ping" } },
  ];
  let index = 0;
  const block = (start: Record<string, unknown>, deltas: Record<string, unknown>[]) => {
    events.push({
      event: "content_block_start",
      data: { type: "content_block_start", index, content_block: start },
    });
    for (const delta of deltas)
      events.push({
        event: "content_block_delta",
        data: { type: "content_block_delta", index, delta },
      });
    events.push({ event: "content_block_stop", data: { type: "content_block_stop", index } });
    index++;
  };
  if (options.thinking) {
    block({ type: "thinking", thinking: "", signature: "" }, [
      ...options.thinking.map((thinking) => ({ type: "thinking_delta", thinking })),
      { type: "signature_delta", signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pk" },
    ]);
  }
  if (words.length > 0) {
    block(
      { type: "text", text: "", citations: null },
      words.map((w, i) => ({ type: "text_delta", text: i === 0 ? w : ` ${w}` })),
    );
  }
  if (options.toolUse) {
    const json = JSON.stringify(options.toolUse.input);
    const half = Math.floor(json.length / 2);
    block(
      {
        type: "tool_use",
        id: "toolu_01A09q90qw90lq917835lq9",
        name: options.toolUse.name,
        input: {},
      },
      [
        { type: "input_json_delta", partial_json: "" },
        { type: "input_json_delta", partial_json: json.slice(0, half) },
        { type: "input_json_delta", partial_json: json.slice(half) },
      ],
    );
  }
  events.push(
    {
      event: "message_delta",
      data: {
        type: "message_delta",
        delta: { stop_reason: options.stopReason ?? "end_turn", stop_sequence: null },
        usage: { output_tokens: options.outputTokens ?? words.length + 2 },
      },
    },
    { event: "message_stop", data: { type: "message_stop" } },
  );
  return events;
}

/** The `error` event the API sends mid-stream (`overloaded_error`, `api_error`, ...). */
export const errorEvent = (type: string, message: string): SseEvent => ({
  event: "error",
  data: { type: "error", error: { type, message } },
});

export interface AnthropicServer {
  readonly url: string;
  /** The requests received, in order. */
  readonly requests: Received[];
  /** Requests whose connection closed before their answer ended (the client let go). */
  readonly dropped: number;
  /** Scripts the answers of the next requests; the last one repeats. */
  answer(...answers: Answer[]): void;
  close(): Promise<void>;
}

/** Starts a server; `answers` as for `answer()` (default: one short Message, or its stream). */
export async function startAnthropicServer(...answers: Answer[]): Promise<AnthropicServer> {
  let script: Answer[] = answers;
  let next = 0;
  let dropped = 0;
  const requests: Received[] = [];
  const server = await startServer((req, res) => {
    res.on("close", () => {
      if (!res.writableFinished) dropped++;
    });
    void (async () => {
      const text = await readBody(req);
      if (req.method !== "POST" || req.url?.split("?")[0] !== "/v1/messages") {
        sendError(res, { kind: "error", status: 404, type: "not_found_error" });
        return;
      }
      const body = JSON.parse(text) as Record<string, unknown>;
      requests.push({ body, headers: req.headers });
      const scripted = script[Math.min(next++, script.length - 1)];
      const answer: Answer =
        scripted ??
        (body["stream"] === true
          ? { kind: "stream", events: messageEvents(["Hello", "there."]) }
          : { kind: "message", message: message("Hello there.") });
      respond(res, answer, body);
    })();
  });
  return {
    url: server.url,
    requests,
    get dropped() {
      return dropped;
    },
    answer(...answers: Answer[]) {
      script = answers;
      next = 0;
    },
    close: () => server.close(),
  };
}

function respond(res: ServerResponse, answer: Answer, body: Record<string, unknown>): void {
  switch (answer.kind) {
    case "message": {
      const model = typeof body["model"] === "string" ? body["model"] : undefined;
      const json = JSON.stringify({ ...answer.message, ...(model && { model }) });
      res.writeHead(200, {
        "content-type": "application/json",
        "request-id": REQUEST_ID,
        ...answer.headers,
      });
      res.end(json);
      return;
    }
    case "error":
      sendError(res, answer);
      return;
    case "hang":
      return;
    case "stream":
      stream(res, answer);
  }
}

function sendError(res: ServerResponse, answer: Extract<Answer, { kind: "error" }>): void {
  res.writeHead(answer.status, {
    "content-type": "application/json",
    "request-id": REQUEST_ID,
    ...answer.headers,
  });
  res.end(
    JSON.stringify({
      type: "error",
      error: {
        type: answer.type,
        message: answer.message ?? answer.type,
        ...(answer.details && { details: answer.details }),
      },
      request_id: REQUEST_ID,
    }),
  );
}

function stream(res: ServerResponse, answer: Extract<Answer, { kind: "stream" }>): void {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "request-id": REQUEST_ID,
  });
  res.flushHeaders();
  const { events, cutAfter, stallAfter } = answer;
  let sent = 0;
  const send = () => {
    if (res.destroyed) return;
    if (cutAfter !== undefined && sent >= cutAfter) {
      res.socket?.destroy();
      return;
    }
    if (stallAfter !== undefined && sent >= stallAfter) return;
    const event = events[sent++];
    if (event === undefined) {
      res.end();
      return;
    }
    // The next event once this one is flushed: a cut then drops nothing already sent.
    res.write(`event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`, () => {
      setImmediate(send);
    });
  };
  send();
}
