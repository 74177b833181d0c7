import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { AIMessage, AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createAgent, MiddlewareError } from "langchain";
import { describe, expect, it } from "vitest";
import {
  healChatModelStream,
  isModelStreamRestart,
  selfHealingMiddleware,
  STREAM_RESTART_EVENT,
  type LangChainModelOptions,
  type ModelStreamRestart,
} from "../../src/adapters/langchain.js";
import { finishReasonOf, readMessageChunk } from "../../src/adapters/langchain/stream-format.js";
import {
  createSelfHealing,
  isSelfHealConfigError,
  isStreamInterruptedError,
  isStreamRestart,
  isStreamStalledError,
  isStreamTruncatedError,
  type RecoveryEvent,
  type SelfHealing,
  type SelfHealingOptions,
  type StreamMode,
  type ToolCallEvent,
} from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import { StreamingScriptModel, type StreamScript } from "../fixtures/adapters/langchain-models.js";

/**
 * Model calls inside createAgent are read on real time (the adapter cannot reach the instance's
 * clock yet), so these tests use limits of 1 s against a model that sends a chunk every 5 ms: a
 * busy machine may delay a chunk by a good fraction of a second, never by 1 s (issue 27). Nothing
 * asserts a duration beyond ordering and a bound far from both sides.
 */
const FIRST_TOKEN_MS = 1_000;
const IDLE_MS = 1_000;

/** A selfheal instance (on real time unless a clock is given) with routes `a` and `b`; its events. */
function setup(options: Partial<SelfHealingOptions> = {}) {
  const sh = createSelfHealing({
    agent: "stream-bot",
    logger: { warn: () => undefined },
    recovery: { random: () => 0, providers: [{ name: "a" }, { name: "b" }] },
    ...options,
  });
  const calls: ToolCallEvent[] = [];
  const recoveries: RecoveryEvent[] = [];
  sh.on("tool-call", (e) => calls.push(e));
  sh.on("recovery", (e) => recoveries.push(e));
  return { sh, calls, recoveries };
}

/** An agent on model `a` (failing over to `b`), selfheal's middleware with these model options. */
function agentOn(
  sh: SelfHealing,
  a: BaseChatModel,
  b: BaseChatModel,
  model: Partial<LangChainModelOptions> = {},
) {
  return createAgent({
    model: a,
    tools: [],
    middleware: [
      selfHealingMiddleware(sh, {
        model: {
          provider: "a",
          fallbacks: [{ provider: "b", model: b }],
          firstTokenMs: FIRST_TOKEN_MS,
          idleMs: IDLE_MS,
          ...model,
        },
      }),
    ],
  });
}

type Agent = ReturnType<typeof agentOn>;
const INPUT = { messages: [{ role: "user", content: "What is the refund policy?" }] };

/**
 * Streams a run as a UI would (`messages` for tokens, `custom` for the discard signal, `values`
 * for the final state): what it was shown, in order (`|discard n|` for a discard signal), the
 * signals, the final messages and the error the stream threw.
 */
async function streamRun(agent: Agent) {
  const shown: string[] = [];
  const restarts: ModelStreamRestart[] = [];
  let final: BaseMessage[] = [];
  let error: unknown;
  const started = Date.now();
  try {
    const stream = await agent.stream(INPUT, { streamMode: ["messages", "custom", "values"] });
    for await (const item of stream as AsyncIterable<[string, unknown]>) {
      const [mode, payload] = item;
      if (mode === "messages") {
        const [message] = payload as [BaseMessage];
        if (AIMessageChunk.isInstance(message) && message.text !== "") shown.push(message.text);
      } else if (mode === "custom" && isModelStreamRestart(payload)) {
        shown.push(`|discard ${payload.discard}|`);
        restarts.push(payload);
      } else if (mode === "values") final = (payload as { messages: BaseMessage[] }).messages;
    }
  } catch (e) {
    error = e;
  }
  return { shown, text: shown.join(""), restarts, final, error, ms: Date.now() - started };
}

