/**
 * The fake provider against the real clients (openai 7 and 6, @anthropic-ai/sdk, @google/genai 3
 * and 2), one driver each (sdk-clients.ts): every answer parses, every stream iterates to its
 * end, every fault arrives as that SDK surfaces it (its error class, status and headers; a cut,
 * stalled or malformed stream; a truncated finish), each in exactly one request.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  startFakeProvider,
  type FakeProvider,
  type FakeProviderOptions,
  type FaultKind,
  type WireApiName,
} from "../../src/testing/index.js";
import { DRIVERS, newSeen, type Seen } from "./sdk-clients.js";
import { until } from "./settle.js";

const REPLY = "Hello from the fake provider.";
/** Two thirds of its five tokens, rounded down. */
const TWO_THIRDS = "Hello from the";

const providers: FakeProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const p = await startFakeProvider({ tokenIntervalMs: 0, ...options });
  providers.push(p);
  return p;
}

/** The status each error fault has in each API (Gemini refuses a prompt with a 200). */
const STATUS: Record<WireApiName, Partial<Record<FaultKind, number>>> = {
  chat_completions: {
    rate_limit: 429,
    http_500: 500,
    http_502: 502,
    http_503: 503,
    overloaded: 503,
    context_length: 400,
    content_policy: 400,
    auth: 401,
  },
  responses: {
    rate_limit: 429,
    http_500: 500,
    http_502: 502,
    http_503: 503,
    overloaded: 503,
    context_length: 400,
    content_policy: 400,
    auth: 401,
  },
  anthropic_messages: {
    rate_limit: 429,
    http_500: 500,
    http_502: 502,
    http_503: 503,
    overloaded: 529,
    context_length: 400,
    content_policy: 400,
    auth: 401,
  },
  gemini: {
    rate_limit: 429,
    http_500: 500,
    http_502: 502,
    http_503: 503,
    overloaded: 503,
    context_length: 400,
    auth: 400,
  },
};

