/**
 * `selfheal/anthropic`: the `@anthropic-ai/sdk` client healed in one line. Every
 * `client.messages.create` (plain and `stream: true`), `messages.stream()` and `messages.parse()`
 * is a selfheal call: span, health, diagnosis of the SDK's errors, recovery with the SDK's own
 * retries off, failover to another model or client of the Messages API; streams are bounded and
 * checked by `anthropicMessageEvents`. The SDK is not imported: the client is read by shape.
 *
 * ```ts
 * const client = healAnthropic(sh, new Anthropic(), { fallback: { provider: "haiku", model: "claude-haiku-4-5" } });
 * const message = await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 1024, messages });
 * ```
 */
import { SelfHealConfigError } from "../errors.js";
import { GEN_AI_PROVIDERS } from "../telemetry/conventions.js";
import type { CallContext, SelfHealing } from "../index.js";
import {
  ANTHROPIC_FAIL_ON_FINISH,
  anthropicMessageEvents,
  messageInputTokens,
  tokenCount,
  type AnthropicMessageEvent,
} from "./anthropic-events.js";
import {
  clientHealing,
  type ClientCall,
  type ClientDefaults,
  type ClientRoute,
  type HealClientOptions,
} from "./heal-client.js";
import {
  attemptOptions,
  healedCreate,
  sent,
  type StainlessParams,
  type StainlessRequestOptions,
} from "./stainless.js";

export { ANTHROPIC_FAIL_ON_FINISH, anthropicMessageEvents, type AnthropicMessageEvent };

/** An Anthropic client, as far as selfheal calls it (`new Anthropic()` fits, as its Bedrock and Vertex kin). */
export interface AnthropicClient {
  messages: {
    create(...args: never[]): unknown;
  };
}

/** Another route of the Messages API: another client (base URL, account) and/or another model. */
export type AnthropicRoute<C extends AnthropicClient = AnthropicClient> = ClientRoute<C>;

/** Options of `healAnthropic`: those of `healModel` (`selfheal/ai-sdk`), routes of the Messages API. */
export type HealAnthropicOptions<C extends AnthropicClient = AnthropicClient> =
  HealClientOptions<C>;

/** The request body of `messages.create`, as far as selfheal reads it. */
type MessageParams = StainlessParams;

/** A Message, as far as selfheal reads it. */
interface Message {
  model?: string;
  content?: readonly { type?: string; text?: string }[] | null;
  usage?: Usage | null;
}

interface Usage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** What a healed attempt calls on a route's client: the SDK's own method, on the SDK's object. */
interface Messages {
  create(params: unknown, options?: StainlessRequestOptions): PromiseLike<unknown>;
}

type MessagesCall = ClientCall<AnthropicClient, MessageParams | undefined, StainlessRequestOptions>;

const DEFAULTS: ClientDefaults = {
  caller: "healAnthropic",
  name: "anthropic",
  provider: "anthropic",
  expected: "an Anthropic client (new Anthropic() of @anthropic-ai/sdk)",
  isClient: (value) => {
    const messages = (value as { messages?: unknown } | null)?.messages;
    return (
      typeof value === "object" &&
      value !== null &&
      typeof messages === "object" &&
      messages !== null &&
      typeof (messages as { create?: unknown }).create === "function"
    );
  },
};

/**
 * The client, healed: `messages.create` (plain and `stream: true`), `messages.stream()` and
 * `messages.parse()` are selfheal calls (`anthropic.messages`, `anthropic.messages:stream`);
 * everything else is the client's own. Each attempt is sent with the SDK's retries off
 * (`maxRetries: 0`) and selfheal's signal; `fallback` routes are another model and/or another
 * client of the Messages API (each provider name declared in `recovery.providers`). Healing the
 * healed client again returns it as it is.
 */
export function healAnthropic<C extends AnthropicClient>(
  sh: SelfHealing,
  client: C,
  options?: HealAnthropicOptions<C>,
): C {
  const healing = clientHealing(sh, client, options, DEFAULTS);
  if (healing.healed) return healing.healed;
  const op = healing.operation({
    name: "messages",
    operation: "chat",
    generate: generateOnce,
    stream: streamOnce,
    isEmpty: isEmptyMessage,
    format: anthropicMessageEvents,
    failOnFinish: ANTHROPIC_FAIL_ON_FINISH,
  });
  const create = healedCreate(healing, op);

  /**
   * The SDK's own helper (`stream()`, `parse()`), run on the real `messages` with the healed
   * `create`: each request it makes is a healed call, and what it returns (a MessageStream, a
   * parsed Message) is the SDK's.
   */
  const helper =
    (method: "stream" | "parse") =>
    (...args: unknown[]): unknown => {
      // A MessageStream accumulates one message and cannot be told to start it again.
      if (method === "stream" && healing.options.afterFirstToken === "restart") {
        throw new SelfHealConfigError(
          "healAnthropic.options.afterFirstToken",
          'messages.stream() cannot restart its message (the SDK\'s MessageStream accumulates it): use "fail" or "buffer", or messages.create({ stream: true }) with onRestart',
        );
      }
      const messages = (client as unknown as { messages: Record<string, unknown> }).messages;
      const view = Object.create(messages, { create: { value: create } }) as object;
      return Reflect.apply(messages[method] as (...a: unknown[]) => unknown, view, args);
    };

  return healing.proxy({
    "messages.create": create,
    "messages.stream": helper("stream"),
    "messages.parse": helper("parse"),
  });
}

