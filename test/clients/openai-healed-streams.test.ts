/**
 * Streams of a client healed by `healOpenAI`, end to end: the real `openai` package (7.60 and
 * 6.49) against the fake provider on 127.0.0.1 streaming Chat Completion chunks and Responses
 * events over SSE. A whole stream (the SDK's own Stream class back, usage), a cut before and
 * after the first token, a stall, a truncated finish (`length`, `response.incomplete`), failover
 * and restart to another client, the SDK's stream() helpers, and the stream's controller.
 * selfheal runs on a VirtualClock: its limits pass only when a test advances it.
 */
import OpenAI7 from "openai";
import OpenAI6 from "openai6";
import { afterEach, describe, expect, it } from "vitest";
import { healOpenAI, type HealOpenAIOptions } from "../../src/clients/openai.js";
import {
  createSelfHealing,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type RecoveryOptions,
  type StreamRestart,
  type ToolCallEvent,
} from "../../src/index.js";
import { startFakeProvider, VirtualClock, type FakeProvider } from "../../src/testing/index.js";
import { recordingMeters } from "../helpers/otel.js";
import { eventually } from "../helpers/otlp.js";

const REPLY = "The answer is forty two.";
const FIRST_THREE = "The answer is";
const LIMIT_MS = 5_000;
const NEVER_MS = 3_600_000;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

const SDKS = { "openai 7.60": OpenAI7, "openai 6.49": OpenAI6 as unknown as typeof OpenAI7 };

type Chunk = OpenAI7.ChatCompletionChunk | OpenAI7.Responses.ResponseStreamEvent;

/** The two APIs: a streamed request, and the text of one chunk. */
const APIS = {
  "Chat Completions": {
    ask: (client: OpenAI7, options?: OpenAI7.RequestOptions) =>
      client.chat.completions.create(
        {
          model: "gpt-test",
          messages: [{ role: "user", content: "hi" }],
          stream: true,
          stream_options: { include_usage: true },
        },
        options,
      ),
    text: (chunk: Chunk) => (chunk as OpenAI7.ChatCompletionChunk).choices[0]?.delta.content ?? "",
    truncated: "length",
    helper: async (client: OpenAI7) => {
      const stream = client.chat.completions.stream({
        model: "gpt-test",
        messages: [{ role: "user", content: "hi" }],
      });
      return (await stream.finalChatCompletion()).choices[0]?.message.content;
    },
  },
  Responses: {
    ask: (client: OpenAI7, options?: OpenAI7.RequestOptions) =>
      client.responses.create({ model: "gpt-test", input: "hi", stream: true }, options),
    text: (chunk: Chunk) => {
      const event = chunk as OpenAI7.Responses.ResponseStreamEvent;
      return event.type === "response.output_text.delta" ? event.delta : "";
    },
    truncated: "max_output_tokens",
    helper: async (client: OpenAI7) => {
      const stream = client.responses.stream({ model: "gpt-test", input: "hi" });
      return (await stream.finalResponse()).output_text;
    },
  },
} as const;

async function server(): Promise<FakeProvider> {
  const provider = await startFakeProvider({ reply: REPLY, tokenIntervalMs: 1 });
  open.push(provider);
  return provider;
}

