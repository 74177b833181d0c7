/**
 * `healGoogleGenAI`: the real `@google/genai` clients, 3.6.1 and 2.32.0, healed in one line and
 * pointed (`httpOptions.baseUrl`) at servers on 127.0.0.1 speaking the Gemini API: selfheal's
 * fake provider (`generateContent` JSON, `streamGenerateContent?alt=sse` events, Google's error
 * bodies with RetryInfo) and, for the statuses it does not send, a small server of Google's
 * error bodies. The raw clients are built with the SDK's own retries on (`retryOptions`, five
 * attempts): the request counts show each healed attempt is sent once. selfheal runs on virtual
 * time: a wait between attempts passes at once (and is recorded), a stream's limit only when a
 * test advances the clock, while the servers answer in real time.
 */
import { GoogleGenAI, GenerateContentResponse } from "@google/genai";
import {
  GoogleGenAI as GoogleGenAI2,
  GenerateContentResponse as GenerateContentResponse2,
} from "@google/genai2";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import {
  geminiChunks,
  healGoogleGenAI,
  type GeminiChunk,
  type HealGoogleGenAIOptions,
} from "../../src/clients/google-genai.js";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type DiagnosisEvent,
  type StreamMode,
  type StreamRestart,
  type ToolCallEvent,
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
import { startFakeProvider, VirtualClock } from "../../src/testing/index.js";
import { readBody, startServer } from "../helpers/http-server.js";
import { recordingProvider } from "../helpers/otel.js";
import { eventually } from "../helpers/otlp.js";

const MODEL = "gemini-2.5-flash";
const WORDS = Array.from({ length: 12 }, (_, i) => `w${i + 1}`);
const ANSWER = WORDS.join(" ");
const FIRST_FIVE = WORDS.slice(0, 5).join(" ");
/** The limit a stall test lets pass. */
const LIMIT_MS = 5_000;
/** Every other limit: never reached. */
const LONG_MS = 600_000;

/** Virtual time whose waits between attempts pass at once, recorded; stream limits wait for `advance`. */
class SkipWaits extends VirtualClock {
  readonly waits: number[] = [];
  skip = true;
  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.waits.push(ms);
    const slept = super.sleep(ms, signal);
    if (this.skip) void this.advance(ms);
    return slept;
  }
}

/** The two majors, as users install them: each its own GoogleGenAI class. */
const SDKS = [
  // 3.x asks the v1 API by default, 2.x v1beta.
  { version: "3.6.1", GenAI: GoogleGenAI, Response: GenerateContentResponse, api: "v1" },
  { version: "2.32.0", GenAI: GoogleGenAI2, Response: GenerateContentResponse2, api: "v1beta" },
] as const;
type Client = GoogleGenAI | GoogleGenAI2;

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

/** Google's error body. */
const googleError = (code: number, status: string, message: string, details?: unknown[]) =>
  JSON.stringify({ error: { code, message, status, ...(details && { details }) } });

/**
 * A Gemini server for what the fake provider does not send: each request gets the next reply
 * (an error status and body, or a plain answer once they run out).
 */
async function startReplyServer(
  replies: { status: number; body: string; headers?: Record<string, string> }[],
) {
  const paths: string[] = [];
  const server = await startServer((req, res) => {
    void readBody(req).then(() => {
      paths.push(req.url ?? "");
      const reply = replies.shift() ?? {
        status: 200,
        body: JSON.stringify({
          candidates: [
            { content: { parts: [{ text: "Fine." }], role: "model" }, finishReason: "STOP" },
          ],
          usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 1, totalTokenCount: 4 },
        }),
      };
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(reply.body);
    });
  });
  open.push(server);
  return { ...server, paths };
}