/** The body of one attempt: the caller's, with the route's model. */
function bodyOf(
  params: MessageParams | undefined,
  model: string | undefined,
): MessageParams | undefined {
  return model === undefined ? params : { ...params, model };
}

/**
 * Sends one attempt's request on the route selfheal picked (its request reported in the GenAI
 * conventions' terms: the provider of the client's API, not the route's selfheal name).
 */
async function send(call: MessagesCall, ctx: CallContext): Promise<unknown> {
  const { client, model } = call.route(ctx.provider);
  const body = bodyOf(call.params, model);
  const requestModel = body?.model;
  ctx.reportModel({
    provider: genAiProvider(client),
    ...(typeof requestModel === "string" && { requestModel }),
  });
  const { messages } = client as unknown as { messages: Messages };
  const options = attemptOptions(call.options, ctx);
  try {
    return await sent(call, messages.create(body, options));
  } catch (error) {
    if (!refreshedToken(client, error)) throw error;
    // The SDK's one retry with a fresh token, which maxRetries: 0 turned off: no selfheal retry
    // (a 401 is AUTH, escalated) would send it, and the token is all that was wrong.
    return await sent(call, messages.create(body, options));
  }
}

/**
 * Whether `error` is a 401 to a client that signs with an access token from its credentials
 * (no API key): the SDK then drops the cached token, and its next request mints a fresh one.
 */
function refreshedToken(client: AnthropicClient, error: unknown): boolean {
  const { credentials, apiKey } = client as { credentials?: unknown; apiKey?: unknown };
  return (
    (error as { status?: unknown } | null)?.status === 401 &&
    typeof credentials === "function" &&
    (apiKey === null || apiKey === undefined)
  );
}

/**
 * `gen_ai.provider.name` of a client: Anthropic's API, or the cloud that serves the Messages API
 * to the Bedrock and Vertex clients (`@anthropic-ai/bedrock-sdk`, `@anthropic-ai/vertex-sdk`),
 * told by their class names.
 */
function genAiProvider(client: AnthropicClient): string {
  switch ((client as { constructor?: { name?: unknown } }).constructor?.name) {
    case "AnthropicBedrock":
      return GEN_AI_PROVIDERS.awsBedrock;
    case "AnthropicVertex":
      return GEN_AI_PROVIDERS.gcpVertexAi;
    default:
      return GEN_AI_PROVIDERS.anthropic;
  }
}

/** The model that answered, as the answer names it. */
function reportResponseModel(ctx: CallContext, model: unknown): void {
  if (typeof model === "string") ctx.reportModel({ responseModel: model });
}

/** One plain attempt on the route selfheal picked. */
async function generateOnce(call: MessagesCall, ctx: CallContext): Promise<unknown> {
  const message = (await send(call, ctx)) as Message | null;
  reportResponseModel(ctx, message?.model);
  reportUsage(ctx, message?.usage);
  return message;
}

/** One streamed attempt on the route selfheal picked: the SDK's stream of events. */
async function streamOnce(
  call: MessagesCall,
  ctx: CallContext,
): Promise<AsyncIterable<AnthropicMessageEvent>> {
  const stream = (await send(call, ctx)) as AsyncIterable<AnthropicMessageEvent>;
  call.opened = stream;
  // anthropicMessageEvents reads the model, the tokens and the end on the way.
  return stream;
}

/** The tokens of an answer (the input's: see messageInputTokens). */
function reportUsage(ctx: CallContext, usage: Usage | null | undefined): void {
  const input = messageInputTokens(usage);
  const output = tokenCount(usage?.output_tokens);
  ctx.reportUsage({
    ...(input !== undefined && { inputTokens: input }),
    ...(output !== undefined && { outputTokens: output }),
  });
}

/** Empty: no text that is not blank, and no tool call (thinking alone is no answer). */
function isEmptyMessage(answer: unknown): boolean {
  const content = (answer as Message | null)?.content;
  if (!Array.isArray(content)) return true;
  return !content.some(
    (block: { type?: string; text?: string }) =>
      block.type === "tool_use" ||
      block.type === "server_tool_use" ||
      (block.type === "text" && (block.text ?? "").trim() !== ""),
  );
}
