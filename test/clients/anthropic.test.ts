/**
 * `healAnthropic`: the real `@anthropic-ai/sdk` client, healed in one line, against Anthropic
 * servers on 127.0.0.1 speaking the Messages wire format (JSON, SSE, error bodies, `retry-after`
 * and `request-id`). The raw clients keep the SDK's default of 2 retries: the counts of requests
 * show the healed client sends each attempt with them off. selfheal runs on a VirtualClock: a
 * wait or a limit passes only when a test advances it, while the servers answer in real time.
 */
import Anthropic from "@anthropic-ai/sdk";
import { Stream } from "@anthropic-ai/sdk/core/streaming";
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import {
  healAnthropic,
  type AnthropicClient,
  type HealAnthropicOptions,
} from "../../src/clients/anthropic.js";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
  type DiagnosisEvent,
  type StreamRestart,
  type ToolCallEvent,
} from "../../src/index.js";
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_STREAM,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  SPAN_TOOL_CALL,
} from "../../src/telemetry/conventions.js";
import { VirtualClock } from "../../src/testing/index.js";
import { recordingProvider } from "../helpers/otel.js";
import { eventually } from "../helpers/otlp.js";
import {
  errorEvent,
  message,
  messageEvents,
  REQUEST_ID,
  startAnthropicServer,
} from "./anthropic-server.js";

const MODEL = "claude-sonnet-4-5";
const WORDS = Array.from({ length: 8 }, (_, i) => `w${i + 1}`);
const TEXT = WORDS.join(" ");
/** firstTokenMs and idleMs of the tests that pass them: the only limit a test lets pass. */
const LIMIT_MS = 5_000;
/** The limits elsewhere: far beyond any wait a retry takes. */
const LONG_MS = 600_000;
const STEP_MS = 100;
/** Events of WORDS up to the fifth word's delta: message_start, ping, content_block_start, 5 deltas. */
const FIVE_WORDS = 3 + 5;
const REQUEST = {
  model: MODEL,
  max_tokens: 256,
  messages: [{ role: "user" as const, content: "Hi" }],
};

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
});

/** A healed client on virtual time; `backup`: a second server as a fallback client. */
async function setup(
  options: HealAnthropicOptions<Anthropic> = {},
  { backup = false, providers }: { backup?: boolean; providers?: string[] } = {},
) {
  const primary = await startAnthropicServer();
  open.push(primary);
  const secondary = backup ? await startAnthropicServer() : undefined;
  if (secondary) open.push(secondary);
  const clock = new VirtualClock();
  const otel = recordingProvider();
  const sh = createSelfHealing({
    agent: "anthropic-client",
    clock,
    tracerProvider: otel.provider,
    logger: { warn: () => undefined },
    recovery: {
      random: () => 0,
      ...(providers && { providers: providers.map((name) => ({ name })) }),
    },
  });
  open.push(sh);
  const raw = new Anthropic({ apiKey: "sk-ant-test", baseURL: primary.url });
  const fallback = secondary && {
    provider: "backup",
    client: new Anthropic({ apiKey: "sk-ant-test", baseURL: secondary.url }),
  };
  const client = healAnthropic(sh, raw, {
    ...(fallback && { fallback }),
    firstTokenMs: LONG_MS,
    idleMs: LONG_MS,
    ...options,
  });
  const calls: ToolCallEvent[] = [];
  const diagnoses: DiagnosisEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  sh.on("diagnosis", (e) => diagnoses.push(e));
  return { primary, secondary, clock, sh, raw, client, calls, diagnoses, otel };
}

/**
 * Moves virtual time on in small steps, giving the servers real time between them, until
 * `done()`: a retry's wait passes, and a new attempt's limits (far longer) do not.
 */
async function stepUntil(clock: VirtualClock, done: () => boolean, what: string) {
  for (let step = 0; step < 3_000; step++) {
    if (done()) return;
    await clock.advance(STEP_MS);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`virtual time ran out waiting for ${what}`);
}

/** A promise's settling, as a flag to step the clock for. */
function settled<T>(promise: Promise<T>): () => boolean {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  return () => done;
}

