/**
 * The fake provider's wire formats byte by byte, over real HTTP with fetch: routes, each API's
 * bodies, SSE events, error bodies and headers. fake-provider-sdks.test.ts proves the same
 * formats with the real clients; Chat Completions' own bytes are in fake-provider-faults.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  startFakeProvider,
  type FakeProvider,
  type FakeProviderOptions,
} from "../../src/testing/index.js";

const providers: FakeProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

async function start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
  const p = await startFakeProvider({ tokenIntervalMs: 0, reply: "Hi there", ...options });
  providers.push(p);
  return p;
}

function post(p: FakeProvider, path: string, body: unknown, method = "POST"): Promise<Response> {
  return fetch(`${p.origin}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(method === "GET" ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
}

const USER = [{ role: "user", content: "hi" }];
const RESPONSES = "/v1/responses";
const MESSAGES = "/v1/messages";
const GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent";
const GEMINI_SSE = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
const CONTENTS = [{ role: "user", parts: [{ text: "hi" }] }];

/** An SSE text's events: the `event:` name if any, and the parsed `data:`. */
function events(text: string): { event: string | undefined; data: Record<string, unknown> }[] {
  return text
    .split(/\r\n\r\n|\n\n/)
    .filter((block) => block !== "")
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice("event: ".length);
      const data = lines.find((l) => l.startsWith("data: "))?.slice("data: ".length) ?? "null";
      return { event, data: JSON.parse(data) as Record<string, unknown> };
    });
}

const RESPONSE_BASE = {
  id: "resp_fake",
  object: "response",
  created_at: 0,
  background: false,
  error: null,
  instructions: null,
  max_output_tokens: null,
  model: "gpt-5",
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: 1,
  text: { format: { type: "text" }, verbosity: "medium" },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  user: null,
  metadata: {},
};

const textPart = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text });

function responseUsage(output: number) {
  return {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 10 + output,
  };
}

describe("fake provider: routes", () => {
  it.each([
    ["/v1/chat/completions", "chat_completions"],
    ["/v1/responses", "responses"],
    ["/v1/messages", "anthropic_messages"],
    ["/v1/messages?beta=true", "anthropic_messages"],
    ["/v1beta/models/gemini-2.5-flash:generateContent", "gemini"],
    ["/v1/models/gemini-2.5-flash:generateContent", "gemini"],
    ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"],
  ] as const)("POST %s is answered by %s", async (path, api) => {
    const p = await start();
    const res = await post(p, path, { model: "m", messages: USER, input: "hi" });
    expect(res.status).toBe(200);
    await res.text();
    expect(p.byApi[api].requests).toBe(1);
    expect(p.requests).toBe(1);
  });

  it.each([
    ["POST", "/v1beta/models/:generateContent"],
    ["POST", "/v1beta/models/tuned/x:generateContent"],
    ["POST", "/v1beta/models/gemini-2.5-flash:countTokens"],
    ["POST", "/v1beta/models/gemini-2.5-flash"],
    ["POST", "/v1beta/models/%E0%A4:generateContent"],
    ["POST", "/v1beta/generateContent"],
    ["GET", "/v1beta/models/gemini-2.5-flash:generateContent"],
    ["GET", "/v1/messages"],
    ["POST", "/v1/messages/count_tokens"],
    ["POST", "/v1/responses/resp_1"],
    ["POST", "/v1/chat/completionsX"],
  ])("%s %s is a 404, not counted", async (method, path) => {
    const p = await start();
    const res = await post(p, path, { contents: CONTENTS }, method);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      error: {
        message: `no route ${method} ${path}`,
        type: "invalid_request_error",
        code: null,
        param: null,
      },
    });
    expect(p.requests).toBe(0);
    expect(p.injector.calls).toBe(0);
  });

  it("gives a Gemini model's %-escapes back decoded", async () => {
    const p = await start();
    const res = await post(p, "/v1beta/models/gemini%2D2.5:generateContent", {
      contents: CONTENTS,
    });
    expect(await res.json()).toMatchObject({ modelVersion: "gemini-2.5" });
  });

  it("counts every API's requests on one server, and keeps their bodies in arrival order", async () => {
    const p = await start();
    const bodies = [
      [RESPONSES, { model: "gpt-5", input: "hi", stream: true }],
      [MESSAGES, { model: "claude", max_tokens: 9, messages: USER }],
      [GEMINI_SSE, { contents: CONTENTS }],
      ["/v1/chat/completions", { model: "gpt-4o", messages: USER }],
      [GEMINI, { contents: CONTENTS }],
    ] as const;
    for (const [path, body] of bodies) await (await post(p, path, body)).text();
    expect(p.bodies).toEqual(bodies.map(([, body]) => body));
    expect({ requests: p.requests, streamed: p.streamed }).toEqual({ requests: 5, streamed: 2 });
    expect(p.byApi).toEqual({
      chat_completions: { requests: 1, streamed: 0, stalled: 0 },
      responses: { requests: 1, streamed: 1, stalled: 0 },
      anthropic_messages: { requests: 1, streamed: 0, stalled: 0 },
      gemini: { requests: 2, streamed: 1, stalled: 0 },
    });
  });

  it("gives the origin beside OpenAI's /v1 base URL", async () => {
    const p = await start();
    expect(p.origin).toBe(`http://127.0.0.1:${p.port}`);
    expect(p.url).toBe(`${p.origin}/v1`);
  });
});

