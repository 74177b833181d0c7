/**
 * The real provider clients as the fake provider's tests drive them, one shape for all: a plain
 * call and a stream read to its end, SDK retries off (`maxRetries: 0`; Google's client retries
 * only with `retryOptions`), so that each fault is exactly one request.
 */
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import { ApiError as ApiError2, GoogleGenAI as GoogleGenAI2 } from "@google/genai2";
import OpenAI from "openai";
import OpenAI6 from "openai6";
import type { FakeProvider, WireApiName } from "../../src/testing/index.js";

/** What a stream showed its reader so far: grows while it runs, kept when it breaks. */
export interface Seen {
  /** Event names (the SDK's `type`s; Gemini: "chunk", or the chunk's finishReason). */
  events: string[];
  text: string;
  /** The finish reason or status the stream reported, if it did. */
  finish: string | undefined;
}

export const newSeen = (): Seen => ({ events: [], text: "", finish: undefined });

export interface Client {
  /** A plain call: its text and finish reason (or status). */
  plain(prefill?: boolean): Promise<{ text: string; finish: string | null | undefined }>;
  /** A streamed call read to its end into `seen`; rejects as the SDK's iterator does. */
  stream(seen: Seen): Promise<void>;
}

type ErrorClass = abstract new (...args: never[]) => Error;

export interface Driver {
  name: string;
  api: WireApiName;
  connect(p: FakeProvider): Client;
  /** The SDK's error class for an HTTP status. */
  errorClass(status: number): ErrorClass;
  /** The SDK's class for an API's error event in a stream that has begun. */
  streamErrorClass: ErrorClass;
  /** The SDK's class for a connection that failed before an answer. */
  connectionError: ErrorClass;
  /** The SDK keeps an error's headers (`error.headers.get(...)`); Google's client does not. */
  keepsHeaders: boolean;
  /** The normal and the truncated finish, as `Client` reports them. */
  finishes: { normal: string; truncated: string };
  /** The stream's last event said it was complete (undefined: this SDK hides what would). */
  ended(seen: Seen): boolean | undefined;
  /** Events before the first token. */
  headEvents: number;
}

const USER = "hi";

/**
 * openai 7's and 6's clients make the same calls; 6's is typed as 7's so that one driver serves
 * both (the calls run on the real 6 client; its own types are not what is tested here).
 */
function openaiDriver(
  name: string,
  SDK: typeof OpenAI | typeof OpenAI6,
  api: "chat_completions" | "responses",
): Driver {
  const newClient = (p: FakeProvider) =>
    new SDK({ apiKey: "test", baseURL: p.url, maxRetries: 0 }) as unknown as OpenAI;
  const errorClass = (status: number): ErrorClass =>
    status === 429
      ? SDK.RateLimitError
      : status === 401
        ? SDK.AuthenticationError
        : status === 400
          ? SDK.BadRequestError
          : status >= 500
            ? SDK.InternalServerError
            : SDK.APIError;
  const base = {
    name,
    api,
    errorClass,
    connectionError: SDK.APIConnectionError,
    // openai 6 hands Responses' `error` event to the reader (below, thrown as a plain Error);
    // openai 7 throws it as an APIError.
    streamErrorClass: api === "responses" && SDK === OpenAI6 ? Error : SDK.APIError,
    keepsHeaders: true,
  };
  if (api === "chat_completions")
    return {
      ...base,
      finishes: { normal: "stop", truncated: "length" },
      // The SDK drops `[DONE]`: a stream without it reads the same.
      ended: () => undefined,
      headEvents: 1,
      connect(p) {
        const client = newClient(p);
        const messages = (prefill?: boolean) => [
          { role: "user" as const, content: USER },
          ...(prefill ? [{ role: "assistant" as const, content: "Sure" }] : []),
        ];
        return {
          async plain(prefill) {
            const c = await client.chat.completions.create({
              model: "gpt-4o",
              messages: messages(prefill),
            });
            return {
              text: c.choices[0]?.message.content ?? "",
              finish: c.choices[0]?.finish_reason,
            };
          },
          async stream(seen) {
            const s = await client.chat.completions.create({
              model: "gpt-4o",
              messages: messages(),
              stream: true,
            });
            for await (const chunk of s) {
              const choice = chunk.choices[0];
              seen.events.push(choice?.finish_reason ?? "chunk");
              seen.text += choice?.delta.content ?? "";
              seen.finish = choice?.finish_reason ?? seen.finish;
            }
          },
        };
      },
    };
  return {
    ...base,
    finishes: { normal: "completed", truncated: "incomplete" },
    ended: (seen) =>
      ["response.completed", "response.incomplete"].includes(seen.events.at(-1) ?? ""),
    headEvents: 4,
    connect(p) {
      const client = newClient(p);
      const input = (prefill?: boolean) => [
        { role: "user" as const, content: USER },
        ...(prefill ? [{ role: "assistant" as const, content: "Sure" }] : []),
      ];
      return {
        async plain(prefill) {
          const r = await client.responses.create({ model: "gpt-5", input: input(prefill) });
          return { text: r.output_text, finish: r.status };
        },
        async stream(seen) {
          const s = await client.responses.create({ model: "gpt-5", input: input(), stream: true });
          for await (const event of s) {
            seen.events.push(event.type);
            if (event.type === "error") throw new Error(event.message);
            if (event.type === "response.output_text.delta") seen.text += event.delta;
            if (event.type === "response.completed" || event.type === "response.incomplete")
              seen.finish = event.response.status;
          }
        },
      };
    },
  };
}