/** Steps the clock until `promise` settles; its value. */
async function recovered<T>(clock: VirtualClock, promise: Promise<T>): Promise<T> {
  await stepUntil(clock, settled(promise), "the call to settle");
  return promise;
}

/** The text of a stream of events, and the error it ended with. */
async function readText(stream: AsyncIterable<Anthropic.RawMessageStreamEvent>) {
  const seen = { text: "", error: undefined as unknown };
  try {
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "text_delta")
        seen.text += event.delta.text;
    }
  } catch (error) {
    seen.error = error;
  }
  return seen;
}

const thrown = (promise: Promise<unknown>) =>
  promise.then(
    () => expect.unreachable("expected a rejection"),
    (e: unknown) => e,
  );

describe("healAnthropic: plain messages.create", () => {
  it("answers with the SDK's Message, one request, the usage on the call's span", async () => {
    const s = await setup();
    s.primary.answer({
      kind: "message",
      message: message("Hello.", { inputTokens: 11, outputTokens: 3 }),
    });
    const answer = await s.client.messages.create(REQUEST);
    expect(answer).toMatchObject({ type: "message", model: MODEL, stop_reason: "end_turn" });
    expect(answer.content).toEqual([{ type: "text", text: "Hello.", citations: null }]);
    expect(answer._request_id).toBe(REQUEST_ID);
    expect(s.primary.requests).toHaveLength(1);
    expect(s.primary.requests[0]?.body).toEqual(REQUEST);
    expect(s.calls.map((c) => [c.tool, c.outcome])).toEqual([["anthropic.messages", "success"]]);
    const [span] = s.otel.named(SPAN_TOOL_CALL);
    expect(span?.attributes).toMatchObject({
      [ATTR_GEN_AI_OPERATION_NAME]: "chat",
      [ATTR_GEN_AI_PROVIDER_NAME]: "anthropic",
      [ATTR_GEN_AI_REQUEST_MODEL]: MODEL,
      [ATTR_GEN_AI_RESPONSE_MODEL]: MODEL,
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 11,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 3,
    });
  });

  it("counts cache reads and writes as input tokens", async () => {
    const s = await setup();
    const cached = message("Hello.", { inputTokens: 5, outputTokens: 2 });
    Object.assign(cached["usage"] as object, {
      cache_creation_input_tokens: 100,
      cache_read_input_tokens: 1000,
    });
    s.primary.answer({ kind: "message", message: cached });
    await s.client.messages.create(REQUEST);
    expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 1105,
    });
  });

  it("reports no tokens a server gave as junk (negative, fractional)", async () => {
    const s = await setup();
    s.primary.answer({
      kind: "message",
      message: message("Hello.", { inputTokens: -1_000_000, outputTokens: 2.5 }),
    });
    await s.client.messages.create(REQUEST);
    const attributes = s.otel.named(SPAN_TOOL_CALL)[0]?.attributes ?? {};
    expect(attributes[ATTR_GEN_AI_USAGE_INPUT_TOKENS]).toBeUndefined();
    expect(attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]).toBeUndefined();
  });

  it("a 429 with Retry-After: exactly 2 requests, the second once the wait passed", async () => {
    const s = await setup();
    s.primary.answer(
      { kind: "error", status: 429, type: "rate_limit_error", headers: { "retry-after": "2" } },
      { kind: "message", message: message("After the wait.") },
    );
    const answer = s.client.messages.create(REQUEST);
    await eventually(() => s.diagnoses.length === 1, "the 429's diagnosis");
    expect(s.diagnoses[0]).toMatchObject({ pattern: "RATE_LIMIT", retryAfterMs: 2_000 });
    await s.clock.advance(1_999);
    expect(s.primary.requests).toHaveLength(1);
    await s.clock.advance(1);
    expect((await answer).content[0]).toMatchObject({ text: "After the wait." });
    expect(s.primary.requests).toHaveLength(2);
    expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
  });

  for (const [status, type, pattern] of [
    [529, "overloaded_error", "SERVICE_DOWN"],
    [503, "api_error", "SERVICE_DOWN"],
    [500, "api_error", "SERVICE_DOWN"],
  ] as const) {
    it(`a ${status} ${type} is ${pattern}, retried once: 2 requests`, async () => {
      const s = await setup();
      s.primary.answer(
        { kind: "error", status, type },
        { kind: "message", message: message("Back.") },
      );
      const answer = recovered(s.clock, s.client.messages.create(REQUEST));
      expect((await answer).content[0]).toMatchObject({ text: "Back." });
      expect(s.primary.requests).toHaveLength(2);
      expect(s.diagnoses.map((d) => d.pattern)).toEqual([pattern]);
    });
  }

  it("a 401 is not retried: one request, escalated with the SDK's AuthenticationError", async () => {
    const s = await setup();
    s.primary.answer({ kind: "error", status: 401, type: "authentication_error" });
    const error = await thrown(s.client.messages.create(REQUEST));
    expect(isHumanEscalationRequiredError(error)).toBe(true);
    const cause = (error as Error).cause;
    expect(cause).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(cause).toMatchObject({ status: 401, requestID: REQUEST_ID });
    expect(s.primary.requests).toHaveLength(1);
    expect(s.diagnoses.map((d) => d.pattern)).toEqual(["AUTH"]);
    expect(s.calls.map((c) => c.outcome)).toEqual(["error"]);
  });

  it("a 401 to a client signing with access tokens is sent once more with a fresh one, as the SDK does", async () => {
    const s = await setup();
    // An access token provider (credentials), as OAuth and workload identity give: a 401 makes
    // the SDK drop the cached token and ask for a fresh one.
    const credentials = (opts?: { forceRefresh?: boolean }) =>
      Promise.resolve({ token: opts?.forceRefresh ? "fresh" : "stale", expiresAt: null });
    const tokens = new Anthropic({ apiKey: null, credentials, baseURL: s.primary.url });
    const client = healAnthropic(s.sh, tokens, { name: "tokens" });
    s.primary.answer(
      { kind: "error", status: 401, type: "authentication_error" },
      { kind: "message", message: message("Signed in.") },
    );
    expect((await client.messages.create(REQUEST)).content[0]).toMatchObject({
      text: "Signed in.",
    });
    expect(s.primary.requests.map((r) => r.headers.authorization)).toEqual([
      "Bearer stale",
      "Bearer fresh",
    ]);
    expect(s.calls.map((c) => c.outcome)).toEqual(["success"]);
    // A token refused again is AUTH: one fresh token per call, as the SDK, then escalated.
    s.primary.answer({ kind: "error", status: 401, type: "authentication_error" });
    expect(isHumanEscalationRequiredError(await thrown(client.messages.create(REQUEST)))).toBe(
      true,
    );
    expect(s.primary.requests).toHaveLength(4);
  });

  it("an empty answer (thinking only) is EMPTY_LLM_RESPONSE, asked again", async () => {
    const s = await setup();
    s.primary.answer(
      {
        kind: "message",
        message: message("", { content: [{ type: "thinking", thinking: "Hm.", signature: "s" }] }),
      },
      { kind: "message", message: message("Now.") },
    );
    const answer = recovered(s.clock, s.client.messages.create(REQUEST));
    expect((await answer).content[0]).toMatchObject({ text: "Now." });
    expect(s.diagnoses.map((d) => d.pattern)).toEqual(["EMPTY_LLM_RESPONSE"]);
  });

  it("a tool call is an answer, without text", async () => {
    const s = await setup();
    s.primary.answer({
      kind: "message",
      message: message("", {
        stopReason: "tool_use",
        content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: {} }],
      }),
    });
    expect(await s.client.messages.create(REQUEST)).toMatchObject({ stop_reason: "tool_use" });
    expect(s.primary.requests).toHaveLength(1);
  });

  it("fails over to another model of the provider: the request names it", async () => {
    const s = await setup(
      { fallback: { provider: "haiku", model: "claude-haiku-4-5" } },
      { providers: ["anthropic", "haiku"] },
    );
    s.primary.answer(
      { kind: "error", status: 529, type: "overloaded_error" },
      { kind: "error", status: 529, type: "overloaded_error" },
      { kind: "message", message: message("From Haiku.") },
    );
    const answer = recovered(s.clock, s.client.messages.create(REQUEST));
    expect(await answer).toMatchObject({ model: "claude-haiku-4-5" });
    expect(s.primary.requests.map((r) => r.body["model"])).toEqual([
      MODEL,
      MODEL,
      "claude-haiku-4-5",
    ]);
    expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
    // The call's span names the route that answered, by the conventions' provider name.
    expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
      [ATTR_GEN_AI_PROVIDER_NAME]: "anthropic",
      [ATTR_GEN_AI_REQUEST_MODEL]: "claude-haiku-4-5",
      [ATTR_GEN_AI_RESPONSE_MODEL]: "claude-haiku-4-5",
    });
  });

  it("fails over to another client (another base URL) of the Messages API", async () => {
    const s = await setup({}, { backup: true, providers: ["anthropic", "backup"] });
    s.primary.answer({ kind: "error", status: 529, type: "overloaded_error" });
    s.secondary?.answer({ kind: "message", message: message("From the backup.") });
    const answer = recovered(s.clock, s.client.messages.create(REQUEST));
    expect((await answer).content[0]).toMatchObject({ text: "From the backup." });
    expect(s.secondary?.requests.map((r) => r.body)).toEqual([REQUEST]);
  });

  it("withResponse() gives the answering attempt's response and request id", async () => {
    const s = await setup();
    const { data, response, request_id } = await s.client.messages.create(REQUEST).withResponse();
    expect(data.type).toBe("message");
    expect(response.status).toBe(200);
    expect(request_id).toBe(REQUEST_ID);
  });

  it("messages.parse() is healed too", async () => {
    const s = await setup();
    s.primary.answer(
      { kind: "error", status: 529, type: "overloaded_error" },
      { kind: "message", message: message('{"answer": 4}') },
    );
    const parsed = recovered(s.clock, s.client.messages.parse(REQUEST));
    expect((await parsed).content[0]).toMatchObject({ text: '{"answer": 4}' });
    expect(s.primary.requests).toHaveLength(2);
  });
});

