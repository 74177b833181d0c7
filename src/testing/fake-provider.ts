import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  FailureInjector,
  type FailureInjectorOptions,
  type Injection,
} from "./failure-injector.js";
import { STREAM_ONLY_FAULTS } from "./faults.js";
import {
  routeOf,
  WIRE_APIS,
  type Answer,
  type StreamEvents,
  type WireApiName,
} from "./wire/index.js";
import { jsonReply, SSE_HEADERS, type WireReply } from "./wire/types.js";

/** A running fake provider. */
export interface FakeProvider {
  /** OpenAI's base URL (Chat Completions, Responses), e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string;
  /**
   * The server's origin, e.g. `http://127.0.0.1:41234`: the base URL of Anthropic's and Google's
   * clients, which add `/v1/messages` and `/v1beta/models/…` themselves.
   */
  readonly origin: string;
  readonly port: number;
  /** Decides each request's fault: `provider.injector.inject("rate_limit", { first: 2 })`. */
  readonly injector: FailureInjector;
  /** Requests received on any API's path (a body that is not JSON included). */
  readonly requests: number;
  /** Of those, requests that asked for a stream. */
  readonly streamed: number;
  /**
   * Streams that went silent in a `stream_stall` (counted once the tokens before the silence
   * were written): a test waits on it before it lets a client's idle limit pass.
   */
  readonly stalled: number;
  /** The same three counts for each API. */
  readonly byApi: Readonly<Record<WireApiName, ApiCounts>>;
  /**
   * The parsed JSON body of each request, every API's, in arrival order (refused ones
   * included; a body that is not JSON is not recorded), to assert what a client sent.
   */
  readonly bodies: readonly Record<string, unknown>[];
  /** Stops listening, ends pending waits and drops open connections (streaming ones included). */
  close(): Promise<void>;
}

export interface FakeProviderOptions extends FailureInjectorOptions {
  /**
   * The answer of a request without a fault (default "Hello from the fake provider."). A stream
   * sends it split into words, one token per word with the whitespace before it (" from"), so
   * the tokens joined give back `reply` exactly; usage counts these tokens.
   */
  reply?: string;
  /** Gap between two token events of a stream, ms (default 5). */
  tokenIntervalMs?: number;
  /**
   * Refuse a request whose conversation ends with the model's turn (role `assistant`, Gemini's
   * `model`) with the API's 400, as models without assistant prefill do (default false).
   */
  rejectPrefill?: boolean;
  /** Defaults to 0: a free port. */
  port?: number;
}

/** Defaults of the fake provider's options and of its faults' timings. */
const DEFAULTS = {
  reply: "Hello from the fake provider.",
  tokenIntervalMs: 5,
  /** `timeout` without `delayMs`: longer than any sane client timeout. */
  timeoutDelayMs: 600_000,
  /** `slow_first_token` without `delayMs`. */
  firstTokenDelayMs: 20_000,
  /** `stream_stall` without `silentMs`. */
  stallSilentMs: 30_000,
  /** `malformed_event` without `atToken`. */
  malformedAtToken: 1,
} as const;

/** `reply` as stream tokens: each word with the whitespace before it (trailing space kept). */
function tokensOf(reply: string): string[] {
  const tokens: string[] = [];
  let space = "";
  // Runs of whitespace and of the rest, each matched once (linear on any reply).
  for (const run of reply.match(/\s+|\S+/g) ?? []) {
    if (/\s/.test(run.charAt(0))) space = run;
    else {
      tokens.push(space + run);
      space = "";
    }
  }
  // Trailing whitespace stays on the last word (or is the one token of a blank reply).
  if (space) tokens.push((tokens.pop() ?? "") + space);
  return tokens;
}

function send(res: ServerResponse, reply: WireReply, headers: Record<string, string>): void {
  res.writeHead(reply.status, { ...headers, ...reply.headers });
  res.end(reply.body);
}

/** The 404 of a path no API answers, in OpenAI's error shape. */
function noRoute(req: IncomingMessage): WireReply {
  const message = `no route ${req.method ?? ""} ${req.url ?? ""}`;
  return jsonReply(404, {
    error: { message, type: "invalid_request_error", code: null, param: null },
  });
}