const answerOf = (messages: BaseMessage[]) => messages.at(-1)?.text;
const A3 = "a0 a1 a2 ";
const B3 = "b0 b1 b2 ";

describe("selfHealingMiddleware: a streamed model call (agent.stream, streamMode messages)", () => {
  it("passes a complete stream to the caller token by token, each token once", async () => {
    const { sh, calls } = setup();
    const a = new StreamingScriptModel("a", [{ tokens: 3 }]);
    const b = new StreamingScriptModel("b", [{}]);
    const run = await streamRun(agentOn(sh, a, b));

    expect(run.error).toBeUndefined();
    expect(run.shown).toEqual(["a0 ", "a1 ", "a2 "]); // the model's own callbacks were muted
    expect(answerOf(run.final)).toBe(A3);
    expect(a.log).toEqual(["a#1 done"]);
    expect(b.calls).toBe(0);
    expect(calls.map((c) => c.outcome)).toEqual(["success"]);
  });

  it.each<StreamMode>(["fail", "restart", "buffer"])(
    "%s: a slow first token fails over before anything is shown; the slow request is aborted",
    async (mode) => {
      const { sh, recoveries } = setup();
      const a = new StreamingScriptModel("a", [{ firstMs: 60_000 }]);
      const b = new StreamingScriptModel("b", [{}]);
      const run = await streamRun(agentOn(sh, a, b, { afterFirstToken: mode }));

      expect(run.error).toBeUndefined();
      expect(run.text).toBe(B3);
      expect(run.restarts).toEqual([]);
      expect(answerOf(run.final)).toBe(B3);
      expect(a.log).toEqual(["a#1 aborted"]);
      expect(recoveries[0]).toMatchObject({
        pattern: "STREAM_FIRST_TOKEN_TIMEOUT",
        outcome: "recovered",
        provider: "b",
      });
      expect(run.ms).toBeLessThan(30_000); // not the minute a's first token would take
    },
  );
});

/** A fault after the first token: how `a`'s stream goes, the error behind it, chunks it sent. */
const FAULTS: {
  fault: string;
  script: StreamScript;
  pattern: string;
  cause: (e: unknown) => boolean;
  shownBefore: string;
  /** Chunks that reached the caller (tokens and the finish chunk). */
  delivered: number;
}[] = [
  {
    fault: "cut (ends without a finish reason)",
    script: { tokens: 3, then: "cut" },
    pattern: "STREAM_TRUNCATED",
    cause: (e) => isStreamTruncatedError(e) && e.type === "cut",
    shownBefore: A3,
    delivered: 3,
  },
  {
    fault: "cut (the connection drops)",
    script: { tokens: 3, then: "throw" },
    pattern: "STREAM_TRUNCATED",
    cause: (e) => isStreamTruncatedError(e) && e.type === "cut",
    shownBefore: A3,
    delivered: 3,
  },
  {
    fault: "stalled",
    script: { tokens: 2, then: "silent" },
    pattern: "STREAM_STALLED",
    cause: isStreamStalledError,
    shownBefore: "a0 a1 ",
    delivered: 2,
  },
  {
    fault: "truncated (finish reason length)",
    script: { tokens: 3, then: "length" },
    pattern: "STREAM_TRUNCATED",
    cause: (e) => isStreamTruncatedError(e) && e.type === "length",
    shownBefore: A3,
    delivered: 4,
  },
];

