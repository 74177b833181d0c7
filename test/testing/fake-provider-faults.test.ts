import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  FAULT_KINDS,
  VirtualClock,
  seededRandom,
  startFakeProvider,
  type FakeProvider,
  type FakeProviderOptions,
  type FaultKind,
} from "../../src/testing/index.js";
import { turns, until } from "./settle.js";

const REPLY = "Hello from the fake provider.";
const USER = [{ role: "user", content: "hi" }];
const NOT_JSON =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)";

const providers: FakeProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const p = await startFakeProvider({ tokenIntervalMs: 0, ...options });
  providers.push(p);
  return p;
}

function post(p: FakeProvider, body: unknown, path = "/chat/completions"): Promise<Response> {
  return fetch(`${p.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const chat = (p: FakeProvider, extra: Record<string, unknown> = {}) =>
  post(p, { model: "fake-model", messages: USER, ...extra });

/** Reads a body as raw text as it arrives: `seen.text` grows; `ended` tells how it ended. */
function collect(res: Response) {
  const seen = { text: "" };
  const ended = (async (): Promise<{ error?: unknown }> => {
    if (!res.body) throw new Error("no body");
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const part = await reader.read();
        if (part.done) return {};
        seen.text += decoder.decode(part.value as Uint8Array, { stream: true });
      }
    } catch (error) {
      return { error };
    }
  })();
  return { seen, ended };
}

/** The `data:` payloads of an SSE text, in order. */
function dataOf(text: string): string[] {
  return text
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => block.slice("data: ".length));
}

/** The content tokens of an SSE text. */
function tokensOf(text: string): string[] {
  return dataOf(text).flatMap((data) => {
    if (data === "[DONE]") return [];
    try {
      const chunk = JSON.parse(data) as { choices: { delta: { content?: string } }[] };
      return chunk.choices.flatMap((c) => (c.delta.content ? [c.delta.content] : []));
    } catch {
      return [];
    }
  });
}

const CHUNK_HEAD =
  '{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":0,"model":"fake-model"';

const HTTP_FAULTS = [
  [
    "rate_limit",
    429,
    {
      message:
        "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500. Please try again later.",
      type: "requests",
      code: "rate_limit_exceeded",
      param: null,
    },
  ],
  [
    "http_500",
    500,
    {
      message: "The server had an error while processing your request.",
      type: "server_error",
      code: null,
      param: null,
    },
  ],
  ["http_502", 502, { message: "Bad gateway.", type: "server_error", code: null, param: null }],
  [
    "http_503",
    503,
    {
      message: "The server is overloaded or not ready yet.",
      type: "server_error",
      code: null,
      param: null,
    },
  ],
  [
    "overloaded",
    503,
    {
      message: "The engine is currently overloaded, please try again later.",
      type: "server_error",
      code: null,
      param: null,
    },
  ],
  [
    "context_length",
    400,
    {
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
      type: "invalid_request_error",
      code: "context_length_exceeded",
      param: null,
    },
  ],
  [
    "content_policy",
    400,
    {
      message: "Your request was rejected as a result of our safety system.",
      type: "invalid_request_error",
      code: "content_policy_violation",
      param: null,
    },
  ],
  [
    "auth",
    401,
    {
      message:
        "Incorrect API key provided: sk-abc12*****. You can find your API key at your dashboard.",
      type: "invalid_request_error",
      code: "invalid_api_key",
      param: null,
    },
  ],
] as const;

describe("fake provider: the server", () => {
  it("listens on 127.0.0.1 on a free port and gives its /v1 base URL", async () => {
    const p = await start();
    expect(p.port).toBeGreaterThan(0);
    expect(p.url).toBe(`http://127.0.0.1:${p.port}/v1`);
    expect(p.requests).toBe(0);
    expect(p.streamed).toBe(0);
    expect(p.stalled).toBe(0);
    expect(p.bodies).toEqual([]);
  });

  it("listens on 127.0.0.1 only: another loopback address is refused", async () => {
    const p = await start();
    const outcome = await new Promise<string>((resolve) => {
      const socket = connect(p.port, "127.0.0.2");
      socket.on("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.on("error", (error: NodeJS.ErrnoException) => {
        resolve(error.code ?? "error");
      });
    });
    expect(outcome).not.toBe("connected");
  });

  it("listens on the port asked, and refuses to start on one already taken", async () => {
    const p = await start();
    await expect(startFakeProvider({ port: p.port })).rejects.toMatchObject({
      code: "EADDRINUSE",
    });
  });

  it("close() stops listening", async () => {
    const p = await startFakeProvider();
    const { url } = p;
    await p.close();
    await expect(
      fetch(`${url}/chat/completions`, { method: "POST", body: "{}" }),
    ).rejects.toThrow();
  });

  it.each([
    ["GET", "/v1/chat/completions"],
    ["POST", "/v1/models"],
    ["POST", "/v1/chat"],
    ["PUT", "/v1/chat/completions"],
    ["POST", "/chat/completions"],
  ])("%s %s is a 404 in OpenAI's error shape, not counted", async (method, path) => {
    const p = await start();
    p.injector.inject("http_503", { first: 1 });
    const res = await fetch(`http://127.0.0.1:${p.port}${path}`, {
      method,
      ...(method === "GET" ? {} : { body: JSON.stringify({ messages: USER }) }),
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      error: {
        message: `no route ${method} ${path}`,
        type: "invalid_request_error",
        code: null,
        param: null,
      },
    });
    expect(p.requests).toBe(0);
    expect(p.bodies).toEqual([]);
    expect(p.injector.calls).toBe(0);
  });

  it("answers /v1/chat/completions with a query string", async () => {
    const p = await start();
    const res = await post(p, { messages: USER }, "/chat/completions?api-version=2024-10-21");
    expect(res.status).toBe(200);
    expect(p.requests).toBe(1);
  });
});

