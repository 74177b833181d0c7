/**
 * What the Stainless-generated SDKs (`openai`, `@anthropic-ai/sdk`) share, for their healed
 * clients: per-request options (`maxRetries`, `signal`), the `APIPromise` a method returns
 * (`.withResponse()`), and the `Stream` class of a streamed answer (`controller`, `tee()`,
 * `toReadableStream()`). Read by shape: no SDK is imported.
 */
import type { CallContext, HealedStream, StreamRestart } from "../index.js";
import {
  callOptions,
  openStream,
  type ClientCall,
  type ClientHealing,
  type ClientOperation,
} from "./heal-client.js";

/** The per-request options of a Stainless SDK method, as far as selfheal sets them. */
export interface StainlessRequestOptions {
  maxRetries?: number;
  signal?: AbortSignal | null;
}

/**
 * One attempt's request options: the caller's, with the SDK's own retries off (selfheal retries,
 * honouring Retry-After: the two would multiply) and selfheal's signal (aborted by a timeout, a
 * stalled stream, the deadline or the caller's own signal).
 */
export function attemptOptions<O>(options: O | undefined, ctx: CallContext): O {
  return { ...options, maxRetries: 0, signal: ctx.signal } as O;
}

/** What selfheal reads of an `APIPromise`: `withResponse()`, lazily, on the answering attempt's. */
interface APIPromiseLike {
  withResponse(): Promise<{ response: Response; request_id: string | null }>;
}

/** The Stainless extras of a healed call's promise. */
export interface HealedAPIPromise<T> extends Promise<T> {
  /** The answer, with the answering attempt's HTTP response and request id. */
  withResponse(): Promise<{ data: T; response: Response; request_id: string | null }>;
  /** Not healed: the body is read to judge the answer. Use `withResponse()`. */
  asResponse(): Promise<Response>;
}

/** Sends one attempt's request: the call keeps what the SDK returned (the answering one last). */
export function sent<T>(call: ClientCall<unknown, unknown>, request: T): T {
  call.sent = request;
  return request;
}

/**
 * The SDK's own error for a request its caller aborted: `APIUserAbortError`, a static of every
 * Stainless client class (openai, @anthropic-ai/sdk), made from the client's class.
 */
function userAbortError(client: unknown): Error | undefined {
  const SdkClass = (client as { constructor?: { APIUserAbortError?: unknown } } | null)
    ?.constructor;
  const AbortClass = SdkClass?.APIUserAbortError;
  return typeof AbortClass === "function" ? new (AbortClass as new () => Error)() : undefined;
}

/**
 * What the caller sees when its own signal ended the call: the SDK's APIUserAbortError, as from
 * the unhealed client (selfheal ends the call with the signal's reason); other errors as they are.
 */
function asCallerAbort(
  error: unknown,
  signal: AbortSignal | null | undefined,
  call: ClientCall<unknown, unknown>,
): unknown {
  if (!signal?.aborted) return error;
  return userAbortError(call.route(undefined).client) ?? error;
}

/**
 * The healed call's promise with `withResponse()` of the attempt that answered; when the caller
 * aborts with its `signal`, it rejects with the SDK's APIUserAbortError.
 */
export function healedAPIPromise<T>(
  result: Promise<T>,
  call: ClientCall<unknown, unknown>,
): HealedAPIPromise<T> {
  const signal = (call.options as StainlessRequestOptions | undefined)?.signal;
  const answer = signal
    ? result.catch((error: unknown) => {
        throw asCallerAbort(error, signal, call);
      })
    : result;
  return Object.assign(answer, {
    withResponse: async () => {
      const data = await answer;
      const sdk = call.sent as Partial<APIPromiseLike> | undefined;
      if (typeof sdk?.withResponse !== "function") {
        throw new TypeError("selfheal: withResponse(): the SDK's answer has no HTTP response");
      }
      // The SDK keeps the parsed answer: nothing is read or sent again.
      const { response, request_id } = await sdk.withResponse();
      return { data, response, request_id };
    },
    asResponse: () =>
      Promise.reject(
        new TypeError(
          "selfheal: asResponse() is not healed (selfheal reads the body to judge the answer); use withResponse()",
        ),
      ),
  });
}