const anthropic: Driver = {
  name: "@anthropic-ai/sdk messages",
  api: "anthropic_messages",
  errorClass: (status) =>
    ({
      400: Anthropic.BadRequestError,
      401: Anthropic.AuthenticationError,
      429: Anthropic.RateLimitError,
      500: Anthropic.InternalServerError,
      502: Anthropic.InternalServerError,
      503: Anthropic.ServiceUnavailableError,
      529: Anthropic.OverloadedError,
    })[status] ?? Anthropic.APIError,
  connectionError: Anthropic.APIConnectionError,
  streamErrorClass: Anthropic.APIError,
  keepsHeaders: true,
  finishes: { normal: "end_turn", truncated: "max_tokens" },
  ended: (seen) => seen.events.at(-1) === "message_stop",
  headEvents: 2, // message_start, content_block_start (the SDK skips ping)
  connect(p) {
    const client = new Anthropic({ apiKey: "test", baseURL: p.origin, maxRetries: 0 });
    const params = (prefill?: boolean) => ({
      model: "claude-sonnet-4-5",
      max_tokens: 100,
      messages: [
        { role: "user" as const, content: USER },
        ...(prefill ? [{ role: "assistant" as const, content: "Sure" }] : []),
      ],
    });
    return {
      async plain(prefill) {
        const m = await client.messages.create(params(prefill));
        const text = m.content.map((block) => (block.type === "text" ? block.text : "")).join("");
        return { text, finish: m.stop_reason };
      },
      async stream(seen) {
        const s = await client.messages.create({ ...params(), stream: true });
        for await (const event of s) {
          seen.events.push(event.type);
          if (event.type === "content_block_delta" && event.delta.type === "text_delta")
            seen.text += event.delta.text;
          if (event.type === "message_delta") seen.finish = event.delta.stop_reason ?? undefined;
        }
      },
    };
  },
};

function geminiDriver(
  name: string,
  SDK: typeof GoogleGenAI | typeof GoogleGenAI2,
  ApiErrorClass: typeof ApiError | typeof ApiError2,
): Driver {
  return {
    name,
    api: "gemini",
    errorClass: () => ApiErrorClass,
    connectionError: TypeError, // fetch failed: the client does not wrap it
    streamErrorClass: ApiErrorClass,
    keepsHeaders: false,
    finishes: { normal: "STOP", truncated: "MAX_TOKENS" },
    ended: (seen) => (seen.events.length === 0 ? false : seen.events.at(-1) !== "chunk"),
    headEvents: 0,
    connect(p) {
      const client = new SDK({ apiKey: "test", httpOptions: { baseUrl: p.origin } });
      const contents = (prefill?: boolean) => [
        { role: "user", parts: [{ text: USER }] },
        ...(prefill ? [{ role: "model", parts: [{ text: "Sure" }] }] : []),
      ];
      return {
        async plain(prefill) {
          const r = await client.models.generateContent({
            model: "gemini-2.5-flash",
            contents: contents(prefill),
          });
          return { text: r.text ?? "", finish: r.candidates?.[0]?.finishReason };
        },
        async stream(seen) {
          const s = await client.models.generateContentStream({
            model: "gemini-2.5-flash",
            contents: contents(),
          });
          for await (const chunk of s) {
            const finish = chunk.candidates?.[0]?.finishReason;
            seen.events.push(finish ?? "chunk");
            seen.text += chunk.text ?? "";
            seen.finish = finish ?? seen.finish;
          }
        },
      };
    },
  };
}

/** Every client the fake provider is proved against. */
export const DRIVERS: readonly Driver[] = [
  openaiDriver("openai 7 chat.completions", OpenAI, "chat_completions"),
  openaiDriver("openai 6 chat.completions", OpenAI6, "chat_completions"),
  openaiDriver("openai 7 responses", OpenAI, "responses"),
  openaiDriver("openai 6 responses", OpenAI6, "responses"),
  anthropic,
  geminiDriver("@google/genai 3 models", GoogleGenAI, ApiError),
  geminiDriver("@google/genai 2 models", GoogleGenAI2, ApiError2),
];