function instance(recovery: RecoveryOptions = {}) {
  const clock = new VirtualClock();
  const meters = recordingMeters();
  const sh = createSelfHealing({
    agent: "openai-streams",
    clock,
    meterProvider: meters.meterProvider,
    logger: { warn: () => undefined },
    recovery: { random: () => 0, deadlineMs: NEVER_MS, ...recovery },
  });
  open.push(sh, { close: () => meters.shutdown() });
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const diagnosed = { count: 0 };
  sh.on("diagnosis", () => {
    diagnosed.count++;
  });
  /**
   * Once the first attempt failed (diagnosed: no limit of selfheal's may decide it), lets virtual
   * time pass in small steps while `waiting`: the backoff selfheal chose passes.
   */
  const afterFailure = async (waiting: () => boolean) => {
    await eventually(() => diagnosed.count > 0, "the first attempt's failure");
    const until = Date.now() + 30_000;
    while (waiting()) {
      if (Date.now() > until) throw new Error("timed out waiting for the next request");
      await clock.advance(250);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  return { sh, clock, calls, meters, afterFailure };
}

const clientOf = (SDK: typeof OpenAI7, provider: FakeProvider) =>
  new SDK({ baseURL: provider.url, apiKey: "sk-fake" });

/** Reads a stream as a UI would: its text (dropped at a restart), and the error it ends with. */
function read(
  stream: Promise<AsyncIterable<Chunk>>,
  text: (chunk: Chunk) => string,
  restarts: StreamRestart[] = [],
) {
  const seen = { text: "", chunks: 0, error: undefined as unknown };
  let shown = restarts.length;
  const done = (async () => {
    try {
      for await (const chunk of await stream) {
        if (restarts.length > shown) {
          shown = restarts.length;
          seen.text = "";
        }
        seen.chunks++;
        seen.text += text(chunk);
      }
    } catch (error) {
      seen.error = error;
    }
  })();
  return { seen, done };
}

for (const [sdkName, SDK] of Object.entries(SDKS)) {
  for (const [apiName, api] of Object.entries(APIS)) {
    describe(`healOpenAI streams, ${sdkName}, ${apiName}`, () => {
      const heal = (
        sh: ReturnType<typeof instance>["sh"],
        client: OpenAI7,
        o?: HealOpenAIOptions,
      ) => healOpenAI(sh, client, { firstTokenMs: LIMIT_MS, idleMs: LIMIT_MS, ...o });
      const tool = apiName === "Responses" ? "openai.responses:stream" : "openai.chat:stream";

      it("streams the answer as the SDK's own Stream, with its tokens", async () => {
        const provider = await server();
        const { sh, calls, meters } = instance({
          providers: [{ name: "openai", usdPer1kTokens: 1000 }],
        });
        const stream = await api.ask(heal(sh, clientOf(SDK, provider)));
        expect(stream.controller).toBeInstanceOf(AbortController);
        expect(typeof stream.tee).toBe("function");
        const [left, right] = stream.tee();
        const { seen, done } = read(Promise.resolve(left), api.text);
        const other = read(Promise.resolve(right), api.text);
        await Promise.all([done, other.done]);
        expect(seen).toMatchObject({ text: REPLY, error: undefined });
        expect(other.seen.text).toBe(REPLY);
        expect(calls.map((c) => [c.tool, c.outcome, c.empty])).toEqual([[tool, "success", false]]);
        const points = await meters.read();
        const cost = [...points].find(([k]) => k.startsWith("selfheal_llm_cost_usd"))?.[1];
        expect(cost).toBe(10 + REPLY.split(" ").length); // input and output tokens, $1 each
      });

      it("the caller's signal before the first token: the SDK's APIUserAbortError", async () => {
        const provider = await server();
        provider.injector.inject("slow_first_token", { first: 1 }, { delayMs: NEVER_MS });
        const { sh } = instance();
        const caller = new AbortController();
        const stream = api.ask(heal(sh, clientOf(SDK, provider)), { signal: caller.signal });
        await eventually(() => provider.requests === 1, "the request");
        caller.abort();
        await expect(stream).rejects.toBeInstanceOf(SDK.APIUserAbortError);
        expect(provider.requests).toBe(1);
      });

      it("toReadableStream() works as on the SDK's stream", async () => {
        const provider = await server();
        const { sh } = instance();
        const stream = await api.ask(heal(sh, clientOf(SDK, provider)));
        const lines = await new Response(stream.toReadableStream()).text();
        const chunks = lines
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Chunk);
        expect(chunks.map(api.text).join("")).toBe(REPLY);
      });

      it("a stream cut before its first token is asked again: the whole answer", async () => {
        const provider = await server();
        provider.injector.inject("stream_cut", { first: 1 }, { afterTokens: 0 });
        const { sh, afterFailure, calls } = instance();
        const { seen, done } = read(api.ask(heal(sh, clientOf(SDK, provider))), api.text);
        await afterFailure(() => provider.requests < 2);
        await done;
        expect(seen).toMatchObject({ text: REPLY, error: undefined });
        expect(provider.requests).toBe(2);
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("a stream cut after its first tokens fails with what was delivered", async () => {
        const provider = await server();
        provider.injector.inject("stream_cut", { first: 1 }, { afterTokens: 3 });
        const { sh, calls } = instance();
        const { seen, done } = read(api.ask(heal(sh, clientOf(SDK, provider))), api.text);
        await done;
        expect(seen.text).toBe(FIRST_THREE);
        expect(isStreamInterruptedError(seen.error)).toBe(true);
        expect(isStreamTruncatedError((seen.error as Error).cause)).toBe(true);
        expect(provider.requests).toBe(1);
        expect(calls.map((c) => c.outcome)).toEqual(["error"]);
      });

      it("a stalled stream fails once its idle limit passes", async () => {
        const provider = await server();
        provider.injector.inject(
          "stream_stall",
          { first: 1 },
          { afterTokens: 3, silentMs: NEVER_MS },
        );
        const { sh, clock } = instance();
        const { seen, done } = read(api.ask(heal(sh, clientOf(SDK, provider))), api.text);
        await eventually(
          () => provider.stalled === 1 && seen.text === FIRST_THREE,
          "three tokens, then the stall",
        );
        await clock.advance(LIMIT_MS);
        await done;
        expect(seen.text).toBe(FIRST_THREE);
        expect(isStreamInterruptedError(seen.error)).toBe(true);
        expect(isStreamStalledError((seen.error as Error).cause)).toBe(true);
      });

      it(`a truncated finish (${api.truncated}) fails the stream`, async () => {
        const provider = await server();
        provider.injector.inject("finish_length", { first: 1 }, { afterTokens: 3 });
        const { sh } = instance();
        const { seen, done } = read(api.ask(heal(sh, clientOf(SDK, provider))), api.text);
        await done;
        expect(seen.text).toBe(FIRST_THREE);
        const cause = (seen.error as Error).cause;
        expect(isStreamTruncatedError(cause)).toBe(true);
        expect(cause).toMatchObject({ type: api.truncated });
      });

      it("buffer: a truncated finish is asked again before anything is shown", async () => {
        const provider = await server();
        provider.injector.inject("finish_length", { first: 1 }, { afterTokens: 3 });
        const { sh, afterFailure } = instance();
        const client = heal(sh, clientOf(SDK, provider), { afterFirstToken: "buffer" });
        const { seen, done } = read(api.ask(client), api.text);
        await afterFailure(() => provider.requests < 2);
        await done;
        expect(seen).toMatchObject({ text: REPLY, error: undefined });
      });

      it("restart: a cut stream starts again on the fallback client, onRestart told", async () => {
        const [primary, secondary] = [await server(), await server()];
        primary.injector.inject("stream_cut", { first: 1 }, { afterTokens: 3 });
        const { sh, afterFailure, calls } = instance({
          providers: [{ name: "openai" }, { name: "backup" }],
        });
        const restarts: StreamRestart[] = [];
        const client = heal(sh, clientOf(SDK, primary), {
          fallback: { provider: "backup", client: clientOf(SDK, secondary) },
          afterFirstToken: "restart",
          onRestart: (r) => restarts.push(r),
        });
        const { seen, done } = read(api.ask(client), api.text, restarts);
        await afterFailure(() => secondary.requests < 1);
        await done;
        expect(seen).toMatchObject({ text: REPLY, error: undefined });
        expect(restarts).toHaveLength(1);
        expect(restarts[0]).toMatchObject({ provider: "backup" });
        expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      it("a first token that never comes fails over to the fallback model", async () => {
        const provider = await server();
        provider.injector.inject("slow_first_token", { first: 1 }, { delayMs: NEVER_MS });
        const { sh, clock } = instance({ providers: [{ name: "big" }, { name: "small" }] });
        const client = heal(sh, clientOf(SDK, provider), {
          provider: "big",
          fallback: { provider: "small", model: "gpt-small" },
        });
        const { seen, done } = read(api.ask(client), api.text);
        await eventually(() => provider.requests === 1, "the first request");
        await clock.advance(LIMIT_MS);
        await done;
        expect(seen).toMatchObject({ text: REPLY, error: undefined });
        expect(provider.bodies.map((b) => b.model)).toEqual(["gpt-test", "gpt-small"]);
      });

      it("the SDK's stream() helper is healed: its request is retried", async () => {
        const provider = await server();
        provider.injector.inject("http_503", { first: 1 });
        const { sh, afterFailure, calls } = instance();
        const answer = api.helper(heal(sh, clientOf(SDK, provider)));
        await afterFailure(() => provider.requests < 2);
        expect(await answer).toBe(REPLY);
        expect(calls.map((c) => [c.tool, c.outcome])).toEqual([[tool, "recovered"]]);
      });

      it("the SDK's stream() helper refuses restart: it cannot start its answer again", async () => {
        const provider = await server();
        const { sh } = instance();
        const client = heal(sh, clientOf(SDK, provider), { afterFirstToken: "restart" });
        await expect(api.helper(client)).rejects.toMatchObject({
          field: "healOpenAI.options.afterFirstToken",
        });
        expect(provider.requests).toBe(0);
      });

      it("stream.controller.abort() ends the call and the stream, without an error", async () => {
        const provider = await server();
        provider.injector.inject(
          "stream_stall",
          { first: 1 },
          { afterTokens: 3, silentMs: NEVER_MS },
        );
        const { sh } = instance();
        const stream = await api.ask(heal(sh, clientOf(SDK, provider)));
        const { seen, done } = read(Promise.resolve(stream), api.text);
        await eventually(() => seen.text === FIRST_THREE, "three tokens");
        stream.controller.abort();
        await done;
        // As the SDK's own stream: an abort of its caller's ends it without an error.
        expect(seen).toMatchObject({ text: FIRST_THREE, error: undefined });
        expect(provider.requests).toBe(1);
      });
    });
  }
}