describe("fake provider: OpenAI Responses", () => {
  it("a plain answer is a completed response with its output and usage", async () => {
    const p = await start();
    const res = await post(p, RESPONSES, { model: "gpt-5", input: "hi" });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("x-request-id")).toBe("req_fake_1");
    expect(await res.json()).toEqual({
      ...RESPONSE_BASE,
      status: "completed",
      completed_at: 0,
      incomplete_details: null,
      output: [
        {
          id: "msg_fake",
          type: "message",
          status: "completed",
          content: [textPart("Hi there")],
          role: "assistant",
        },
      ],
      usage: responseUsage(2),
    });
  });

  it("streams the API's events, named, numbered, ending with response.completed", async () => {
    const p = await start();
    const res = await post(p, RESPONSES, { model: "gpt-5", input: "hi", stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const seen = events(await res.text());
    expect(seen.map((e) => e.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    seen.forEach((e, i) => {
      expect(e.data.type).toBe(e.event);
      expect(e.data.sequence_number).toBe(i);
    });
    const at = { item_id: "msg_fake", output_index: 0, content_index: 0 };
    expect(seen[0]?.data.response).toEqual({
      ...RESPONSE_BASE,
      status: "in_progress",
      completed_at: null,
      incomplete_details: null,
      output: [],
      usage: null,
    });
    expect(seen[2]?.data.item).toEqual({
      id: "msg_fake",
      type: "message",
      status: "in_progress",
      content: [],
      role: "assistant",
    });
    expect(seen[3]?.data).toMatchObject({ ...at, part: textPart("") });
    expect(seen.slice(4, 6).map((e) => e.data)).toEqual([
      { type: "response.output_text.delta", sequence_number: 4, ...at, delta: "Hi", logprobs: [] },
      {
        type: "response.output_text.delta",
        sequence_number: 5,
        ...at,
        delta: " there",
        logprobs: [],
      },
    ]);
    expect(seen[6]?.data).toMatchObject({ ...at, text: "Hi there" });
    expect(seen[9]?.data.response).toMatchObject({
      status: "completed",
      output: [{ status: "completed", content: [textPart("Hi there")] }],
      usage: responseUsage(2),
    });
  });

  it("finish_length: incomplete for max_output_tokens, streamed as response.incomplete", async () => {
    const p = await start({ reply: "one two three" });
    p.injector.inject("finish_length", { first: 2 });
    const plain: unknown = await (await post(p, RESPONSES, { input: "hi" })).json();
    expect(plain).toMatchObject({
      status: "incomplete",
      completed_at: null,
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ status: "incomplete", content: [textPart("one two")] }],
      usage: { output_tokens: 2 },
    });
    const res = await post(p, RESPONSES, { input: "hi", stream: true });
    const last = events(await res.text()).at(-1);
    expect(last?.event).toBe("response.incomplete");
    expect(last?.data.response).toEqual(plain);
  });

  it("no_done: the output item is done, and the stream ends without response.completed", async () => {
    const p = await start();
    p.injector.inject("no_done", { first: 1 });
    const seen = events(await (await post(p, RESPONSES, { input: "hi", stream: true })).text());
    expect(seen.at(-1)?.event).toBe("response.output_item.done");
  });

  it("malformed_event: a text delta cut mid-JSON, the next event numbered on", async () => {
    const p = await start();
    p.injector.inject("malformed_event", { first: 1 }, { atToken: 2 });
    const text = await (await post(p, RESPONSES, { input: "hi", stream: true })).text();
    expect(text).toContain(
      'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_fake","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}\n\n' +
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_fake","delta":\n\n' +
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":5,',
    );
  });

  it("errors are OpenAI's, with the request id", async () => {
    const p = await start();
    p.injector.inject("auth", { first: 1 });
    const res = await post(p, RESPONSES, { input: "hi" });
    expect(res.status).toBe(401);
    expect(res.headers.get("x-request-id")).toBe("req_fake_1");
    expect(await res.json()).toMatchObject({ error: { code: "invalid_api_key" } });
  });

  it("rejectPrefill looks at the last item of input", async () => {
    const p = await start({ rejectPrefill: true });
    const input = [...USER, { role: "assistant", content: "Sure" }];
    const res = await post(p, RESPONSES, { input });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { param: "input" } });
    expect((await post(p, RESPONSES, { input: "a string input" })).status).toBe(200);
  });
});

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

