/**
 * The LangChain adapter's parts on their own: what counts as an empty model answer, the linked
 * abort signal, the routes a model call takes and the options they make, what passes through
 * selfheal untouched (LangGraph's control flow), the signal and tool call id a call gets, the
 * model side of the middleware (the request the model gets, the tokens it reports), and what
 * `healTool` and `healChatModelStream` refuse.
 */
import { AIMessage, AIMessageChunk, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { tool } from "@langchain/core/tools";
import { beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  healChatModelStream,
  healTool,
  isModelStreamRestart,
  selfHealingMiddleware,
  STREAM_RESTART_EVENT,
} from "../../src/adapters/langchain.js";
import {
  isControlFlow,
  toolCallIdOption,
  withSignal,
} from "../../src/adapters/langchain/invocation.js";
import { LinkedSignal } from "../../src/adapters/langchain/linked-signal.js";
import {
  errorName,
  failureText,
  isHealed,
  toolOptions,
} from "../../src/adapters/langchain/tool-calls.js";
import { isEmptyModelAnswer } from "../../src/adapters/langchain/model-calls.js";
import { ModelRoutes, routeOptions } from "../../src/adapters/langchain/model-routes.js";
import { tappedModel, type ModelTap } from "../../src/adapters/langchain/tapped-model.js";
import {
  finishReasonOf,
  normalizeFinishReason,
  readMessageChunk,
} from "../../src/adapters/langchain/stream-format.js";
import {
  HealthCheckFailedError,
  isStreamInterruptedError,
  isStreamRestart,
  isStreamStalledError,
} from "../../src/index.js";
import { configError, NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();
beforeEach(() => {
  otel.reset();
});

/** A LangChain tool of `name` that answers "ok". */
const named = (name: string) => tool(() => "ok", { name, description: name, schema: z.object({}) });

const attrs = (name = "agent.tool_call") => {
  const span = otel.named(name)[0];
  if (!span) throw new Error(`no ${name} span`);
  return span.attributes;
};

describe("an empty model answer", () => {
  const message = (content: unknown, extra: Record<string, unknown> = {}) =>
    new AIMessage({ content: content as string, ...extra });

  it("is an AIMessage with no tool call and nothing but blank text or reasoning", () => {
    const cases: [string, unknown, boolean][] = [
      ["no content", message(""), true],
      ["blank text", message(" \n "), true],
      ["text", message("Refunds take 5 days."), false],
      ["no blocks", message([]), true],
      ["a blank text block", message([{ type: "text", text: "  " }]), true],
      ["a text block without text", message([{ type: "text" }]), true],
      ["a text block", message([{ type: "text", text: "yes" }]), false],
      ["a blank string block", message(["  "]), true],
      ["a string block", message(["yes"]), false],
      ["reasoning", message([{ type: "reasoning", reasoning: "hm" }]), true],
      ["thinking", message([{ type: "thinking", thinking: "hm" }]), true],
      ["redacted thinking", message([{ type: "redacted_thinking", data: "x" }]), true],
      ["reasoning and text", message([{ type: "thinking" }, { type: "text", text: "ok" }]), false],
      ["an image", message([{ type: "image_url", image_url: "data:," }]), false],
      ["a block with no type", message([{ text: "?" }]), false],
      [
        "a tool call",
        message("", { tool_calls: [{ name: "lookup", args: {}, id: "c1", type: "tool_call" }] }),
        false,
      ],
      [
        "an invalid tool call",
        message("", {
          invalid_tool_calls: [{ name: "lookup", args: "{", id: "c1", error: "bad json" }],
        }),
        false,
      ],
      ["structured output (not a message)", { content: "" }, false],
      ["a human message", new HumanMessage(""), false],
    ];
    for (const [what, answer, empty] of cases)
      expect([what, isEmptyModelAnswer(answer)]).toEqual([what, empty]);
  });
});

describe("LinkedSignal", () => {
  it("aborts with the first source that aborts, with its reason", () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = new LinkedSignal(a.signal, undefined, b.signal);
    expect(linked.signal.aborted).toBe(false);
    b.abort("caller left");
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("caller left");
    a.abort("later");
    expect(linked.signal.reason).toBe("caller left");
  });

  it("is aborted at once by a source that already is", () => {
    const gone = AbortSignal.abort("before");
    expect(new LinkedSignal(gone).signal.reason).toBe("before");
  });

  it("follows nothing once released, and ignores itself as a source", () => {
    const a = new AbortController();
    const linked = new LinkedSignal(a.signal);
    linked.follow(linked.signal);
    linked.release();
    a.abort("after release");
    expect(linked.signal.aborted).toBe(false);
    linked.abort("own reason");
    expect(linked.signal.reason).toBe("own reason");
  });

  it("once aborted, follows no other source", () => {
    const linked = new LinkedSignal();
    linked.abort("first");
    linked.follow(AbortSignal.abort("second"));
    expect(linked.signal.reason).toBe("first");
  });
});

describe("model routes", () => {
  const own = { name: "own" };
  const backup = { name: "backup" };

  it("the caller's model on the primary (or no provider), the fallback's on its route", async () => {
    const routes = new ModelRoutes("acme", [{ provider: "backup", model: backup as never }]);
    expect(await routes.modelFor(undefined, own)).toBe(own);
    expect(await routes.modelFor("acme", own)).toBe(own);
    expect(await routes.modelFor("backup", own)).toBe(backup);
    expect(await routes.modelFor("elsewhere", own)).toBe(own);
    expect(await new ModelRoutes(undefined, undefined).modelFor("backup", own)).toBe(own);
  });

  it("a fallback named by a string is made by initChatModel, once", async () => {
    const routes = new ModelRoutes("acme", [
      { provider: "backup", model: "nosuchprovider:model-x" },
    ]);
    const first = await routes.modelFor("backup", own).catch((e: unknown) => e);
    const second = await routes.modelFor("backup", own).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(Error);
    expect(second).toBe(first);
  });

  it("the options they make: providers only with a primary and fallbacks; limits only when set", () => {
    const fallbacks = [{ provider: "backup", model: "openai:gpt-4o-mini" }];
    expect(routeOptions({})).toStrictEqual({ readOnly: true });
    expect(routeOptions({ provider: "acme" })).toStrictEqual({ readOnly: true, provider: "acme" });
    expect(routeOptions({ fallbacks })).toStrictEqual({ readOnly: true });
    expect(routeOptions({ provider: "acme", fallbacks })).toStrictEqual({
      readOnly: true,
      provider: "acme",
      providers: ["acme", "backup"],
    });
    expect(routeOptions({ provider: "acme", fallbacks: [] })).toEqual({
      readOnly: true,
      provider: "acme",
    });
    const plans = { RATE_LIMIT: [] };
    expect(routeOptions({ timeoutMs: 5, deadlineMs: 9, plans })).toEqual({
      readOnly: true,
      timeoutMs: 5,
      deadlineMs: 9,
      plans,
    });
  });
});

describe("what a call passes on", () => {
  it("LangGraph's control flow (is_bubble_up) passes through; nothing else does", () => {
    const hostile = Object.defineProperty({}, "is_bubble_up", {
      get() {
        throw new Error("no");
      },
    });
    expect(isControlFlow({ is_bubble_up: true })).toBe(true);
    for (const error of [
      { is_bubble_up: "true" },
      { is_bubble_up: false },
      new Error("x"),
      null,
      undefined,
      "is_bubble_up",
      hostile,
    ])
      expect(isControlFlow(error)).toBe(false);
  });

  it("the attempt's signal, joined to the config's own", () => {
    const attempt = new AbortController();
    expect(withSignal(undefined, attempt.signal)).toStrictEqual({ signal: attempt.signal });
    const same = withSignal({ signal: attempt.signal, tags: ["a"] }, attempt.signal);
    expect(same).toEqual({ signal: attempt.signal, tags: ["a"] });
    const caller = new AbortController();
    const joined = withSignal({ signal: caller.signal, tags: ["b"] }, attempt.signal);
    expect(joined.tags).toEqual(["b"]);
    expect(joined.signal).not.toBe(caller.signal);
    expect(joined.signal).not.toBe(attempt.signal);
    caller.abort("caller");
    expect(joined.signal.reason).toBe("caller");
    const other = new AbortController();
    const joined2 = withSignal({ signal: other.signal }, attempt.signal);
    attempt.abort("timeout");
    expect(joined2.signal.reason).toBe("timeout");
  });

  it("a tool call id only when it says something", () => {
    expect(toolCallIdOption("call_1")).toEqual({ toolCallId: "call_1" });
    for (const id of ["", "  ", undefined, 7]) expect(toolCallIdOption(id)).toStrictEqual({});
  });
});

describe("the middleware's model calls", () => {
  /** A model request as createAgent builds it, and the handler that answers it. */
  function request(modelSettings?: Record<string, unknown>, signal?: AbortSignal) {
    return {
      model: new FakeListChatModel({ responses: ["ok"] }),
      messages: [new HumanMessage("a"), new HumanMessage("b")],
      tools: [],
      runtime: { ...(signal && { signal }) },
      ...(modelSettings && { modelSettings }),
    };
  }

  type Wrap = (request: unknown, handler: (r: unknown) => Promise<unknown>) => Promise<unknown>;
  const wrapOf = (middleware: unknown) => (middleware as { wrapModelCall: Wrap }).wrapModelCall;

  it("turns the client's retries off unless the caller set them; reports the answer's tokens", async () => {
    const meters = recordingMeters();
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, {
      meterProvider: meters.meterProvider,
      recordArguments: true,
    });
    const wrap = wrapOf(selfHealingMiddleware(sh));
    const seen: Record<string, unknown>[] = [];
    // usage_metadata set as providers set it (AIMessage's generic field type resolves to undefined).
    const answer = Object.assign(new AIMessage("ok"), {
      usage_metadata: { input_tokens: 30, output_tokens: 4, total_tokens: 34 },
    });
    const handler = (r: unknown) => {
      seen.push((r as { modelSettings: Record<string, unknown> }).modelSettings);
      return Promise.resolve(answer);
    };
    expect(await wrap(request(), handler)).toBe(answer);
    expect(attrs()["gen_ai.tool.call.arguments"]).toBe('{"messages":2,"tools":0}');
    await wrap(request({ temperature: 0.3 }), handler);
    await wrap(request({ maxRetries: 2 }), handler);
    expect(seen).toEqual([
      { maxRetries: 0 },
      { maxRetries: 0, temperature: 0.3 },
      { maxRetries: 2 },
    ]);
    const tokens = [...(await meters.read()).entries()].filter(([k]) =>
      k.startsWith("gen_ai.client.token.usage"),
    );
    expect(
      tokens.map(([k, count]) => `${/gen_ai\.token\.type=(\w+)/.exec(k)?.[1]}:${count}`).sort(),
    ).toEqual(["input:3", "output:3"]);
    await meters.shutdown();
  });

  it("reports no tokens for an answer without usage, or one that is not a message", async () => {
    const meters = recordingMeters();
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, {
      meterProvider: meters.meterProvider,
    });
    const wrap = wrapOf(selfHealingMiddleware(sh));
    await wrap(request(), () => Promise.resolve(new AIMessage("ok")));
    await wrap(request(), () =>
      Promise.resolve({ usage_metadata: { input_tokens: 1, output_tokens: 1 } }),
    );
    const tokens = [...(await meters.read()).keys()].filter((k) =>
      k.startsWith("gen_ai.client.token.usage"),
    );
    expect(tokens).toEqual([]);
    await meters.shutdown();
  });

  it("gives up with the caller: an aborted run's model call is not a model failure", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const wrap = wrapOf(selfHealingMiddleware(sh));
    const run = new AbortController();
    let calls = 0;
    const call = wrap(request(undefined, run.signal), () => {
      calls++;
      return new Promise((_resolve, reject) => {
        run.signal.addEventListener("abort", () => {
          reject(new Error("aborted"));
        });
      });
    });
    run.abort("user left");
    const error = await clock.run(
      call.catch((e: unknown) => e),
      { stepMs: 500 },
    );
    expect(error).toBeDefined();
    expect(calls).toBe(1);
  });

  it("lets LangGraph's control flow through as it is, not diagnosed, not retried", async () => {
    const { sh, events } = recoveryInstance(otel.provider);
    const wrap = wrapOf(selfHealingMiddleware(sh));
    const interrupt = Object.assign(new Error("interrupt"), { is_bubble_up: true });
    let calls = 0;
    const thrown = await wrap(request(), () => {
      calls++;
      return Promise.reject(interrupt);
    }).catch((e: unknown) => e);
    expect(thrown).toBe(interrupt);
    expect(calls).toBe(1);
    expect(events).toEqual([]);
  });
});

