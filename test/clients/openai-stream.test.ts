/**
 * `selfheal/openai`: Chat Completion streams healed by `sh.stream`, end to end over real SSE
 * from fake OpenAI-compatible servers on 127.0.0.1, through both ways users stream: the OpenAI
 * SDK's `stream: true`, and `fetch` read by `sseChunks`. Each stream fault through each
 * `afterFirstToken` mode. selfheal runs on a VirtualClock: its limits pass only when a test
 * advances it, while the servers stream in real time.
 */
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import {
  chatCompletionChunks,
  sseChunks,
  type ChatCompletionChunk,
} from "../../src/clients/openai.js";
import {
  createSelfHealing,
  HttpResponseError,
  isStreamInterruptedError,
  isStreamRestart,
  isStreamStalledError,
  isStreamTruncatedError,
  type CallContext,
  type StreamMode,
  type ToolCallEvent,
} from "../../src/index.js";
import { startFakeProvider, VirtualClock, type FakeProvider } from "../../src/testing/index.js";
import { eventually } from "../helpers/otlp.js";

const ANSWER = Array.from({ length: 12 }, (_, i) => `w${i + 1}`).join(" ");
const FIRST_FIVE = ANSWER.split(" ").slice(0, 5).join(" ");
const LIMIT_MS = 5_000;
const NEVER_MS = 600_000;
type Route = "primary" | "fallback";

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

type Open = (
  servers: Record<Route, FakeProvider>,
) => (prompt: string, ctx: CallContext) => Promise<AsyncIterable<ChatCompletionChunk>>;

