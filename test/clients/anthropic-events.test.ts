/**
 * `anthropicMessageEvents`: how selfheal reads Anthropic's streamed Messages events, on the
 * event sequences the API sends (text, thinking, tool use, each stop reason, `error` events),
 * read as they are and as the real `@anthropic-ai/sdk` yields them from a server on 127.0.0.1;
 * and how the errors such a stream throws are diagnosed.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ANTHROPIC_FAIL_ON_FINISH,
  anthropicMessageEvents,
  type AnthropicMessageEvent,
} from "../../src/clients/anthropic-events.js";
import { createSelfHealing, StreamTruncatedError, type ChunkInfo } from "../../src/index.js";
import {
  errorEvent,
  messageEvents,
  startAnthropicServer,
  type AnthropicServer,
  type SseEvent,
} from "./anthropic-server.js";

const read = (event: AnthropicMessageEvent) => anthropicMessageEvents.read(event);
const eventsOf = (sse: readonly SseEvent[]) => sse.map((e) => e.data as AnthropicMessageEvent);

/** What a stream of events amounts to, as the engine reads it (the last finish reason wins). */
function summary(events: readonly AnthropicMessageEvent[]) {
  const infos = events.map(read).filter((i): i is ChunkInfo => i !== undefined);
  return {
    tokens: infos.filter((i) => i.token).length,
    answered: infos.some((i) => i.answer),
    firstToken: events.findIndex((e) => read(e)?.token),
    finishReason: infos.findLast((i) => i.finishReason !== undefined)?.finishReason,
    outputTokens: infos.findLast((i) => i.outputTokens !== undefined)?.outputTokens,
    errors: infos.filter((i) => i.error !== undefined).map((i) => i.error),
  };
}