describe("healAnthropic: messages.create({ stream: true })", () => {
  it("yields the SDK's events in the SDK's Stream, and reports the usage", async () => {
    const s = await setup();
    s.primary.answer({
      kind: "stream",
      events: messageEvents(WORDS, { inputTokens: 21, outputTokens: 10 }),
    });
    const stream = await s.client.messages.create({ ...REQUEST, stream: true });
    expect(stream).toBeInstanceOf(Stream);
    expect(stream.controller).toBeInstanceOf(AbortController);
    expect(await readText(stream)).toEqual({ text: TEXT, error: undefined });
    expect(s.primary.requests[0]?.body).toEqual({ ...REQUEST, stream: true });
    expect(s.calls.map((c) => [c.tool, c.outcome])).toEqual([
      ["anthropic.messages:stream", "success"],
    ]);
    expect(s.otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
      [ATTR_GEN_AI_REQUEST_STREAM]: true,
      [ATTR_GEN_AI_REQUEST_MODEL]: MODEL,
      [ATTR_GEN_AI_RESPONSE_MODEL]: MODEL,
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 21,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 10,
    });
  });

  it("a 429 before the stream: exactly 2 requests, then the whole answer", async () => {
    const s = await setup();
    s.primary.answer(
      { kind: "error", status: 429, type: "rate_limit_error", headers: { "retry-after": "1" } },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const opened = recovered(s.clock, s.client.messages.create({ ...REQUEST, stream: true }));
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
    expect(s.primary.requests).toHaveLength(2);
  });

  it("an overloaded_error event before the first token is retried, unseen", async () => {
    const s = await setup();
    s.primary.answer(
      {
        kind: "stream",
        events: [...messageEvents(WORDS).slice(0, 2), errorEvent("overloaded_error", "Overloaded")],
      },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const opened = recovered(s.clock, s.client.messages.create({ ...REQUEST, stream: true }));
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
    expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([
      ["SERVICE_DOWN", "http-5xx-unavailable"],
    ]);
  });

  it("a stream cut before its first token is asked again, unseen", async () => {
    const s = await setup();
    s.primary.answer(
      { kind: "stream", events: messageEvents(WORDS), cutAfter: 2 },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const opened = recovered(s.clock, s.client.messages.create({ ...REQUEST, stream: true }));
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
    expect(s.primary.requests).toHaveLength(2);
  });

  it("fail (default): a stream cut mid-answer errors with what was delivered", async () => {
    const s = await setup();
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), cutAfter: FIVE_WORDS });
    const stream = await s.client.messages.create({ ...REQUEST, stream: true });
    const seen = await readText(stream);
    expect(seen.text).toBe(WORDS.slice(0, 5).join(" "));
    expect(isStreamInterruptedError(seen.error)).toBe(true);
    expect(isStreamTruncatedError((seen.error as Error).cause)).toBe(true);
    expect(s.primary.requests).toHaveLength(1);
    expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_TRUNCATED"]);
  });

  it("a stream that ends after its stop reason without message_stop was cut", async () => {
    const s = await setup({ afterFirstToken: "buffer" });
    s.primary.answer(
      { kind: "stream", events: messageEvents(WORDS).slice(0, -1) },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const opened = recovered(s.clock, s.client.messages.create({ ...REQUEST, stream: true }));
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
    expect(s.primary.requests).toHaveLength(2);
    expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_TRUNCATED"]);

    const t = await setup();
    t.primary.answer({ kind: "stream", events: messageEvents(WORDS).slice(0, -1) });
    const seen = await readText(await t.client.messages.create({ ...REQUEST, stream: true }));
    expect(seen.text).toBe(TEXT);
    expect(isStreamInterruptedError(seen.error)).toBe(true);
    const cause = (seen.error as Error).cause;
    // The stop reason came, message_stop did not: a cut, not a completion.
    expect(cause).toMatchObject({ type: "cut" });
  });

  it("restart: a stalled stream starts again on the fallback client, onRestart told", async () => {
    const restarts: StreamRestart[] = [];
    const s = await setup(
      {
        afterFirstToken: "restart",
        onRestart: (r) => restarts.push(r),
        firstTokenMs: LIMIT_MS,
        idleMs: LIMIT_MS,
      },
      { backup: true, providers: ["anthropic", "backup"] },
    );
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), stallAfter: FIVE_WORDS });
    s.secondary?.answer({ kind: "stream", events: messageEvents(WORDS) });
    const stream = await s.client.messages.create({ ...REQUEST, stream: true });
    let text = "";
    const read = (async () => {
      for await (const event of stream) {
        if (event.type === "message_start") text = ""; // the answer starts again
        if (event.type === "content_block_delta" && event.delta.type === "text_delta")
          text += event.delta.text;
      }
    })();
    await eventually(() => text === WORDS.slice(0, 5).join(" "), "the five first words");
    await s.clock.advance(LIMIT_MS);
    await read;
    expect(text).toBe(TEXT);
    expect(restarts).toHaveLength(1);
    expect(isStreamStalledError(restarts[0]?.cause)).toBe(true);
    expect(s.calls.map((c) => c.outcome)).toEqual(["recovered"]);
  });

  it("no first token within firstTokenMs: the next route answers", async () => {
    const s = await setup(
      { firstTokenMs: LIMIT_MS },
      { backup: true, providers: ["anthropic", "backup"] },
    );
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), stallAfter: 2 });
    s.secondary?.answer({ kind: "stream", events: messageEvents(WORDS) });
    const opened = s.client.messages.create({ ...REQUEST, stream: true });
    await eventually(() => s.primary.requests.length === 1, "the primary's request");
    await s.clock.advance(LIMIT_MS);
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
    expect(s.diagnoses.map((d) => d.pattern)).toEqual(["STREAM_FIRST_TOKEN_TIMEOUT"]);
  });

  it("stop_reason max_tokens fails the stream by default; failOnFinish: [] takes it", async () => {
    const s = await setup();
    s.primary.answer({
      kind: "stream",
      events: messageEvents(WORDS, { stopReason: "max_tokens" }),
    });
    const seen = await readText(await s.client.messages.create({ ...REQUEST, stream: true }));
    expect(seen.text).toBe(TEXT);
    expect(isStreamInterruptedError(seen.error)).toBe(true);
    expect((seen.error as Error).cause).toMatchObject({ type: "max_tokens" });

    const t = await setup({ failOnFinish: [] });
    t.primary.answer({
      kind: "stream",
      events: messageEvents(WORDS, { stopReason: "max_tokens" }),
    });
    expect(await readText(await t.client.messages.create({ ...REQUEST, stream: true }))).toEqual({
      text: TEXT,
      error: undefined,
    });
  });

  it("stop_reason refusal is CONTENT_POLICY: never asked again, nothing shown under buffer", async () => {
    const s = await setup({ afterFirstToken: "buffer" });
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS, { stopReason: "refusal" }) });
    const error = await thrown(s.client.messages.create({ ...REQUEST, stream: true }));
    expect(isStreamTruncatedError(error)).toBe(true);
    expect(error).toMatchObject({ type: "refusal" });
    expect(s.diagnoses.map((d) => [d.pattern, d.rule])).toEqual([
      ["CONTENT_POLICY", "stream-content-filter"],
    ]);
    expect(s.primary.requests).toHaveLength(1);
  });

  it("buffer: a cut stream is asked again; only the whole answer is seen", async () => {
    const s = await setup({ afterFirstToken: "buffer" });
    s.primary.answer(
      { kind: "stream", events: messageEvents(WORDS), cutAfter: FIVE_WORDS },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const opened = recovered(s.clock, s.client.messages.create({ ...REQUEST, stream: true }));
    expect(await readText(await opened)).toEqual({ text: TEXT, error: undefined });
  });
});

