import { wrapLanguageModel, type LanguageModelMiddleware } from "ai";
import { SelfHealConfigError } from "../../errors.js";
import type {
  CallContext,
  CallOptions,
  HealedStreamFunction,
  SelfHealing,
  StreamOptions,
  ToolOptions,
  WrappedTool,
} from "../../index.js";
import { checkModelOptions, checkModel, isModel, type HealModelOptions } from "./options.js";
import { inFrameworkSpan, MODEL_SPANS } from "./spans.js";
import { AI_SDK_PARTS, readParts, toReadableStream } from "./stream.js";
import type {
  ContentPart,
  GenerateResult,
  LanguageModelV3,
  ModelCallOptions,
  StreamPart,
  StreamResult,
} from "./types.js";

/** One model call as selfheal sees it: the request, and the model behind each provider. */
class ModelCall {
  /** The request and response of the streamed attempt that answers (the latest one). */
  streamed: Omit<StreamResult, "stream"> = {};

  constructor(
    readonly params: ModelCallOptions,
    readonly primary: LanguageModelV3,
    readonly fallbacks: ReadonlyMap<string, LanguageModelV3>,
  ) {}

  /** The model of the provider selfheal picked for this attempt (failover changes it). */
  modelFor(provider: string | undefined): LanguageModelV3 {
    return (provider !== undefined && this.fallbacks.get(provider)) || this.primary;
  }

  /** `recordArguments` shows the prompt, not the settings or the signal. */
  toJSON(): unknown {
    return this.params.prompt;
  }
}

interface Registration {
  readonly providers: readonly string[];
  readonly generate: WrappedTool<ModelCall, GenerateResult>;
  readonly stream: HealedStreamFunction<ModelCall, StreamPart, "fail" | "restart" | "buffer">;
}

/** Model calls registered per instance, by name: `sh.tool` takes a name once. */
const registered = new WeakMap<SelfHealing, Map<string, Registration>>();

/**
 * The models `healModel` made, by the registration they call: healing one again under the same
 * registration returns it (wrapping it again would nest two selfheal calls per model call).
 */
const healedModels = new WeakMap<LanguageModelV3, Registration>();

/**
 * The model as a healed model: each `doGenerate` / `doStream` is a selfheal `llm` call (span,
 * health, empty-answer detection, diagnosis of `APICallError`s, recovery), failing over to
 * `fallback` models by provider. Set `maxRetries: 0` on generateText / streamText: selfheal
 * retries, and the SDK's own retries would run around it.
 */
export function healModel(
  sh: SelfHealing,
  model: LanguageModelV3,
  options?: HealModelOptions,
): LanguageModelV3 {
  checkModel(model, "healModel(model)");
  const checked = checkModelOptions("healModel", options);
  const fallbacks = fallbackRoutes("healModel", checked);
  // Registered now, so a bad option or an undeclared provider fails here, not at the first call.
  const registration = register("healModel", sh, model, checked, fallbacks);
  if (healedModels.get(model) === registration) return model;
  const healed = wrapLanguageModel({
    model,
    middleware: middleware(() => registration, fallbacks, checked),
  });
  healedModels.set(healed, registration);
  return healed;
}

/**
 * The same as a middleware, to compose with others in `wrapLanguageModel`. The model it wraps
 * is the primary; it is registered at its first call.
 */
export function selfHealMiddleware(
  sh: SelfHealing,
  options?: HealModelOptions,
): LanguageModelMiddleware {
  const checked = checkModelOptions("selfHealMiddleware", options);
  const fallbacks = fallbackRoutes("selfHealMiddleware", checked);
  const registrationFor = (model: LanguageModelV3) =>
    register("selfHealMiddleware", sh, model, checked, fallbacks);
  return middleware(registrationFor, fallbacks, checked);
}

function middleware(
  registrationFor: (model: LanguageModelV3) => Registration,
  fallbacks: ReadonlyMap<string, LanguageModelV3>,
  options: HealModelOptions,
): LanguageModelMiddleware {
  return {
    specificationVersion: "v3",
    wrapGenerate: ({ params, model }) => {
      const { generate } = registrationFor(model);
      const call = new ModelCall(params, model, fallbacks);
      return inFrameworkSpan(options.spans, MODEL_SPANS, () => generate(call, callOptions(params)));
    },
    wrapStream: async ({ params, model }) => {
      const { stream } = registrationFor(model);
      const call = new ModelCall(params, model, fallbacks);
      const healed = inFrameworkSpan(options.spans, MODEL_SPANS, () =>
        stream(call, callOptions(params)),
      );
      // Wait for the first part (a failure before it rejects here, as doStream would): then the
      // answering attempt's request and response are known, and nothing has reached the SDK.
      const iterator = healed[Symbol.asyncIterator]();
      const first = await iterator.next();
      return {
        ...call.streamed,
        stream: toReadableStream(
          healed,
          first,
          iterator,
          params.includeRawChunks === true,
          options.onRestart,
        ),
      };
    },
  };
}

function asList<T>(value: T | readonly T[] | undefined): readonly T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? (value as readonly T[]) : [value as T];
}

