/**
 * `geminiChunks`: how selfheal reads streamed Gemini chunks, on chunk sequences shaped as the
 * Gemini API streams them (text, thinking with thought signatures, function calls, a blocked
 * prompt, running usage totals), read alone and through `sh.stream`, whose verdict (complete,
 * cut, truncated, withheld, empty) and diagnosis are what a healed client's caller gets.
 */
import { Readable } from "node:stream";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  GEMINI_FAIL_ON_FINISH,
  geminiChunks,
  isEmptyGeminiAnswer,
  type GeminiChunk,
} from "../../src/clients/gemini-stream.js";
import {
  createSelfHealing,
  isStreamTruncatedError,
  StreamTruncatedError,
  type DiagnosisEvent,
  type SelfHealing,
} from "../../src/index.js";
import { SkipClock } from "../diagnosis/sdk-corpus.js";

/** Chunks as the API sends them (fields selfheal does not read included). */
const seq = (chunks: object[]): GeminiChunk[] => chunks;
const usage = (candidates: number | undefined, thoughts?: number) => ({
  promptTokenCount: 9,
  ...(candidates !== undefined && { candidatesTokenCount: candidates }),
  totalTokenCount: 9 + (candidates ?? 0) + (thoughts ?? 0),
  promptTokensDetails: [{ modality: "TEXT", tokenCount: 9 }],
  ...(thoughts !== undefined && { thoughtsTokenCount: thoughts }),
});
const meta = { modelVersion: "gemini-2.5-flash", responseId: "r-1" };
const text = (t: string, extra: object = {}) => ({
  candidates: [{ content: { parts: [{ text: t }], role: "model" }, index: 0, ...extra }],
});

/** A plain answer in three chunks; the last carries STOP. */
const TEXT = seq([
  { ...text("The sky"), usageMetadata: usage(2), ...meta },
  { ...text(" is blue because of"), usageMetadata: usage(7), ...meta },
  { ...text(" Rayleigh scattering."), usageMetadata: usage(11), ...meta },
  { ...text("", { finishReason: "STOP" }), usageMetadata: usage(11), ...meta },
]);

/** Thinking shown (includeThoughts), then the answer; the end holds only a thought signature. */
const THINKING = seq([
  {
    candidates: [
      {
        content: { parts: [{ text: "**Counting letters**\n\nI look at", thought: true }] },
        index: 0,
      },
    ],
    usageMetadata: usage(undefined, 40),
    ...meta,
  },
  { ...text("There are **3** r's in strawberry."), usageMetadata: usage(10, 256), ...meta },
  {
    candidates: [
      {
        content: { parts: [{ text: "", thoughtSignature: "EpcCCpQCARFNMg9G" }], role: "model" },
        finishReason: "STOP",
        index: 0,
      },
    ],
    usageMetadata: usage(10, 256),
    ...meta,
  },
]);

/** A function call with a thought signature, then an empty text part with STOP. */
const TOOL_CALL = seq([
  {
    candidates: [
      {
        content: {
          parts: [
            {
              functionCall: { name: "weather", args: { location: "San Francisco" } },
              thoughtSignature: "EpEgCo4gAb4",
            },
          ],
          role: "model",
        },
        index: 0,
      },
    ],
    usageMetadata: usage(15, 804),
    ...meta,
  },
  { ...text("", { finishReason: "STOP" }), usageMetadata: usage(15, 804), ...meta },
]);

/** The prompt was blocked: one chunk, no candidates. */
const PROMPT_BLOCKED = seq([
  {
    promptFeedback: { blockReason: "PROHIBITED_CONTENT" },
    usageMetadata: usage(undefined),
    ...meta,
  },
]);

/** The answer hit maxOutputTokens. */
const MAX_TOKENS = seq([
  { ...text("The sky is"), usageMetadata: usage(3), ...meta },
  { ...text(" blue", { finishReason: "MAX_TOKENS" }), usageMetadata: usage(4), ...meta },
]);

/** The candidate was stopped by the safety filter before any of it was sent. */
const SAFETY = seq([
  {
    candidates: [
      {
        finishReason: "SAFETY",
        index: 0,
        safetyRatings: [{ category: "HARM_CATEGORY_DANGEROUS_CONTENT", probability: "HIGH" }],
      },
    ],
    usageMetadata: usage(0),
    ...meta,
  },
]);