/** How a promise settled: its error, or a failure if it did not reject. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const error: unknown = await promise.then(
    () => new Error("expected a rejection"),
    (e: unknown) => e,
  );
  if (!(error instanceof Error)) throw new Error(`not an Error: ${String(error)}`);
  return error;
}

describe.each(DRIVERS)("$name against the fake provider", (driver) => {
  const connect = async (options: FakeProviderOptions = {}) => {
    const p = await start(options);
    return { p, client: driver.connect(p) };
  };

  it("a plain call parses: the reply, the normal finish, one request on its API", async () => {
    const { p, client } = await connect();
    expect(await client.plain()).toEqual({ text: REPLY, finish: driver.finishes.normal });
    expect(p.requests).toBe(1);
    expect(p.byApi[driver.api]).toEqual({ requests: 1, streamed: 0, stalled: 0 });
  });

  it("a stream iterates to its end: every token, the finish, complete", async () => {
    const { p, client } = await connect({ tokenIntervalMs: 1 });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen.text).toBe(REPLY);
    expect(seen.finish).toBe(driver.finishes.normal);
    expect(driver.ended(seen)).not.toBe(false);
    expect(p.byApi[driver.api]).toEqual({ requests: 1, streamed: 1, stalled: 0 });
  });

  it("finish_length: the first two thirds with the truncated finish, plain and streamed", async () => {
    const { p, client } = await connect();
    p.injector.inject("finish_length", { first: 2 });
    expect(await client.plain()).toEqual({ text: TWO_THIRDS, finish: driver.finishes.truncated });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen).toMatchObject({ text: TWO_THIRDS, finish: driver.finishes.truncated });
    expect(driver.ended(seen)).not.toBe(false);
  });

  it("finish_length keeps afterTokens tokens", async () => {
    const { p, client } = await connect();
    p.injector.inject("finish_length", { first: 1 }, { afterTokens: 1 });
    expect(await client.plain()).toEqual({ text: "Hello", finish: driver.finishes.truncated });
  });

  it("empty: no text, the normal finish, plain and streamed", async () => {
    const { p, client } = await connect();
    p.injector.inject("empty", { first: 2 });
    expect(await client.plain()).toEqual({ text: "", finish: driver.finishes.normal });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen).toMatchObject({ text: "", finish: driver.finishes.normal });
  });

  const errors = Object.entries(STATUS[driver.api]) as [FaultKind, number][];
  it.each(errors)(
    "%s is the SDK's error for %i, plain and streamed, one request each",
    async (kind, status) => {
      const { p, client } = await connect();
      p.injector.inject(kind, { first: 2 });
      for (const call of [client.plain(), client.stream(newSeen())]) {
        const error = await rejection(call);
        expect(error).toBeInstanceOf(driver.errorClass(status));
        expect(error).toMatchObject({ status });
      }
      expect(p.requests).toBe(2);
      expect(await client.plain()).toEqual({ text: REPLY, finish: driver.finishes.normal });
    },
  );

  it("rate_limit with retryAfterSeconds: the wait reaches the SDK's error", async () => {
    const { p, client } = await connect();
    p.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 7 });
    const error = await rejection(client.plain());
    if (driver.keepsHeaders) {
      expect((error as unknown as { headers: Headers }).headers.get("retry-after")).toBe("7");
    } else {
      const body = JSON.parse(error.message) as { error: { details: unknown[] } };
      expect(body.error.details).toContainEqual({
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        retryDelay: "7s",
      });
    }
  });

  it("connection_reset: the SDK's connection error, one request", async () => {
    const { p, client } = await connect();
    p.injector.inject("connection_reset", { first: 1 });
    expect(await rejection(client.plain())).toBeInstanceOf(driver.connectionError);
    expect(p.requests).toBe(1);
  });

  it("malformed_json: a plain call rejects", async () => {
    const { p, client } = await connect();
    p.injector.inject("malformed_json", { first: 1 });
    await rejection(client.plain());
    expect(p.requests).toBe(1);
  });

  it("timeout with a short delayMs: the answer comes after it", async () => {
    const { p, client } = await connect();
    p.injector.inject("timeout", { first: 1 }, { delayMs: 1 });
    expect(await client.plain()).toEqual({ text: REPLY, finish: driver.finishes.normal });
  });

  it("stream_cut: the first two thirds, then the stream breaks without a finish", async () => {
    const { p, client } = await connect();
    p.injector.inject("stream_cut", { first: 1 });
    const seen = newSeen();
    await rejection(client.stream(seen));
    expect(seen).toMatchObject({ text: TWO_THIRDS, finish: undefined });
    expect(driver.ended(seen)).not.toBe(true);
    expect(p.requests).toBe(1);
  });

  it("stream_stall: the tokens before the silence, then the stream breaks when the server closes", async () => {
    const { p, client } = await connect();
    p.injector.inject("stream_stall", { first: 1 }, { afterTokens: 2 });
    const seen: Seen = newSeen();
    const reading = rejection(client.stream(seen));
    await until(() => p.stalled === 1 && seen.text === "Hello from");
    expect(p.byApi[driver.api].stalled).toBe(1);
    await p.close();
    await reading;
    expect(seen.finish).toBeUndefined();
  });

  it("stream_stall with a short silence: the rest comes, complete", async () => {
    const { p, client } = await connect();
    p.injector.inject("stream_stall", { first: 1 }, { silentMs: 1 });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen).toMatchObject({ text: REPLY, finish: driver.finishes.normal });
    expect(p.stalled).toBe(1);
  });

  it("malformed_event: a SyntaxError after the tokens before it", async () => {
    const { p, client } = await connect();
    p.injector.inject("malformed_event", { first: 1 }, { atToken: 3 });
    const seen = newSeen();
    expect(await rejection(client.stream(seen))).toBeInstanceOf(SyntaxError);
    expect(seen.text).toBe("Hello from");
  });

  it("stream_error: the tokens before it, then the SDK throws the API's error event", async () => {
    const { p, client } = await connect();
    p.injector.inject("stream_error", { first: 1 }, { afterTokens: 2, message: "overloaded now" });
    const seen = newSeen();
    const error = await rejection(client.stream(seen));
    expect(error).toBeInstanceOf(driver.streamErrorClass);
    expect(error.message).toContain("overloaded now");
    expect(seen).toMatchObject({ text: "Hello from", finish: undefined });
    expect(p.requests).toBe(1);
  });

  it("no_done: every token and the finish, but nothing that completes the stream", async () => {
    const { p, client } = await connect();
    p.injector.inject("no_done", { first: 1 });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen.text).toBe(REPLY);
    expect(driver.ended(seen)).not.toBe(true);
    // Responses' status and Gemini's finish reason come with what completes the stream.
    const finishEnds = driver.api === "responses" || driver.api === "gemini";
    expect(seen.finish).toBe(finishEnds ? undefined : driver.finishes.normal);
  });

  it("slow_first_token: what comes before the first token at once, then no token until the delay", async () => {
    const { p, client } = await connect();
    p.injector.inject("slow_first_token", { first: 1 });
    const seen = newSeen();
    const reading = client.stream(seen).catch(() => undefined);
    await until(() => p.streamed === 1 && seen.events.length === driver.headEvents);
    expect(seen.text).toBe("");
    await p.close();
    await reading;
    expect(seen.text).toBe("");
  });

  it("slow_first_token with a short delay: the whole answer", async () => {
    const { p, client } = await connect();
    p.injector.inject("slow_first_token", { first: 1 }, { delayMs: 1 });
    const seen = newSeen();
    await client.stream(seen);
    expect(seen).toMatchObject({ text: REPLY, finish: driver.finishes.normal });
  });

  it("rejectPrefill: a conversation ending with the model's turn is the SDK's 400", async () => {
    const { p, client } = await connect({ rejectPrefill: true });
    const error = await rejection(client.plain(true));
    expect(error).toBeInstanceOf(driver.errorClass(400));
    expect(error).toMatchObject({ status: 400 });
    expect(p.injector.calls).toBe(0);
    expect(await client.plain()).toEqual({ text: REPLY, finish: driver.finishes.normal });
  });
});