const CLIENTS: Record<string, Open> = {
  "OpenAI SDK": (servers) => {
    const clients = {
      primary: new OpenAI({ baseURL: servers.primary.url, apiKey: "sk-fake", maxRetries: 0 }),
      fallback: new OpenAI({ baseURL: servers.fallback.url, apiKey: "sk-fake", maxRetries: 0 }),
    };
    return async (prompt, ctx) =>
      clients[ctx.provider as Route].chat.completions.create(
        { model: "m", messages: [{ role: "user", content: prompt }], stream: true },
        { signal: ctx.signal },
      );
  },
  "fetch + sseChunks": (servers) => async (prompt, ctx) => {
    const res = await fetch(`${servers[ctx.provider as Route].url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        stream: true,
        messages: [{ role: "user", content: prompt }],
      }),
      signal: ctx.signal,
    });
    if (!res.ok) throw await HttpResponseError.from(res);
    return sseChunks(res);
  },
};

async function setup(client: Open, mode: StreamMode, arm: (primary: FakeProvider) => void) {
  const primary = await startFakeProvider({ reply: ANSWER, tokenIntervalMs: 1 });
  const fallback = await startFakeProvider({
    reply: ANSWER,
    tokenIntervalMs: 1,
    rejectPrefill: true,
  });
  open.push(primary, fallback);
  arm(primary);
  const clock = new VirtualClock();
  const sh = createSelfHealing({
    agent: "openai-stream",
    clock,
    logger: { warn: () => undefined },
    recovery: { providers: [{ name: "primary" }, { name: "fallback" }], random: () => 0 },
  });
  open.push(sh);
  // Chunks each route's stream handed to selfheal: a test lets a limit pass only once they did.
  const received = { primary: 0, fallback: 0 };
  const stream = client({ primary, fallback });
  async function* counted(prompt: string, ctx: CallContext) {
    for await (const chunk of await stream(prompt, ctx)) {
      received[ctx.provider as Route]++;
      yield chunk;
    }
  }
  const calls: ToolCallEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  const answer = sh.stream(
    "answer",
    {
      readOnly: true,
      providers: ["primary", "fallback"],
      format: chatCompletionChunks,
      firstTokenMs: LIMIT_MS,
      idleMs: LIMIT_MS,
      afterFirstToken: mode,
    },
    counted,
  );
  return { primary, fallback, clock, calls, answer, received };
}

/** Reads the stream as a UI would: text, dropped at a restart marker; the error it ends with. */
function read(stream: AsyncIterable<unknown>) {
  const seen = { text: "", restarts: 0, error: undefined as unknown };
  const done = (async () => {
    try {
      for await (const item of stream) {
        if (isStreamRestart(item)) {
          seen.restarts++;
          seen.text = "";
        } else seen.text += (item as ChatCompletionChunk).choices[0]?.delta?.content ?? "";
      }
    } catch (error) {
      seen.error = error;
    }
  })();
  return { seen, done };
}

for (const [name, client] of Object.entries(CLIENTS)) {
  describe(`selfheal/openai through ${name}, over real SSE`, () => {
    for (const mode of ["fail", "restart", "buffer"] as const) {
      it(`${mode}: a slow first token fails over, nothing shown before`, async () => {
        const s = await setup(client, mode, (p) =>
          p.injector.inject("slow_first_token", { first: 1 }, { delayMs: NEVER_MS }),
        );
        const { seen, done } = read(s.answer("hi"));
        await eventually(() => s.primary.requests === 1, "the primary's request");
        await s.clock.advance(LIMIT_MS);
        await done;
        expect(seen).toMatchObject({ text: ANSWER, restarts: 0, error: undefined });
        expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
      });

      for (const fault of ["stream_cut", "stream_stall", "malformed_event"] as const) {
        it(`${mode}: ${fault} after the first tokens`, async () => {
          const s = await setup(client, mode, (p) =>
            p.injector.inject(
              fault,
              { first: 1 },
              { afterTokens: 5, silentMs: NEVER_MS, atToken: 6 },
            ),
          );
          const stream = s.answer("hi");
          const { seen, done } = read(stream);
          if (fault === "stream_stall") {
            // The five tokens are out and the server is silent: only then may the idle limit pass.
            await eventually(
              () => s.primary.stalled === 1 && s.received.primary === 6,
              "the primary's role chunk and five tokens, then its stall",
            );
            await s.clock.advance(LIMIT_MS);
          }
          await done;
          if (mode === "fail") {
            expect(seen.text).toBe(FIRST_FIVE);
            expect(isStreamInterruptedError(seen.error)).toBe(true);
            const cause = (seen.error as Error).cause;
            expect(
              fault === "stream_stall"
                ? isStreamStalledError(cause)
                : isStreamTruncatedError(cause),
            ).toBe(true);
            expect(s.fallback.requests).toBe(0);
            expect(s.calls.map((c) => c.outcome)).toEqual(["error"]);
            await expect(stream.result).rejects.toBe(seen.error);
          } else {
            expect(seen).toMatchObject({
              text: ANSWER,
              restarts: mode === "restart" ? 1 : 0,
              error: undefined,
            });
            expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
            await expect(stream.result).resolves.toMatchObject({
              outcome: "recovered",
              provider: "fallback",
              finishReason: "stop",
            });
          }
        });
      }

      it(`${mode}: no [DONE] after the finish reason is a whole answer`, async () => {
        const s = await setup(client, mode, (p) => p.injector.inject("no_done", { first: 1 }));
        const stream = s.answer("hi");
        const { seen, done } = read(stream);
        await done;
        expect(seen).toMatchObject({ text: ANSWER, restarts: 0, error: undefined });
        expect(s.fallback.requests).toBe(0);
        await expect(stream.result).resolves.toMatchObject({
          outcome: "success",
          finishReason: "stop",
        });
      });
    }
  });
}

describe("chatCompletionChunks", () => {
  it("reads content, refusals and tool calls as answer tokens, reasoning as progress, finish and usage", () => {
    const r = (chunk: ChatCompletionChunk) => chatCompletionChunks.read(chunk);
    expect(r({ choices: [{ delta: { role: "assistant", content: "" } }] })).toBeUndefined();
    expect(r({ choices: [{ delta: { content: "Hi" } }] })).toEqual({ token: true, answer: true });
    expect(r({ choices: [{ delta: { content: " " } }] })).toEqual({ token: true });
    expect(r({ choices: [{ delta: { refusal: "No." } }] })).toEqual({ token: true, answer: true });
    expect(r({ choices: [{ delta: { tool_calls: [{ index: 0 }] } }] })).toEqual({
      token: true,
      answer: true,
    });
    expect(r({ choices: [{ delta: { reasoning_content: "hmm" } }] })).toEqual({ token: true });
    expect(r({ choices: [{ delta: {}, finish_reason: "length" }] })).toMatchObject({
      finishReason: "length",
    });
    expect(r({ choices: [], usage: { completion_tokens: 9 } })).toMatchObject({ outputTokens: 9 });
  });

  it("sseChunks throws on an event that is not a chunk, and on a streamed error event", async () => {
    const body = (events: string[]) =>
      new Response(events.map((e) => `data: ${e}\n\n`).join(""), {
        headers: { "content-type": "text/event-stream" },
      });
    const collect = async (res: Response) => {
      const out: unknown[] = [];
      for await (const c of sseChunks(res)) out.push(c);
      return out;
    };
    await expect(
      collect(body(['{"choices":[]}', "[DONE]", '{"choices":[]}'])),
    ).resolves.toHaveLength(1);
    await expect(collect(body(['{"choices":[{"delta":{"content":']))).rejects.toThrow(SyntaxError);
    await expect(collect(body(['{"id":1}']))).rejects.toThrow(/not a chat.completion.chunk/);
    await expect(
      collect(body(['{"error":{"message":"overloaded","type":"overloaded_error"}}'])),
    ).rejects.toMatchObject({ message: "overloaded", type: "overloaded_error" });
  });
});