describe("fake provider: an answer without a fault", () => {
  it("is a chat.completion with the reply and its usage", async () => {
    const p = await start();
    const res = await chat(p);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 0,
      model: "fake-model",
      choices: [
        { index: 0, message: { role: "assistant", content: REPLY }, finish_reason: "stop" },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });

  it.each([
    ["", "", 0],
    ["   ", "   ", 1],
    ["one", "one", 1],
    ["a b  c\n", "a b  c\n", 3],
  ])("reply %j: content %j, %i completion tokens", async (reply, content, tokens) => {
    const p = await start({ reply });
    const body = (await (await chat(p)).json()) as {
      choices: { message: { content: string } }[];
      usage: unknown;
    };
    expect(body.choices[0]?.message.content).toBe(content);
    expect(body.usage).toEqual({
      prompt_tokens: 10,
      completion_tokens: tokens,
      total_tokens: 10 + tokens,
    });
  });

  it.each([
    ["an empty object", "{}"],
    ["a body without messages", '{"model":"m"}'],
  ])("answers %s, and records it", async (_name, text) => {
    const p = await start();
    const res = await post(p, text);
    expect(res.status).toBe(200);
    expect(p.bodies).toEqual([JSON.parse(text)]);
    expect(p.injector.calls).toBe(1);
  });
});

describe("fake provider: bodies it refuses", () => {
  it.each([
    ["an array", "[]"],
    ["null", "null"],
    ["a number", "5"],
    ["a string", '"hello"'],
    ["true", "true"],
    ["nothing", ""],
    ["cut JSON", '{"messages": ['],
  ])("%s gets OpenAI's 400 for a body that is not JSON", async (_name, text) => {
    const p = await start();
    const res = await post(p, text);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      error: { message: NOT_JSON, type: "invalid_request_error", code: null, param: null },
    });
    expect(p.requests).toBe(1);
    expect(p.streamed).toBe(0);
    expect(p.bodies).toEqual([]);
    expect(p.injector.calls).toBe(0);
  });

  it("rejectPrefill looks at the last message only, however long the conversation", async () => {
    const p = await start({ rejectPrefill: true });
    const messages = [...USER, ...USER, { role: "assistant", content: "Sure" }];
    expect((await post(p, { messages })).status).toBe(400);
  });

  it("a refused prefill still counts as streamed when it asked for a stream", async () => {
    const p = await start({ rejectPrefill: true });
    const res = await chat(p, {
      messages: [...USER, { role: "assistant", content: "Sure" }],
      stream: true,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message:
          "Assistant message prefill is not supported: the conversation must end with a user message.",
        type: "invalid_request_error",
        code: null,
        param: "messages",
      },
    });
    expect(p.streamed).toBe(1);
    expect(p.requests).toBe(1);
  });

  it.each([
    ["messages is not an array", { messages: "assistant" }],
    ["no messages", {}],
    ["messages is empty", { messages: [] }],
    ["the last message is null", { messages: [{ role: "assistant" }, null] }],
    ["the last message is a string", { messages: ["assistant"] }],
    ["the last message has no role", { messages: [{ content: "x" }] }],
    ["the last message is the user's", { messages: [{ role: "assistant" }, ...USER] }],
    [
      "only an earlier message is the assistant's",
      { messages: [...USER, { role: "assistant", content: "Sure" }, ...USER] },
    ],
    ["the last message is a tool's", { messages: [{ role: "tool", content: "42" }] }],
  ])("rejectPrefill answers when %s", async (_name, body) => {
    const p = await start({ rejectPrefill: true });
    const res = await post(p, body);
    expect(res.status).toBe(200);
    expect(p.injector.calls).toBe(1);
  });
});