describe.each(FAULTS)(
  "selfHealingMiddleware: a stream $fault after its first token",
  ({ script, pattern, cause, shownBefore, delivered }) => {
    it("fail (default): the caller keeps what it was shown and gets a StreamInterruptedError; nothing resent", async () => {
      const { sh, calls } = setup();
      const a = new StreamingScriptModel("a", [script]);
      const b = new StreamingScriptModel("b", [{}]);
      const run = await streamRun(agentOn(sh, a, b));

      expect(run.text).toBe(shownBefore);
      expect(MiddlewareError.isInstance(run.error)).toBe(true);
      const interrupted = (run.error as Error).cause;
      expect(isStreamInterruptedError(interrupted)).toBe(true);
      expect(interrupted).toMatchObject({ tool: "model", delivered });
      expect(cause((interrupted as Error).cause)).toBe(true);
      expect(b.calls).toBe(0);
      expect(calls.map((c) => c.outcome)).toEqual(["error"]);
    });

    it("restart: the discard signal, then the whole answer from the next route", async () => {
      const { sh, calls, recoveries } = setup();
      const a = new StreamingScriptModel("a", [script]);
      const b = new StreamingScriptModel("b", [{}]);
      const run = await streamRun(agentOn(sh, a, b, { afterFirstToken: "restart" }));

      expect(run.error).toBeUndefined();
      expect(run.text).toBe(`${shownBefore}|discard ${delivered}|${B3}`);
      expect(run.restarts[0]).toMatchObject({
        type: STREAM_RESTART_EVENT,
        tool: "model",
        discard: delivered,
        attempt: 2,
        provider: "b",
      });
      expect(run.restarts[0]?.messageId).toBeTruthy();
      expect(answerOf(run.final)).toBe(B3); // the graph keeps only the whole answer
      expect(recoveries[0]).toMatchObject({ pattern, outcome: "recovered", provider: "b" });
      expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
    });

    it("buffer: nothing of the cut answer is shown; the whole answer from the next route", async () => {
      const { sh, calls } = setup();
      const a = new StreamingScriptModel("a", [script]);
      const b = new StreamingScriptModel("b", [{}]);
      const run = await streamRun(agentOn(sh, a, b, { afterFirstToken: "buffer" }));

      expect(run.error).toBeUndefined();
      expect(run.text).toBe(B3);
      expect(run.restarts).toEqual([]);
      expect(answerOf(run.final)).toBe(B3);
      expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
    });
  },
);

