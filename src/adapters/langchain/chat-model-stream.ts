import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import type {
  BaseChatModel,
  BaseChatModelCallOptions,
} from "@langchain/core/language_models/chat_models";
import type { AIMessageChunk } from "@langchain/core/messages";
import { SelfHealConfigError } from "../../errors.js";
import type {
  CallContext,
  HealedStream,
  SelfHealing,
  StreamItem,
  StreamMode,
  StreamOptions,
} from "../../index.js";
import { ModelRoutes, routeOptions } from "./model-routes.js";
import {
  checkChatModelStreamOptions,
  checkInstance,
  type HealChatModelStreamOptions,
} from "./options.js";
import { registeredStream } from "./registry.js";
import { messageChunkFormat, normalizeFinishReason } from "./stream-format.js";

/** The selfheal stream name of `healChatModelStream` unless `name` says otherwise. */
export const DEFAULT_STREAM_NAME = "model.stream";

/** Per-call options of a healed model stream: the model's call options (`signal` aborts the call). */
export type ChatModelStreamCallOptions = Partial<BaseChatModelCallOptions>;

/**
 * A chat model's `stream()` healed: each call a selfheal stream call. It yields the model's
 * AIMessageChunks and, under `afterFirstToken: "restart"`, a StreamRestart before a new answer.
 */
export type HealedChatModelStream<M extends StreamMode = "fail"> = (
  input: BaseLanguageModelInput,
  options?: ChatModelStreamCallOptions,
) => HealedStream<StreamItem<AIMessageChunk, M>>;

/** One call: how to open its stream on a route, and what `recordArguments` shows of it. */
class ChatStreamCall {
  constructor(
    private readonly input: BaseLanguageModelInput,
    readonly open: (ctx: CallContext) => Promise<AsyncIterable<AIMessageChunk>>,
  ) {}

  toJSON(): unknown {
    return { messages: Array.isArray(this.input) ? this.input.length : 1 };
  }
}

/**
 * Heals a chat model's `stream()` outside `createAgent`, on `sh.stream`: time to first token and
 * idle limits, completion checked (the finish reason LangChain's providers report), failover to
 * `fallbacks` before the first token, and `afterFirstToken` after it. Construct the model with
 * `maxRetries: 0`: its client's own retries would hide each failure from the diagnosis.
 *
 * ```ts
 * const stream = healChatModelStream(sh, model, { afterFirstToken: "restart" });
 * for await (const chunk of stream([{ role: "user", content: "Hi" }])) {
 *   if (isStreamRestart(chunk)) text = "";
 *   else text += chunk.text;
 * }
 * ```
 */
export function healChatModelStream<M extends StreamMode = "fail">(
  sh: SelfHealing,
  model: BaseChatModel,
  options: HealChatModelStreamOptions<M> = {},
): HealedChatModelStream<M> {
  checkInstance(sh, "healChatModelStream(sh)");
  if (typeof (model as Partial<BaseChatModel> | null | undefined)?.stream !== "function")
    throw new SelfHealConfigError(
      "healChatModelStream(model)",
      "expected a LangChain chat model (BaseChatModel, initChatModel())",
    );
  const o = checkChatModelStreamOptions(options, "healChatModelStream.options");
  const routes = new ModelRoutes(o.provider, o.fallbacks);
  const stream = registeredStream<ChatStreamCall, AIMessageChunk, M>(
    sh,
    o.name ?? DEFAULT_STREAM_NAME,
    streamOptions(o as HealChatModelStreamOptions<M>),
    streamSettings(o),
    (call, ctx) => call.open(ctx),
  );
  return (input, callOptions) => {
    const { signal, ...rest } = callOptions ?? {};
    const call = new ChatStreamCall(input, async (ctx) => {
      const routeModel = await routes.modelFor<BaseChatModel>(ctx.provider, model);
      return routeModel.stream(input, { ...rest, signal: ctx.signal });
    });
    return stream(call, signal ? { signal } : undefined);
  };
}

function streamOptions<M extends StreamMode>(
  o: HealChatModelStreamOptions<M>,
): StreamOptions<ChatStreamCall, AIMessageChunk, M> {
  const { firstTokenMs, idleMs, afterFirstToken, failOnFinish, completion } = o;
  return {
    ...routeOptions(o),
    format: messageChunkFormat(completion ?? "finish"),
    ...(firstTokenMs !== undefined && { firstTokenMs }),
    ...(idleMs !== undefined && { idleMs }),
    ...(afterFirstToken !== undefined && { afterFirstToken }),
    ...(failOnFinish !== undefined && { failOnFinish: failOnFinish.map(normalizeFinishReason) }),
  };
}

/** What every caller of one stream name must agree on (the mode changes what it yields). */
function streamSettings(o: HealChatModelStreamOptions): string {
  const { firstTokenMs, idleMs, afterFirstToken, failOnFinish, completion } = o;
  return JSON.stringify({ firstTokenMs, idleMs, afterFirstToken, failOnFinish, completion });
}