describe("what healTool and healChatModelStream refuse", () => {
  const lookup = tool(() => "ok", {
    name: "lookup",
    description: "lookup",
    schema: z.object({ q: z.string() }),
  });

  it("healTool: an instance, then a LangChain tool with a name and invoke", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    expect(configError(() => healTool({} as never, lookup, { readOnly: true })).field).toBe(
      "healTool(sh)",
    );
    for (const bad of [
      null,
      undefined,
      {},
      { name: "x" },
      { invoke: () => 1 },
      { invoke: () => 1, name: "" },
      { invoke: "x", name: "y" },
    ]) {
      const error = configError(() => healTool(sh, bad as never, { readOnly: true }));
      expect(error.field).toBe("healTool(tool)");
      expect(error.message).toContain("expected a LangChain tool (tool(), StructuredTool)");
    }
  });

  it("healTool: passes the tool call's id, from the call or the config", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const healed = healTool(sh, lookup, { readOnly: true });
    await healed.invoke({ type: "tool_call", id: "from-call", name: "lookup", args: { q: "a" } });
    await healed.invoke({ q: "b" }, { toolCall: { id: "from-config", name: "lookup", args: {} } });
    await healed.invoke({ q: "c" }, { toolCallId: "from-node" } as never);
    await healed.invoke({ q: "d" });
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.call.id"])).toEqual([
      "from-call",
      "from-config",
      "from-node",
      undefined,
    ]);
  });

  it("healTool: the caller's abort reaches the tool", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    let given: AbortSignal | undefined;
    const waiting = tool(
      (_input, config: { signal?: AbortSignal }) => {
        given = config.signal;
        return new Promise((_resolve, reject) => {
          config.signal?.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        });
      },
      { name: "waiting", description: "waits", schema: z.object({}) },
    );
    const caller = new AbortController();
    const call = healTool(sh, waiting, { readOnly: true })
      .invoke({}, { signal: caller.signal })
      .catch((e: unknown) => e);
    await clock.advance(1);
    caller.abort("gone");
    await call;
    expect(given?.aborted).toBe(true);
  });

  it("healChatModelStream: an instance, a chat model, its options by field", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const model = new FakeListChatModel({ responses: ["ok"] });
    expect(configError(() => healChatModelStream({} as never, model)).field).toBe(
      "healChatModelStream(sh)",
    );
    for (const bad of [null, {}, { stream: "no" }]) {
      const error = configError(() => healChatModelStream(sh, bad as never));
      expect(error.field).toBe("healChatModelStream(model)");
      expect(error.message).toContain(
        "expected a LangChain chat model (BaseChatModel, initChatModel())",
      );
    }
    expect(configError(() => healChatModelStream(sh, model, { idleMs: -1 })).field).toBe(
      "healChatModelStream.options.idleMs",
    );
  });
});