describe("selfHealingMiddleware: what counts, and what else streams", () => {
  it("a cut stream is never a success: every call an error, the agent critical", async () => {
    // The instance on a virtual clock, to step past its 5 s health cache; the stream limits
    // inside the model calls run on real time.
    const clock = new VirtualClock();
    const { sh, calls } = setup({ clock });
    const a = new StreamingScriptModel("a", [{ tokens: 2, then: "cut" }]);
    const agent = createAgent({
      model: a,
      tools: [],
      middleware: [selfHealingMiddleware(sh, { model: { idleMs: IDLE_MS } })],
    });
    for (let i = 0; i < 10; i++) {
      const run = await streamRun(agent);
      expect(isStreamInterruptedError((run.error as Error).cause)).toBe(true);
      expect(run.text).toBe("a0 a1 ");
    }
    expect(calls.map((c) => c.outcome)).toEqual(Array(10).fill("error"));
    await clock.advance(6_000);
    expect((await sh.status()).status).toBe("critical");
  });

  it("agent.invoke, a model streaming inside _generate: a cut answer is failed over unseen, never returned", async () => {
    const { sh, calls, recoveries } = setup();
    const a = new StreamingScriptModel("a", [{ tokens: 3, then: "cut" }]);
    const b = new StreamingScriptModel("b", [{}]);
    // The default `fail` mode: nobody is shown the tokens of an invoke, so nothing is committed.
    const result = await agentOn(sh, a, b).invoke(INPUT);

    expect(answerOf(result.messages)).toBe(B3);
    expect(recoveries[0]).toMatchObject({ pattern: "STREAM_TRUNCATED", outcome: "recovered" });
    expect(calls.map((c) => c.outcome)).toEqual(["recovered"]);
  });

  it("agent.invoke, a whole answer that finished for length is truncated and failed over", async () => {
    const { sh, recoveries } = setup();
    const a = new WholeAnswerModel("a0 a1", "length");
    const b = new WholeAnswerModel("b0 b1 b2", "stop");
    const result = await agentOn(sh, a, b).invoke(INPUT);

    expect(answerOf(result.messages)).toBe("b0 b1 b2");
    expect(recoveries[0]).toMatchObject({ pattern: "STREAM_TRUNCATED", provider: "b" });
    expect(a.calls).toBe(1);
  });

  it("agent.invoke, a model that does not stream: timeoutMs aborts its request, and it fails over", async () => {
    const { sh, recoveries } = setup();
    const a = new WholeAnswerModel("late", "stop", 60_000);
    const b = new WholeAnswerModel("b0 b1 b2", "stop");
    const started = Date.now();
    const result = await agentOn(sh, a, b, { timeoutMs: 1_000 }).invoke(INPUT);

    expect(answerOf(result.messages)).toBe("b0 b1 b2");
    expect(a.aborted).toBe(1); // the attempt's signal reached the model's request
    expect(recoveries[0]).toMatchObject({ pattern: "TIMEOUT", provider: "b" });
    expect(Date.now() - started).toBeLessThan(30_000); // not the minute a's answer would take
  });

  it("streamEvents: the discard signal is an on_custom_event between the two answers' tokens", async () => {
    const { sh } = setup();
    const a = new StreamingScriptModel("a", [{ tokens: 2, then: "throw" }]);
    const b = new StreamingScriptModel("b", [{}]);
    const agent = agentOn(sh, a, b, { afterFirstToken: "restart" });
    const seen: string[] = [];
    for await (const e of agent.streamEvents(INPUT, { version: "v2" })) {
      if (e.event === "on_chat_model_stream") {
        const text = (e.data as { chunk: AIMessageChunk }).chunk.text;
        if (text !== "") seen.push(text);
      } else if (e.event === "on_custom_event" && e.name === STREAM_RESTART_EVENT) {
        seen.push(`|discard ${(e.data as ModelStreamRestart).discard}|`);
      }
    }
    expect(seen.join("")).toBe(`a0 a1 |discard 2|${B3}`);
  });

  it("stream protocol v3 (chat model stream events): the same discard signal between the answers", async () => {
    const { sh } = setup();
    const a = new StreamingScriptModel("a", [{ tokens: 2, then: "cut" }]);
    const b = new StreamingScriptModel("b", [{}]);
    const agent = agentOn(sh, a, b, { afterFirstToken: "restart" });
    // `version: "v3"` is LangGraph's protocol-native stream (not in createAgent's types yet).
    const options = { streamMode: ["messages", "custom"], version: "v3" } as const;
    const seen: string[] = [];
    for await (const [mode, payload] of (await agent.stream(
      INPUT,
      options as never,
    )) as AsyncIterable<[string, unknown]>) {
      if (mode === "custom" && isModelStreamRestart(payload))
        seen.push(`|discard ${payload.discard}|`);
      if (mode !== "messages") continue;
      const [event] = payload as [{ event: string; delta?: { text?: string } }];
      if (event.event === "content-block-delta" && event.delta?.text) seen.push(event.delta.text);
    }
    expect(seen.join("")).toBe(`a0 a1 |discard 2|${B3}`);
  });

  it("the Anthropic-style finish reason (stop_reason in additional_kwargs) completes a stream; max_tokens truncates it", async () => {
    const { sh, recoveries } = setup();
    const a = new StreamingScriptModel("a", [
      { tokens: 2, then: "stop", style: "anthropic" },
      { tokens: 2, then: "length", style: "anthropic" },
    ]);
    const b = new StreamingScriptModel("b", [{}]);
    const agent = agentOn(sh, a, b, { afterFirstToken: "buffer" });

    expect((await streamRun(agent)).text).toBe("a0 a1 ");
    expect((await streamRun(agent)).text).toBe(B3);
    expect(recoveries[0]).toMatchObject({ pattern: "STREAM_TRUNCATED", provider: "b" });
  });

  it("LangChain's FakeStreamingChatModel (no finish reason; bindTools makes a new model): completion end", async () => {
    const { sh, recoveries } = setup();
    // Its first character comes after 5 s, five times the first-token limit: the limit reaches
    // the model that bindTools made, and fails over.
    const a = new FakeStreamingChatModel({ responses: [new AIMessage("slow")], sleep: 5_000 });
    const b = new FakeStreamingChatModel({ responses: [new AIMessage("fast")], sleep: 1 });
    const run = await streamRun(agentOn(sh, a, b, { completion: "end" }));

    expect(run.error).toBeUndefined();
    expect(run.text).toBe("fast");
    expect(recoveries[0]).toMatchObject({ pattern: "STREAM_FIRST_TOKEN_TIMEOUT", provider: "b" });
  });

  it("a model that reports no finish reason fails every stream under the default completion", async () => {
    const { sh, recoveries } = setup();
    const a = new FakeStreamingChatModel({ responses: [new AIMessage("hi")], sleep: 1 });
    const b = new FakeStreamingChatModel({ responses: [new AIMessage("yo")], sleep: 1 });
    const run = await streamRun(agentOn(sh, a, b, { afterFirstToken: "buffer" }));

    expect(MiddlewareError.isInstance(run.error)).toBe(true);
    expect(run.shown).toEqual([]);
    // Both routes' complete answers were judged cut: nothing was passed off as whole.
    expect(recoveries.map((e) => e.pattern)).toEqual(["STREAM_TRUNCATED"]);
    expect(recoveries[0]?.outcome).not.toBe("recovered");
  });

  it("a caller who stops reading cancels the model's request", async () => {
    const { sh } = setup();
    const a = new StreamingScriptModel("a", [{ tokens: 20, gapMs: 20 }]);
    const b = new StreamingScriptModel("b", [{}]);
    const stream = await agentOn(sh, a, b).stream(INPUT, { streamMode: "messages" });
    const reader = stream[Symbol.asyncIterator]();
    await reader.next(); // the first token, then the reader leaves
    await reader.return();
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(a.log).toEqual(["a#1 aborted"]);
    expect(b.calls).toBe(0);
  });

  it("refuses bad stream settings by name", () => {
    const { sh } = setup();
    const bad = (model: Record<string, unknown>) => {
      try {
        selfHealingMiddleware(sh, { model: model as LangChainModelOptions });
      } catch (e) {
        return isSelfHealConfigError(e) ? e.field : "not a config error";
      }
      return "accepted";
    };
    expect(bad({ firstTokenMs: 0 })).toBe("selfHealingMiddleware.options.model.firstTokenMs");
    expect(bad({ idleMs: "1s" })).toBe("selfHealingMiddleware.options.model.idleMs");
    expect(bad({ afterFirstToken: "resume" })).toBe(
      "selfHealingMiddleware.options.model.afterFirstToken",
    );
    expect(bad({ completion: "eventually" })).toBe(
      "selfHealingMiddleware.options.model.completion",
    );
    expect(bad({ failOnFinish: [""] })).toBe("selfHealingMiddleware.options.model.failOnFinish[0]");
  });
});

