/**
 * `selfheal/google-genai`: the `@google/genai` client (2.x and 3.x) healed in one line. Every
 * `ai.models.generateContent` and `generateContentStream` (and a chat's, from `ai.chats.create`)
 * is a selfheal call: span, health, diagnosis of the SDK's `ApiError`s (Google's RetryInfo
 * honoured), recovery with the SDK's own retries off, failover to another model or client of
 * the Gemini API; streams are bounded and checked by `geminiChunks`. The SDK is not imported:
 * the client is read by shape.
 *
 * ```ts
 * const ai = healGoogleGenAI(sh, new GoogleGenAI({ apiKey }), { fallback: { provider: "flash-lite", model: "gemini-2.5-flash-lite" } });
 * const response = await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "Hi" });
 * ```
 */
import { SelfHealConfigError } from "../errors.js";
import type { CallContext, SelfHealing } from "../index.js";
import { GEN_AI_PROVIDERS } from "../telemetry/conventions.js";
import {
  GEMINI_FAIL_ON_FINISH,
  geminiChunks,
  isEmptyGeminiAnswer,
  outputTokensOf,
  type GeminiChunk,
  type GeminiPart,
} from "./gemini-stream.js";
import {
  callOptions,
  clientHealing,
  openStream,
  type ClientCall,
  type ClientDefaults,
  type ClientRoute,
  type HealClientOptions,
} from "./heal-client.js";

export { GEMINI_FAIL_ON_FINISH, geminiChunks, isEmptyGeminiAnswer };
export type { GeminiChunk, GeminiPart };

/** A Google GenAI client, as far as selfheal calls it (`new GoogleGenAI()` of 2.x and 3.x fits). */
export interface GoogleGenAIClient {
  models: {
    generateContent(...args: never[]): unknown;
    generateContentStream(...args: never[]): unknown;
  };
}

/** Another route of the Gemini API: another client (API key, Vertex AI project) and/or model. */
export type GoogleGenAIRoute<C extends GoogleGenAIClient = GoogleGenAIClient> = ClientRoute<C>;

/** Options of `healGoogleGenAI`: those of `healModel` (`selfheal/ai-sdk`), routes of the Gemini API. */
export type HealGoogleGenAIOptions<C extends GoogleGenAIClient = GoogleGenAIClient> =
  HealClientOptions<C>;

/** The parameters of `generateContent`, as far as selfheal reads and sets them. */
interface ContentParams {
  model?: unknown;
  config?: {
    abortSignal?: AbortSignal | undefined;
    httpOptions?: { retryOptions?: object | undefined } | undefined;
  } | null;
}

/** What a healed attempt calls on a route's client: the SDK's own methods, on its `models`. */
interface Models {
  generateContent(params: ContentParams): Promise<GeminiChunk>;
  generateContentStream(params: ContentParams): Promise<AsyncIterable<GeminiChunk>>;
}

/** `gen_ai.operation.name` of Gemini's calls, and the selfheal name's suffix. */
const OPERATION = "generate_content";

type ContentCall = ClientCall<GoogleGenAIClient, ContentParams | undefined>;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null;

const DEFAULTS: ClientDefaults = {
  caller: "healGoogleGenAI",
  name: "gemini",
  provider: "gcp.gemini",
  expected: "a Google GenAI client (new GoogleGenAI() of @google/genai)",
  isClient: (value) => {
    const models = isObject(value) ? value["models"] : undefined;
    return (
      isObject(models) &&
      typeof models["generateContent"] === "function" &&
      typeof models["generateContentStream"] === "function"
    );
  },
};

/**
 * The client, healed: `models.generateContent` and `models.generateContentStream` are selfheal
 * calls (`gemini.generate_content`, `gemini.generate_content:stream`), and so are those of the
 * chats `chats.create` makes; everything else is the client's own. Each attempt is sent once
 * (`httpOptions.retryOptions.attempts: 1`: the SDK's retries, when configured, are off) with
 * selfheal's signal as `config.abortSignal`; `fallback` routes are another model and/or another
 * client of the Gemini API (each provider name declared in `recovery.providers`). Healing the
 * healed client again returns it as it is.
 */
