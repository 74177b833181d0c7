import { afterEach, describe, expect, it } from "vitest";
import {
  FailureInjector,
  startFakeProvider,
  thrownFault,
  type FakeProvider,
  type FakeProviderOptions,
  type FaultKind,
} from "../../src/testing/index.js";

const REPLY = "Hello from the fake provider.";
const WORDS = ["Hello", " from", " the", " fake", " provider."];
const STREAM_FAULTS: FaultKind[] = [
  "slow_first_token",
  "stream_cut",
  "stream_stall",
  "malformed_event",
  "no_done",
];

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

async function start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  provider = await startFakeProvider({ tokenIntervalMs: 1, ...options });
  return provider;
}

const USER = [{ role: "user", content: "hi" }];

function post(p: FakeProvider, body: unknown): Promise<Response> {
  return fetch(`${p.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A streamed chat request, `extra` merged into the body. */
function streamed(p: FakeProvider, extra: Record<string, unknown> = {}): Promise<Response> {
  return post(p, { model: "fake-model", messages: USER, stream: true, ...extra });
}

/**
 * A tiny SSE reader: the `data:` of each event in arrival order. `ended` settles when the body
 * ends (`error` set when it broke off); `atLeast(n)` resolves once n events (or the end) came.
 */
function sse(res: Response) {
  const events: string[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  let over = false;
  const wake = () => {
    for (const w of [...waiters])
      if (over || events.length >= w.count) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
  };
  const ended = (async (): Promise<{ error?: unknown }> => {
    const body = res.body;
    if (!body) throw new Error("no body");
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      const reader = body.getReader();
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block
            .split("\n")
            .filter((line) => line.startsWith("data: "))
            .map((line) => line.slice("data: ".length))
            .join("\n");
          events.push(data);
          wake();
        }
      }
      return {};
    } catch (error) {
      return { error };
    } finally {
      over = true;
      wake();
    }
  })();
  const atLeast = (count: number) =>
    new Promise<void>((resolve) => {
      waiters.push({ count, resolve });
      wake();
    });
  return { events, ended, atLeast };
}

interface Chunk {
  object: string;
  choices: {
    index: number;
    delta: { role?: string; content?: string };
    finish_reason: string | null;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** What a list of event data says: each event parsed, or "malformed", or "[DONE]". */
function read(events: string[]) {
  const parsed = events.map((data): Chunk | "malformed" | "[DONE]" => {
    if (data === "[DONE]") return data;
    try {
      return JSON.parse(data) as Chunk;
    } catch {
      return "malformed";
    }
  });
  const chunks = parsed.filter((c): c is Chunk => typeof c === "object");
  const tokens = chunks.flatMap((c) =>
    c.choices.flatMap((choice) => (choice.delta.content ? [choice.delta.content] : [])),
  );
  return {
    /** One letter per event: r(ole), t(oken), f(inish), u(sage), m(alformed), d(one). */
    shape: parsed
      .map((c) => {
        if (c === "[DONE]") return "d";
        if (c === "malformed") return "m";
        const choice = c.choices[0];
        if (!choice) return "u";
        if (choice.delta.role) return "r";
        return choice.finish_reason ? "f" : "t";
      })
      .join(""),
    chunks,
    tokens,
    finish: chunks.flatMap((c) => c.choices.flatMap((choice) => choice.finish_reason ?? [])),
    done: parsed.includes("[DONE]"),
  };
}

async function streamOf(p: FakeProvider, extra: Record<string, unknown> = {}) {
  const res = await streamed(p, extra);
  const s = sse(res);
  const { error } = await s.ended;
  return { res, error, ...read(s.events) };
}

/**
 * The limit on a test where close() must end a request the fault would hold for 20 s, 30 s or
 * for ever: far under those, far over what a busy machine takes to close (issue 27).
 */
const CLOSE_BOUND_MS = 10_000;

describe("fake provider: streamed answers", () => {
  it("streams like OpenAI: role chunk, one chunk per word, finish, [DONE]", async () => {
    const p = await start();
    const { res, error, shape, chunks, tokens, finish } = await streamOf(p);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(error).toBeUndefined();
    expect(shape).toBe("rtttttfd");
    expect(tokens).toEqual(WORDS);
    expect(tokens.join("")).toBe(REPLY);
    expect(finish).toEqual(["stop"]);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    expect(chunks.at(-1)?.choices[0]?.delta).toEqual({});
    expect(chunks.some((c) => "usage" in c)).toBe(false);
    expect(p.requests).toBe(1);
    expect(p.streamed).toBe(1);
  });

  it("with stream_options.include_usage: usage null on every chunk, then a usage chunk with no choices", async () => {
    const p = await start();
    const { shape, chunks } = await streamOf(p, { stream_options: { include_usage: true } });
    expect(shape).toBe("rtttttfud");
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });

  it("splits any reply into words whose tokens join back to it exactly", async () => {
    const reply = "  one two\nthree  four five six ";
    const p = await start({ reply, tokenIntervalMs: 0 });
    const { tokens } = await streamOf(p);
    expect(tokens).toEqual(["  one", " two", "\nthree", "  four", " five", " six "]);
    expect(tokens.join("")).toBe(reply);
  });

  it("records each parsed body and counts streamed requests apart", async () => {
    const p = await start();
    await streamOf(p, { temperature: 0 });
    const plain = await post(p, { model: "m", messages: USER });
    expect(await plain.json()).toMatchObject({
      object: "chat.completion",
      choices: [{ message: { role: "assistant", content: REPLY }, finish_reason: "stop" }],
    });
    expect(p.requests).toBe(2);
    expect(p.streamed).toBe(1);
    expect(p.bodies).toEqual([
      { model: "fake-model", messages: USER, stream: true, temperature: 0 },
      { model: "m", messages: USER },
    ]);
  });

  it("a body that is not JSON gets OpenAI's 400 and is not recorded; the injector is not asked", async () => {
    const p = await start();
    p.injector.inject("http_503", { first: 1 });
    const res = await post(p, '{"model": "fake-model", "stream": tru');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { type: "invalid_request_error", message: /could not parse the JSON body/ },
    });
    expect(p.requests).toBe(1);
    expect(p.bodies).toEqual([]);
    expect(p.injector.calls).toBe(0);
  });
});

describe("fake provider: assistant prefill", () => {
  const prefill = [...USER, { role: "assistant", content: "Sure," }];

  it("rejectPrefill refuses a conversation ending with an assistant message, streamed or not", async () => {
    const p = await start({ rejectPrefill: true });
    for (const stream of [true, false]) {
      const res = await post(p, { model: "m", messages: prefill, stream });
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toEqual({
        error: {
          type: "invalid_request_error",
          code: null,
          param: "messages",
          message: expect.stringMatching(/assistant message prefill is not supported/i) as string,
        },
      });
    }
    expect(p.bodies).toHaveLength(2); // refused bodies are recorded too
    expect(p.injector.calls).toBe(0);
    const { shape } = await streamOf(p); // a conversation ending with the user is answered
    expect(shape).toBe("rtttttfd");
  });

  it("without rejectPrefill a prefilled conversation is answered", async () => {
    const p = await start();
    const { shape } = await streamOf(p, { messages: prefill });
    expect(shape).toBe("rtttttfd");
  });
});

describe("fake provider: existing faults on a streamed request", () => {
  it.each([
    ["rate_limit", 429],
    ["http_500", 500],
    ["http_503", 503],
    ["context_length", 400],
    ["auth", 401],
  ] as const)("%s answers %i with its JSON error before any event", async (kind, status) => {
    const p = await start();
    p.injector.inject(kind, { first: 1 }, { retryAfterSeconds: 3 });
    const res = await streamed(p);
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toMatchObject({ error: { type: expect.any(String) as string } });
    if (kind === "rate_limit") expect(res.headers.get("retry-after")).toBe("3");
    expect(p.streamed).toBe(1);
  });

  it("empty streams zero tokens, then the finish chunk and [DONE]", async () => {
    const p = await start();
    p.injector.inject("empty", { first: 1 });
    const { shape, chunks } = await streamOf(p, { stream_options: { include_usage: true } });
    expect(shape).toBe("rfud");
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(0);
  });

  it("connection_reset fails the request before any event", async () => {
    const p = await start();
    p.injector.inject("connection_reset", { first: 1 });
    await expect(streamed(p)).rejects.toThrow(/fetch failed/);
  });

  it("timeout answers after delayMs, then streams the whole answer", async () => {
    const p = await start();
    p.injector.inject("timeout", { first: 1 }, { delayMs: 30 });
    const { shape, tokens } = await streamOf(p);
    expect(shape).toBe("rtttttfd");
    expect(tokens.join("")).toBe(REPLY);
  });

  it(
    "hang never answers; close() ends the waiting request",
    { timeout: CLOSE_BOUND_MS },
    async () => {
      const p = await start();
      p.injector.inject("hang", { first: 1 });
      const pending = streamed(p).then(
        () => "answered",
        () => "failed",
      );
      await until(() => p.injector.calls === 1);
      await p.close();
      expect(await pending).toBe("failed");
    },
  );
});

describe("fake provider: stream faults", () => {
  it("slow_first_token: headers and role chunk at once, then the whole answer after delayMs", async () => {
    const p = await start();
    p.injector.inject("slow_first_token", { first: 1 }, { delayMs: 100 });
    const { shape, tokens, error } = await streamOf(p);
    expect(error).toBeUndefined();
    expect(shape).toBe("rtttttfd");
    expect(tokens.join("")).toBe(REPLY);
  });

  it(
    "slow_first_token (default 20 s): the role chunk came, no token; close() ends the stream",
    { timeout: CLOSE_BOUND_MS },
    async () => {
      const p = await start();
      p.injector.inject("slow_first_token", { first: 1 });
      const res = await streamed(p); // the headers came at once
      expect(res.status).toBe(200);
      const s = sse(res);
      await s.atLeast(1);
      await p.close();
      const { error } = await s.ended;
      expect(error).toBeDefined(); // broken off by close(), not ended by the server
      expect(read(s.events).shape).toBe("r");
    },
  );

  it("stream_cut (default two thirds): 3 of 5 tokens, then the socket dies: no finish, no [DONE]", async () => {
    const p = await start();
    p.injector.inject("stream_cut", { first: 1 });
    const { shape, tokens, error, finish, done } = await streamOf(p);
    expect(error).toBeInstanceOf(Error);
    expect(shape).toBe("rttt");
    expect(tokens).toEqual(WORDS.slice(0, 3));
    expect(finish).toEqual([]);
    expect(done).toBe(false);
  });

  it.each([0, 1, 5, 9])("stream_cut afterTokens %i", async (afterTokens) => {
    const p = await start();
    p.injector.inject("stream_cut", { first: 1 }, { afterTokens });
    const { tokens, error, shape } = await streamOf(p);
    expect(error).toBeInstanceOf(Error);
    expect(tokens).toEqual(WORDS.slice(0, afterTokens));
    expect(shape).toBe(`r${"t".repeat(Math.min(afterTokens, 5))}`);
  });

  it("stream_stall: silent for silentMs after afterTokens tokens, then the rest of the answer", async () => {
    const p = await start();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens: 2, silentMs: 200 });
    const { shape, tokens, error } = await streamOf(p);
    expect(error).toBeUndefined();
    expect(shape).toBe("rtttttfd");
    expect(tokens.join("")).toBe(REPLY);
  });

  it(
    "stream_stall (default 30 s): the connection stays open after two thirds; close() ends it",
    { timeout: CLOSE_BOUND_MS },
    async () => {
      const p = await start();
      p.injector.inject("stream_stall", { first: 1 });
      const s = sse(await streamed(p));
      await s.atLeast(4); // role + 3 tokens
      await p.close();
      const { error } = await s.ended;
      expect(error).toBeDefined(); // still open when close() broke it off
      expect(read(s.events).shape).toBe("rttt");
    },
  );

  it("malformed_event (default at token 1): one extra invalid event before the first token, no token lost", async () => {
    const p = await start();
    p.injector.inject("malformed_event", { first: 1 });
    const res = await streamed(p);
    const s = sse(res);
    const { error } = await s.ended;
    expect(error).toBeUndefined();
    const { shape, tokens } = read(s.events);
    expect(shape).toBe("rmtttttfd");
    expect(tokens).toEqual(WORDS);
    expect(s.events[1]).toBe('{"choices":[{"delta":{"content":');
  });

  it.each([
    [3, "rttmtttfd"],
    [5, "rttttmtfd"],
    [6, "rtttttmfd"],
    [99, "rtttttmfd"],
  ])("malformed_event atToken %i -> %s", async (atToken, expected) => {
    const p = await start();
    p.injector.inject("malformed_event", { first: 1 }, { atToken });
    const { shape, tokens } = await streamOf(p);
    expect(shape).toBe(expected);
    expect(tokens).toEqual(WORDS);
  });

  it("no_done: the whole answer and its finish reason, then a clean end without [DONE]", async () => {
    const p = await start();
    p.injector.inject("no_done", { first: 1 });
    const { shape, error, finish, done } = await streamOf(p, {
      stream_options: { include_usage: true },
    });
    expect(error).toBeUndefined();
    expect(shape).toBe("rtttttfu");
    expect(finish).toEqual(["stop"]);
    expect(done).toBe(false);
  });

  it.each(STREAM_FAULTS)(
    "%s on a request that is not streamed: answered normally",
    async (kind) => {
      const p = await start();
      p.injector.inject(kind, { first: 1 }, { delayMs: 20_000, silentMs: 20_000 });
      const res = await post(p, { model: "m", messages: USER });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ choices: [{ message: { content: REPLY } }] });
      expect(p.injector.injected.get(kind)).toBe(1);
      expect(p.streamed).toBe(0);
    },
  );

  it("the next request after a stream fault is answered normally", async () => {
    const p = await start();
    p.injector.inject("stream_cut", { first: 1 });
    expect((await streamOf(p)).error).toBeDefined();
    expect((await streamOf(p)).shape).toBe("rtttttfd");
    expect(p.streamed).toBe(2);
  });
});

describe("stream faults in process", () => {
  it.each(STREAM_FAULTS)("thrownFault(%s) throws: it exists only over HTTP streams", (kind) => {
    expect(() => thrownFault(kind)).toThrow(/only exists over HTTP streams/);
  });

  it("wrap rejects with that error; the existing faults still throw as before", async () => {
    const inj = new FailureInjector();
    inj.inject("stream_cut", { first: 1 });
    const f = inj.wrap(() => Promise.resolve("ok"));
    await expect(f(undefined, undefined)).rejects.toThrow(/stream_cut only exists over HTTP/);
    await expect(f(undefined, undefined)).resolves.toBe("ok");
    expect(thrownFault("http_503")).toMatchObject({ status: 503 });
    expect(() => thrownFault("hang")).toThrow(/not an error/);
  });

  it("inject refuses bad stream options, naming the field", async () => {
    const inj = new FailureInjector();
    expect(() => inj.inject("stream_cut", { first: 1 }, { afterTokens: -1 })).toThrow(
      /afterTokens/,
    );
    expect(() => inj.inject("malformed_event", { first: 1 }, { atToken: 0 })).toThrow(/atToken/);
    expect(() => inj.inject("stream_stall", { first: 1 }, { silentMs: Infinity })).toThrow(
      /silentMs/,
    );
    await expect(startFakeProvider({ tokenIntervalMs: -1 })).rejects.toThrow(/tokenIntervalMs/);
  });
});

/** Polls a condition on the event loop (no clock decides anything). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