describe("healChatModelStream's limits and modes", () => {
  type Step = { text: string; finish?: string } | "hang" | Error;

  /**
   * A chat model whose n-th stream() plays the n-th script (the last repeats): chunks, then a
   * thrown error or a hang until its signal aborts. Its calls' signals are kept.
   */
  function scripted(...scripts: Step[][]) {
    const model = new FakeListChatModel({ responses: ["unused"] });
    const signals: (AbortSignal | undefined)[] = [];
    model.stream = (_input, options) => {
      const signal = (options as { signal?: AbortSignal } | undefined)?.signal;
      signals.push(signal);
      const script = scripts[Math.min(signals.length - 1, scripts.length - 1)] ?? [];
      async function* parts() {
        for (const step of script) {
          if (step === "hang")
            await new Promise((_resolve, reject) => {
              signal?.addEventListener("abort", () => {
                reject(new Error("aborted"));
              });
            });
          else if (step instanceof Error) throw step;
          else
            yield new AIMessageChunk({
              content: step.text,
              response_metadata: step.finish ? { finish_reason: step.finish } : {},
            });
        }
      }
      return Promise.resolve(parts()) as never;
    };
    return { model, signals };
  }

  /** Reads a healed stream to its end on the instance's clock: items, the error, the time. */
  async function readAll(
    clock: { now(): number; run<T>(p: Promise<T>, o: { stepMs: number }): Promise<T> },
    stream: AsyncIterable<unknown>,
  ) {
    const started = clock.now();
    const items: unknown[] = [];
    const error = await clock.run(
      (async () => {
        for await (const item of stream) items.push(item);
      })().then(
        () => undefined,
        (e: unknown) => e,
      ),
      { stepMs: 250 },
    );
    return { items, error, ms: clock.now() - started };
  }

  const unavailable = () => Object.assign(new Error("upstream unavailable"), { status: 503 });

  it("idleMs ends a stream silent after its first token; unset, the default 15 s holds", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const stalls = () => scripted([{ text: "Refunds" }, "hang"]).model;
    const short = await readAll(
      clock,
      healChatModelStream(sh, stalls(), { name: "short", idleMs: 2_000 })("hi"),
    );
    expect(short.ms).toBeLessThan(3_000);
    // A token reached the caller: the stall is the cause of the interruption it gets.
    expect(isStreamInterruptedError(short.error)).toBe(true);
    expect(isStreamStalledError((short.error as Error).cause)).toBe(true);
    const long = await readAll(clock, healChatModelStream(sh, stalls(), { name: "long" })("hi"));
    expect(long.ms).toBeGreaterThanOrEqual(15_000);
  });

  it("firstTokenMs ends a stream with no token; unset, the default 20 s holds", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const silent = () => scripted(["hang"]).model;
    const short = await readAll(
      clock,
      healChatModelStream(sh, silent(), { name: "short", firstTokenMs: 1_000 })("hi"),
    );
    expect(short.ms).toBeLessThan(2_000);
    const long = await readAll(clock, healChatModelStream(sh, silent(), { name: "long" })("hi"));
    expect(long.ms).toBeGreaterThanOrEqual(20_000);
  });

  it("failOnFinish: `length` is a cut answer by default; an empty list takes it", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const long = () => scripted([{ text: "Refunds take", finish: "LENGTH" }]).model;
    const byDefault = await readAll(
      clock,
      healChatModelStream(sh, long(), { name: "default" })("hi"),
    );
    expect(byDefault.error).toBeDefined();
    const taken = await readAll(
      clock,
      healChatModelStream(sh, long(), { name: "taken", failOnFinish: [] })("hi"),
    );
    expect(taken.error).toBeUndefined();
    const custom = scripted([{ text: "Refunds", finish: "stop" }]).model;
    const stopped = await readAll(
      clock,
      healChatModelStream(sh, custom, { name: "custom", failOnFinish: ["STOP"] })("hi"),
    );
    expect(stopped.error).toBeDefined();
  });

  it("afterFirstToken: fail keeps what was shown and throws; restart sends the discard signal, then the whole answer", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const cutThenWhole = () =>
      scripted(
        [{ text: "Refunds" }, unavailable()],
        [{ text: "Refunds take 5 days.", finish: "stop" }],
      ).model;
    const failed = await readAll(
      clock,
      healChatModelStream(sh, cutThenWhole(), { name: "fails" })("hi"),
    );
    expect(isStreamInterruptedError(failed.error)).toBe(true);
    expect(failed.items).toHaveLength(1);
    const restarted = await readAll(
      clock,
      healChatModelStream(sh, cutThenWhole(), { name: "restarts", afterFirstToken: "restart" })(
        "hi",
      ),
    );
    expect(restarted.error).toBeUndefined();
    expect(
      restarted.items.map((i) => (isStreamRestart(i) ? "restart" : (i as AIMessageChunk).text)),
    ).toEqual(["Refunds", "restart", "Refunds take 5 days."]);
  });

  it("the caller's signal ends the stream, and each attempt gets selfheal's own", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const { model, signals } = scripted([{ text: "Refunds" }, "hang"]);
    const caller = new AbortController();
    const reading = readAll(clock, healChatModelStream(sh, model)("hi", { signal: caller.signal }));
    await clock.advance(100);
    caller.abort("user left");
    const { error, ms } = await reading;
    expect(error).toBeDefined();
    expect(ms).toBeLessThan(15_000);
    expect(signals[0]).not.toBe(caller.signal);
    expect(signals[0]?.aborted).toBe(true);
  });

  it("records the number of messages as the call's arguments, not their text", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY, { recordArguments: true });
    const { model } = scripted([{ text: "ok", finish: "stop" }]);
    const stream = healChatModelStream(sh, model);
    await readAll(clock, stream([new HumanMessage("secret a"), new HumanMessage("secret b")]));
    await readAll(clock, stream("secret c"));
    expect(
      otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.call.arguments"]),
    ).toEqual(['{"messages":2}', '{"messages":1}']);
  });
});