export function healGoogleGenAI<C extends GoogleGenAIClient>(
  sh: SelfHealing,
  client: C,
  options?: HealGoogleGenAIOptions<C>,
): C {
  const healing = clientHealing(sh, client, options, DEFAULTS);
  if (healing.healed) return healing.healed;
  const { onRestart, afterFirstToken } = healing.options;
  const op = healing.operation({
    name: OPERATION,
    operation: OPERATION,
    generate: generateOnce,
    stream: streamOnce,
    isEmpty: isEmptyGeminiAnswer,
    format: geminiChunks,
    failOnFinish: GEMINI_FAIL_ON_FINISH,
  });

  const generateContent = (params: ContentParams | undefined): Promise<GeminiChunk> => {
    const call = healing.call(params, undefined) as ContentCall;
    return op.generate(call, callOptions(op.operation, params?.model, params?.config?.abortSignal));
  };
  const generateContentStream = async (
    params: ContentParams | undefined,
  ): Promise<AsyncGenerator<GeminiChunk>> => {
    const call = healing.call(params, undefined) as ContentCall;
    const healed = op.stream(
      call,
      callOptions(op.operation, params?.model, params?.config?.abortSignal),
    );
    return generatorOf(await openStream(healed, onRestart));
  };

  return healing.proxy({
    "models.generateContent": generateContent,
    "models.generateContentStream": generateContentStream,
    /**
     * The SDK's own `chats.create`, its chat given the healed methods: a Chat keeps the `models`
     * it was made with (`modelsModule`, in 2.x and 3.x) and calls nothing else of it.
     */
    "chats.create": (...args: unknown[]): unknown => {
      const chats = (client as unknown as { chats: { create: (...a: unknown[]) => unknown } })
        .chats;
      const models = Object.create(client.models, {
        generateContent: { value: generateContent },
        generateContentStream: {
          value: (params: ContentParams | undefined) => {
            // A chat records every chunk it reads in its history: a restarted answer twice.
            if (afterFirstToken === "restart") {
              return Promise.reject(
                new SelfHealConfigError(
                  "healGoogleGenAI.options.afterFirstToken",
                  'a chat cannot restart its answer (it keeps the chunks it read in its history): use "fail" or "buffer", or models.generateContentStream with onRestart',
                ),
              );
            }
            return generateContentStream(params);
          },
        },
      }) as object;
      const view = Object.create(chats, { modelsModule: { value: models } }) as object;
      return Reflect.apply(chats.create, view, args);
    },
  });
}

/**
 * One attempt's parameters: the caller's, with the route's model, selfheal's signal (aborted by a
 * timeout, a stalled stream, the deadline or the caller's own signal), and one HTTP request: a
 * client built with `httpOptions.retryOptions` would retry 429 and 5xx itself (p-retry, up to 5
 * attempts), and the two would multiply.
 */
function attemptParams(
  params: ContentParams | undefined,
  model: string | undefined,
  ctx: CallContext,
): ContentParams {
  const config = params?.config ?? undefined;
  const http = config?.httpOptions;
  return {
    ...params,
    ...(model !== undefined && { model }),
    config: {
      ...config,
      abortSignal: ctx.signal,
      httpOptions: { ...http, retryOptions: { ...http?.retryOptions, attempts: 1 } },
    },
  };
}

/**
 * The route's `models` and model, the attempt's request reported in the GenAI conventions' terms:
 * the client's API (the Gemini API, or Vertex AI for a client made with `vertexai: true`), not
 * the route's selfheal name.
 */
function modelsOfRoute(call: ContentCall, ctx: CallContext) {
  const { client, model } = call.route(ctx.provider);
  const requestModel = model ?? call.params?.model;
  ctx.reportModel({
    operation: OPERATION,
    provider:
      (client as { vertexai?: unknown }).vertexai === true
        ? GEN_AI_PROVIDERS.gcpVertexAi
        : GEN_AI_PROVIDERS.gcpGemini,
    ...(typeof requestModel === "string" && { requestModel }),
  });
  return { models: client.models as unknown as Models, model };
}

/** The model that answered, as the answer names it (`modelVersion`). */
function reportResponseModel(ctx: CallContext, answer: GeminiChunk): void {
  if (typeof answer.modelVersion === "string")
    ctx.reportModel({ responseModel: answer.modelVersion });
}

/** One plain attempt on the route selfheal picked. */
async function generateOnce(call: ContentCall, ctx: CallContext): Promise<GeminiChunk> {
  const { models, model } = modelsOfRoute(call, ctx);
  const response = await models.generateContent(attemptParams(call.params, model, ctx));
  reportResponseModel(ctx, response);
  const usage = response.usageMetadata;
  const input = usage?.promptTokenCount;
  const output = outputTokensOf(usage);
  ctx.reportUsage({
    ...(typeof input === "number" && { inputTokens: input }),
    ...(output !== undefined && { outputTokens: output }),
  });
  return response;
}

/** One streamed attempt on the route selfheal picked: the SDK's stream of chunks. */
async function streamOnce(
  call: ContentCall,
  ctx: CallContext,
): Promise<AsyncIterable<GeminiChunk>> {
  const { models, model } = modelsOfRoute(call, ctx);
  // geminiChunks reads the answering model and the tokens on the way.
  return models.generateContentStream(attemptParams(call.params, model, ctx));
}

/**
 * The healed stream as the SDK returns its own, an async generator of chunks: leaving the loop
 * early (break, a throw) ends the call and its request.
 */
async function* generatorOf(iterator: AsyncIterator<GeminiChunk>): AsyncGenerator<GeminiChunk> {
  try {
    for (;;) {
      const step = await iterator.next();
      if (step.done) return;
      yield step.value;
    }
  } finally {
    await iterator.return?.();
  }
}
