/**
 * `healGoogleGenAI`, streamed calls: `models.generateContentStream` over real SSE through each
 * fault before and after the first token, in each `afterFirstToken` mode, on both majors
 * (google-genai-setup.ts says how).
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type StreamMode,
  type StreamRestart,
} from "../../src/index.js";
import {
  ATTR_GEN_AI_OPERATION_NAME,
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
  LIMIT_MS,
  LONG_MS,
  MODEL,
  readText,
  REQUEST,
  SDKS,
  setupFor,
  thrown,
  WORDS,
} from "./google-genai-setup.js";

afterEach(closeAll);

for (const sdk of SDKS) {
  const setup = setupFor(sdk);

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
}