describe("what a streamed chunk says", () => {
  it("finish reasons beyond langchain-stream's table: key places, case, blanks, every Responses status", () => {
    const incomplete = (details?: unknown) => ({
      response_metadata: { object: "response", status: "incomplete", incomplete_details: details },
    });
    const cases: [unknown, unknown, string | undefined][] = [
      [{ response_metadata: { finish_reason: "stop" } }, undefined, "stop"],
      [{ response_metadata: { finishReason: "SAFETY" } }, undefined, "content_filter"],
      [{ response_metadata: { done_reason: "Length" } }, undefined, "length"],
      [{}, { finish_reason: "MODEL_LENGTH" }, "length"],
      [{ response_metadata: { finish_reason: "" } }, undefined, undefined],
      [{ response_metadata: { finish_reason: 3 } }, undefined, undefined],
      [incomplete({ reason: "content_filter" }), undefined, "content_filter"],
      [incomplete(), undefined, "length"],
      [{ response_metadata: { object: "response", status: "failed" } }, undefined, "error"],
      [{ response_metadata: { object: "response", status: "in_progress" } }, undefined, undefined],
      [{ response_metadata: { status: "completed" } }, undefined, undefined],
      [null, undefined, undefined],
    ];
    for (const [message, info, reason] of cases)
      expect([message, finishReasonOf(message, info)]).toEqual([message, reason]);
    expect(normalizeFinishReason("REFUSAL")).toBe("content_filter");
    expect(normalizeFinishReason("end_turn")).toBe("end_turn");
  });

  it("tokens and answers: text, blank text, blocks, tool call chunks, reasoning", () => {
    const cases: [string, unknown, boolean, boolean][] = [
      ["text", { content: "Hi" }, true, true],
      ["a space", { content: " " }, true, false],
      ["nothing", { content: "" }, false, false],
      ["a text block", { content: [{ type: "text", text: "Hi" }] }, true, true],
      ["a blank text block", { content: [{ type: "text", text: " " }] }, true, false],
      ["a text block without text", { content: [{ type: "text" }] }, false, false],
      ["a string block", { content: ["Hi"] }, true, true],
      ["an empty string block", { content: [""] }, false, false],
      ["a thinking block", { content: [{ type: "thinking", thinking: "hm" }] }, true, false],
      ["an image block", { content: [{ type: "image_url" }] }, true, true],
      ["a null block", { content: [null] }, false, false],
      ["a tool call chunk", { content: "", tool_call_chunks: [{ name: "lookup" }] }, true, true],
      ["no tool call chunks", { content: "", tool_call_chunks: [] }, false, false],
      ["reasoning", { content: "", additional_kwargs: { reasoning_content: "hm" } }, true, false],
      [
        "empty reasoning",
        { content: "", additional_kwargs: { reasoning_content: "" } },
        false,
        false,
      ],
    ];
    for (const [what, message, token, answer] of cases) {
      const info = readMessageChunk(message);
      expect([what, info.token, info.answer]).toEqual([what, token, answer]);
    }
  });

  it("output tokens from usage_metadata, unless left out (a model call reports its own)", () => {
    const message = { content: "Hi", usage_metadata: { output_tokens: 12 } };
    expect(readMessageChunk(message).outputTokens).toBe(12);
    expect(readMessageChunk(message, undefined, false).outputTokens).toBeUndefined();
    expect(
      readMessageChunk({ content: "Hi", usage_metadata: { output_tokens: "12" } }).outputTokens,
    ).toBeUndefined();
  });
});