/** A chat model that does not stream: one whole answer with its finish reason, after `delayMs`. */
class WholeAnswerModel extends BaseChatModel {
  calls = 0;
  aborted = 0;
  constructor(
    private readonly text: string,
    private readonly finish: string,
    private readonly delayMs = 0,
  ) {
    super({});
  }
  _llmType(): string {
    return "whole-answer";
  }
  override bindTools(): ReturnType<BaseChatModel["withConfig"]> {
    return this.withConfig({});
  }
  async _generate(
    _messages: BaseMessage[],
    options: this["ParsedCallOptions"],
  ): Promise<ChatResult> {
    this.calls++;
    if (this.delayMs > 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, this.delayMs);
        options.signal?.addEventListener("abort", () => {
          clearTimeout(timer);
          this.aborted++;
          reject(new Error("aborted"));
        });
      });
    }
    const message = new AIMessage({ content: this.text });
    return {
      generations: [{ text: this.text, message, generationInfo: { finish_reason: this.finish } }],
    };
  }
}

/** Reads a healed stream on the virtual clock: its items and the error it ended with. */
async function drain<T>(clock: VirtualClock, stream: AsyncIterable<T>) {
  const items: T[] = [];
  let error: unknown;
  const reading = (async () => {
    for await (const item of stream) items.push(item);
  })();
  await clock.run(
    reading.catch((e: unknown) => (error = e)),
    { stepMs: 5 },
  );
  const text = items
    .map((i) => (isStreamRestart(i) ? `|restart ${i.discard}|` : (i as AIMessageChunk).text))
    .join("");
  return { items, error, text };
}