describe("fake provider: HTTP faults", () => {
  it.each(HTTP_FAULTS)(
    "%s answers %i with its exact error body, then the next request is answered",
    async (kind, status, error) => {
      const p = await start();
      p.injector.inject(kind, { first: 1 });
      const res = await chat(p);
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("retry-after")).toBeNull();
      expect(await res.json()).toEqual({ error });
      expect((await chat(p)).status).toBe(200);
      expect(p.injector.injected.get(kind)).toBe(1);
    },
  );

  it.each(HTTP_FAULTS)("%s takes an overridden message", async (kind, status, error) => {
    const p = await start();
    p.injector.inject(kind, { first: 1 }, { message: "wording drift" });
    const res = await chat(p, { stream: true });
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ error: { ...error, message: "wording drift" } });
  });

  it.each([0, 1, 30])("rate_limit with retryAfterSeconds %i sends Retry-After", async (s) => {
    const p = await start();
    p.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: s });
    const res = await chat(p);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe(String(s));
    expect(res.headers.get("content-type")).toBe("application/json");
  });

  it("serves a script of faults call by call, then answers", async () => {
    const p = await start();
    p.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
    p.injector.inject("http_500", { first: 3 });
    p.injector.inject("auth", { first: 4 });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await chat(p)).status);
    expect(statuses).toEqual([429, 500, 500, 401, 200]);
    expect(p.requests).toBe(5);
    expect(p.injector.calls).toBe(5);
    expect(p.bodies).toHaveLength(5);
  });

  it("during windows follow the clock given to the provider", async () => {
    const clock = new VirtualClock();
    const p = await start({ clock });
    p.injector.inject("http_503", { during: { fromMs: 1_000, toMs: 2_000 } });
    const statuses: number[] = [];
    for (const ms of [0, 1_000, 999, 1]) {
      await clock.advance(ms);
      statuses.push((await chat(p)).status);
    }
    expect(statuses).toEqual([200, 503, 503, 200]);
  });

  it("probability triggers draw from the provider's seed", async () => {
    const p = await start({ seed: 42 });
    p.injector.inject("http_502", { probability: 0.5 });
    const random = seededRandom(42);
    const expected = Array.from({ length: 16 }, () => (random() < 0.5 ? 502 : 200));
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) statuses.push((await chat(p)).status);
    expect(statuses).toEqual(expected);
  });
});