describe("the middleware's options, by field", () => {
  const model = new FakeListChatModel({ responses: ["ok"] });

  it("names each mistake", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const F = "selfHealingMiddleware.options";
    const cases: [unknown, string, string?][] = [
      [5, F],
      [{ retries: 1 }, `${F}.retries`],
      [{ readOnly: "search" }, `${F}.readOnly`],
      [{ readOnly: ["search", ""] }, `${F}.readOnly`],
      [{ tools: 1 }, `${F}.tools`],
      [{ tools: { search: 1 } }, `${F}.tools.search`],
      [{ tools: { search: { retries: 2 } } }, `${F}.tools.search.retries`],
      [{ tools: { charge: { idempotencyKey: "k" } } }, `${F}.tools.charge.idempotencyKey`],
      [{ model: "gpt-4o" }, `${F}.model`],
      [{ model: { name: "" } }, `${F}.model.name`],
      [{ model: { fallbacks: "x" } }, `${F}.model.fallbacks`],
      [{ model: { provider: "a", fallbacks: [1] } }, `${F}.model.fallbacks[0]`],
      [
        { model: { provider: "a", fallbacks: [{ provider: "b", model, weight: 1 }] } },
        `${F}.model.fallbacks[0].weight`,
      ],
      [
        { model: { provider: "a", fallbacks: [{ provider: "", model }] } },
        `${F}.model.fallbacks[0].provider`,
      ],
      [
        { model: { provider: "a", fallbacks: [{ provider: "b", model: null }] } },
        `${F}.model.fallbacks[0].model`,
        'expected a chat model or a "provider:model" string, got null',
      ],
      [
        { model: { provider: "a", fallbacks: [{ provider: "b", model: 5 }] } },
        `${F}.model.fallbacks[0].model`,
        "got 5",
      ],
      [
        { model: { fallbacks: [{ provider: "b", model }] } },
        `${F}.model.provider`,
        "required with fallbacks",
      ],
      [{ model: { idleMs: 0 } }, `${F}.model.idleMs`],
      [{ model: { firstTokenMs: "1s" } }, `${F}.model.firstTokenMs`],
      [{ model: { afterFirstToken: "retry" } }, `${F}.model.afterFirstToken`],
      [{ model: { completion: "done" } }, `${F}.model.completion`],
      [{ model: { failOnFinish: "length" } }, `${F}.model.failOnFinish`],
      [{ model: { failOnFinish: ["length", ""] } }, `${F}.model.failOnFinish[1]`],
      [{ onFailure: "ignore" }, `${F}.onFailure`],
      [{ spans: "both" }, `${F}.spans`],
    ];
    for (const [options, field, message] of cases) {
      const error = configError(() => selfHealingMiddleware(sh, options as never));
      expect([field, error.field]).toEqual([field, field]);
      if (message !== undefined) expect(error.message).toContain(message);
    }
    expect(configError(() => selfHealingMiddleware({ tool: 1 } as never)).message).toContain(
      "expected a selfheal instance (createSelfHealing())",
    );
  });

  it("takes what is right: model false, a failure handler, a read-only test, fallbacks by string", () => {
    const { sh } = recoveryInstance(otel.provider, {
      ...NO_RECOVERY,
      providers: [{ name: "a" }, { name: "b" }],
    });
    expect(() =>
      selfHealingMiddleware(sh, {
        model: false,
        onFailure: () => "failed",
        readOnly: (name) => name === "search",
        tools: { charge: { idempotencyKey: () => "k" } },
        spans: "attach",
      }),
    ).not.toThrow();
    expect(() =>
      selfHealingMiddleware(sh, {
        model: {
          name: "m2",
          provider: "a",
          fallbacks: [{ provider: "b", model: "openai:gpt-4o-mini" }],
          idleMs: 5,
          firstTokenMs: 5,
          afterFirstToken: "buffer",
          completion: "end",
          failOnFinish: ["length"],
        },
      }),
    ).not.toThrow();
  });

  it("healTool wants readOnly said, and names its other options", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const lookup = tool(() => "ok", { name: "lookup2", description: "d", schema: z.object({}) });
    const missing = configError(() => healTool(sh, lookup, {} as never));
    expect(missing.field).toBe("healTool(lookup2).options.readOnly");
    expect(missing.message).toContain("required: say whether the tool writes");
    expect(configError(() => healTool(sh, lookup, { readOnly: "yes" } as never)).field).toBe(
      "healTool(lookup2).options.readOnly",
    );
    expect(
      configError(() => healTool(sh, lookup, { readOnly: true, spans: "x" } as never)).field,
    ).toBe("healTool(lookup2).options.spans");
    expect(
      configError(() => healTool(sh, lookup, { readOnly: true, retries: 1 } as never)).field,
    ).toBe("healTool(lookup2).options.retries");
    expect(configError(() => healTool(sh, lookup, null as never)).field).toBe(
      "healTool(lookup2).options",
    );
  });
});

