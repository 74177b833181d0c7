/**
 * `selfheal/openai`: the `openai` client healed in one line, and the stream formats of its APIs.
 *
 * ```ts
 * const client = healOpenAI(sh, new OpenAI(), { fallback: { provider: "azure", client: azure } });
 * const answer = await client.responses.create({ model: "gpt-4.1", input: "Hi" }); // a selfheal call
 * ```
 *
 * Chat Completions (`chat.completions.create`, `parse`, `stream`, `runTools`) and Responses
 * (`responses.create`, `parse`, `stream`), plain and streamed, are selfheal calls; every other
 * member is the client's own. `chatCompletionChunks` and `responseEvents` tell `sh.stream` how to
 * read each API's stream when you wrap calls by hand; `sseChunks(response)` reads a `fetch`
 * response's Chat Completion chunks.
 *
 * ```ts
 * const chat = sh.stream("chat", { readOnly: true, providers: ["openai", "backup"], format: chatCompletionChunks },
 *   (messages, ctx) => client(ctx.provider).chat.completions.create({ model, messages, stream: true }, { signal: ctx.signal, maxRetries: 0 }));
 * for await (const chunk of chat(messages)) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
 * ```
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import { SelfHealConfigError } from "../errors.js";
import type { CallContext, ChunkInfo, SelfHealing, StreamFormat } from "../index.js";
import {
  callOptions,
  clientHealing,
  type ClientCall,
  type ClientDefaults,
  type ClientHealing,
  type ClientOperation,
  type ClientRoute,
  type HealClientOptions,
} from "./heal-client.js";
import {
  isEmptyResponsesAnswer,
  responseEvents,
  RESPONSES_FAIL_ON_FINISH,
  type ResponseEvent,
  type ResponseObject,
} from "./openai-responses.js";
import {
  attemptOptions,
  healedAPIPromise,
  healedCreate,
  sent,
  type StainlessRequestOptions,
} from "./stainless.js";
import { STREAM_DEFAULTS } from "../engine/options/stream.js";
import { GEN_AI_PROVIDERS } from "../telemetry/conventions.js";

export {
  responseEvents,
  RESPONSES_FAIL_ON_FINISH,
  type ResponseEvent,
  type ResponseObject,
} from "./openai-responses.js";

/** One chunk of a streamed Chat Completion, as far as selfheal reads it (the OpenAI SDK's type fits). */
export interface ChatCompletionChunk {
  id?: string;
  model?: string;
  choices: readonly {
    index?: number;
    delta?: {
      role?: string | null;
      content?: string | null;
      refusal?: string | null;
      /** Reasoning text of DeepSeek, vLLM and other compatible servers. */
      reasoning_content?: string | null;
      tool_calls?: readonly unknown[] | null;
    } | null;
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number | null; completion_tokens?: number | null } | null;
}

const PROGRESS: ChunkInfo = Object.freeze({ token: true });
const ANSWER: ChunkInfo = Object.freeze({ token: true, answer: true });

/**
 * How selfheal reads Chat Completion chunks: content, a refusal or a tool call is an answer
 * token, reasoning a token (no answer on its own), `finish_reason` completes the stream (an end
 * without one is a cut; `length` and `content_filter` fail it unless `failOnFinish` says
 * otherwise), and `usage.completion_tokens` (with `stream_options: { include_usage: true }`)
 * are the output tokens.
 */
export const chatCompletionChunks: StreamFormat<ChatCompletionChunk> = {
  read(chunk) {
    const choice = chunk.choices[0];
    const outputTokens = tokens(chunk.usage?.completion_tokens);
    // With stream_options: { include_usage: true }: a last chunk with usage and no choices.
    const inputTokens = tokens(chunk.usage?.prompt_tokens);
    const finishReason = choice?.finish_reason ?? undefined;
    if (finishReason !== undefined || outputTokens !== undefined || inputTokens !== undefined) {
      return { ...deltaInfo(choice?.delta), finishReason, outputTokens, inputTokens };
    }
    return deltaInfo(choice?.delta);
  },
  completion: "finish",
  responseModel: (chunk) => chunk.model,
};

const tokens = (value: unknown): number | undefined =>
  typeof value === "number" ? value : undefined;