describe("fake provider: Gemini", () => {
  const chunk = (text: string | undefined, tokens: number, finishReason?: string) => ({
    candidates: [
      {
        content: { ...(text === undefined ? {} : { parts: [{ text }] }), role: "model" },
        ...(finishReason ? { finishReason } : {}),
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: 10,
      candidatesTokenCount: tokens,
      totalTokenCount: 10 + tokens,
    },
    modelVersion: "gemini-2.5-flash",
    responseId: "fake-response",
  });

  it("a plain answer is a GenerateContentResponse with its finishReason and usage", async () => {
    const p = await start();
    const res = await post(p, GEMINI, { contents: CONTENTS });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual(chunk("Hi there", 2, "STOP"));
  });

  it("streams chunks with running usage, CRLF between events, the finishReason last", async () => {
    const p = await start();
    const res = await post(p, GEMINI_SSE, { contents: CONTENTS });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(await res.text()).toBe(
      [chunk("Hi", 1), chunk(" there", 2), chunk("", 2, "STOP")]
        .map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`)
        .join(""),
    );
    expect(p.streamed).toBe(1);
  });

  it("a body's stream flag does not decide: the path does", async () => {
    const p = await start();
    const res = await post(p, GEMINI, { contents: CONTENTS, stream: true });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(p.streamed).toBe(0);
  });

  it("empty: a candidate without parts; finish_length: MAX_TOKENS", async () => {
    const p = await start({ reply: "one two three" });
    p.injector.inject("empty", { first: 1 });
    expect(await (await post(p, GEMINI, { contents: CONTENTS })).json()).toEqual(
      chunk(undefined, 0, "STOP"),
    );
    p.injector.inject("finish_length", { first: 1 });
    expect(await (await post(p, GEMINI, { contents: CONTENTS })).json()).toEqual(
      chunk("one two", 2, "MAX_TOKENS"),
    );
  });

  it("no_done: every token, but no chunk with a finishReason", async () => {
    const p = await start();
    p.injector.inject("no_done", { first: 1 });
    const seen = events(await (await post(p, GEMINI_SSE, { contents: CONTENTS })).text());
    expect(seen.map((e) => e.data)).toEqual([chunk("Hi", 1), chunk(" there", 2)]);
  });

  it("rate_limit: RESOURCE_EXHAUSTED with a QuotaFailure, and a RetryInfo when it has a wait", async () => {
    const p = await start();
    const bodies = [];
    for (const options of [{ retryAfterSeconds: 30 }, {}]) {
      p.injector.clear();
      p.injector.inject("rate_limit", { first: 1 }, options);
      const res = await post(p, GEMINI, { contents: CONTENTS });
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBeNull();
      bodies.push(await res.json());
    }
    const quota = {
      "@type": "type.googleapis.com/google.rpc.QuotaFailure",
      violations: [
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
          quotaId: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        },
      ],
    };
    const error = {
      code: 429,
      message:
        "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
      status: "RESOURCE_EXHAUSTED",
    };
    expect(bodies).toEqual([
      {
        error: {
          ...error,
          details: [
            quota,
            { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "30s" },
          ],
        },
      },
      { error: { ...error, details: [quota] } },
    ]);
  });

  it.each([
    ["http_500", 500, "INTERNAL"],
    ["http_502", 502, "UNAVAILABLE"],
    ["http_503", 503, "UNAVAILABLE"],
    ["overloaded", 503, "UNAVAILABLE"],
    ["context_length", 400, "INVALID_ARGUMENT"],
  ] as const)("%s is a %i %s error", async (kind, code, status) => {
    const p = await start();
    p.injector.inject(kind, { first: 1 });
    const res = await post(p, GEMINI_SSE, { contents: CONTENTS });
    expect(res.status).toBe(code);
    expect(await res.json()).toEqual({
      error: { code, message: expect.any(String) as unknown, status },
    });
  });

  it("auth: a 400 INVALID_ARGUMENT with ErrorInfo API_KEY_INVALID, as for a bad key", async () => {
    const p = await start();
    p.injector.inject("auth", { first: 1 });
    const res = await post(p, GEMINI, { contents: CONTENTS });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: {
        status: "INVALID_ARGUMENT",
        details: [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID" },
        ],
      },
    });
  });

  it("content_policy: a 200 with the prompt's blockReason and no candidates, plain or streamed", async () => {
    const p = await start();
    p.injector.inject("content_policy", { first: 2 }, { message: "no" });
    const blocked = {
      promptFeedback: { blockReason: "SAFETY", blockReasonMessage: "no" },
      usageMetadata: { promptTokenCount: 10, totalTokenCount: 10 },
      responseId: "fake-response",
    };
    const plain = await post(p, GEMINI, { contents: CONTENTS });
    expect(plain.status).toBe(200);
    expect(await plain.json()).toEqual(blocked);
    const streamed = await post(p, GEMINI_SSE, { contents: CONTENTS });
    expect(streamed.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(await streamed.text()).toBe(`data: ${JSON.stringify(blocked)}\r\n\r\n`);
  });

  it("a body that is not JSON, and contents ending with the model's turn, are 400 INVALID_ARGUMENT", async () => {
    const p = await start({ rejectPrefill: true });
    const prefill = { contents: [...CONTENTS, { role: "model", parts: [{ text: "Sure" }] }] };
    for (const body of ["[1,", prefill]) {
      const res = await post(p, GEMINI, body);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        error: { code: 400, status: "INVALID_ARGUMENT" },
      });
    }
    expect(p.injector.calls).toBe(0);
  });
});

describe("fake provider: malformed_json in each API", () => {
  it.each([
    [RESPONSES, { input: "hi" }],
    [MESSAGES, { messages: USER }],
    [GEMINI, { contents: CONTENTS }],
  ])("%s: a 200 JSON body cut mid-JSON", async (path, body) => {
    const p = await start();
    p.injector.inject("malformed_json", { first: 1 });
    const res = await post(p, path, body);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    const text = await res.text();
    expect(text.startsWith("{")).toBe(true);
    expect(() => JSON.parse(text) as unknown).toThrow(SyntaxError);
  });
});

describe("fake provider: stream_error in each API", () => {
  it.each([
    [
      "/v1/chat/completions",
      { messages: USER, stream: true },
      'data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null,"param":null}}\n\n',
    ],
    [
      RESPONSES,
      { input: "hi", stream: true },
      'event: error\ndata: {"type":"error","sequence_number":5,"code":"server_error","message":"The server had an error while processing your request.","param":null}\n\n',
    ],
    [
      MESSAGES,
      { messages: USER, stream: true },
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_fake_1"}\n\n',
    ],
    [
      GEMINI_SSE,
      { contents: CONTENTS },
      'data: {"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}\r\n\r\n',
    ],
  ])("%s: the API's error event after the first token, then the end", async (path, body, last) => {
    const p = await start();
    p.injector.inject("stream_error", { first: 1 });
    const res = await post(p, path, body);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.endsWith(last)).toBe(true);
    expect(text).toContain('"Hi"');
    expect(text).not.toContain('" there"');
  });
});