describe("one name, one thing, on an instance", () => {
  const model = () => new FakeListChatModel({ responses: ["ok"] });

  it("a chat stream's settings, once per name", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    healChatModelStream(sh, model(), { idleMs: 1_000 });
    expect(() => healChatModelStream(sh, model(), { idleMs: 1_000 })).not.toThrow();
    const error = configError(() => healChatModelStream(sh, model(), { idleMs: 2_000 }));
    expect(error.field).toBe('langchain: stream "model.stream"');
    expect(error.message).toContain(
      "already healed on this selfheal instance with other stream settings (",
    );
    expect(error.message).toContain("give this one its own name");
  });

  it("a stream, a tool and the model calls each need their own name", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    healTool(sh, named("lookup"), { readOnly: true });
    const streamOverTool = configError(() => healChatModelStream(sh, model(), { name: "lookup" }));
    expect(streamOverTool.field).toBe('langchain: "lookup"');
    expect(streamOverTool.message).toContain(
      "this name is taken by a LangChain tool on this selfheal instance; give healChatModelStream another (its name option)",
    );
    healChatModelStream(sh, model(), { name: "chat" });
    const toolOverStream = configError(() => healTool(sh, named("chat"), { readOnly: true }));
    expect(toolOverStream.message).toContain("this name is taken by healChatModelStream");
    const modelOverTool = configError(() =>
      selfHealingMiddleware(sh, { model: { name: "lookup" } }),
    );
    expect(modelOverTool.field).toBe('langchain: "lookup"');
    expect(modelOverTool.message).toContain(
      "a LangChain tool and the model calls share this name; give the model calls another (model.name)",
    );
  });

  it("model calls of one name keep their routes; a tool keeps its safety", () => {
    const { sh } = recoveryInstance(otel.provider, {
      ...NO_RECOVERY,
      providers: [{ name: "a" }, { name: "b" }],
    });
    selfHealingMiddleware(sh);
    const routed = configError(() => selfHealingMiddleware(sh, { model: { provider: "a" } }));
    expect(routed.field).toBe('langchain: model "model"');
    expect(routed.message).toContain(
      "model calls of this selfheal instance are already healed with routes (no provider), not a;",
    );
    selfHealingMiddleware(sh, { model: { name: "m2", provider: "a" } });
    const back = configError(() => selfHealingMiddleware(sh, { model: { name: "m2" } }));
    expect(back.message).toContain("already healed with routes a, not (no provider)");
    healTool(sh, named("charge"), { readOnly: false });
    const safety = configError(() => healTool(sh, named("charge"), { readOnly: true }));
    expect(safety.field).toBe('langchain: tool "charge"');
    expect(safety.message).toContain("already registered on this selfheal instance as a write");
    healTool(sh, named("read"), { readOnly: true });
    expect(configError(() => healTool(sh, named("read"), { readOnly: false })).message).toContain(
      "as read-only",
    );
  });

  it("tells selfheal's discard signal from any other chunk", () => {
    expect(isModelStreamRestart({ type: STREAM_RESTART_EVENT, discard: 3 })).toBe(true);
    for (const other of [{ type: "other" }, null, STREAM_RESTART_EVENT, { discard: 3 }])
      expect(isModelStreamRestart(other)).toBe(false);
  });
});