function deltaInfo(delta: ChatCompletionChunk["choices"][number]["delta"]): ChunkInfo | undefined {
  if (!delta) return undefined;
  if (delta.content || delta.refusal || (delta.tool_calls?.length ?? 0) > 0) {
    return delta.content && delta.content.trim() === "" && !delta.tool_calls?.length
      ? PROGRESS
      : ANSWER;
  }
  return delta.reasoning_content ? PROGRESS : undefined;
}

/** An SSE line longer than this errors the stream (a server that never ends a line). */
const MAX_EVENT_CHARS = 1024 * 1024;

/**
 * The chunks of a streamed Chat Completion from a `fetch` response (`stream: true`), in order,
 * ending at `data: [DONE]` or the end of the body. An event that is not JSON throws a
 * SyntaxError (a chunk may carry part of the answer: dropping it would pass a damaged answer as
 * whole). Check `response.ok` first: `if (!res.ok) throw await HttpResponseError.from(res)`.
 */
export async function* sseChunks(response: Response): AsyncGenerator<ChatCompletionChunk> {
  if (!response.body)
    throw new TypeError("selfheal: sseChunks(response): the response has no body");
  const events = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream({ maxBufferSize: MAX_EVENT_CHARS }))
    .getReader();
  try {
    for (;;) {
      const { done, value } = await events.read();
      if (done) return;
      if (value.data === "[DONE]") return;
      let chunk: unknown;
      try {
        chunk = JSON.parse(value.data);
      } catch (error) {
        throw new SyntaxError(
          `selfheal: a streamed event is not JSON (${(error as Error).message}): ${value.data.slice(0, 80)}`,
          { cause: error },
        );
      }
      yield asChunk(chunk);
    }
  } finally {
    // Also on an early end: the request behind the stream is cancelled.
    void events.cancel().catch(() => undefined);
  }
}

/** A parsed event as a chunk; an `{ error }` event (some servers stream errors) is thrown. */
function asChunk(value: unknown): ChatCompletionChunk {
  const o = value as { choices?: unknown; error?: unknown } | null;
  if (o && typeof o === "object" && o.error !== undefined && o.choices === undefined) {
    const error = o.error as { message?: unknown; code?: unknown; type?: unknown };
    throw Object.assign(
      new Error(typeof error.message === "string" ? error.message : "streamed error event"),
      { error, code: error.code, type: error.type },
    );
  }
  if (!o || typeof o !== "object" || !Array.isArray(o.choices)) {
    throw new SyntaxError("selfheal: a streamed event is not a chat.completion.chunk (no choices)");
  }
  return o as ChatCompletionChunk;
}

// ---- healOpenAI -------------------------------------------------------------------------------

/**
 * An OpenAI client, as far as selfheal calls it: `new OpenAI()` and `new AzureOpenAI()` of the
 * `openai` package (6 and 7 tested), or any client of the same shape.
 */
export interface OpenAIClient {
  chat: { completions: { create(...args: never[]): unknown } };
  responses?: { create(...args: never[]): unknown };
}

/** Another route of the same API: another client (base URL, Azure deployment) and/or model. */
export type OpenAIRoute = ClientRoute<OpenAIClient>;

/** Options of `healOpenAI`: those of `healModel` (`selfheal/ai-sdk`), routes of the same API. */
export type HealOpenAIOptions = HealClientOptions<OpenAIClient>;

/** A request body, as far as selfheal reads it. */
interface Params {
  model?: unknown;
  stream?: unknown;
}

/** An API namespace (`chat.completions`, `responses`): the SDK's methods, on the SDK's object. */
type Namespace = Record<string, unknown> & { _client?: unknown };

type OpenAICall = ClientCall<OpenAIClient, Params, StainlessRequestOptions>;

/** A Chat Completion, as far as selfheal reads it (the SDK's `ChatCompletion` fits). */
interface ChatCompletion {
  choices?: readonly ({
    message?: {
      content?: unknown;
      refusal?: string | null;
      tool_calls?: readonly unknown[] | null;
      function_call?: unknown;
      audio?: unknown;
    } | null;
  } | null)[];
  usage?: { prompt_tokens?: number | null; completion_tokens?: number | null } | null;
}

/** What differs between the two APIs healed. */
interface Api<Chunk> {
  /** The operation's name (`openai.chat`, `openai.responses`). */
  readonly name: string;
  /** Where the namespace is on a client. */
  readonly path: readonly string[];
  readonly format: StreamFormat<Chunk>;
  readonly failOnFinish: readonly string[];
  readonly isEmpty: (answer: unknown) => boolean;
  /** Input and output tokens of a plain answer. */
  readonly usage: (answer: unknown) => readonly [unknown, unknown];
}

