/**
 * What the `healGoogleGenAI` suites share: the real `@google/genai` clients, 3.6.1 and 2.32.0,
 * healed in one line and pointed (`httpOptions.baseUrl`) at servers on 127.0.0.1 speaking the
 * Gemini API: selfheal's fake provider (`generateContent` JSON, `streamGenerateContent?alt=sse`
 * events, Google's error bodies with RetryInfo) and, for the statuses it does not send, a small
 * server of Google's error bodies. The raw clients are built with the SDK's own retries on
 * (`retryOptions`, five attempts): the request counts show each healed attempt is sent once.
 * selfheal runs on virtual time: a wait between attempts passes at once (and is recorded), a
 * stream's limit only when a test advances the clock, while the servers answer in real time.
 */
import { GoogleGenAI, GenerateContentResponse } from "@google/genai";
import {
  GoogleGenAI as GoogleGenAI2,
  GenerateContentResponse as GenerateContentResponse2,
} from "@google/genai2";
import { expect } from "vitest";
import {
  healGoogleGenAI,
  type GeminiChunk,
  type HealGoogleGenAIOptions,
} from "../../src/clients/google-genai.js";
import { createSelfHealing, type DiagnosisEvent, type ToolCallEvent } from "../../src/index.js";
import { startFakeProvider, VirtualClock } from "../../src/testing/index.js";
import { readBody, startServer } from "../helpers/http-server.js";
import { recordingProvider } from "../helpers/otel.js";

export const MODEL = "gemini-2.5-flash";
export const WORDS = Array.from({ length: 12 }, (_, i) => `w${i + 1}`);
export const ANSWER = WORDS.join(" ");
export const FIRST_FIVE = WORDS.slice(0, 5).join(" ");
/** The limit a stall test lets pass. */
export const LIMIT_MS = 5_000;
/** Every other limit: never reached. */
export const LONG_MS = 600_000;

/** Virtual time whose waits between attempts pass at once, recorded; stream limits wait for `advance`. */
export class SkipWaits extends VirtualClock {
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
export const SDKS = [
  // 3.x asks the v1 API by default, 2.x v1beta.
  { version: "3.6.1", GenAI: GoogleGenAI, Response: GenerateContentResponse, api: "v1" },
  { version: "2.32.0", GenAI: GoogleGenAI2, Response: GenerateContentResponse2, api: "v1beta" },
] as const;
export type Client = GoogleGenAI | GoogleGenAI2;

/** What a test started (servers, selfheal instances): closed after it by `closeAll`. */
export const open: { close(): Promise<void> }[] = [];
export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((o) => o.close()));
}

/** Google's error body. */
export const googleError = (code: number, status: string, message: string, details?: unknown[]) =>
  JSON.stringify({ error: { code, message, status, ...(details && { details }) } });

/**
 * A Gemini server for what the fake provider does not send: each request gets the next reply
 * (an error status and body, or a plain answer once they run out).
 */
export async function startReplyServer(
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

export function setupFor(sdk: (typeof SDKS)[number]) {
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

export const REQUEST = { model: MODEL, contents: "Say the words." };

/** The text of a stream of chunks, and the error it ended with. */
export async function readText(stream: AsyncIterable<GeminiChunk>, seen = { text: "", chunks: 0 }) {
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

export const thrown = (promise: Promise<unknown>) =>
  promise.then(
    () => expect.unreachable("expected a rejection"),
    (e: unknown) => e,
  );