describe("what the model reads about a failed tool", () => {
  it("selfheal's own errors as they are; another error its name and redacted message, on one line", () => {
    const refusal = new HealthCheckFailedError("charge", "critical");
    expect(failureText(refusal, "charge")).toBe(refusal.message);
    const leaky = new TypeError("card 4242 declined for jane@example.com\nretry later");
    const text = failureText(leaky, "charge");
    expect(text.startsWith("Tool 'charge' failed: TypeError: ")).toBe(true);
    expect(text).not.toContain("jane@example.com");
    expect(text).not.toContain("\n");
    expect(failureText("x".repeat(2_000), "t").length).toBeLessThan(600);
  });

  it("an error's name: one line, at most 80 characters, Error when it has none", () => {
    expect(errorName(new RangeError("x"))).toBe("RangeError");
    expect(errorName({ name: "A\nB" })).toBe("A\\nB");
    expect(errorName({ name: "N".repeat(100) })).toHaveLength(80);
    for (const nameless of [{ name: "" }, { name: 5 }, null, "text", {}])
      expect(errorName(nameless)).toBe("Error");
    const hostile = Object.defineProperty({}, "name", {
      get() {
        throw new Error("no");
      },
    });
    expect(errorName(hostile)).toBe("Error");
  });

  it("a tool's selfheal options: settings, readOnly, the key from its arguments, the span mode", () => {
    const options = toolOptions<unknown>(
      false,
      { timeoutMs: 5, idempotencyKey: (args) => `k-${String(args.id)}` },
      "attach",
    );
    expect(options).toMatchObject({ timeoutMs: 5, readOnly: false, span: "attach" });
    expect(options.idempotencyKey?.({ args: { id: 7 } } as never)).toBe("k-7");
    expect(toolOptions<unknown>(true, undefined, undefined)).toStrictEqual({ readOnly: true });
    expect(isHealed({ [Symbol.for("selfheal:langchain:healed")]: true })).toBe(true);
    expect(isHealed({})).toBe(false);
    expect(isHealed(null)).toBe(false);
  });
});

describe("the middleware's tool calls", () => {
  type WrapTool = (request: unknown, handler: (r: unknown) => Promise<unknown>) => Promise<unknown>;
  const wrapToolOf = (middleware: unknown) =>
    (middleware as { wrapToolCall: WrapTool }).wrapToolCall;
  const lookup = tool(() => "ok", {
    name: "lookup",
    description: "d",
    schema: z.object({ q: z.string() }),
  });
  const request = (over: Record<string, unknown> = {}) => ({
    tool: lookup,
    toolCall: { name: "lookup", args: { q: "refunds" }, id: "call_1" },
    runtime: {},
    state: { messages: [] },
    ...over,
  });
  const down = () =>
    Promise.reject(Object.assign(new Error("bad gateway for jane@example.com"), { status: 502 }));

  it("a failure it could not heal is an error ToolMessage the model reads: named, redacted, with the call's id", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const wrap = wrapToolOf(selfHealingMiddleware(sh, { readOnly: ["lookup"] }));
    const message = (await clock.run(wrap(request(), down), { stepMs: 500 })) as ToolMessage;
    expect(message).toBeInstanceOf(ToolMessage);
    expect(message.status).toBe("error");
    expect(message.name).toBe("lookup");
    expect(message.tool_call_id).toBe("call_1");
    expect(message.text).toContain("Tool 'lookup' failed: Error: ");
    expect(message.text).not.toContain("jane@example.com");
    const noId = (await clock.run(
      wrap(request({ toolCall: { name: "lookup", args: { q: "x" } } }), down),
      { stepMs: 500 },
    )) as ToolMessage;
    expect(noId.tool_call_id).toBe("");
  });

  it("onFailure: error rethrows; a function writes the message, or rethrows by answering nothing", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const rethrow = wrapToolOf(
      selfHealingMiddleware(sh, { readOnly: ["lookup"], onFailure: "error" }),
    );
    await expect(clock.run(rethrow(request(), down), { stepMs: 500 })).rejects.toThrow(
      "bad gateway",
    );
    const seen: unknown[] = [];
    const custom = wrapToolOf(
      selfHealingMiddleware(sh, {
        model: false,
        readOnly: ["lookup"],
        onFailure: (error, req) => {
          seen.push((req as { toolCall: { id: string } }).toolCall.id);
          return (error as Error).message.startsWith("bad")
            ? "lookup is down, try later"
            : undefined;
        },
      }),
    );
    const message = (await clock.run(custom(request(), down), { stepMs: 500 })) as ToolMessage;
    expect(message.content).toBe("lookup is down, try later");
    const other = () => Promise.reject(new Error("other"));
    await expect(clock.run(custom(request(), other), { stepMs: 500 })).rejects.toThrow("other");
    expect(seen).toEqual(["call_1", "call_1"]);
  });

  it("leaves alone a call of no tool, or of a healed tool; names a call by the tool's own name", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const wrap = wrapToolOf(selfHealingMiddleware(sh, { readOnly: ["lookup", "renamed"] }));
    const answer = new ToolMessage({ content: "as is", tool_call_id: "call_1" });
    expect(await wrap(request({ tool: undefined }), () => Promise.resolve(answer))).toBe(answer);
    const healed = healTool(sh, named("healed-one"), { readOnly: true });
    expect(await wrap(request({ tool: healed }), () => Promise.resolve(answer))).toBe(answer);
    expect(otel.named("agent.tool_call")).toHaveLength(0);
    await clock.run(
      wrap(request({ toolCall: { name: "renamed", args: {}, id: "c" } }), () =>
        Promise.resolve(answer),
      ),
      { stepMs: 500 },
    );
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.tool.name"])).toEqual([
      "lookup",
    ]);
  });

  it("a run stopped by its signal, or the tool's config signal, is a cancelled call: rethrown, not a message", async () => {
    const { sh, clock } = recoveryInstance(otel.provider);
    const wrap = wrapToolOf(selfHealingMiddleware(sh, { readOnly: ["lookup"] }));
    const run = new AbortController();
    let calls = 0;
    const hanging = (r: unknown) => {
      calls++;
      const t = (
        r as { tool: { invoke(i: unknown, c?: { signal?: AbortSignal }): Promise<unknown> } }
      ).tool;
      return t.invoke({ q: "x" }, { signal: configSignal.signal });
    };
    const configSignal = new AbortController();
    const slow = tool(
      (_input, config: { signal?: AbortSignal }) =>
        new Promise((_resolve, reject) => {
          config.signal?.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        }),
      { name: "lookup", description: "d", schema: z.object({ q: z.string() }) },
    );
    const call = wrap(request({ tool: slow, runtime: { signal: run.signal } }), hanging).catch(
      (e: unknown) => e,
    );
    await clock.advance(1);
    run.abort("user left");
    const error = await clock.run(call, { stepMs: 500 });
    expect(error).not.toBeInstanceOf(ToolMessage);
    expect(calls).toBe(1);
    const viaConfig = wrap(request({ tool: slow }), hanging).catch((e: unknown) => e);
    await clock.advance(1);
    configSignal.abort("stopped");
    expect(await clock.run(viaConfig, { stepMs: 500 })).not.toBeInstanceOf(ToolMessage);
  });
});

