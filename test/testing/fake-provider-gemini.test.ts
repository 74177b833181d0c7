/** The fake provider's Gemini (`:generateContent`, `:streamGenerateContent`) byte by byte. */
import { describe, expect, it } from "vitest";
import { CONTENTS, events, GEMINI, GEMINI_SSE, post, useProviders } from "./wire-http.js";

const start = useProviders();

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