describe("anthropicMessageEvents", () => {
  it("completes at the stop reason followed by message_stop (an end without both is a cut)", () => {
    expect(anthropicMessageEvents.completion).toBe("finish-and-end");
    expect(read({ type: "message_stop" })).toEqual({ end: true });
  });

  it("reads the input tokens (the cache's included) and the model from message_start", () => {
    const start = {
      type: "message_start",
      message: {
        model: "claude-sonnet-4-5-20250929",
        usage: { input_tokens: 5, cache_creation_input_tokens: 7, cache_read_input_tokens: 11 },
      },
    };
    expect(read(start)).toEqual({ inputTokens: 23 });
    expect(anthropicMessageEvents.responseModel?.(start)).toBe("claude-sonnet-4-5-20250929");
    expect(anthropicMessageEvents.responseModel?.({ type: "message_delta" })).toBeUndefined();
    expect(read({ type: "message_start", message: { usage: { input_tokens: -1 } } })).toBe(
      undefined,
    );
  });

  it("reads a text answer: its deltas are answer tokens, message_delta the finish and usage", () => {
    const events = eventsOf(messageEvents(["Hello", "there."], { outputTokens: 9 }));
    expect(summary(events)).toEqual({
      tokens: 2,
      answered: true,
      firstToken: events.findIndex((e) => e.type === "content_block_delta"),
      finishReason: "end_turn",
      outputTokens: 9,
      errors: [],
    });
  });

  it("reads thinking as tokens that are no answer, the text after it as the answer", () => {
    const thinkingOnly = eventsOf(messageEvents([], { thinking: ["Let me", " think."] }));
    expect(summary(thinkingOnly)).toMatchObject({ tokens: 2, answered: false });
    const both = eventsOf(messageEvents(["Four."], { thinking: ["2+2"] }));
    expect(summary(both)).toMatchObject({ tokens: 2, answered: true, finishReason: "end_turn" });
    // The first token is the thinking, before any text.
    expect(both[summary(both).firstToken]).toMatchObject({ delta: { type: "thinking_delta" } });
  });

  it("reads a tool call (its block and input JSON) as the answer, stop reason tool_use", () => {
    const events = eventsOf(
      messageEvents([], {
        toolUse: { name: "get_weather", input: { city: "Paris" } },
        stopReason: "tool_use",
      }),
    );
    expect(summary(events)).toMatchObject({ answered: true, finishReason: "tool_use" });
    expect(read({ type: "content_block_start", content_block: { type: "tool_use" } })).toEqual({
      token: true,
      answer: true,
    });
    expect(
      read({ type: "content_block_delta", delta: { type: "input_json_delta", partial_json: "" } }),
    ).toEqual({ token: true, answer: true });
    expect(
      read({ type: "content_block_start", content_block: { type: "server_tool_use" } }),
    ).toEqual({ token: true, answer: true });
  });

  it("passes each stop reason on; max_tokens, the context window and refusal fail by default", () => {
    for (const stopReason of [
      "end_turn",
      "max_tokens",
      "stop_sequence",
      "tool_use",
      "pause_turn",
      "refusal",
      "model_context_window_exceeded",
    ]) {
      expect(summary(eventsOf(messageEvents(["Hi"], { stopReason }))).finishReason).toBe(
        stopReason,
      );
    }
    expect([...ANTHROPIC_FAIL_ON_FINISH]).toEqual([
      "max_tokens",
      "model_context_window_exceeded",
      "refusal",
    ]);
    expect(Object.isFrozen(ANTHROPIC_FAIL_ON_FINISH)).toBe(true);
  });

  it("reads message_delta's usage without a stop reason, and nothing from an empty one", () => {
    expect(
      read({ type: "message_delta", delta: { stop_reason: null }, usage: { output_tokens: 3 } }),
    ).toEqual({
      finishReason: undefined,
      outputTokens: 3,
    });
    expect(read({ type: "message_delta", delta: null, usage: null })).toBeUndefined();
    expect(read({ type: "message_delta" })).toBeUndefined();
  });

  it("takes no token count that is not a whole number at least 0 (a server's junk)", () => {
    for (const junk of [-5, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "7", null]) {
      expect(
        read({
          type: "message_delta",
          delta: { stop_reason: "end_turn" },
          usage: { output_tokens: junk as number },
        }),
      ).toEqual({ finishReason: "end_turn", outputTokens: undefined });
    }
  });

  it("gives no token for the events around the content, nor for empty deltas", () => {
    for (const type of ["message_start", "content_block_stop", "message_stop", "ping"]) {
      expect(read({ type, message: { usage: { input_tokens: 5 } } })?.token).toBeUndefined();
    }
    expect(
      read({ type: "content_block_start", content_block: { type: "text", text: "" } }),
    ).toBeUndefined();
    expect(
      read({ type: "content_block_start", content_block: { type: "thinking", thinking: "" } }),
    ).toBeUndefined();
    expect(
      read({ type: "content_block_delta", delta: { type: "text_delta", text: "" } }),
    ).toBeUndefined();
    expect(
      read({ type: "content_block_delta", delta: { type: "thinking_delta", thinking: "" } }),
    ).toBeUndefined();
    expect(
      read({
        type: "content_block_delta",
        delta: { type: "signature_delta" },
      }),
    ).toBeUndefined();
  });

  it("reads blank text as progress, not an answer", () => {
    expect(
      read({ type: "content_block_delta", delta: { type: "text_delta", text: " \n" } }),
    ).toEqual({
      token: true,
    });
    expect(
      read({ type: "content_block_start", content_block: { type: "text", text: "Hi" } }),
    ).toEqual({
      token: true,
      answer: true,
    });
  });

  it("reads citations, redacted thinking, server tool results and kinds it does not know as progress", () => {
    const progress = { token: true };
    expect(read({ type: "content_block_delta", delta: { type: "citations_delta" } })).toEqual(
      progress,
    );
    expect(read({ type: "content_block_delta", delta: { type: "some_future_delta" } })).toEqual(
      progress,
    );
    for (const type of ["redacted_thinking", "web_search_tool_result", "some_future_block"]) {
      expect(read({ type: "content_block_start", content_block: { type } })).toEqual(progress);
    }
  });

  it("never throws on events missing their fields", () => {
    const odd: AnthropicMessageEvent[] = [
      { type: "content_block_delta" },
      { type: "content_block_delta", delta: null },
      { type: "content_block_start", content_block: null },
      { type: "content_block_start" },
      { type: "error" },
      { type: "error", error: null },
      { type: "" },
    ];
    for (const event of odd) expect(() => read(event)).not.toThrow();
  });

  it("reads an error event as the failure it names, with its type and body", () => {
    const info = read(errorEvent("overloaded_error", "Overloaded").data as AnthropicMessageEvent);
    const error = info?.error as Error & { type?: string; error?: unknown };
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toBe("Overloaded");
    expect(error.type).toBe("overloaded_error");
    expect(error.error).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: "Overloaded" },
    });
    expect((read({ type: "error" })?.error as Error).message).toBe("streamed error event");
  });
});