/**
 * The healed stream as the SDK's own `Stream` (the class of the answering attempt's stream: the
 * constructor `(iterator, controller)` of every Stainless SDK), so `controller`, `tee()` and
 * `toReadableStream()` work as on an unhealed client; iterating it reads the healed stream once.
 * As the SDK's, a stream its caller aborted (`controller.abort()`, the request's `signal`) ends
 * without an error.
 */
export async function healedSdkStream<Chunk>(
  healed: HealedStream<Chunk | StreamRestart>,
  call: ClientCall<unknown, unknown>,
  controller: AbortController,
  onRestart: ((restart: StreamRestart) => void) | undefined,
): Promise<AsyncIterable<Chunk>> {
  const ended = (error: unknown): IteratorResult<Chunk> => {
    if (controller.signal.aborted) return { done: true, value: undefined };
    throw error;
  };
  const iterator = await openStream(healed, onRestart, ended);
  let consumed = false;
  const iterate = (): AsyncIterator<Chunk> => {
    if (consumed) {
      throw new TypeError(
        "selfheal: cannot iterate over a consumed stream, use `.tee()` to split the stream",
      );
    }
    consumed = true;
    return iterator;
  };
  const SdkStream = (call.opened as { constructor?: unknown } | undefined)?.constructor;
  if (typeof SdkStream === "function" && SdkStream !== Object) {
    type StreamClass = new (
      iterate: () => AsyncIterator<Chunk>,
      controller: AbortController,
    ) => AsyncIterable<Chunk>;
    return new (SdkStream as StreamClass)(iterate, controller);
  }
  return {
    controller,
    [Symbol.asyncIterator]: iterate,
  } as AsyncIterable<Chunk>;
}

/**
 * A controller for the healed stream, aborted by the caller's own signal too: `stream.controller
 * .abort()` and the caller's signal both end the call, recovery included. Call `unlink` once the
 * stream ended: the caller's signal forwards no more.
 */
export function linkedController(signal: AbortSignal | null | undefined): {
  controller: AbortController;
  unlink: () => void;
} {
  const controller = new AbortController();
  if (!signal) return { controller, unlink: () => undefined };
  if (signal.aborted) {
    controller.abort(signal.reason);
    return { controller, unlink: () => undefined };
  }
  const forward = () => {
    controller.abort(signal.reason);
  };
  signal.addEventListener("abort", forward, { once: true });
  return {
    controller,
    unlink: () => {
      signal.removeEventListener("abort", forward);
    },
  };
}

/** What a Stainless `create` reads of its body: the model, and whether it streams. */
export interface StainlessParams {
  model?: unknown;
  stream?: unknown;
}

/**
 * A Stainless SDK's `create`, healed: a plain request through the operation's `sh.tool`, a
 * `stream: true` one through its `sh.stream`, given back as the SDK's own Stream once its first
 * token came (a failure before it rejects, as the SDK's request would), its `controller` and the
 * caller's signal ending the call.
 */
export function healedCreate<R, P extends StainlessParams>(
  healing: ClientHealing<R>,
  op: ClientOperation<ClientCall<R, P | undefined, StainlessRequestOptions>, unknown, unknown>,
): (params: P | undefined, requestOptions?: StainlessRequestOptions) => HealedAPIPromise<unknown> {
  const { onRestart } = healing.options;
  return (params, requestOptions) => {
    const call = healing.call<P | undefined, StainlessRequestOptions>(params, requestOptions);
    const signal = requestOptions?.signal;
    if (params?.stream !== true) {
      return healedAPIPromise(
        op.generate(call, callOptions(op.operation, params?.model, signal)),
        call as ClientCall<unknown, unknown>,
      );
    }
    const { controller, unlink } = linkedController(signal);
    const stream = op.stream(call, callOptions(op.operation, params.model, controller.signal));
    void stream.result.then(unlink, unlink);
    return healedAPIPromise(
      healedSdkStream(stream, call as ClientCall<unknown, unknown>, controller, onRestart),
      call as ClientCall<unknown, unknown>,
    );
  };
}