function setupFor(sdk: (typeof SDKS)[number]) {
  /** A raw client of `baseUrl`, with the SDK's own retries on: five attempts, 10 ms apart. */
  const rawClient = (baseUrl: string): Client =>
    new sdk.GenAI({
      apiKey: "test-key",
      httpOptions: { baseUrl, retryOptions: { attempts: 5, initialDelay: 0.01, maxDelay: 0.01 } },
    });

  return async function setup(
    options: HealGoogleGenAIOptions<Client> = {},
    {
      backup = false,
      providers,
      baseUrl,
    }: { backup?: boolean; providers?: string[]; baseUrl?: string } = {},
  ) {
    const primary = await startFakeProvider({ reply: ANSWER, tokenIntervalMs: 1 });
    open.push(primary);
    const secondary = backup
      ? await startFakeProvider({ reply: ANSWER, tokenIntervalMs: 1 })
      : undefined;
    if (secondary) open.push(secondary);
    const clock = new SkipWaits();
    const otel = recordingProvider();
    const sh = createSelfHealing({
      agent: "gemini-client",
      clock,
      tracerProvider: otel.provider,
      logger: { warn: () => undefined },
      recovery: {
        random: () => 0,
        ...(providers && { providers: providers.map((name) => ({ name })) }),
      },
    });
    open.push(sh);
    const raw = rawClient(baseUrl ?? primary.origin);
    const ai = healGoogleGenAI(sh, raw, {
      ...(secondary && { fallback: { provider: "backup", client: rawClient(secondary.origin) } }),
      firstTokenMs: LONG_MS,
      idleMs: LONG_MS,
      ...options,
    });
    const calls: ToolCallEvent[] = [];
    const diagnoses: DiagnosisEvent[] = [];
    sh.on("tool-call", (e) => calls.push(e));
    sh.on("diagnosis", (e) => diagnoses.push(e));
    /** Requests at every server. */
    const requests = () => primary.requests + (secondary?.requests ?? 0);
    return { primary, secondary, clock, sh, raw, ai, calls, diagnoses, otel, requests };
  };
}

const REQUEST = { model: MODEL, contents: "Say the words." };

/** The text of a stream of chunks, and the error it ended with. */
async function readText(stream: AsyncIterable<GeminiChunk>, seen = { text: "", chunks: 0 }) {
  let error: unknown;
  try {
    for await (const chunk of stream) {
      seen.chunks++;
      for (const part of chunk.candidates?.[0]?.content?.parts ?? []) seen.text += part.text ?? "";
    }
  } catch (e) {
    error = e;
  }
  return { text: seen.text, error };
}