describe("anthropicMessageEvents on what @anthropic-ai/sdk yields", () => {
  let server: AnthropicServer;
  let client: Anthropic;
  beforeAll(async () => {
    server = await startAnthropicServer();
    client = new Anthropic({ apiKey: "sk-ant-test", baseURL: server.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  const streamed = async () => {
    const events: AnthropicMessageEvent[] = [];
    const stream = await client.messages.create({
      model: "claude-sonnet-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: "Hi" }],
      stream: true,
    });
    for await (const event of stream) events.push(event);
    return events;
  };

  it("yields the wire's events but the ping, and they read the same", async () => {
    const sent = messageEvents(["The", "answer."], { thinking: ["Hm."] });
    server.answer({ kind: "stream", events: sent });
    const events = await streamed();
    const withoutPing = eventsOf(sent).filter((e) => e.type !== "ping");
    expect(events).toEqual(withoutPing);
    const { firstToken, ...read } = summary(events);
    const { firstToken: sentFirst, ...sentRead } = summary(eventsOf(sent));
    expect(read).toEqual(sentRead);
    expect(events[firstToken]).toEqual(eventsOf(sent)[sentFirst]);
  });

  it("throws the error event, read as the SDK's APIError of that type", async () => {
    server.answer({
      kind: "stream",
      events: [...messageEvents(["Hi"]).slice(0, 4), errorEvent("overloaded_error", "Overloaded")],
    });
    const error = await streamed().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect(error).toMatchObject({ status: undefined, type: "overloaded_error" });
  });
});

describe("diagnosis of what an Anthropic stream throws", () => {
  let server: AnthropicServer;
  let client: Anthropic;
  const sh = createSelfHealing({ agent: "anthropic-events", logger: { warn: () => undefined } });
  beforeAll(async () => {
    server = await startAnthropicServer();
    client = new Anthropic({ apiKey: "sk-ant-test", baseURL: server.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
    await sh.close();
  });

  const thrown = async (event: SseEvent) => {
    server.answer({ kind: "stream", events: [...messageEvents(["Hi"]).slice(0, 3), event] });
    try {
      const stream = await client.messages.create({
        model: "claude-sonnet-4-5",
        max_tokens: 64,
        messages: [{ role: "user", content: "Hi" }],
        stream: true,
      });
      for await (const event of stream) expect(event.type).not.toBe("error");
    } catch (e) {
      return e;
    }
    throw new Error("the stream did not throw");
  };

  for (const [type, pattern, rule] of [
    ["overloaded_error", "SERVICE_DOWN", "http-5xx-unavailable"],
    ["rate_limit_error", "RATE_LIMIT", "rate-limit-code"],
    ["api_error", "SERVICE_DOWN", "http-500"],
  ] as const) {
    it(`an ${type} event mid-stream (the SDK's APIError, no status) is ${pattern}`, async () => {
      const error = await thrown(errorEvent(type, "An error occurred."));
      const d = await sh.diagnose(error);
      expect({ pattern: d.pattern, rule: d.rule }).toEqual({ pattern, rule });
      // The same error in band, as the format reads it from raw events.
      const inBand = read(
        errorEvent(type, "An error occurred.").data as AnthropicMessageEvent,
      )?.error;
      expect((await sh.diagnose(inBand)).pattern).toBe(pattern);
    });
  }

  it("a stream that stopped at max_tokens is STREAM_TRUNCATED; at refusal CONTENT_POLICY, never retried", async () => {
    const progress = { chunks: 9, firstTokenMs: 5 };
    const truncated = await sh.diagnose(
      new StreamTruncatedError("anthropic.messages:stream", "max_tokens", progress),
    );
    expect({ pattern: truncated.pattern, retryable: truncated.retryable }).toEqual({
      pattern: "STREAM_TRUNCATED",
      retryable: true,
    });
    const refused = await sh.diagnose(
      new StreamTruncatedError("anthropic.messages:stream", "refusal", progress),
    );
    expect({
      pattern: refused.pattern,
      rule: refused.rule,
      strategies: refused.strategies,
    }).toEqual({
      pattern: "CONTENT_POLICY",
      rule: "stream-content-filter",
      strategies: [],
    });
  });
});