describe("the model an attempt hands LangChain (tappedModel)", () => {
  /** A tap that records the streams it is asked to read, and passes their chunks through. */
  function recordingTap() {
    const controller = new AbortController();
    const streams: { options: unknown; asEvents: boolean }[] = [];
    const tap: ModelTap = {
      signal: controller.signal,
      async *stream(open, options, runManager, asEvents) {
        streams.push({ options, asEvents });
        yield* open(options, runManager);
      },
    };
    return { tap, streams, controller };
  }

  /** A chat model that streams and generates, keeping the `this` and options it was called with. */
  class Streaming extends BaseChatModel {
    seen: { self: unknown; options: { signal?: AbortSignal } }[] = [];
    _llmType() {
      return "streaming";
    }
    override async *_streamResponseChunks(_m: unknown, options: { signal?: AbortSignal }) {
      this.seen.push({ self: this, options });
      await Promise.resolve();
      yield new ChatGenerationChunk({ text: "hi", message: new AIMessageChunk("hi") });
    }
    _generate(_m: unknown, options: { signal?: AbortSignal }) {
      this.seen.push({ self: this, options });
      return Promise.resolve({ generations: [{ text: "ok", message: new AIMessage("ok") }] });
    }
  }

  it("leaves anything that is not a model as it is", () => {
    const { tap } = recordingTap();
    for (const value of [undefined, "gpt-4o", { name: "not a model" }])
      expect(tappedModel(value, tap)).toBe(value);
  });

  it("reads a chat model's stream through the tap, the model's own method on the model itself", async () => {
    const { tap, streams } = recordingTap();
    const model = new Streaming({});
    const tapped = tappedModel(model, tap);
    expect(tapped).not.toBe(model);
    expect(tapped._llmType()).toBe("streaming");
    const chunks: string[] = [];
    for await (const c of tapped._streamResponseChunks([], { signal: undefined } as never))
      chunks.push(c.text);
    expect(chunks).toEqual(["hi"]);
    expect(streams).toEqual([{ options: { signal: undefined }, asEvents: false }]);
    expect(model.seen[0]?.self).toBe(model);
  });

  it("joins _generate's signal to the attempt's: either aborts the request", async () => {
    const { tap, controller } = recordingTap();
    const model = new Streaming({});
    const tapped = tappedModel(model, tap);
    const caller = new AbortController();
    await tapped._generate([], { signal: caller.signal });
    await tapped._generate([], {});
    const [first, second] = model.seen;
    expect(first?.options.signal).not.toBe(caller.signal);
    expect(first?.self).toBe(tapped);
    expect(second?.options.signal?.aborted).toBe(false);
    controller.abort("attempt timed out");
    // Released once the call ended: the attempt's abort no longer reaches a finished request.
    expect(first?.options.signal?.aborted).toBe(false);
  });

  it("a model that does not stream keeps the base class's method: LangChain calls _generate", () => {
    class Generating extends BaseChatModel {
      _llmType() {
        return "generating";
      }
      _generate() {
        return Promise.resolve({ generations: [] });
      }
    }
    const { tap } = recordingTap();
    const tapped = tappedModel(new Generating({}), tap);
    expect(Reflect.get(tapped, "_streamResponseChunks")).toBe(
      Reflect.get(BaseChatModel.prototype, "_streamResponseChunks"),
    );
  });

  it("a binding's model, bindTools' result and initChatModel's instance are tapped too", async () => {
    const { tap, streams } = recordingTap();
    const model = new Streaming({});
    const binding = { bound: model, kwargs: {} };
    const tappedBinding = tappedModel(binding, tap);
    expect(tappedBinding.kwargs).toBe(binding.kwargs);
    expect(tappedBinding.bound).not.toBe(model);
    const texts: string[] = [];
    for await (const c of tappedBinding.bound._streamResponseChunks([], {})) texts.push(c.text);
    expect(texts).toEqual(["hi"]);
    expect(streams).toHaveLength(1);
    const other = new Streaming({});
    const rebinding = Object.assign(new Streaming({}), { bindTools: () => other });
    const rebound = tappedModel(rebinding, tap).bindTools();
    expect(rebound).not.toBe(other);
    expect(rebound._llmType()).toBe("streaming");
    const selfBinding = Object.assign(new Streaming({}), {
      bindTools(this: unknown) {
        return this;
      },
    });
    const tappedSelf = tappedModel(selfBinding, tap);
    expect(tappedSelf.bindTools()).toBe(tappedSelf);
    const configurable = {
      _getModelInstance: () => Promise.resolve(model),
      withConfig: () => ({ bound: model }),
    };
    const tappedConfigurable = tappedModel(configurable, tap);
    const instance = await tappedConfigurable._getModelInstance();
    expect(instance).not.toBe(model);
    expect(instance._llmType()).toBe("streaming");
    expect(tappedConfigurable.withConfig().bound).not.toBe(model);
  });
});
