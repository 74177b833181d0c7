/**
 * The fake provider's routes and what every API shares, byte by byte over real HTTP with fetch.
 * Each API's own bytes: fake-provider-{responses,anthropic,gemini}.test.ts (Chat Completions':
 * fake-provider-faults.test.ts); the same formats with the real clients:
 * fake-provider-sdks.test.ts.
 */
import { describe, expect, it } from "vitest";
import {
  CONTENTS,
  GEMINI,
  GEMINI_SSE,
  MESSAGES,
  post,
  RESPONSES,
  useProviders,
  USER,
} from "./wire-http.js";

const start = useProviders();

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
