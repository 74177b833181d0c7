import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  FailureInjector,
  type FailureInjectorOptions,
  type Injection,
} from "./failure-injector.js";
import { httpFault, STREAM_ONLY_FAULTS, type ApiErrorBody } from "./faults.js";

/** A running fake provider. */
export interface FakeProvider {
  /** Base URL, e.g. `http://127.0.0.1:41234/v1`. */
  readonly url: string;
  readonly port: number;
  /** Decides each request's fault: `provider.injector.inject("rate_limit", { first: 2 })`. */
  readonly injector: FailureInjector;
  /** Requests received on /v1/chat/completions (a body that is not JSON included). */
  readonly requests: number;
  /** Of those, requests whose body asked `"stream": true`. */
  readonly streamed: number;
  /**
   * Streams that went silent in a `stream_stall` (counted once the tokens before the silence
   * were written): a test waits on it before it lets a client's idle limit pass.
   */
  readonly stalled: number;
  /**
   * The parsed JSON body of each request on /v1/chat/completions, in arrival order (refused
   * ones included; a body that is not JSON is not recorded), to assert what a client sent.
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
   * Refuse a request whose last message has role `assistant` with a 400
   * `invalid_request_error`, as providers without assistant prefill do (default false).
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

/** The event `malformed_event` sends: a chunk cut mid-JSON. */
const MALFORMED_EVENT = 'data: {"choices":[{"delta":{"content":\n\n';

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

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

function usage(completionTokens: number) {
  return {
    prompt_tokens: 10,
    completion_tokens: completionTokens,
    total_tokens: 10 + completionTokens,
  };
}

function completion(content: string) {
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 0,
    model: "fake-model",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: usage(tokensOf(content).length),
  };
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function invalidRequest(res: ServerResponse, message: string, param: string | null): void {
  const error: ApiErrorBody = { message, type: "invalid_request_error", code: null, param };
  json(res, 400, { error });
}

/** OpenAI's answer to a body that is not JSON. */
const NOT_JSON =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)";

const PREFILL_REFUSED =
  "Assistant message prefill is not supported: the conversation must end with a user message.";

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

function endsWithAssistant(body: Record<string, unknown>): boolean {
  const messages = body.messages;
  if (!Array.isArray(messages)) return false;
  const last: unknown = messages.at(-1);
  return typeof last === "object" && last !== null && "role" in last && last.role === "assistant";
}

function wantsUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options;
  return (
    typeof options === "object" &&
    options !== null &&
    "include_usage" in options &&
    options.include_usage === true
  );
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

/** One streamed answer: its tokens, the fault that bends it, and how it is paced. */
interface StreamPlan {
  tokens: string[];
  fault: Injection | undefined;
  includeUsage: boolean;
  tokenIntervalMs: number;
  wait: Wait;
  /** The stream went silent (a stall). */
  onStall: () => void;
}

function chunk(delta: Record<string, string>, finishReason: string | null, includeUsage: boolean) {
  return {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 0,
    model: "fake-model",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    // As OpenAI: with include_usage every chunk but the last carries `usage: null`.
    ...(includeUsage ? { usage: null } : {}),
  };
}

/** Streams an answer as OpenAI's SSE, bent by a stream fault if one applies. */
async function streamAnswer(res: ServerResponse, plan: StreamPlan): Promise<void> {
  const { tokens, fault, includeUsage, tokenIntervalMs, wait, onStall } = plan;
  let flushed = Promise.resolve();
  const send = (event: string) => {
    flushed = new Promise((resolve) => {
      res.write(event, () => {
        resolve();
      });
    });
  };
  const data = (payload: unknown) => {
    send(`data: ${JSON.stringify(payload)}\n\n`);
  };

  const kind = fault?.kind;
  const twoThirds = Math.floor((tokens.length * 2) / 3);
  const stopAt =
    kind === "stream_cut" || kind === "stream_stall"
      ? Math.min(fault?.afterTokens ?? twoThirds, tokens.length)
      : -1;
  const malformedAt =
    kind === "malformed_event"
      ? Math.min((fault?.atToken ?? DEFAULTS.malformedAtToken) - 1, tokens.length)
      : -1;

  res.writeHead(200, SSE_HEADERS);
  data(chunk({ role: "assistant", content: "" }, null, includeUsage));
  if (kind === "slow_first_token") {
    if (!(await wait(res, fault?.delayMs ?? DEFAULTS.firstTokenDelayMs))) return;
  }
  // Step i is where token i goes; step tokens.length is where the finish chunk goes.
  for (let i = 0; i <= tokens.length; i++) {
    if (i > 0 && i < tokens.length && tokenIntervalMs > 0) {
      if (!(await wait(res, tokenIntervalMs))) return;
    }
    if (i === stopAt && kind === "stream_cut") {
      await flushed; // what was sent arrives, then the connection dies
      res.socket?.destroy();
      return;
    }
    if (i === stopAt && kind === "stream_stall") {
      await flushed;
      onStall();
      if (!(await wait(res, fault?.silentMs ?? DEFAULTS.stallSilentMs))) return;
    }
    if (i === malformedAt) send(MALFORMED_EVENT);
    const token = tokens[i];
    if (token !== undefined) data(chunk({ content: token }, null, includeUsage));
  }
  data(chunk({}, "stop", includeUsage));
  if (includeUsage)
    data({
      id: "chatcmpl-fake",
      object: "chat.completion.chunk",
      created: 0,
      model: "fake-model",
      choices: [],
      usage: usage(tokens.length),
    });
  if (kind !== "no_done") send("data: [DONE]\n\n");
  res.end();
}

