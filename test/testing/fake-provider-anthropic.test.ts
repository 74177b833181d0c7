/** The fake provider's Anthropic Messages (`POST /v1/messages`), byte by byte over fetch. */
import { describe, expect, it } from "vitest";
import { events, MESSAGES, post, useProviders, USER } from "./wire-http.js";

const start = useProviders();

describe("fake provider: Anthropic Messages", () => {
  const usage = (output: number) => ({
    input_tokens: 10,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: output,
    service_tier: "standard",
  });

  it("a plain answer is a message with one text block and a request-id", async () => {
    const p = await start();
    const res = await post(p, MESSAGES, { model: "claude-x", max_tokens: 9, messages: USER });
    expect(res.headers.get("request-id")).toBe("req_fake_1");
    expect(await res.json()).toEqual({
      id: "msg_fake",
      type: "message",
      role: "assistant",
      model: "claude-x",
      content: [{ type: "text", text: "Hi there" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: usage(2),
    });
  });

  it("streams exactly Anthropic's events", async () => {
    const p = await start();
    const res = await post(p, MESSAGES, { model: "claude-x", messages: USER, stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("request-id")).toBe("req_fake_1");
    const start_ = {
      type: "message_start",
      message: {
        id: "msg_fake",
        type: "message",
        role: "assistant",
        model: "claude-x",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usage(1),
      },
    };
    const delta = (text: string) => ({
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text },
    });
    expect(await res.text()).toBe(
      (
        [
          ["message_start", start_],
          [
            "content_block_start",
            { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
          ],
          ["ping", { type: "ping" }],
          ["content_block_delta", delta("Hi")],
          ["content_block_delta", delta(" there")],
          ["content_block_stop", { type: "content_block_stop", index: 0 }],
          [
            "message_delta",
            {
              type: "message_delta",
              delta: { stop_reason: "end_turn", stop_sequence: null },
              usage: { output_tokens: 2 },
            },
          ],
          ["message_stop", { type: "message_stop" }],
        ] as const
      )
        .map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
        .join(""),
    );
  });

  it("empty: no content block, plain or streamed", async () => {
    const p = await start();
    p.injector.inject("empty", { first: 2 });
    expect(await (await post(p, MESSAGES, { messages: USER })).json()).toMatchObject({
      content: [],
      stop_reason: "end_turn",
      usage: { output_tokens: 0 },
    });
    const res = await post(p, MESSAGES, { messages: USER, stream: true });
    expect(events(await res.text()).map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "message_delta",
      "message_stop",
    ]);
  });

  it("finish_length: stop_reason max_tokens, plain and streamed", async () => {
    const p = await start({ reply: "one two three" });
    p.injector.inject("finish_length", { first: 2 });
    expect(await (await post(p, MESSAGES, { messages: USER })).json()).toMatchObject({
      content: [{ type: "text", text: "one two" }],
      stop_reason: "max_tokens",
    });
    const seen = events(await (await post(p, MESSAGES, { messages: USER, stream: true })).text());
    expect(seen.at(-2)?.data).toMatchObject({
      delta: { stop_reason: "max_tokens" },
      usage: { output_tokens: 2 },
    });
    expect(seen.at(-1)?.event).toBe("message_stop");
  });

  it("no_done: message_delta, then the stream ends without message_stop", async () => {
    const p = await start();
    p.injector.inject("no_done", { first: 1 });
    const seen = events(await (await post(p, MESSAGES, { messages: USER, stream: true })).text());
    expect(seen.at(-1)?.event).toBe("message_delta");
  });

  it.each([
    ["rate_limit", 429, "rate_limit_error"],
    ["http_500", 500, "api_error"],
    ["http_502", 502, "api_error"],
    ["http_503", 503, "api_error"],
    ["overloaded", 529, "overloaded_error"],
    ["context_length", 400, "invalid_request_error"],
    ["content_policy", 400, "invalid_request_error"],
    ["auth", 401, "authentication_error"],
  ] as const)("%s is a %i %s error with the request id", async (kind, status, type) => {
    const p = await start();
    p.injector.inject(kind, { first: 1 });
    const res = await post(p, MESSAGES, { messages: USER, stream: true });
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("request-id")).toBe("req_fake_1");
    expect(res.headers.get("retry-after")).toBeNull();
    expect(await res.json()).toEqual({
      type: "error",
      error: { type, message: expect.any(String) as unknown },
      request_id: "req_fake_1",
    });
  });

  it("rate_limit with retryAfterSeconds sends retry-after; message overrides the wording", async () => {
    const p = await start();
    p.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 0, message: "slow down" });
    const res = await post(p, MESSAGES, { messages: USER });
    expect(res.headers.get("retry-after")).toBe("0");
    expect(await res.json()).toMatchObject({ error: { message: "slow down" } });
  });

  it("a body that is not JSON, and a refused prefill, are 400 invalid_request_errors", async () => {
    const p = await start({ rejectPrefill: true });
    for (const body of [
      "{not json",
      { messages: [...USER, { role: "assistant", content: "x" }] },
    ]) {
      const res = await post(p, MESSAGES, body);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        type: "error",
        error: { type: "invalid_request_error" },
      });
    }
    expect(p.injector.calls).toBe(0);
  });
});