describe("healAnthropic: messages.stream() (the SDK's MessageStream)", () => {
  it("recovers before its first token; finalMessage() and the text events are the SDK's", async () => {
    const s = await setup();
    s.primary.answer(
      { kind: "error", status: 529, type: "overloaded_error" },
      { kind: "stream", events: messageEvents(WORDS) },
    );
    const stream = s.client.messages.stream(REQUEST);
    let text = "";
    stream.on("text", (delta) => (text += delta));
    const final = recovered(s.clock, stream.finalMessage());
    expect(await final).toMatchObject({
      content: [{ type: "text", text: TEXT }],
      stop_reason: "end_turn",
    });
    expect(text).toBe(TEXT);
    expect(stream.request_id).toBe(REQUEST_ID);
    expect(s.primary.requests).toHaveLength(2);
  });

  it("a cut mid-answer rejects finalMessage() with the StreamInterruptedError as cause", async () => {
    const s = await setup();
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), cutAfter: FIVE_WORDS });
    const error = await thrown(s.client.messages.stream(REQUEST).finalMessage());
    expect(error).toBeInstanceOf(Anthropic.AnthropicError);
    expect(isStreamInterruptedError((error as Error).cause)).toBe(true);
  });

  it("refuses afterFirstToken restart: a MessageStream cannot start its message again", async () => {
    const s = await setup({ afterFirstToken: "restart" });
    let error: unknown;
    try {
      s.client.messages.stream(REQUEST);
    } catch (e) {
      error = e;
    }
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as Error).message).toContain("healAnthropic.options.afterFirstToken");
    expect(s.primary.requests).toHaveLength(0);
  });
});