/**
 * An OpenAI-compatible `/v1/chat/completions` server on 127.0.0.1 that serves the injector's
 * faults as real HTTP: 429 with or without Retry-After, 500/502/503, 400 context length and
 * content policy, 401, an empty answer, a body cut mid-JSON, a reset connection, a response
 * that comes too late (`timeout`) or never (`hang`). For integration tests and users' own.
 *
 * A request with `"stream": true` is answered as Server-Sent Events like the OpenAI API: a
 * `chat.completion.chunk` with `delta: { role: "assistant", content: "" }`, one chunk per
 * token of `reply` every `tokenIntervalMs`, a chunk with `finish_reason: "stop"`, a usage chunk
 * (`choices: []`) when `stream_options.include_usage` is set, then `data: [DONE]`. The faults
 * above behave the same for it (an HTTP fault answers with its status before any event, `empty`
 * streams no token, `malformed_json` sends the same cut JSON body); five more exist only in a
 * stream, and a request that is not streamed is answered normally under them:
 * - `slow_first_token`: headers and role chunk at once, the first token after `delayMs` (20 s);
 * - `stream_cut`: the socket is destroyed after `afterTokens` tokens (two thirds): no finish;
 * - `stream_stall`: silent for `silentMs` (30 s) after `afterTokens` tokens, then the rest;
 * - `malformed_event`: an extra event cut mid-JSON before token `atToken` (1), no token lost;
 * - `no_done`: the whole answer and its finish chunk, then the response ends without [DONE].
 *
 * The body is parsed first: one that is not a JSON object gets OpenAI's 400, and with
 * `rejectPrefill` a conversation ending with an assistant message gets a 400
 * `invalid_request_error`; neither asks the injector. `close()` ends every wait and stream.
 */
// Long on purpose: the request's path (parse, refuse, the fault table, answer) read top to bottom.
export async function startFakeProvider(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const tokenIntervalMs = options.tokenIntervalMs ?? DEFAULTS.tokenIntervalMs;
  if (!(tokenIntervalMs >= 0 && tokenIntervalMs < Infinity))
    throw new TypeError("tokenIntervalMs must be a finite number of ms >= 0");
  const injector = new FailureInjector(options);
  const reply = options.reply ?? DEFAULTS.reply;
  const sockets = new Set<Socket>();
  /** Each pending wait's way to end early: close() calls them all. */
  const waits = new Set<() => void>();
  const bodies: Record<string, unknown>[] = [];
  let requests = 0;
  let streamed = 0;
  let stalled = 0;

  const wait = waiter(waits);

  /** Answers one parsed request: validation, then the injector's fault, then the answer. */
  const answer = async (req: IncomingMessage, res: ServerResponse, text: string) => {
    const body = parseBody(text);
    if (!body) {
      invalidRequest(res, NOT_JSON, null);
      return;
    }
    bodies.push(body);
    const isStream = body.stream === true;
    if (isStream) streamed++;
    if (options.rejectPrefill && endsWithAssistant(body)) {
      invalidRequest(res, PREFILL_REFUSED, "messages");
      return;
    }
    const reply200 = async (fault?: Injection) => {
      if (isStream)
        await streamAnswer(res, {
          tokens: fault?.kind === "empty" ? [] : tokensOf(reply),
          fault,
          includeUsage: wantsUsage(body),
          tokenIntervalMs,
          wait,
          onStall: () => {
            stalled++;
          },
        });
      else json(res, 200, completion(fault?.kind === "empty" ? "" : reply));
    };

    const { fault } = injector.next();
    if (!fault || STREAM_ONLY_FAULTS.has(fault.kind)) {
      await reply200(fault);
      return;
    }
    const http = httpFault(fault.kind, fault);
    if (http) {
      json(res, http.status, { error: http.body }, http.headers);
      return;
    }
    switch (fault.kind) {
      case "empty":
        await reply200(fault);
        return;
      case "malformed_json":
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"id":"chatcmpl-fake","choices":[{"message":');
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
    if (req.method !== "POST" || !req.url?.startsWith("/v1/chat/completions")) {
      req.resume();
      json(res, 404, {
        error: {
          message: `no route ${req.method ?? ""} ${req.url ?? ""}`,
          type: "invalid_request_error",
          code: null,
          param: null,
        },
      });
      return;
    }
    requests++;
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("error", () => undefined); // a client that goes away mid-body: nothing to answer
    req.on("end", () => {
      answer(req, res, Buffer.concat(parts).toString("utf8")).catch(() => {
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
    port,
    injector,
    get requests() {
      return requests;
    },
    get streamed() {
      return streamed;
    },
    get stalled() {
      return stalled;
    },
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