function parseBody(text: string): Record<string, unknown> | undefined {
  try {
    const body: unknown = JSON.parse(text);
    return typeof body === "object" && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Waits `ms` unless the response closes first (client gone, close()); true if it waited. */
type Wait = (res: ServerResponse, ms: number) => Promise<boolean>;

/** A `Wait` whose pending waits are in `waits`: calling one ends that wait early. */
function waiter(waits: Set<() => void>): Wait {
  return (res, ms) => {
    if (res.destroyed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const end = (waited: boolean) => {
        clearTimeout(timer);
        waits.delete(cancel);
        res.off("close", cancel);
        resolve(waited);
      };
      const cancel = () => {
        end(false);
      };
      // Node fires a timer past 2^31-1 ms at once: a longer wait is cut to that.
      const timer = setTimeout(
        () => {
          end(true);
        },
        Math.min(ms, 2 ** 31 - 1),
      );
      waits.add(cancel);
      res.once("close", cancel);
    });
  };
}

/** One streamed answer: its events, the fault that bends it, and how it is paced. */
interface StreamPlan {
  events: StreamEvents;
  tokens: readonly string[];
  fault: Injection | undefined;
  headers: Record<string, string>;
  tokenIntervalMs: number;
  wait: Wait;
  /** The stream went silent (a stall). */
  onStall: () => void;
}

/** Streams an answer as its API's SSE, bent by a stream fault if one applies. */
async function streamAnswer(res: ServerResponse, plan: StreamPlan): Promise<void> {
  const { events, tokens, fault, tokenIntervalMs, wait, onStall } = plan;
  let flushed = Promise.resolve();
  const send = (...texts: string[]) => {
    for (const text of texts)
      flushed = new Promise((resolve) => {
        res.write(text, () => {
          resolve();
        });
      });
  };

  const kind = fault?.kind;
  const twoThirds = Math.floor((tokens.length * 2) / 3);
  const stopAt =
    kind === "stream_cut" || kind === "stream_stall" || kind === "stream_error"
      ? Math.min(fault?.afterTokens ?? twoThirds, tokens.length)
      : -1;
  const malformedAt =
    kind === "malformed_event"
      ? Math.min((fault?.atToken ?? DEFAULTS.malformedAtToken) - 1, tokens.length)
      : -1;

  res.writeHead(200, { ...plan.headers, ...SSE_HEADERS });
  // Headers go out now even where the API has no event before the first token (Gemini).
  res.flushHeaders();
  send(...events.head());
  if (kind === "slow_first_token") {
    if (!(await wait(res, fault?.delayMs ?? DEFAULTS.firstTokenDelayMs))) return;
  }
  // Step i is where token i goes; step tokens.length is where the finish goes.
  for (let i = 0; i <= tokens.length; i++) {
    if (i > 0 && i < tokens.length && tokenIntervalMs > 0) {
      if (!(await wait(res, tokenIntervalMs))) return;
    }
    if (i === stopAt && kind === "stream_cut") {
      await flushed; // what was sent arrives, then the connection dies
      res.socket?.destroy();
      return;
    }
    if (i === stopAt && kind === "stream_error") {
      send(events.error(fault?.message));
      res.end();
      return;
    }
    if (i === stopAt && kind === "stream_stall") {
      await flushed;
      onStall();
      if (!(await wait(res, fault?.silentMs ?? DEFAULTS.stallSilentMs))) return;
    }
    if (i === malformedAt) send(events.malformed());
    const token = tokens[i];
    if (token !== undefined) send(events.token(token, i));
  }
  send(...events.finish());
  if (kind !== "no_done") send(...events.done());
  res.end();
}

/** Requests an API received on this server, and how many streamed or stalled. */
export interface ApiCounts {
  readonly requests: number;
  readonly streamed: number;
  readonly stalled: number;
}

/**
 * A fake provider on 127.0.0.1 speaking the wire formats of OpenAI Chat Completions
 * (`POST /v1/chat/completions`), OpenAI Responses (`POST /v1/responses`), Anthropic Messages
 * (`POST /v1/messages`) and Gemini (`POST /v1beta/models/{model}:generateContent` and
 * `:streamGenerateContent?alt=sse`), chosen by the path (one module each, src/testing/wire/),
 * and serving the injector's faults as real HTTP in each API's shapes: 429 with or without
 * Retry-After, 500/502/503, overloaded (Anthropic's 529), 400 context length and content
 * policy, auth, an empty answer, a truncated one (`finish_length`), a body cut mid-JSON, a reset
 * connection, a response that comes too late (`timeout`) or never (`hang`). For integration
 * tests and users' own; docs/testing.md has each API's answers.
 *
 * A streamed request (`"stream": true`, or Gemini's `:streamGenerateContent`) is answered as its
 * API's Server-Sent Events: what comes before the first token (Chat's role chunk, Responses'
 * `response.created` … `response.content_part.added`, Anthropic's `message_start`,
 * `content_block_start` and `ping`), one event per token of `reply` every `tokenIntervalMs`,
 * the finish (finish reason, usage), then what completes the stream (`data: [DONE]`,
 * `response.completed`, `message_stop`, Gemini's chunk with its `finishReason`). The faults
 * above behave the same for it (an HTTP fault answers with its status before any event, `empty`
 * streams no token, `malformed_json` sends the same cut JSON body); six more exist only in a
 * stream, and a request that is not streamed is answered normally under them:
 * - `slow_first_token`: headers and the events before the first token at once, the first token
 *   after `delayMs` (20 s);
 * - `stream_cut`: the socket is destroyed after `afterTokens` tokens (two thirds): no finish;
 * - `stream_stall`: silent for `silentMs` (30 s) after `afterTokens` tokens, then the rest;
 * - `malformed_event`: an extra event cut mid-JSON before token `atToken` (1), no token lost;
 * - `no_done`: the whole answer and its finish, without what completes the stream;
 * - `stream_error`: the API's error event (an overload) after `afterTokens` tokens (two
 *   thirds), then the response ends.
 *
 * The body is parsed first: one that is not a JSON object gets the API's 400, and with
 * `rejectPrefill` a conversation ending with the model's turn gets a 400; neither asks the
 * injector. `close()` ends every wait and stream.
 */
// Long on purpose: the request's path (parse, refuse, the fault table, answer) read top to bottom.
export async function startFakeProvider(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const tokenIntervalMs = options.tokenIntervalMs ?? DEFAULTS.tokenIntervalMs;
  if (!(tokenIntervalMs >= 0 && tokenIntervalMs < Infinity))
    throw new TypeError("tokenIntervalMs must be a finite number of ms >= 0");
  const injector = new FailureInjector(options);
  const replyTokens = tokensOf(options.reply ?? DEFAULTS.reply);
  const sockets = new Set<Socket>();
  /** Each pending wait's way to end early: close() calls them all. */
  const waits = new Set<() => void>();
  const bodies: Record<string, unknown>[] = [];
  const counts = { requests: 0, streamed: 0, stalled: 0 };
  const byApi = Object.fromEntries(
    WIRE_APIS.map((api) => [api.name, { requests: 0, streamed: 0, stalled: 0 }]),
  ) as Record<WireApiName, { requests: number; streamed: number; stalled: number }>;

  const wait = waiter(waits);

  /** Answers one parsed request: validation, then the injector's fault, then the answer. */
  const answer = async (
    req: IncomingMessage,
    res: ServerResponse,
    { api, match }: NonNullable<ReturnType<typeof routeOf>>,
    n: number,
    text: string,
  ) => {
    const headers = api.headers(n);
    const apiCounts = byApi[api.name];
    const body = parseBody(text);
    if (!body) {
      send(res, api.notJson(n), headers);
      return;
    }
    bodies.push(body);
    const isStream = match.stream ?? body.stream === true;
    if (isStream) {
      counts.streamed++;
      apiCounts.streamed++;
    }
    if (options.rejectPrefill && api.endsWithAssistant(body)) {
      send(res, api.prefillRefused(n), headers);
      return;
    }
    const model = match.model ?? (typeof body.model === "string" ? body.model : "fake-model");
    const reply200 = async (fault?: Injection) => {
      const kind = fault?.kind;
      const cut = Math.min(
        fault?.afterTokens ?? Math.floor((replyTokens.length * 2) / 3),
        replyTokens.length,
      );
      const tokens =
        kind === "empty" ? [] : kind === "finish_length" ? replyTokens.slice(0, cut) : replyTokens;
      const said: Answer = { model, tokens, truncated: kind === "finish_length", n, body };
      if (isStream)
        await streamAnswer(res, {
          events: api.stream(said),
          tokens,
          fault,
          headers,
          tokenIntervalMs,
          wait,
          onStall: () => {
            counts.stalled++;
            apiCounts.stalled++;
          },
        });
      else send(res, jsonReply(200, api.body(said)), headers);
    };

    const { fault } = injector.next();
    if (!fault || STREAM_ONLY_FAULTS.has(fault.kind)) {
      await reply200(fault);
      return;
    }
    const refusal = api.fault(fault.kind, fault, isStream, n);
    if (refusal) {
      send(res, refusal, headers);
      return;
    }
    switch (fault.kind) {
      case "empty":
      case "finish_length":
        await reply200(fault);
        return;
      case "malformed_json":
        send(
          res,
          { status: 200, headers: { "content-type": "application/json" }, body: api.cutBody },
          headers,
        );
        return;
      case "connection_reset":
        req.socket.destroy();
        return;
      case "timeout":
        if (await wait(res, fault.delayMs ?? DEFAULTS.timeoutDelayMs)) await reply200();
        return;
      default:
        // hang: never answer; close() drops the connection.
        return;
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const route = req.method === "POST" ? routeOf((req.url ?? "").split("?")[0] ?? "") : undefined;
    if (!route) {
      req.resume();
      send(res, noRoute(req), {});
      return;
    }
    const n = ++counts.requests;
    byApi[route.api.name].requests++;
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("error", () => undefined); // a client that goes away mid-body: nothing to answer
    req.on("end", () => {
      answer(req, res, route, n, Buffer.concat(parts).toString("utf8")).catch(() => {
        res.destroy();
      });
    });
  };

  const server = createServer(handle);
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    port,
    injector,
    get requests() {
      return counts.requests;
    },
    get streamed() {
      return counts.streamed;
    },
    get stalled() {
      return counts.stalled;
    },
    byApi,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        for (const cancel of [...waits]) cancel();
        for (const socket of sockets) socket.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}