describe("healAnthropic: the caller's own end", () => {
  it("your signal ends a plain call: the SDK's APIUserAbortError, the request dropped, not sent again", async () => {
    const s = await setup();
    s.primary.answer({ kind: "hang" });
    const controller = new AbortController();
    const answer = s.client.messages.create(REQUEST, { signal: controller.signal });
    await eventually(() => s.primary.requests.length === 1, "the request");
    controller.abort();
    expect(await thrown(answer)).toBeInstanceOf(Anthropic.APIUserAbortError);
    await eventually(() => s.primary.dropped === 1, "the request's connection to close");
    expect(s.primary.requests).toHaveLength(1);
  });

  it("a loop that breaks lets the stream's request go", async () => {
    const s = await setup();
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), stallAfter: FIVE_WORDS });
    const stream = await s.client.messages.create({ ...REQUEST, stream: true });
    for await (const event of stream) if (event.type === "content_block_delta") break;
    await eventually(() => s.primary.dropped === 1, "the stream's connection to close");
    expect(s.primary.requests).toHaveLength(1);
  });

  it("stream.controller.abort() ends the loop without an error, as the SDK's stream", async () => {
    const s = await setup();
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), stallAfter: FIVE_WORDS });
    const stream = await s.client.messages.create({ ...REQUEST, stream: true });
    let deltas = 0;
    for await (const event of stream) {
      // The fifth word is the last the server sends: abort while the loop waits for more.
      if (event.type === "content_block_delta" && ++deltas === 5) stream.controller.abort();
    }
    expect(deltas).toBe(5);
    await eventually(() => s.primary.dropped === 1, "the stream's connection to close");
    expect(s.primary.requests).toHaveLength(1);
  });

  it("MessageStream.abort() ends the healed call: APIUserAbortError, the request dropped", async () => {
    const s = await setup();
    s.primary.answer({ kind: "stream", events: messageEvents(WORDS), stallAfter: FIVE_WORDS });
    const stream = s.client.messages.stream(REQUEST);
    stream.on("text", () => {
      stream.abort();
    });
    expect(await thrown(stream.finalMessage())).toBeInstanceOf(Anthropic.APIUserAbortError);
    await eventually(() => s.primary.dropped === 1, "the stream's connection to close");
    expect(s.primary.requests).toHaveLength(1);
  });
});