const CHAT: Api<ChatCompletionChunk> = {
  name: "chat",
  path: ["chat", "completions"],
  format: chatCompletionChunks,
  failOnFinish: STREAM_DEFAULTS.failOnFinish,
  isEmpty: isEmptyChatCompletion,
  usage: (answer) => {
    const usage = (answer as ChatCompletion | null)?.usage;
    return [usage?.prompt_tokens, usage?.completion_tokens];
  },
};

const RESPONSES: Api<ResponseEvent> = {
  name: "responses",
  path: ["responses"],
  format: responseEvents,
  failOnFinish: RESPONSES_FAIL_ON_FINISH,
  isEmpty: isEmptyResponsesAnswer,
  usage: (answer) => {
    const usage = (answer as ResponseObject | null)?.usage;
    return [usage?.input_tokens, usage?.output_tokens];
  },
};

const hasCreate = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { create?: unknown }).create === "function";

const DEFAULTS: ClientDefaults = {
  caller: "healOpenAI",
  name: "openai",
  provider: "openai",
  expected: "an OpenAI client (new OpenAI() or new AzureOpenAI() of the openai package)",
  isClient: (value) =>
    typeof value === "object" &&
    value !== null &&
    hasCreate((value as { chat?: { completions?: unknown } }).chat?.completions),
};

/**
 * The client, healed: Chat Completions and Responses calls are selfheal calls (`openai.chat`,
 * `openai.chat:stream`, `openai.responses`, `openai.responses:stream`, or `{name}.…`), the
 * client's type and every other member its own. Each attempt is sent with the SDK's retries off
 * (`maxRetries: 0`) and selfheal's signal; `fallback` routes are another client of the same API
 * (another base URL, an Azure deployment) and/or another model, each provider name declared in
 * `recovery.providers`. Healing the healed client again returns it as it is.
 */
export function healOpenAI<C extends OpenAIClient>(
  sh: SelfHealing,
  client: C,
  options?: HealOpenAIOptions,
): C {
  const healing = clientHealing<C>(sh, client, options, DEFAULTS);
  if (healing.healed) return healing.healed;
  // The SDK's helpers are run with the healed client, made once its methods are.
  const self = { healed: client };
  self.healed = healing.proxy({
    ...apiMethods(healing, client, CHAT, () => self.healed),
    ...(hasCreate(client.responses) && apiMethods(healing, client, RESPONSES, () => self.healed)),
  });
  return self.healed;
}

/** The healed methods of one API, by path (`chat.completions.create`). */
function apiMethods<C extends OpenAIClient, Chunk>(
  healing: ClientHealing<C>,
  client: C,
  api: Api<Chunk>,
  healedClient: () => C,
): Record<string, (...args: never[]) => unknown> {
  const { afterFirstToken } = healing.options;
  const op: ClientOperation<OpenAICall, unknown, Chunk> = healing.operation({
    name: api.name,
    operation: "chat",
    generate: (call: OpenAICall, ctx) => generateOnce(api, call, ctx),
    stream: (call: OpenAICall, ctx) => streamOnce(api, call, ctx),
    isEmpty: api.isEmpty,
    format: api.format,
    failOnFinish: api.failOnFinish,
  });
  const plain =
    (method: string) => (params: Params | undefined, requestOptions?: StainlessRequestOptions) => {
      const call = healing.call(params, requestOptions, method) as unknown as OpenAICall;
      return healedAPIPromise(
        op.generate(call, callOptions(op.operation, params?.model, requestOptions?.signal)),
        call,
      );
    };
  const create = healedCreate(
    healing as unknown as ClientHealing<OpenAIClient>,
    op as ClientOperation<OpenAICall, unknown, unknown>,
  );
  /**
   * The SDK's own helper (`stream()`, `runTools()`), run on the real namespace with the healed
   * client as its `_client`: each request it makes is a healed `create`, what it returns the SDK's.
   */
  const helper =
    (method: string) =>
    (...args: unknown[]): unknown => {
      // The SDK's stream helpers accumulate one answer and cannot be told to start it again.
      if (afterFirstToken === "restart") {
        throw new SelfHealConfigError(
          "healOpenAI.options.afterFirstToken",
          `${[...api.path, method].join(".")}() cannot restart its answer (the SDK's helper accumulates it): use "fail" or "buffer", or create({ stream: true }) with onRestart`,
        );
      }
      const namespace = namespaceOf(client, api.path);
      const view = Object.create(namespace, { _client: { value: healedClient() } }) as Namespace;
      return Reflect.apply(namespace[method] as (...a: unknown[]) => unknown, view, args);
    };
  const at = (method: string) => [...api.path, method].join(".");
  return {
    [at("create")]: create,
    // parse() is create() with the answer parsed: each attempt runs the SDK's own parse().
    [at("parse")]: plain("parse"),
    [at("stream")]: helper("stream"),
    ...(api === (CHAT as Api<unknown>) && { [at("runTools")]: helper("runTools") }),
  };
}