/** The fallback models by provider name, in order. */
function fallbackRoutes(
  caller: string,
  options: HealModelOptions,
): ReadonlyMap<string, LanguageModelV3> {
  const routes = new Map<string, LanguageModelV3>();
  asList(options.fallback).forEach((route, i) => {
    const { provider, model } = isModel(route) ? { provider: route.provider, model: route } : route;
    if (routes.has(provider)) {
      throw new SelfHealConfigError(
        `${caller}.options.fallback[${i}]`,
        `provider "${provider}" is already a fallback: give each route its own provider name ({ provider, model }), declared in recovery.providers`,
      );
    }
    routes.set(provider, model);
  });
  return routes;
}

/** The model's registration on `sh`, made on first use; a later one must list the same routes. */
function register(
  caller: string,
  sh: SelfHealing,
  model: LanguageModelV3,
  options: HealModelOptions,
  fallbacks: ReadonlyMap<string, LanguageModelV3>,
): Registration {
  const name = options.name ?? model.modelId;
  const primary = options.provider ?? model.provider;
  if (fallbacks.has(primary)) {
    throw new SelfHealConfigError(
      `${caller}.options.fallback`,
      `provider "${primary}" is the primary's: give the fallback its own provider name ({ provider, model }), declared in recovery.providers`,
    );
  }
  const providers = [primary, ...fallbacks.keys()];
  let byName = registered.get(sh);
  if (!byName) registered.set(sh, (byName = new Map<string, Registration>()));
  const existing = byName.get(name);
  if (existing) {
    if (existing.providers.join() !== providers.join()) {
      throw new SelfHealConfigError(
        `${caller}.options.name`,
        `model "${name}" is already healed with routes ${existing.providers.join(", ")}; give this one its own name`,
      );
    }
    return existing;
  }
  const generate = sh.tool(name, modelToolOptions(options, providers), generateOnce);
  const stream = sh.stream(streamName(name), modelStreamOptions(options, providers), streamOnce);
  const registration = { providers, generate, stream };
  byName.set(name, registration);
  return registration;
}

/** The selfheal name of a model's streamed calls: a health scope of their own. */
export const streamName = (name: string): string => `${name}:stream`;

/** What a model's generate and stream registrations share. */
function sharedOptions(options: HealModelOptions, providers: readonly string[]) {
  const { timeoutMs, deadlineMs, plans, spans } = options;
  return {
    readOnly: true, // a model call changes nothing: it is never refused
    kind: "llm" as const,
    // One route needs no declaration; failover routes must be declared in recovery.providers.
    ...(providers.length > 1 ? { providers } : { provider: providers[0] as string }),
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(deadlineMs !== undefined && { deadlineMs }),
    ...(plans !== undefined && { plans }),
    ...(spans !== undefined && { span: spans }),
  };
}

function modelToolOptions(
  options: HealModelOptions,
  providers: readonly string[],
): ToolOptions<ModelCall, GenerateResult> {
  return { ...sharedOptions(options, providers), isEmpty: isEmptyAnswer };
}

function modelStreamOptions(
  options: HealModelOptions,
  providers: readonly string[],
): StreamOptions<ModelCall, StreamPart> {
  const { firstTokenMs, idleMs, afterFirstToken, failOnFinish } = options;
  return {
    ...sharedOptions(options, providers),
    format: AI_SDK_PARTS,
    ...(firstTokenMs !== undefined && { firstTokenMs }),
    ...(idleMs !== undefined && { idleMs }),
    ...(afterFirstToken !== undefined && { afterFirstToken }),
    ...(failOnFinish !== undefined && { failOnFinish }),
  };
}

function callOptions(params: ModelCallOptions): CallOptions {
  return params.abortSignal ? { signal: params.abortSignal } : {};
}

/** One streamed attempt on the model of the provider selfheal picked, with selfheal's signal. */
async function streamOnce(call: ModelCall, ctx: CallContext): Promise<AsyncIterable<StreamPart>> {
  const model = call.modelFor(ctx.provider);
  const { stream, ...streamed } = await model.doStream({
    ...call.params,
    abortSignal: ctx.signal,
  });
  call.streamed = streamed; // a fallback names its model in its response-metadata part
  return readParts(stream);
}

/** One attempt on the model of the provider selfheal picked, with selfheal's signal. */
async function generateOnce(call: ModelCall, ctx: CallContext): Promise<GenerateResult> {
  const model = call.modelFor(ctx.provider);
  const result = await model.doGenerate({ ...call.params, abortSignal: ctx.signal });
  const { inputTokens, outputTokens } = result.usage;
  ctx.reportUsage({
    ...(inputTokens.total !== undefined && { inputTokens: inputTokens.total }),
    ...(outputTokens.total !== undefined && { outputTokens: outputTokens.total }),
  });
  return model === call.primary ? result : answeredBy(model, result);
}

/**
 * A fallback's answer names its model: the SDK reports `response.modelId`, else the wrapped
 * (primary) model's id, which would hide that another model answered.
 */
function answeredBy(model: LanguageModelV3, result: GenerateResult): GenerateResult {
  if (result.response?.modelId !== undefined) return result;
  return { ...result, response: { ...result.response, modelId: model.modelId } };
}

/** An answer says something or calls a tool: text that is not blank, a tool call, a file. */
function isAnswer(part: ContentPart): boolean {
  switch (part.type) {
    case "text":
      return part.text.trim() !== "";
    case "tool-call":
    case "tool-approval-request":
    case "file":
      return true;
    default:
      return false;
  }
}

/** Empty: no text and no tool call (reasoning alone is not an answer). */
function isEmptyAnswer(answer: GenerateResult): boolean {
  return !answer.content.some(isAnswer);
}