const thrown = (promise: Promise<unknown>) =>
  promise.then(
    () => expect.unreachable("expected a rejection"),
    (e: unknown) => e,
  );

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

  describe(`healGoogleGenAI, @google/genai ${sdk.version}: models.generateContentStream`, () => {
    it("yields the SDK's own chunks; usage on the span", async () => {
      const s = await setup();
      const stream = await s.ai.models.generateContentStream(REQUEST);
      const seen = await readText(stream);
      expect(seen).toEqual({ text: ANSWER, error: undefined });
      expect(s.primary.requests).toBe(1);
      expect(s.calls.map((c) => [c.tool, c.outcome])).toEqual([
        ["gemini.generate_content:stream", "success"],
      ]);
      expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
        [ATTR_GEN_AI_OPERATION_NAME]: "generate_content",
        [ATTR_GEN_AI_RESPONSE_MODEL]: MODEL,
        [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 10,
        [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: WORDS.length,
      });
    });

    it("chunks are the SDK's GenerateContentResponse (its getters work)", async () => {
      const s = await setup();
      const stream = await s.ai.models.generateContentStream(REQUEST);
      let text = "";
      for await (const chunk of stream) {
        expect(chunk).toBeInstanceOf(sdk.Response);
        text += chunk.text ?? "";
      }
      expect(text).toBe(ANSWER);
    });

    it("a 429 before the stream: exactly 2 requests, then the whole answer", async () => {
      const s = await setup();
      s.primary.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 });
      const stream = await s.ai.models.generateContentStream(REQUEST);
      expect(await readText(stream)).toEqual({ text: ANSWER, error: undefined });
      expect(s.primary.requests).toBe(2);
      expect(s.clock.waits).toEqual([2_000]);
    });

    it("a stream cut before its first token is asked again, unseen", async () => {
      const s = await setup();
      s.primary.injector.inject("stream_cut", { first: 1 }, { afterTokens: 0 });
      const stream = await s.ai.models.generateContentStream(REQUEST);
      expect(await readText(stream)).toEqual({ text: ANSWER, error: undefined });
      expect(s.primary.requests).toBe(2);
      // Before a token the SDK's own error is diagnosed: undici's "terminated", its socket cause.
      expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([
        ["SERVICE_DOWN", "connection-failed"],
      ]);
    });

    it("an end without finishReason is a cut, not an answer", async () => {
      const s = await setup({ afterFirstToken: "buffer" });
      s.primary.injector.inject("no_done", { first: 1 });
      const stream = await s.ai.models.generateContentStream(REQUEST);
      expect(await readText(stream)).toEqual({ text: ANSWER, error: undefined });
      expect(s.primary.requests).toBe(2);
      expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_TRUNCATED"]);
    });

    it("a blocked prompt is CONTENT_POLICY: one request, not retried", async () => {
      const s = await setup();
      s.primary.injector.inject("content_policy", { first: 1 });
      const error = await thrown(s.ai.models.generateContentStream(REQUEST));
      expect(isStreamTruncatedError(error)).toBe(true);
      expect(error).toMatchObject({ type: "SAFETY" });
      expect(s.primary.requests).toBe(1);
      expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([
        ["CONTENT_POLICY", "stream-content-filter"],
      ]);
    });

    for (const mode of ["fail", "restart", "buffer"] as const satisfies StreamMode[]) {
      const recovers = mode !== "fail";
      it(`${mode}: a cut after five words ${recovers ? "is answered whole by the backup" : "errors with what was delivered"}`, async () => {
        const restarts: StreamRestart[] = [];
        const seen = { text: "", chunks: 0 };
        const onRestart = (restart: StreamRestart) => {
          restarts.push(restart);
          seen.text = ""; // drop what was shown: the answer starts again
        };
        const s = await setup(
          { afterFirstToken: mode, onRestart },
          { backup: true, providers: ["gcp.gemini", "backup"] },
        );
        s.primary.injector.inject("stream_cut", { first: 1 }, { afterTokens: 5 });
        const stream = await s.ai.models.generateContentStream(REQUEST);
        const { text, error } = await readText(stream, seen);
        if (recovers) {
          expect({ text, error }).toEqual({ text: ANSWER, error: undefined });
          expect(s.secondary?.requests).toBe(1);
          expect(restarts).toHaveLength(mode === "restart" ? 1 : 0);
          expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
        } else {
          expect(text).toBe(FIRST_FIVE);
          expect(isStreamInterruptedError(error)).toBe(true);
          expect(isStreamTruncatedError((error as Error).cause)).toBe(true);
          expect(s.requests()).toBe(1);
        }
        expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_TRUNCATED"]);
      });

      it(`${mode}: finishReason MAX_TOKENS after five words ${recovers ? "is answered whole by the backup" : "fails the stream"}`, async () => {
        const s = await setup(
          { afterFirstToken: mode, onRestart: () => undefined },
          { backup: true, providers: ["gcp.gemini", "backup"] },
        );
        s.primary.injector.inject("finish_length", { first: 1 }, { afterTokens: 5 });
        const stream = await s.ai.models.generateContentStream(REQUEST);
        const { text, error } = await readText(stream);
        if (recovers) {
          expect(text.endsWith(ANSWER)).toBe(true);
          expect(error).toBeUndefined();
          expect(s.secondary?.requests).toBe(1);
        } else {
          expect(text).toBe(FIRST_FIVE);
          expect(isStreamInterruptedError(error)).toBe(true);
          expect((error as Error).cause).toMatchObject({ type: "MAX_TOKENS" });
        }
        expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_TRUNCATED"]);
      });
    }

    for (const mode of ["fail", "restart"] as const) {
      it(`${mode}: a stall after five words ${mode === "fail" ? "errors as stalled" : "starts again on the backup"}`, async () => {
        const restarts: StreamRestart[] = [];
        const seen = { text: "", chunks: 0 };
        const onRestart = (restart: StreamRestart) => {
          restarts.push(restart);
          seen.text = "";
        };
        const s = await setup(
          { afterFirstToken: mode, idleMs: LIMIT_MS, onRestart },
          { backup: true, providers: ["gcp.gemini", "backup"] },
        );
        s.primary.injector.inject(
          "stream_stall",
          { first: 1 },
          { afterTokens: 5, silentMs: LONG_MS },
        );
        const stream = await s.ai.models.generateContentStream(REQUEST);
        const read = readText(stream, seen);
        await eventually(
          () => seen.text === FIRST_FIVE && s.primary.stalled === 1,
          "five words, then silence",
        );
        await s.clock.advance(LIMIT_MS);
        const { text, error } = await read;
        if (mode === "fail") {
          expect(text).toBe(FIRST_FIVE);
          expect(isStreamInterruptedError(error)).toBe(true);
          expect(isStreamStalledError((error as Error).cause)).toBe(true);
        } else {
          expect({ text, error }).toEqual({ text: ANSWER, error: undefined });
          expect(restarts).toHaveLength(1);
          expect(isStreamStalledError(restarts[0]?.cause)).toBe(true);
        }
        expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_STALLED"]);
      });
    }

    it("no first token within firstTokenMs: the backup answers, the primary's request aborted", async () => {
      const s = await setup(
        { firstTokenMs: LIMIT_MS },
        { backup: true, providers: ["gcp.gemini", "backup"] },
      );
      s.primary.injector.inject("slow_first_token", { first: 1 }, { delayMs: LONG_MS });
      const opened = s.ai.models.generateContentStream(REQUEST);
      await eventually(() => s.primary.requests === 1, "the primary's request");
      await s.clock.advance(LIMIT_MS);
      expect(await readText(await opened)).toEqual({ text: ANSWER, error: undefined });
      expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_FIRST_TOKEN_TIMEOUT"]);
    });

    it("the caller's config.abortSignal mid-stream ends the loop with its reason", async () => {
      const s = await setup();
      s.primary.injector.inject(
        "stream_stall",
        { first: 1 },
        { afterTokens: 2, silentMs: LONG_MS },
      );
      const controller = new AbortController();
      const stream = await s.ai.models.generateContentStream({
        ...REQUEST,
        config: { abortSignal: controller.signal },
      });
      const seen = { text: "", chunks: 0 };
      const read = readText(stream, seen);
      await eventually(() => seen.text === "w1 w2", "two words");
      controller.abort(new Error("the user left"));
      const { error } = await read;
      expect(error).toMatchObject({ message: "the user left" });
      expect(s.requests()).toBe(1);
    });

    it("breaking out of the loop ends the call and its request", async () => {
      const s = await setup();
      s.primary.injector.inject(
        "stream_stall",
        { first: 1 },
        { afterTokens: 2, silentMs: LONG_MS },
      );
      const stream = await s.ai.models.generateContentStream(REQUEST);
      for await (const chunk of stream) {
        expect(chunk.text).toBe("w1");
        break;
      }
      await eventually(() => s.calls.length === 1, "the call's end");
      expect(s.calls[0]?.outcome).not.toBe("success");
    });
  });

  describe(`healGoogleGenAI, @google/genai ${sdk.version}: the client`, () => {
    it("is the same client type, the same object's members, healed once", async () => {
      const s = await setup();
      expectTypeOf(s.ai).toEqualTypeOf<Client>();
      expectTypeOf(
        healGoogleGenAI(s.sh, new GoogleGenAI({ apiKey: "k" })),
      ).toEqualTypeOf<GoogleGenAI>();
      expectTypeOf(
        healGoogleGenAI(s.sh, new GoogleGenAI2({ apiKey: "k" })),
      ).toEqualTypeOf<GoogleGenAI2>();
      expect(s.ai).not.toBe(s.raw);
      expect(s.ai.vertexai).toBe(false);
      expect(s.ai.chats).not.toBe(s.raw.chats); // healed: its chats call the healed models
      expect(s.ai.files).toBe(s.raw.files);
      expect(typeof s.ai.models.embedContent).toBe("function");
      expect(healGoogleGenAI(s.sh, s.ai)).toBe(s.ai);
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