describe("healAnthropic: the client", () => {
  it("is the same client type, its other members untouched", async () => {
    const s = await setup();
    expectTypeOf(s.client).toEqualTypeOf<Anthropic>();
    expect(s.client.baseURL).toBe(s.raw.baseURL);
    expect(s.client.messages.batches).toBe(s.raw.messages.batches);
    expect(s.client.models).toBe(s.raw.models);
  });

  it("names the provider of a Bedrock or Vertex client by the conventions (by its class)", async () => {
    const server = await startAnthropicServer();
    open.push(server);
    const otel = recordingProvider();
    const sh = createSelfHealing({
      agent: "clouds",
      tracerProvider: otel.provider,
      logger: { warn: () => undefined },
    });
    open.push(sh);
    // The Messages API behind another client class, as @anthropic-ai/bedrock-sdk's.
    class AnthropicBedrock extends Anthropic {}
    const bedrock = healAnthropic(
      sh,
      new AnthropicBedrock({ apiKey: "sk-ant-test", baseURL: server.url }),
    );
    await bedrock.messages.create(REQUEST);
    expect(otel.named(SPAN_TOOL_CALL)[0]?.attributes).toMatchObject({
      [ATTR_GEN_AI_PROVIDER_NAME]: "aws.bedrock",
    });
  });

  it("healing it again returns it; another instance is refused", async () => {
    const s = await setup();
    expect(healAnthropic(s.sh, s.client, { firstTokenMs: LIMIT_MS, idleMs: LIMIT_MS })).toBe(
      s.client,
    );
    const other = createSelfHealing({ agent: "other", logger: { warn: () => undefined } });
    open.push(other);
    expect(() => healAnthropic(other, s.client)).toThrow(/healed already/);
  });

  it("refuses what is not an Anthropic client, and bad options, naming the field", () => {
    const sh = createSelfHealing({ agent: "config", logger: { warn: () => undefined } });
    open.push(sh);
    expect(() => healAnthropic(sh, {} as unknown as AnthropicClient)).toThrow(
      /healAnthropic\(client\)/,
    );
    const client = new Anthropic({ apiKey: "sk-ant-test" });
    expect(() => healAnthropic(sh, client, { fallback: { provider: "x" } })).toThrow(
      /healAnthropic\.options\.fallback/,
    );
    expect(() =>
      healAnthropic(sh, client, { bogus: 1 } as unknown as HealAnthropicOptions),
    ).toThrow(/healAnthropic\.options/);
  });
});
