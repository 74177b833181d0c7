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
import { modelRequestOf } from "./gen-ai.js";
import { checkModelOptions, checkModel, isModel, type HealModelOptions } from "./options.js";
import { inFrameworkSpan, modelSpans } from "./spans.js";
import { AI_SDK_FAIL_ON_FINISH, AI_SDK_PARTS, readParts, toReadableStream } from "./stream.js";
import type {
  ContentPart,
  GenerateResult,
  HealedModel,
  LanguageModel,
  ModelCallOptions,
  SelfHealMiddleware,
  StreamPart,
  StreamResult,
} from "./types.js";

/** One model call as selfheal sees it: the request, and the model behind each provider. */
class ModelCall {
  /** The request and response of the streamed attempt that answers (the latest one). */
  streamed: Omit<StreamResult, "stream"> = {};

  constructor(
    readonly params: ModelCallOptions,
    readonly primary: LanguageModel,
    readonly fallbacks: ReadonlyMap<string, LanguageModel>,
  ) {}

  /** The model of the provider selfheal picked for this attempt (failover changes it). */
  modelFor(provider: string | undefined): LanguageModel {
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
const healedModels = new WeakMap<LanguageModel, Registration>();

/**
 * The model as a healed model: each `doGenerate` / `doStream` is a selfheal `llm` call (span,
 * health, empty-answer detection, diagnosis of `APICallError`s, recovery), failing over to
 * `fallback` models by provider. A model of AI SDK 6 (`v3`) or 7 (`v4`): the healed model is of
 * the same specification. Set `maxRetries: 0` on generateText / streamText: selfheal retries,
 * and the SDK's own retries would run around it.
 */
export function healModel<M extends LanguageModel>(
  sh: SelfHealing,
  model: M,
  options?: HealModelOptions,
): HealedModel<M> {
  checkModel(model, "healModel(model)");
  const checked = checkModelOptions("healModel", options);
  const fallbacks = fallbackRoutes("healModel", checked);
  // Registered now, so a bad option or an undeclared provider fails here, not at the first call.
  const registration = register("healModel", sh, model, checked, fallbacks);
  if (healedModels.get(model) === registration) return model;
  const calls = modelCalls(() => registration, fallbacks, checked);
  // What the SDK's wrapLanguageModel makes, without importing `ai` (6 or 7 may be installed).
  const healed: LanguageModel = {
    specificationVersion: model.specificationVersion,
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    doGenerate: (params) => calls.generate(params, model),
    doStream: (params) => calls.stream(params, model),
  };
  healedModels.set(healed, registration);
  // The healed model answers with the model's own results: the members the SDK calls keep M's types.
  return healed;
}

/**
 * The same as a middleware, to compose with others in `wrapLanguageModel` (of `ai` 6 or 7). The
 * model it wraps is the primary; it is registered at its first call.
 */
export function selfHealMiddleware(
  sh: SelfHealing,
  options?: HealModelOptions,
): SelfHealMiddleware {
  const checked = checkModelOptions("selfHealMiddleware", options);
  const fallbacks = fallbackRoutes("selfHealMiddleware", checked);
  const registrationFor = (model: LanguageModel) =>
    register("selfHealMiddleware", sh, model, checked, fallbacks);
  const calls = modelCalls(registrationFor, fallbacks, checked);
  return {
    specificationVersion: "v3",
    // The result is the model's own (the wrapped model's, or a fallback's of its specification).
    wrapGenerate: ({ params, model }) => sameAs(calls.generate(params, model)),
    wrapStream: ({ params, model }) => sameAs(calls.stream(params, model)),
  };
}

/** A route's result, as the type of the wrapped model's own (a route is of its specification). */
const sameAs = <R>(result: Promise<unknown>): Promise<R> => result as Promise<R>;

/** What a healed model's `doGenerate` and `doStream` do, given the model they stand for. */
function modelCalls(
  registrationFor: (model: LanguageModel) => Registration,
  fallbacks: ReadonlyMap<string, LanguageModel>,
  options: HealModelOptions,
) {
  return {
    generate: (params: ModelCallOptions, model: LanguageModel): Promise<GenerateResult> => {
      const { generate } = registrationFor(model);
      const call = new ModelCall(params, model, fallbacks);
      return inFrameworkSpan(options.spans, modelSpans(model.modelId), () =>
        generate(call, callOptions(params)),
      );
    },
    stream: async (params: ModelCallOptions, model: LanguageModel): Promise<StreamResult> => {
      const { stream } = registrationFor(model);
      const call = new ModelCall(params, model, fallbacks);
      const healed = inFrameworkSpan(options.spans, modelSpans(model.modelId), () =>
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
): ReadonlyMap<string, LanguageModel> {
  const routes = new Map<string, LanguageModel>();
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
  model: LanguageModel,
  options: HealModelOptions,
  fallbacks: ReadonlyMap<string, LanguageModel>,
): Registration {
  const name = options.name ?? model.modelId;
  const primary = options.provider ?? model.provider;
  if (fallbacks.has(primary)) {
    throw new SelfHealConfigError(
      `${caller}.options.fallback`,
      `provider "${primary}" is the primary's: give the fallback its own provider name ({ provider, model }), declared in recovery.providers`,
    );
  }
  checkSameSpecification(caller, model, fallbacks);
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

/**
 * Every route is of the primary's specification: the SDK hands the healed model a v3 or a v4
 * call, and each route must take it as it is and answer in kind.
 */
function checkSameSpecification(
  caller: string,
  primary: LanguageModel,
  fallbacks: ReadonlyMap<string, LanguageModel>,
): void {
  for (const [provider, model] of fallbacks) {
    if (model.specificationVersion === primary.specificationVersion) continue;
    throw new SelfHealConfigError(
      `${caller}.options.fallback`,
      `the fallback of provider "${provider}" (${model.modelId}) is a ${model.specificationVersion} model and the primary (${primary.modelId}) a ${primary.specificationVersion} one: give every route one specification (with AI SDK 7, wrapLanguageModel({ model, middleware: [] }) makes a v3 model a v4 one)`,
    );
  }
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
    failOnFinish: failOnFinish ?? AI_SDK_FAIL_ON_FINISH,
    ...(firstTokenMs !== undefined && { firstTokenMs }),
    ...(idleMs !== undefined && { idleMs }),
    ...(afterFirstToken !== undefined && { afterFirstToken }),
  };
}

function callOptions(params: ModelCallOptions): CallOptions {
  return params.abortSignal ? { signal: params.abortSignal } : {};
}

/** One streamed attempt on the model of the provider selfheal picked, with selfheal's signal. */
async function streamOnce(call: ModelCall, ctx: CallContext): Promise<AsyncIterable<StreamPart>> {
  const model = call.modelFor(ctx.provider);
  ctx.reportModel(modelRequestOf(model));
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
  ctx.reportModel(modelRequestOf(model));
  const result = await model.doGenerate({ ...call.params, abortSignal: ctx.signal });
  const responseModel = result.response?.modelId;
  if (responseModel !== undefined) ctx.reportModel({ responseModel });
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
function answeredBy(model: LanguageModel, result: GenerateResult): GenerateResult {
  if (result.response?.modelId !== undefined) return result;
  return { ...result, response: { ...result.response, modelId: model.modelId } };
}

/**
 * An answer says something or calls a tool: text that is not blank, a tool call, a file. Not
 * reasoning (v4's `reasoning-file` included), sources, provider-executed results, or v4's
 * provider `custom` blocks.
 */
function isAnswer(part: ContentPart): boolean {
  switch (part.type) {
    case "text":
      return (part.text ?? "").trim() !== "";
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