/** The namespace at `path` of a client (a route's client without it fails that attempt). */
function namespaceOf(client: OpenAIClient, path: readonly string[]): Namespace {
  let node: unknown = client;
  for (const key of path) node = (node as Record<string, unknown> | undefined)?.[key];
  if (typeof node !== "object" || node === null) {
    throw new TypeError(`selfheal: the route's client has no ${path.join(".")}`);
  }
  return node as Namespace;
}

/** The route's namespace, and the body with the route's model. */
function request(api: Api<unknown>, call: OpenAICall, ctx: CallContext) {
  const { client, model } = call.route(ctx.provider);
  const namespace = namespaceOf(client, api.path);
  const method = namespace[call.method];
  if (typeof method !== "function") {
    throw new TypeError(`selfheal: the route's client has no ${api.path.join(".")}.${call.method}`);
  }
  const body = model === undefined ? call.params : { ...call.params, model };
  // In the GenAI conventions' terms: the client's API, not the route's selfheal name.
  const requestModel = model ?? call.params.model;
  ctx.reportModel({
    provider: genAiProvider(client),
    ...(typeof requestModel === "string" && { requestModel }),
  });
  return sent(
    call,
    Reflect.apply(method as (...a: unknown[]) => unknown, namespace, [
      body,
      attemptOptions(call.options, ctx),
    ]) as PromiseLike<unknown>,
  );
}

/** One plain attempt on the route selfheal picked; its tokens reported. */
async function generateOnce<Chunk>(
  api: Api<Chunk>,
  call: OpenAICall,
  ctx: CallContext,
): Promise<unknown> {
  const answer = await request(api, call, ctx);
  reportResponseModel(ctx, (answer as { model?: unknown } | null)?.model);
  const [input, output] = api.usage(answer);
  ctx.reportUsage({
    ...(typeof input === "number" && { inputTokens: input }),
    ...(typeof output === "number" && { outputTokens: output }),
  });
  return answer;
}

/**
 * One streamed attempt on the route selfheal picked: the SDK's stream, read by the API's format
 * (the answering model, and the tokens, included).
 */
async function streamOnce<Chunk>(
  api: Api<Chunk>,
  call: OpenAICall,
  ctx: CallContext,
): Promise<AsyncIterable<Chunk>> {
  const stream = (await request(api, call, ctx)) as AsyncIterable<Chunk>;
  call.opened = stream;
  return stream;
}

/** `gen_ai.provider.name` of a client: Azure OpenAI's (`AzureOpenAI`), else OpenAI's API. */
function genAiProvider(client: OpenAIClient): string {
  const name = (client as { constructor?: { name?: unknown } }).constructor?.name;
  return name === "AzureOpenAI" ? GEN_AI_PROVIDERS.azureOpenai : GEN_AI_PROVIDERS.openai;
}

/** The model that answered, as the answer names it. */
function reportResponseModel(ctx: CallContext, model: unknown): void {
  if (typeof model === "string" && model !== "") ctx.reportModel({ responseModel: model });
}

/** Empty: no choice with text that is not blank, a refusal, a tool call or audio. */
function isEmptyChatCompletion(answer: unknown): boolean {
  const choices = (answer as ChatCompletion | null)?.choices;
  if (!Array.isArray(choices)) return true;
  return !choices.some((choice: NonNullable<ChatCompletion["choices"]>[number]) => {
    const message = choice?.message;
    if (!message) return false;
    const { content } = message;
    return (
      (typeof content === "string" ? content.trim() !== "" : content != null) ||
      !!message.refusal ||
      (message.tool_calls?.length ?? 0) > 0 ||
      !!message.function_call ||
      !!message.audio
    );
  });
}
