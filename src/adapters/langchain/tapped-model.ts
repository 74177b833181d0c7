import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatGenerationChunk } from "@langchain/core/outputs";
import { LinkedSignal } from "./linked-signal.js";

/** The call options a chat model's `_generate` and `_streamResponseChunks` receive. */
export interface ModelCallOptions {
  signal?: AbortSignal | undefined;
}

type RunManager = CallbackManagerForLLMRun | undefined;

/** Starts the model's own stream with the options and run manager given. */
export type StreamOpener = (
  options: ModelCallOptions,
  runManager: RunManager,
) => AsyncIterable<ChatGenerationChunk>;

/** What an attempt does with the requests and streams of the model it calls. */
export interface ModelTap {
  /** The attempt's signal: every request of the model follows it. */
  readonly signal: AbortSignal;
  /**
   * Reads one stream of the model and hands LangChain the chunks it may have, when it may.
   * `asEvents`: LangChain turns what is yielded into stream events as it comes (stream v3).
   */
  stream(
    open: StreamOpener,
    options: ModelCallOptions,
    runManager: RunManager,
    asEvents: boolean,
  ): AsyncGenerator<ChatGenerationChunk>;
}

/** Marks the options of a stream LangChain reads as events (`_streamChatModelEvents`). */
const AS_EVENTS = Symbol("selfheal:langchain:as-events");

type Method = (this: unknown, ...args: unknown[]) => unknown;
type Fields = Record<string | symbol, unknown>;

const isObject = (value: unknown): value is Fields => typeof value === "object" && value !== null;
const method = (value: unknown): Method | undefined =>
  typeof value === "function" ? (value as Method) : undefined;

/**
 * `target` seen through a Proxy with `members` in place of its own: everything else is read from
 * it, and what its methods write lands on it (a model's counters and caches stay the model's).
 */
function overlay(target: Fields, members: Fields): Fields {
  return new Proxy(target, {
    get: (t, key, receiver) =>
      Object.prototype.hasOwnProperty.call(members, key)
        ? members[key]
        : Reflect.get(t, key, receiver),
  });
}

/**
 * The model an attempt hands LangChain: the same model underneath (its prototype, fields, name),
 * with its stream read through `tap` and its requests joined to the attempt's signal. LangChain
 * runs a chat model's `_streamResponseChunks` whenever the call streams (a streaming callback
 * handler, such as the one of streamMode `messages`, or the model's own `streaming` flag): that
 * is where the tap sits. Handled: a chat model, a binding of one (`bindTools`, `withConfig`),
 * and `initChatModel`'s configurable model; anything else is called as it is.
 */
export function tappedModel<M>(model: M, tap: ModelTap): M {
  if (!isObject(model)) return model;
  if (method(model._getModelInstance)) return tappedConfigurable(model, tap) as M;
  if (method(model._streamResponseChunks) && method(model._generate))
    return tappedChatModel(model, tap) as M;
  if (isObject(model.bound)) return tappedBinding(model, tap) as M;
  return model;
}

function tappedChatModel(model: Fields, tap: ModelTap): Fields {
  const members: Fields = {};
  const proxy = overlay(model, members);
  const stream = method(model._streamResponseChunks);
  // LangChain streams only a model that implements streaming: one that does not keeps the
  // base class's method, so that LangChain calls `_generate` instead.
  if (stream && stream !== (BaseChatModel.prototype._streamResponseChunks as unknown)) {
    members._streamResponseChunks = (
      messages: unknown,
      options: ModelCallOptions & { [AS_EVENTS]?: true },
      runManager: RunManager,
    ) => {
      const { [AS_EVENTS]: asEvents, ...own } = options;
      return tap.stream(
        // The model's own method on the model itself: its fields, private ones included.
        (opts, manager) =>
          stream.call(model, messages, opts, manager) as AsyncIterable<ChatGenerationChunk>,
        own,
        runManager,
        asEvents === true,
      );
    };
    // LangChain's bridge from chunks to stream events (v3) calls `_streamResponseChunks` with
    // no run manager and emits what it yields: the stream is marked so. A model with its own
    // events method streams past the tap (its calls are healed as whole calls).
    const events = method(model._streamChatModelEvents);
    if (events && events === (BaseChatModel.prototype._streamChatModelEvents as unknown)) {
      members._streamChatModelEvents = function (
        this: unknown,
        messages: unknown,
        options: ModelCallOptions,
        runManager: RunManager,
      ) {
        return events.call(this, messages, { ...options, [AS_EVENTS]: true }, runManager);
      };
    }
  }
  const generate = method(model._generate);
  if (generate) {
    // Called on the proxy: a model that streams inside `_generate` reaches the tap.
    members._generate = async function (
      this: unknown,
      messages: unknown,
      options: ModelCallOptions | undefined,
      runManager: RunManager,
    ) {
      const link = new LinkedSignal(options?.signal, tap.signal);
      try {
        return await generate.call(this, messages, { ...options, signal: link.signal }, runManager);
      } finally {
        link.release();
      }
    };
  }
  rebinds(members, proxy, model, tap, ["bindTools"]);
  return proxy;
}

/** `initChatModel`'s model: the instance it makes (per config) is the one tapped. */
function tappedConfigurable(model: Fields, tap: ModelTap): Fields {
  const members: Fields = {};
  const proxy = overlay(model, members);
  const instance = method(model._getModelInstance) as Method;
  members._getModelInstance = async function (this: unknown, config: unknown) {
    return tappedModel(await instance.call(this, config), tap);
  };
  rebinds(members, proxy, model, tap, ["bindTools", "withConfig"]);
  return proxy;
}

/** A binding (`bindTools`, `withConfig`): the same binding of the tapped model. */
function tappedBinding(binding: Fields, tap: ModelTap): Fields {
  return overlay(binding, { bound: tappedModel(binding.bound, tap) });
}

/** Methods that return another model (a binding, a new instance): what they return is tapped too. */
function rebinds(
  members: Fields,
  proxy: Fields,
  model: Fields,
  tap: ModelTap,
  names: readonly string[],
): void {
  for (const name of names) {
    const original = method(model[name]);
    if (!original) continue;
    members[name] = function (this: unknown, ...args: unknown[]) {
      const result = original.apply(this, args);
      // Bound to the proxy already (`this.withConfig(...)` on it): nothing to do.
      if (result === proxy || (isObject(result) && result.bound === proxy)) return result;
      return tappedModel(result, tap);
    };
  }
}