describe("fake provider: faults that are not an HTTP error", () => {
  it.each([false, true])(
    "malformed_json (stream %s): a 200 whose JSON body is cut short",
    async (stream) => {
      const p = await start();
      p.injector.inject("malformed_json", { first: 1 });
      const res = await chat(p, { stream });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.text()).toBe('{"id":"chatcmpl-fake","choices":[{"message":');
    },
  );

  it("empty: a completion with no content and no completion tokens", async () => {
    const p = await start();
    p.injector.inject("empty", { first: 1 });
    expect(await (await chat(p)).json()).toMatchObject({
      choices: [{ message: { role: "assistant", content: "" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 0, total_tokens: 10 },
    });
  });

  it("connection_reset: the request fails; the server answers the next one", async () => {
    const p = await start();
    p.injector.inject("connection_reset", { first: 1 });
    await expect(chat(p)).rejects.toThrow(/fetch failed/);
    expect((await chat(p)).status).toBe(200);
    expect(p.requests).toBe(2);
  });

  it("timeout with delayMs answers the full completion after the delay", async () => {
    const p = await start();
    p.injector.inject("timeout", { first: 1 }, { delayMs: 5 });
    const res = await chat(p);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ choices: [{ message: { content: REPLY } }] });
  });

  it("a later timeout with a short delay is answered while one far past Node's longest timer waits", async () => {
    const p = await start();
    p.injector.inject("timeout", { first: 1 }, { delayMs: 2 ** 40 });
    p.injector.inject("timeout", { first: 2 }, { delayMs: 20 });
    let longAnswered = false;
    const long = chat(p).then(
      () => {
        longAnswered = true;
      },
      () => undefined,
    );
    await until(() => p.injector.calls === 1);
    const short = await chat(p);
    expect(short.status).toBe(200);
    await short.text();
    await turns(10);
    expect(longAnswered).toBe(false);
    for (const q of providers.splice(0)) await q.close();
    await long;
    expect(longAnswered).toBe(false);
  });

  it.each([
    ["timeout without delayMs", "timeout"],
    ["hang", "hang"],
  ] as const)("%s: no answer; close() ends the waiting request", async (_name, kind) => {
    const p = await startFakeProvider();
    p.injector.inject(kind, { first: 1 });
    const pending = chat(p).then(
      () => "answered",
      () => "failed",
    );
    await until(() => p.injector.calls === 1);
    await turns(10);
    await p.close();
    expect(await pending).toBe("failed");
  });

  it.each(FAULT_KINDS.filter((k) => !["hang", "timeout"].includes(k)))(
    "%s settles the request without close()",
    async (kind: FaultKind) => {
      const p = await start();
      p.injector.inject(kind, { first: 1 });
      const outcome = await chat(p).then(
        async (res) => {
          await res.text();
          return res.status;
        },
        () => "failed",
      );
      expect(outcome).toEqual(kind === "connection_reset" ? "failed" : expect.any(Number));
    },
  );
});