describe("healChatModelStream: a chat model's own stream() on sh.stream", () => {
  function virtualSetup() {
    const clock = new VirtualClock();
    const { sh, calls, recoveries } = setup({ clock });
    const sleep = (ms: number, signal?: AbortSignal) => clock.sleep(ms, signal);
    return { sh, clock, calls, recoveries, sleep };
  }
  const HI = [{ role: "user", content: "Hi" }];

  it("restart: the chunks, a StreamRestart, then the whole answer from the fallback", async () => {
    const { sh, clock, sleep } = virtualSetup();
    const a = new StreamingScriptModel("a", [{ tokens: 2, then: "throw" }], sleep);
    const b = new StreamingScriptModel("b", [{}], sleep);
    const stream = healChatModelStream(sh, a, {
      provider: "a",
      fallbacks: [{ provider: "b", model: b }],
      afterFirstToken: "restart",
    });
    const s = stream(HI);
    const { text, error, items } = await drain(clock, s);

    expect(error).toBeUndefined();
    expect(text).toBe(`a0 a1 |restart 2|${B3}`);
    expect(items.find(isStreamRestart)).toMatchObject({ discard: 2, attempt: 2, provider: "b" });
    expect(await s.result).toMatchObject({
      outcome: "recovered",
      provider: "b",
      restarts: 1,
      finishReason: "stop",
      outputTokens: 3,
    });
  });

  it("fail: a slow first token fails over on the instance's clock; the slow request is aborted", async () => {
    const { sh, clock, sleep, recoveries } = virtualSetup();
    const a = new StreamingScriptModel("a", [{ firstMs: 60_000 }], sleep);
    const b = new StreamingScriptModel("b", [{}], sleep);
    const stream = healChatModelStream(sh, a, {
      provider: "a",
      fallbacks: [{ provider: "b", model: b }],
      firstTokenMs: 5_000,
    });
    const started = clock.now();
    const { text } = await drain(clock, stream(HI));

    expect(text).toBe(B3);
    expect(clock.now() - started).toBeLessThan(5_500);
    expect(a.log).toEqual(["a#1 aborted"]);
    expect(recoveries[0]).toMatchObject({ pattern: "STREAM_FIRST_TOKEN_TIMEOUT" });
  });

  it("fail: a cut after tokens is a StreamInterruptedError; Anthropic's max_tokens is truncated", async () => {
    const { sh, clock, sleep } = virtualSetup();
    const a = new StreamingScriptModel(
      "a",
      [{ tokens: 2, then: "length", style: "anthropic" }],
      sleep,
    );
    const { text, error } = await drain(clock, healChatModelStream(sh, a)(HI));

    expect(text).toBe("a0 a1 ");
    expect(isStreamInterruptedError(error)).toBe(true);
    const cause = (error as Error).cause;
    expect(isStreamTruncatedError(cause) && cause.type).toBe("length");
  });

  it("buffer: a stalled answer is never shown; the fallback's is", async () => {
    const { sh, clock, sleep } = virtualSetup();
    const a = new StreamingScriptModel("a", [{ tokens: 2, then: "silent" }], sleep);
    const b = new StreamingScriptModel("b", [{}], sleep);
    const stream = healChatModelStream(sh, a, {
      provider: "a",
      fallbacks: [{ provider: "b", model: b }],
      idleMs: 2_000,
      afterFirstToken: "buffer",
    });
    const { text } = await drain(clock, stream(HI));

    expect(text).toBe(B3);
    expect(a.log).toEqual(["a#1 aborted"]);
  });

  it("one stream per name per instance: shared when the settings agree, refused when they do not", () => {
    const { sh, sleep } = virtualSetup();
    const a = new StreamingScriptModel("a", [{}], sleep);
    healChatModelStream(sh, a, { afterFirstToken: "restart" });
    expect(() => healChatModelStream(sh, a, { afterFirstToken: "restart" })).not.toThrow();
    const clash = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return isSelfHealConfigError(e) ? e.message : "not a config error";
      }
      return "accepted";
    };
    expect(clash(() => healChatModelStream(sh, a, { afterFirstToken: "buffer" }))).toMatch(
      /other stream settings/,
    );
    selfHealingMiddleware(sh); // its model calls are the selfheal tool "model"
    expect(clash(() => healChatModelStream(sh, a, { name: "model" }))).toMatch(
      /taken by the middleware's model calls/,
    );
    expect(clash(() => healChatModelStream(sh, a, { idleMs: -1 }))).toMatch(/idleMs/);
    expect(clash(() => healChatModelStream(sh, {} as never))).toMatch(/chat model/);
  });
});

