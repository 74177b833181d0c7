/**
 * `healGoogleGenAI`, plain calls and the client: `models.generateContent` through each fault,
 * chats, the client's type and members, on both majors (google-genai-setup.ts says how).
 */
import { GoogleGenAI } from "@google/genai";
import {
  GoogleGenAI as GoogleGenAI2,
  GenerateContentResponse as GenerateContentResponse2,
} from "@google/genai2";
import type { GenerateContentResponse } from "@google/genai";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { geminiChunks, healGoogleGenAI, type GeminiChunk } from "../../src/clients/google-genai.js";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
} from "../../src/index.js";
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  SPAN_TOOL_CALL,
} from "../../src/telemetry/conventions.js";
import { eventually } from "../helpers/otlp.js";
import {
  ANSWER,
  closeAll,
  FIRST_FIVE,
  googleError,
  MODEL,
  open,
  readText,
  LONG_MS,
  REQUEST,
  SDKS,
  setupFor,
  startReplyServer,
  thrown,
  WORDS,
  type Client,
} from "./google-genai-setup.js";

afterEach(closeAll);

for (const sdk of SDKS) {
  const setup = setupFor(sdk);

  describe(`healGoogleGenAI, @google/genai ${sdk.version}: models.generateContent`, () => {
    it("answers with the SDK's own response, one request, usage on the call's span", async () => {
      const s = await setup();
      const response = await s.ai.models.generateContent(REQUEST);
      expect(response).toBeInstanceOf(sdk.Response);
      expect(response.text).toBe(ANSWER);
      expect(response.candidates?.[0]?.finishReason).toBe("STOP");
      expect(s.primary.requests).toBe(1);
      expect(s.calls.map((c) => [c.tool, c.outcome])).toEqual([
        ["gemini.generate_content", "success"],
      ]);
      expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
        [ATTR_GEN_AI_OPERATION_NAME]: "generate_content",
        [ATTR_GEN_AI_PROVIDER_NAME]: "gcp.gemini",
        [ATTR_GEN_AI_REQUEST_MODEL]: MODEL,
        [ATTR_GEN_AI_RESPONSE_MODEL]: MODEL, // the answer's modelVersion
        [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 10,
        [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: WORDS.length,
      });
    });

    it("a 429 with RetryInfo 2s: the wait is Google's, exactly 2 requests", async () => {
      const s = await setup();
      s.clock.skip = false;
      s.primary.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
      const answer = s.ai.models.generateContent(REQUEST);
      await eventually(() => s.clock.waits.length === 1, "the wait after the 429");
      expect(s.diagnoses[0]).toMatchObject({ pattern: "RATE_LIMIT", retryAfterMs: 2_000 });
      await s.clock.advance(1_999);
      expect(s.primary.requests).toBe(1);
      await s.clock.advance(1);
      expect((await answer).text).toBe(ANSWER);
      expect(s.primary.requests).toBe(2);
      expect(s.clock.waits).toEqual([2_000]);
      expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
    });

    it("the same 429 through the raw client: the SDK's own retries (what healing turns off)", async () => {
      const s = await setup();
      s.primary.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
      expect((await s.raw.models.generateContent(REQUEST)).text).toBe(ANSWER);
      expect(s.primary.requests).toBe(2); // the SDK's p-retry, 10 ms later: RetryInfo not read
      s.primary.injector.inject("rate_limit", { first: 5 }, { retryAfterSeconds: 2 });
      await thrown(s.raw.models.generateContent(REQUEST));
      expect(s.primary.requests).toBe(2 + 5);
    });

    it("a 429 that lasts: each attempt is one request, at most as many as selfheal's plan", async () => {
      const s = await setup();
      s.primary.injector.inject("rate_limit", { first: 100 }, { retryAfterSeconds: 1 });
      const error = await thrown(s.ai.models.generateContent(REQUEST));
      expect(isHumanEscalationRequiredError(error)).toBe(true);
      // Each wait is followed by one request: the SDK's five attempts would make each five.
      expect(s.clock.waits.length).toBeGreaterThan(0);
      expect(s.primary.requests).toBe(s.clock.waits.length + 1);
    });

    for (const [fault, status] of [
      ["http_503", 503],
      ["http_500", 500],
    ] as const) {
      it(`a ${status} is SERVICE_DOWN, retried once: 2 requests`, async () => {
        const s = await setup();
        s.primary.injector.inject(fault, { first: 1 });
        expect((await s.ai.models.generateContent(REQUEST)).text).toBe(ANSWER);
        expect(s.primary.requests).toBe(2);
        expect(s.diagnoses.map((d) => d.pattern)).toEqual(["SERVICE_DOWN"]);
      });
    }

    for (const [status, code, message] of [
      [
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
      ],
      [
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
      ],
    ] as const) {
      it(`a ${status} ${code} is AUTH: one request, escalated with the SDK's ApiError`, async () => {
        const server = await startReplyServer([
          { status, body: googleError(status, code, message) },
        ]);
        const s = await setup({}, { baseUrl: server.url });
        const error = await thrown(s.ai.models.generateContent(REQUEST));
        expect(isHumanEscalationRequiredError(error)).toBe(true);
        expect((error as Error).cause).toMatchObject({ name: "ApiError", status });
        expect(server.paths).toEqual([`/${sdk.api}/models/${MODEL}:generateContent`]);
        expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([["AUTH", "auth"]]);
      });
    }

    it("a 400 FAILED_PRECONDITION is BAD_REQUEST: the SDK's ApiError, one request", async () => {
      const server = await startReplyServer([
        {
          status: 400,
          body: googleError(
            400,
            "FAILED_PRECONDITION",
            "User location is not supported for the API use.",
          ),
        },
      ]);
      const s = await setup({}, { baseUrl: server.url });
      const error = await thrown(s.ai.models.generateContent(REQUEST));
      expect(error).toMatchObject({ name: "ApiError", status: 400 });
      expect(server.paths).toHaveLength(1);
      expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([["BAD_REQUEST", "http-400"]]);
    });

    it("a bad API key (400 API_KEY_INVALID) is AUTH: one request", async () => {
      const s = await setup();
      s.primary.injector.inject("auth", { first: 1 });
      const error = await thrown(s.ai.models.generateContent(REQUEST));
      expect(isHumanEscalationRequiredError(error)).toBe(true);
      expect(s.primary.requests).toBe(1);
      expect(s.diagnoses.map((d) => d.pattern)).toEqual(["AUTH"]);
    });

    it("a 429 with a Retry-After header only: the SDK's ApiError drops headers, so 2 requests after selfheal's own wait", async () => {
      const server = await startReplyServer([
        {
          status: 429,
          headers: { "retry-after": "7" },
          body: googleError(
            429,
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
          ),
        },
      ]);
      const s = await setup({}, { baseUrl: server.url });
      expect((await s.ai.models.generateContent(REQUEST)).text).toBe("Fine.");
      expect(server.paths).toHaveLength(2);
      expect(s.diagnoses[0]).toMatchObject({ pattern: "RATE_LIMIT", retryAfterMs: undefined });
      expect(s.clock.waits).toHaveLength(1);
      expect(s.clock.waits[0]).not.toBe(7_000);
    });

    it("finishReason MAX_TOKENS is the SDK's answer, as is (the caller reads finishReason)", async () => {
      const s = await setup();
      s.primary.injector.inject("finish_length", { first: 1 }, { afterTokens: 5 });
      const response = await s.ai.models.generateContent(REQUEST);
      expect(response.text).toBe(FIRST_FIVE);
      expect(response.candidates?.[0]?.finishReason).toBe("MAX_TOKENS");
      expect(s.primary.requests).toBe(1);
    });

    it("an empty answer is EMPTY_LLM_RESPONSE, asked again", async () => {
      const s = await setup();
      s.primary.injector.inject("empty", { first: 1 });
      expect((await s.ai.models.generateContent(REQUEST)).text).toBe(ANSWER);
      expect(s.primary.requests).toBe(2);
      expect(s.diagnoses.map((d) => d.pattern)).toEqual(["EMPTY_LLM_RESPONSE"]);
    });

    it("fails over to another model of the provider: the request names it", async () => {
      const s = await setup(
        { provider: "gemini", fallback: { provider: "lite", model: "gemini-2.5-flash-lite" } },
        { providers: ["gemini", "lite"] },
      );
      s.primary.injector.inject("http_503", { first: 2 });
      const response = await s.ai.models.generateContent(REQUEST);
      expect(response.text).toBe(ANSWER);
      expect(response.modelVersion).toBe("gemini-2.5-flash-lite");
      expect(s.primary.requests).toBe(3);
      expect(s.calls[0]).toMatchObject({ outcome: "recovered" });
      // The span describes the attempt that answered, in the conventions' terms.
      expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
        [ATTR_GEN_AI_PROVIDER_NAME]: "gcp.gemini",
        [ATTR_GEN_AI_REQUEST_MODEL]: "gemini-2.5-flash-lite",
        [ATTR_GEN_AI_RESPONSE_MODEL]: "gemini-2.5-flash-lite",
      });
    });

    it("fails over to another client of the Gemini API", async () => {
      const s = await setup({}, { backup: true, providers: ["gcp.gemini", "backup"] });
      s.primary.injector.inject("http_503", { first: 10 });
      expect((await s.ai.models.generateContent(REQUEST)).text).toBe(ANSWER);
      expect(s.secondary?.requests).toBe(1);
      expect(s.requests()).toBe(3); // the primary twice (retried once), then the backup
    });

    it("a Vertex AI client's calls are gcp.vertex_ai on the span", async () => {
      const server = await startReplyServer([]);
      const s = await setup();
      const vertex = healGoogleGenAI(
        s.sh,
        new sdk.GenAI({ vertexai: true, apiKey: "test-key", httpOptions: { baseUrl: server.url } }),
        { name: "vertex" },
      );
      expect((await vertex.models.generateContent(REQUEST)).text).toBe("Fine.");
      expect(server.paths).toHaveLength(1);
      expect(server.paths[0]).toContain(`/publishers/google/models/${MODEL}:generateContent`);
      expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
        [ATTR_GEN_AI_PROVIDER_NAME]: "gcp.vertex_ai",
        [ATTR_GEN_AI_REQUEST_MODEL]: MODEL,
      });
      expect(s.calls.map((c) => c.tool)).toEqual(["vertex.generate_content"]);
    });

    it("the caller's config.abortSignal aborts the call, recovery included", async () => {
      const s = await setup();
      s.clock.skip = false;
      s.primary.injector.inject("http_503", { first: 1 });
      const controller = new AbortController();
      const answer = s.ai.models.generateContent({
        ...REQUEST,
        config: { abortSignal: controller.signal },
      });
      await eventually(() => s.clock.waits.length === 1, "the wait before the retry");
      controller.abort(new Error("the user left"));
      expect(await thrown(answer)).toMatchObject({ message: "the user left" });
      expect(s.primary.requests).toBe(1);
    });

    it("a blocked prompt comes back as the SDK returns it, at once: one request", async () => {
      const s = await setup();
      s.primary.injector.inject("content_policy", { first: 1 });
      const response = await s.ai.models.generateContent(REQUEST);
      expect(response.promptFeedback?.blockReason).toBe("SAFETY");
      expect(response.text).toBeUndefined();
      expect(s.primary.requests).toBe(1);
      expect(s.diagnoses).toEqual([]);
      expect(s.calls.map((c) => [c.outcome, c.empty])).toEqual([["success", false]]);
    });
  });

  describe(`healGoogleGenAI, @google/genai ${sdk.version}: the client`, () => {
    it("is the same client type, the same object's members, healed once", async () => {
      const s = await setup();
      // The options setup() heals with: a name is healed once per instance, with one set of options.
      const same = { firstTokenMs: LONG_MS, idleMs: LONG_MS };
      expectTypeOf(s.ai).toEqualTypeOf<Client>();
      expectTypeOf(
        healGoogleGenAI(s.sh, new GoogleGenAI({ apiKey: "k" }), same),
      ).toEqualTypeOf<GoogleGenAI>();
      expectTypeOf(
        healGoogleGenAI(s.sh, new GoogleGenAI2({ apiKey: "k" }), same),
      ).toEqualTypeOf<GoogleGenAI2>();
      expect(s.ai).not.toBe(s.raw);
      expect(s.ai.vertexai).toBe(false);
      expect(s.ai.chats).not.toBe(s.raw.chats); // healed: its chats call the healed models
      expect(s.ai.files).toBe(s.raw.files);
      expect(typeof s.ai.models.embedContent).toBe("function");
      expect(healGoogleGenAI(s.sh, s.ai, same)).toBe(s.ai);
      const other = createSelfHealing({ agent: "other", logger: { warn: () => undefined } });
      open.push(other);
      expect(() => healGoogleGenAI(other, s.ai)).toThrow(/healed already/);
    });

    it("the SDK's other calls are its own, unhealed (countTokens goes to the server once)", async () => {
      const server = await startReplyServer([
        { status: 200, body: JSON.stringify({ totalTokens: 3 }) },
      ]);
      const s = await setup({}, { baseUrl: server.url });
      expect(await s.ai.models.countTokens(REQUEST)).toMatchObject({ totalTokens: 3 });
      expect(server.paths).toEqual([`/${sdk.api}/models/${MODEL}:countTokens`]);
      expect(s.calls).toEqual([]);
    });

    it("a chat's messages are healed: a 429 then the answer, the history kept", async () => {
      const s = await setup();
      s.primary.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 1 });
      const chat = s.ai.chats.create({ model: MODEL });
      expect((await chat.sendMessage({ message: "Say the words." })).text).toBe(ANSWER);
      expect(s.primary.requests).toBe(2);
      const stream = await chat.sendMessageStream({ message: "Again." });
      expect((await readText(stream)).text).toBe(ANSWER);
      // The SDK keeps a streamed answer's chunks as model turns of their own.
      const roles = chat.getHistory().map((c) => c.role);
      expect(roles.filter((role, i) => role !== roles[i - 1])).toEqual([
        "user",
        "model",
        "user",
        "model",
      ]);
      expect(s.calls.map((c) => [c.tool, c.outcome])).toEqual([
        ["gemini.generate_content", "recovered"],
        ["gemini.generate_content:stream", "success"],
      ]);
    });

    it("a chat's stream refuses restart (its history would keep the dropped chunks)", async () => {
      const s = await setup({ afterFirstToken: "restart" });
      const chat = s.ai.chats.create({ model: MODEL });
      const error = await thrown(chat.sendMessageStream({ message: "Hi" }));
      expect(isSelfHealConfigError(error)).toBe(true);
      expect((await chat.sendMessage({ message: "Hi" })).text).toBe(ANSWER);
    });

    it("refuses what is not a Google GenAI client, and a route of another kind, naming the field", async () => {
      const s = await setup();
      expect(() => healGoogleGenAI(s.sh, {} as Client)).toThrow(/healGoogleGenAI\(client\)/);
      expect(() =>
        healGoogleGenAI(s.sh, s.raw, {
          fallback: { provider: "x", client: { chat: {} } as unknown as Client },
        }),
      ).toThrow(/fallback\.client/);
    });

    it("geminiChunks reads what generateContentStream yields", () => {
      expectTypeOf<GenerateContentResponse>().toExtend<GeminiChunk>();
      expectTypeOf<GenerateContentResponse2>().toExtend<GeminiChunk>();
      expect(geminiChunks.completion).toBe("finish");
    });
  });
}