describe("geminiChunks.read", () => {
  const read = (chunks: GeminiChunk[]) => chunks.map((c) => geminiChunks.read(c));

  it("text is an answer token; the STOP chunk completes with the output tokens; each chunk repeats the input tokens", () => {
    expect(read(TEXT)).toEqual([
      { token: true, answer: true, finishReason: undefined, inputTokens: 9, outputTokens: 2 },
      { token: true, answer: true, finishReason: undefined, inputTokens: 9, outputTokens: 7 },
      { token: true, answer: true, finishReason: undefined, inputTokens: 9, outputTokens: 11 },
      { finishReason: "STOP", inputTokens: 9, outputTokens: 11 },
    ]);
    expect(geminiChunks.completion).toBe("finish");
  });

  it("a thought is a token without an answer; output tokens count the thinking", () => {
    expect(read(THINKING)).toEqual([
      { token: true, finishReason: undefined, inputTokens: 9, outputTokens: 40 },
      { token: true, answer: true, finishReason: undefined, inputTokens: 9, outputTokens: 266 },
      { finishReason: "STOP", inputTokens: 9, outputTokens: 266 },
    ]);
  });

  it("a function call is an answer", () => {
    expect(read(TOOL_CALL)[0]).toMatchObject({ token: true, answer: true, outputTokens: 819 });
  });

  it("code, its result, inline data and files are answers; blank text a token only", () => {
    const one = (part: object) =>
      geminiChunks.read({ candidates: [{ content: { parts: [part] } }] });
    for (const part of [
      { executableCode: { language: "PYTHON", code: "print(1)" } },
      { codeExecutionResult: { outcome: "OUTCOME_OK", output: "1\n" } },
      { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
      { fileData: { mimeType: "application/pdf", fileUri: "gs://b/f.pdf" } },
    ])
      expect(one(part)).toEqual({ token: true, answer: true });
    expect(one({ text: "\n\n" })).toEqual({ token: true });
    expect(one({ text: "" })).toBeUndefined();
    expect(one({ thoughtSignature: "abc" })).toBeUndefined();
    // An answer part anywhere in the chunk makes it an answer.
    expect(
      geminiChunks.read({
        candidates: [{ content: { parts: [{ text: "hm", thought: true }, { text: "Yes." }] } }],
      }),
    ).toEqual({ token: true, answer: true });
  });

  it("a blocked prompt finishes with its block reason; no candidates, no tokens", () => {
    expect(read(PROMPT_BLOCKED)).toEqual([
      { finishReason: "PROHIBITED_CONTENT", outputTokens: undefined, inputTokens: 9 },
    ]);
  });

  it("what is not a chunk of an answer reads as nothing", () => {
    expect(geminiChunks.read({})).toBeUndefined();
    expect(geminiChunks.read({ candidates: [] })).toBeUndefined();
    expect(geminiChunks.read({ candidates: [{}] })).toBeUndefined();
    expect(geminiChunks.read({ candidates: [{ content: {} }] })).toBeUndefined();
  });

  it("fails on every finish but STOP and CONTINUATION by default", () => {
    for (const reason of ["MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL"])
      expect(GEMINI_FAIL_ON_FINISH).toContain(reason);
    for (const reason of ["PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "JAILBREAK", "OTHER"])
      expect(GEMINI_FAIL_ON_FINISH).toContain(reason);
    expect(GEMINI_FAIL_ON_FINISH).not.toContain("STOP");
    expect(GEMINI_FAIL_ON_FINISH).not.toContain("CONTINUATION");
  });
});

describe("isEmptyGeminiAnswer (a whole generateContent answer)", () => {
  const whole = (chunk: object) => chunk as GeminiChunk;
  it("text, a function call or code is an answer; thinking or blank text alone is not", () => {
    expect(isEmptyGeminiAnswer(whole(text("Blue.", { finishReason: "STOP" })))).toBe(false);
    expect(isEmptyGeminiAnswer(TOOL_CALL[0])).toBe(false);
    expect(isEmptyGeminiAnswer(THINKING[0])).toBe(true);
    expect(isEmptyGeminiAnswer(whole(text(" \n", { finishReason: "STOP" })))).toBe(true);
    expect(isEmptyGeminiAnswer(whole({ candidates: [] }))).toBe(true);
    expect(isEmptyGeminiAnswer(undefined)).toBe(true);
  });

  it("any candidate's answer counts (candidateCount > 1)", () => {
    const second = text("Yes.").candidates[0];
    expect(isEmptyGeminiAnswer(whole({ candidates: [{ finishReason: "OTHER" }, second] }))).toBe(
      false,
    );
  });

  it("what a content policy withheld is the provider's verdict, not an empty answer", () => {
    expect(isEmptyGeminiAnswer(PROMPT_BLOCKED[0])).toBe(false);
    expect(isEmptyGeminiAnswer(SAFETY[0])).toBe(false);
    // MAX_TOKENS spent on thinking: empty, another attempt (or model) may answer.
    expect(isEmptyGeminiAnswer(whole({ candidates: [{ finishReason: "MAX_TOKENS" }] }))).toBe(true);
  });
});

describe("geminiChunks through sh.stream", () => {
  let sh: SelfHealing | undefined;
  afterEach(async () => {
    await sh?.close();
    sh = undefined;
  });

  /** Streams `chunks` once per attempt (one route, no retry wait) and says how it went. */
  async function run(sequences: GeminiChunk[][]) {
    sh = createSelfHealing({
      agent: "gemini-format",
      clock: new SkipClock(), // retries wait no real time
      logger: { warn: () => undefined },
      recovery: { random: () => 0 },
    });
    const diagnoses: DiagnosisEvent[] = [];
    sh.on("diagnosis", (d) => diagnoses.push(d));
    let attempt = 0;
    const answer = sh.stream<undefined, GeminiChunk>(
      "gemini",
      { readOnly: true, format: geminiChunks, failOnFinish: GEMINI_FAIL_ON_FINISH },
      (): AsyncIterable<GeminiChunk> =>
        Readable.from(sequences[Math.min(attempt++, sequences.length - 1)] ?? []),
    );
    const stream = answer(undefined);
    const got: GeminiChunk[] = [];
    let error: unknown;
    try {
      for await (const chunk of stream) got.push(chunk);
    } catch (e) {
      error = e;
    }
    const result = await stream.result.catch(() => undefined);
    return { got, error, result, attempts: attempt, patterns: diagnoses.map((d) => d.pattern) };
  }

  it("a whole answer completes with STOP and its output tokens", async () => {
    const r = await run([TEXT]);
    expect(r.error).toBeUndefined();
    expect(r.got).toHaveLength(TEXT.length);
    expect(r.result).toMatchObject({ outcome: "success", finishReason: "STOP", outputTokens: 11 });
  });

  it("thinking then a tool call is an answer", async () => {
    expect((await run([THINKING])).result).toMatchObject({ outputTokens: 266 });
    expect((await run([TOOL_CALL])).result).toMatchObject({ finishReason: "STOP" });
  });

  it("an end without finishReason before any token is a cut, retried", async () => {
    const r = await run([[], TEXT]);
    expect(r.patterns).toEqual(["STREAM_TRUNCATED"]);
    expect(r.result).toMatchObject({ outcome: "recovered", attempts: 2 });
  });

  it("MAX_TOKENS before a token is truncated and retried; after one it fails the reader", async () => {
    const before = await run([[MAX_TOKENS[1] as GeminiChunk].map(noContent), TEXT]);
    expect(before.patterns).toEqual(["STREAM_TRUNCATED"]);
    expect(before.result).toMatchObject({ outcome: "recovered" });
    const after = await run([MAX_TOKENS]);
    expect(isStreamTruncatedError((after.error as Error).cause)).toBe(true);
    expect(((after.error as Error).cause as { type: string }).type).toBe("MAX_TOKENS");
    expect(after.patterns).toEqual(["STREAM_TRUNCATED"]);
  });

  it("a SAFETY finish and a blocked prompt are CONTENT_POLICY: not sent again", async () => {
    const safety = await run([SAFETY, TEXT]);
    expect(safety.patterns).toEqual(["CONTENT_POLICY"]);
    expect(safety.attempts).toBe(1);
    const blocked = await run([PROMPT_BLOCKED, TEXT]);
    expect(blocked.patterns).toEqual(["CONTENT_POLICY"]);
    expect(blocked.attempts).toBe(1);
    expect(isStreamTruncatedError(blocked.error)).toBe(true);
  });

  it("thinking alone, then STOP, is an empty answer (the thought reached the reader: not retried)", async () => {
    const r = await run([[THINKING[0] as GeminiChunk, THINKING[2] as GeminiChunk], TEXT]);
    expect(r.patterns).toEqual(["EMPTY_LLM_RESPONSE"]);
    expect(r.result).toMatchObject({ outcome: "success", attempts: 1, finishReason: "STOP" });
  });
});

/** The chunk with its content taken out (a finish with nothing before it). */
function noContent(chunk: GeminiChunk): GeminiChunk {
  return { ...chunk, candidates: chunk.candidates?.map(({ finishReason }) => ({ finishReason })) };
}

describe("a Gemini finish or block reason, diagnosed", () => {
  const sh = createSelfHealing({ agent: "gemini-reasons", logger: { warn: () => undefined } });
  afterAll(() => sh.close());
  const diagnose = (reason: string) =>
    sh.diagnose(
      new StreamTruncatedError("gemini.generate_content:stream", reason, {
        chunks: 1,
        firstTokenMs: 3,
      }),
    );

  for (const reason of [
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "JAILBREAK",
    "MODEL_ARMOR",
  ]) {
    it(`${reason} is CONTENT_POLICY: the same request is withheld again, never retried`, async () => {
      const d = await diagnose(reason);
      expect({ pattern: d.pattern, rule: d.rule, strategies: d.strategies }).toEqual({
        pattern: "CONTENT_POLICY",
        rule: "stream-content-filter",
        strategies: [],
      });
    });
  }

  for (const reason of ["MAX_TOKENS", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER", "cut"]) {
    it(`${reason} is STREAM_TRUNCATED: retried or failed over`, async () => {
      const d = await diagnose(reason);
      expect({ pattern: d.pattern, retryable: d.retryable }).toEqual({
        pattern: "STREAM_TRUNCATED",
        retryable: true,
      });
    });
  }
});