describe("the LangChain stream format: finish reasons and tokens as providers send them", () => {
  const chunk = (fields: Record<string, unknown>) => fields;

  it.each([
    ["OpenAI (generationInfo)", chunk({}), { finish_reason: "stop" }, "stop"],
    ["OpenAI length", chunk({}), { finish_reason: "length" }, "length"],
    ["Anthropic", chunk({ additional_kwargs: { stop_reason: "end_turn" } }), undefined, "end_turn"],
    [
      "Anthropic max_tokens",
      chunk({ additional_kwargs: { stop_reason: "max_tokens" } }),
      undefined,
      "length",
    ],
    [
      "Anthropic refusal",
      chunk({ additional_kwargs: { stop_reason: "refusal" } }),
      undefined,
      "content_filter",
    ],
    ["Google", chunk({ response_metadata: { finishReason: "MAX_TOKENS" } }), undefined, "length"],
    ["Google safety", chunk({}), { finishReason: "SAFETY" }, "content_filter"],
    [
      "Bedrock",
      chunk({ response_metadata: { stopReason: "guardrail_intervened" } }),
      undefined,
      "content_filter",
    ],
    ["Ollama", chunk({ response_metadata: { done_reason: "stop" } }), undefined, "stop"],
    [
      "Responses API",
      chunk({ response_metadata: { object: "response", status: "completed" } }),
      undefined,
      "stop",
    ],
    [
      "Responses API incomplete",
      chunk({
        response_metadata: {
          object: "response",
          status: "incomplete",
          incomplete_details: { reason: "max_output_tokens" },
        },
      }),
      undefined,
      "length",
    ],
    ["none", chunk({ content: "hi" }), undefined, undefined],
  ])("%s", (_, message, generationInfo, reason) => {
    expect(finishReasonOf(message, generationInfo)).toBe(reason);
  });

  it("tells tokens from answer content", () => {
    expect(readMessageChunk({ content: "hi" })).toMatchObject({ token: true, answer: true });
    expect(readMessageChunk({ content: " " })).toMatchObject({ token: true, answer: false });
    expect(readMessageChunk({ content: "" })).toMatchObject({ token: false, answer: false });
    expect(readMessageChunk({ content: [{ type: "thinking", thinking: "hm" }] })).toMatchObject({
      token: true,
      answer: false,
    });
    expect(
      readMessageChunk({ content: "", tool_call_chunks: [{ name: "search", args: "" }] }),
    ).toMatchObject({ token: true, answer: true });
    expect(readMessageChunk({ content: [], usage_metadata: { output_tokens: 7 } })).toMatchObject({
      token: false,
      outputTokens: 7,
    });
  });
});