describe("fake provider: stream wire format", () => {
  it("sends exactly OpenAI's events, headers included", async () => {
    const p = await start({ reply: "Hi there" });
    const res = await chat(p, { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(await res.text()).toBe(
      [
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n`,
        "data: [DONE]\n\n",
      ].join(""),
    );
    expect(p.streamed).toBe(1);
  });

  it("with include_usage: usage null on each chunk, then the usage chunk", async () => {
    const p = await start({ reply: "Hi" });
    const res = await chat(p, { stream: true, stream_options: { include_usage: true } });
    expect(await res.text()).toBe(
      [
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n`,
        `data: ${CHUNK_HEAD},"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}\n\n`,
        "data: [DONE]\n\n",
      ].join(""),
    );
  });

  it.each([
    ["include_usage: false", { include_usage: false }],
    ['include_usage: "true"', { include_usage: "true" }],
    ["include_usage: 1", { include_usage: 1 }],
    ["an empty object", {}],
    ["null", null],
    ["a string", "include_usage"],
  ])("stream_options %s: no usage", async (_name, streamOptions) => {
    const p = await start({ reply: "Hi" });
    const text = await (await chat(p, { stream: true, stream_options: streamOptions })).text();
    expect(text).not.toContain("usage");
    expect(dataOf(text).at(-1)).toBe("[DONE]");
  });

  it.each([
    ['"true"', "true"],
    ["1", 1],
    ["false", false],
  ])("stream: %s is not a stream request", async (_name, stream) => {
    const p = await start();
    const res = await chat(p, { stream });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toMatchObject({ object: "chat.completion" });
    expect(p.streamed).toBe(0);
  });

  it.each([
    ["an empty reply", "", [], "rfd"],
    ["a reply of spaces", "   ", ["   "], "rtfd"],
    ["a last word between runs of spaces", "x  y  ", ["x", "  y  "], "rttfd"],
    ["a last word after a tab, before a newline", "a\tb\n", ["a", "\tb\n"], "rttfd"],
  ])("%s streams its tokens", async (_name, reply, tokens, shape) => {
    const p = await start({ reply });
    const text = await (await chat(p, { stream: true })).text();
    expect(tokensOf(text)).toEqual(tokens);
    expect(dataOf(text)).toHaveLength(shape.length);
  });

  it("empty with a one-word reply still streams no token", async () => {
    const p = await start({ reply: "Hi" });
    p.injector.inject("empty", { first: 1 });
    const text = await (await chat(p, { stream: true })).text();
    expect(tokensOf(text)).toEqual([]);
    expect(dataOf(text)).toHaveLength(3); // role, finish, [DONE]
  });
});

describe("fake provider: token pacing", () => {
  it.each([
    ["-1", -1],
    ["NaN", Number.NaN],
    ["Infinity", Infinity],
    ["-Infinity", -Infinity],
  ])("refuses tokenIntervalMs %s", async (_name, tokenIntervalMs) => {
    await expect(startFakeProvider({ tokenIntervalMs })).rejects.toThrow(
      new TypeError("tokenIntervalMs must be a finite number of ms >= 0"),
    );
  });

  it("waits between tokens: with a long interval only the first token comes", async () => {
    const p = await start({ reply: "one two", tokenIntervalMs: 1e9 });
    const { seen, ended } = collect(await chat(p, { stream: true }));
    await until(() => tokensOf(seen.text).length === 1);
    await turns(10);
    expect(tokensOf(seen.text)).toEqual(["one"]);
    await p.close();
    expect((await ended).error).toBeDefined();
    expect(tokensOf(seen.text)).toEqual(["one"]);
    expect(seen.text).not.toContain("[DONE]");
  });

  it("does not wait before the first token nor before the finish chunk", async () => {
    const p = await start({ reply: "one", tokenIntervalMs: 1e9 });
    const text = await (await chat(p, { stream: true })).text();
    expect(tokensOf(text)).toEqual(["one"]);
    expect(text.endsWith('"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')).toBe(true);
  });

  it("a client that goes away mid-stream leaves the server serving", async () => {
    const p = await start({ reply: "one two three", tokenIntervalMs: 1e9 });
    const controller = new AbortController();
    const res = await fetch(`${p.url}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: USER, stream: true }),
      signal: controller.signal,
    });
    const { seen, ended } = collect(res);
    await until(() => tokensOf(seen.text).length === 1);
    controller.abort();
    expect((await ended).error).toBeDefined();
    const plain = await chat(p);
    expect(plain.status).toBe(200);
    expect(p.requests).toBe(2);
  });
});

/**
 * A request to a second provider that answers after 5 s: a fault given a delay of 1 ms must be
 * over while it still waits (a fault that fell back to its default of 20 s or 30 s would not be).
 * Timers fire in the order of their deadlines; no test reads the time.
 */
async function reference() {
  const ref = await start();
  ref.injector.inject("timeout", { first: 1 }, { delayMs: 5_000 });
  const state = { answered: false };
  void chat(ref).then(
    () => {
      state.answered = true;
    },
    () => undefined,
  );
  await until(() => ref.injector.calls === 1);
  return state;
}

describe("fake provider: a short delay is not the default", () => {
  it.each([
    ["slow_first_token delayMs 1", "slow_first_token", { delayMs: 1 }],
    ["stream_stall silentMs 1", "stream_stall", { afterTokens: 1, silentMs: 1 }],
    ["timeout delayMs 1", "timeout", { delayMs: 1 }],
  ] as const)("%s: the whole answer comes before a 5 s reference", async (_name, kind, options) => {
    const ref = await reference();
    const p = await start();
    p.injector.inject(kind, { first: 1 }, options);
    const text = await (await chat(p, { stream: true })).text();
    expect(tokensOf(text).join("")).toBe(REPLY);
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(ref.answered).toBe(false);
  });
});

describe("fake provider: stream faults, edges", () => {
  it("stream_cut by default keeps two thirds rounded down: 2 of 4 tokens", async () => {
    const p = await start({ reply: "a b c d" });
    p.injector.inject("stream_cut", { first: 1 });
    const { seen, ended } = collect(await chat(p, { stream: true }));
    expect((await ended).error).toBeDefined();
    expect(tokensOf(seen.text)).toEqual(["a", " b"]);
    expect(seen.text).not.toContain('finish_reason":"stop');
  });

  it("stream_stall waits after the tokens it lets through, counted in stalled", async () => {
    const p = await start();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens: 2, silentMs: 1e9 });
    const { seen, ended } = collect(await chat(p, { stream: true }));
    await until(() => p.stalled === 1);
    await until(() => tokensOf(seen.text).length === 2);
    await turns(10);
    expect(tokensOf(seen.text)).toEqual(["Hello", " from"]);
    await p.close();
    expect((await ended).error).toBeDefined();
    expect(tokensOf(seen.text)).toEqual(["Hello", " from"]);
  });

  it.each([
    ["0: before the first token", 0, []],
    [
      "past the last token: before the finish chunk",
      99,
      ["Hello", " from", " the", " fake", " provider."],
    ],
  ])("stream_stall afterTokens %s", async (_name, afterTokens, tokens) => {
    const p = await start();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens, silentMs: 1e9 });
    const { seen, ended } = collect(await chat(p, { stream: true }));
    await until(() => p.stalled === 1 && tokensOf(seen.text).length === tokens.length);
    await turns(10);
    expect(tokensOf(seen.text)).toEqual(tokens);
    expect(seen.text).not.toContain('finish_reason":"stop');
    await p.close();
    expect((await ended).error).toBeDefined();
  });

  it("a stall that ends delivers the rest; only stalled streams are counted", async () => {
    const p = await start();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens: 1, silentMs: 1 });
    const first = await (await chat(p, { stream: true })).text();
    expect(tokensOf(first).join("")).toBe(REPLY);
    expect(first.endsWith("data: [DONE]\n\n")).toBe(true);
    await (await chat(p, { stream: true })).text();
    expect(p.stalled).toBe(1);
    expect(p.streamed).toBe(2);
  });

  it("malformed_event in an empty stream comes before the finish chunk", async () => {
    const p = await start({ reply: "" });
    p.injector.inject("malformed_event", { first: 1 });
    const data = dataOf(await (await chat(p, { stream: true })).text());
    expect(data).toHaveLength(4);
    expect(data[1]).toBe('{"choices":[{"delta":{"content":');
    expect(data[2]).toContain('"finish_reason":"stop"');
    expect(data[3]).toBe("[DONE]");
  });

  it("slow_first_token with a short delay: the role chunk, then every token", async () => {
    const p = await start({ reply: "a b" });
    p.injector.inject("slow_first_token", { first: 1 }, { delayMs: 1 });
    const text = await (await chat(p, { stream: true })).text();
    expect(tokensOf(text)).toEqual(["a", " b"]);
    expect(dataOf(text)).toHaveLength(5);
  });

  it("no_done without include_usage ends after the finish chunk", async () => {
    const p = await start({ reply: "a" });
    p.injector.inject("no_done", { first: 1 });
    const text = await (await chat(p, { stream: true })).text();
    expect(text.endsWith('"finish_reason":"stop"}]}\n\n')).toBe(true);
    expect(text).not.toContain("[DONE]");
  });

  it("close() ends a stalled stream and a slow first token at once", async () => {
    const p = await start();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens: 0 });
    p.injector.inject("slow_first_token", { first: 2 });
    const stalled = collect(await chat(p, { stream: true }));
    const slow = collect(await chat(p, { stream: true }));
    await until(() => p.stalled === 1 && slow.seen.text.length > 0);
    await p.close();
    expect((await stalled.ended).error).toBeDefined();
    expect((await slow.ended).error).toBeDefined();
    expect(tokensOf(stalled.seen.text)).toEqual([]);
    expect(tokensOf(slow.seen.text)).toEqual([]);
  });
});
