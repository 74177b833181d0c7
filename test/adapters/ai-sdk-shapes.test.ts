/**
 * The AI SDK adapter on models and tools built by hand, by the shape the SDK gives them (no `ai`
 * imported): what `healModel`, `selfHealMiddleware` and `healTools` refuse and name, what each
 * model call hands the model and reports (usage, the answering model, empty answers, the
 * signal), how stream parts are read, and what a healed tool passes to `execute`.
 */
import { context, trace } from "@opentelemetry/api";
import { beforeEach, describe, expect, it } from "vitest";
import {
  healModel,
  healTools,
  isRestartPart,
  selfHealMiddleware,
} from "../../src/adapters/ai-sdk.js";
import { AI_SDK_PARTS, readParts, toReadableStream } from "../../src/adapters/ai-sdk/stream.js";
import type {
  GenerateResult,
  HealedModel,
  LanguageModel,
  StreamPart,
} from "../../src/adapters/ai-sdk/types.js";
import { StreamRestart } from "../../src/engine/stream-channel.js";
import type { HealedStream } from "../../src/index.js";
import { AI_SDK_RESTART_TYPE } from "../../src/telemetry/conventions.js";
import { configError, NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();
beforeEach(() => {
  otel.reset();
});

const PROMPT = [{ role: "user", content: [{ type: "text", text: "refund policy?" }] }];

/** A model call as the SDK makes it: the prompt, and `params` over it. */
const generate = (m: HealedModel<LanguageModel>, params: Record<string, unknown> = {}) =>
  Promise.resolve(m.doGenerate({ prompt: PROMPT, ...params }));

/** A v3 usage block; `undefined` totals are a provider that sent none. */
const usage = (input: number | undefined, output: number | undefined) => ({
  inputTokens: { total: input },
  outputTokens: { total: output },
});

const answer = (content: GenerateResult["content"], extra: Partial<GenerateResult> = {}) => ({
  content,
  finishReason: { unified: "stop", raw: "stop" },
  usage: usage(12, 8),
  ...extra,
});

interface Made extends LanguageModel {
  /** The options each doGenerate / doStream received. */
  seen: Record<string, unknown>[];
}

/** A model of `spec` answering each doGenerate with `generate` and each doStream with `parts`. */
function model(
  provider: string,
  modelId: string,
  generate: (options: Record<string, unknown>) => Promise<GenerateResult> = () =>
    Promise.resolve(answer([{ type: "text", text: "ok" }])),
  spec: "v3" | "v4" = "v3",
  parts: StreamPart[] = [
    { type: "text-delta", delta: "ok" },
    { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage(1, 1) },
  ],
): Made {
  const seen: Record<string, unknown>[] = [];
  return {
    specificationVersion: spec,
    provider,
    modelId,
    supportedUrls: {},
    seen,
    doGenerate: (options: Record<string, unknown>) => {
      seen.push(options);
      return generate(options);
    },
    doStream: (options: Record<string, unknown>) => {
      seen.push(options);
      return Promise.resolve({
        stream: new ReadableStream<StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      });
    },
  } as unknown as Made;
}

const unavailable = () =>
  Object.assign(new Error("upstream unavailable"), { statusCode: 503, responseHeaders: {} });

const attrs = (name = "agent.tool_call") => {
  const span = otel.named(name)[0];
  if (!span) throw new Error(`no ${name} span`);
  return span.attributes;
};

function instance(recovery = {}) {
  return recoveryInstance(otel.provider, {
    providers: [{ name: "acme" }, { name: "backup" }, { name: "third" }],
    ...recovery,
  });
}

describe("healModel and selfHealMiddleware: what they refuse, by field", () => {
  const MODEL_MESSAGE =
    'expected an AI SDK language model object (specificationVersion "v3" or "v4", e.g. openai("gpt-4o")), got';

  it("refuses anything that is not a v3 or v4 model with doGenerate and doStream", () => {
    const { sh } = instance(NO_RECOVERY);
    const good = model("acme", "m");
    const shapes: unknown[] = [
      null,
      "openai/gpt-4o",
      {},
      { ...good, specificationVersion: "v2" },
      { ...good, doGenerate: undefined },
      { ...good, doStream: "stream" },
    ];
    for (const shape of shapes) {
      const error = configError(() => healModel(sh, shape as never));
      expect(error.field).toBe("healModel(model)");
      expect(error.message).toContain(MODEL_MESSAGE);
    }
    expect(() => healModel(sh, model("acme", "v4-model", undefined, "v4"))).not.toThrow();
  });

  it("names each bad option, under the caller's name", () => {
    const { sh } = instance(NO_RECOVERY);
    const acme = model("acme", "m");
    const backup = model("backup", "b");
    const cases: [unknown, string, string?][] = [
      [{ name: 5 }, "healModel.options.name"],
      [{ provider: 5 }, "healModel.options.provider"],
      [{ spans: "both" }, "healModel.options.spans"],
      [{ onRestart: "log" }, "healModel.options.onRestart"],
      [
        { fallback: { model: backup } },
        "healModel.options.fallback.provider",
        "required with `model`",
      ],
      [
        { fallback: [{ model: backup }] },
        "healModel.options.fallback[0].provider",
        "required with `model`",
      ],
      [{ fallback: { provider: 7, model: backup } }, "healModel.options.fallback.provider"],
      [
        { fallback: { provider: "backup", model: "gpt" } },
        "healModel.options.fallback.model",
        MODEL_MESSAGE,
      ],
      [
        { fallback: [backup, { provider: "third", model: {} }] },
        "healModel.options.fallback[1].model",
      ],
      [
        { fallback: { provider: "backup", model: backup, weight: 2 } },
        "healModel.options.fallback.weight",
      ],
    ];
    for (const [options, field, message] of cases) {
      const error = configError(() => healModel(sh, acme, options as never));
      expect(error.field).toBe(field);
      if (message !== undefined) expect(error.message).toContain(message);
    }
    expect(configError(() => selfHealMiddleware(sh, { name: 5 } as never)).field).toBe(
      "selfHealMiddleware.options.name",
    );
  });

  it("gives each route its own provider: a second fallback of one provider, or the primary's", () => {
    const { sh } = instance(NO_RECOVERY);
    const acme = model("acme", "m");
    const twice = configError(() =>
      healModel(sh, acme, { fallback: [model("backup", "b1"), model("backup", "b2")] }),
    );
    expect(twice.field).toBe("healModel.options.fallback[1]");
    expect(twice.message).toContain('provider "backup" is already a fallback');
    const primary = configError(() =>
      healModel(sh, acme, { provider: "backup", fallback: model("backup", "b") }),
    );
    expect(primary.field).toBe("healModel.options.fallback");
    expect(primary.message).toContain('provider "backup" is the primary\'s');
  });

  it("refuses a fallback of another specification than the primary's", () => {
    const { sh } = instance(NO_RECOVERY);
    const error = configError(() =>
      healModel(sh, model("acme", "m3"), { fallback: model("backup", "m4", undefined, "v4") }),
    );
    expect(error.field).toBe("healModel.options.fallback");
    expect(error.message).toContain('"backup" (m4) is a v4 model and the primary (m3) a v3 one');
  });

  it("takes a name once per set of routes: the same routes share it, other routes are refused", async () => {
    const { sh } = instance(NO_RECOVERY);
    const first = healModel(sh, model("acme", "a1"), { name: "chat" });
    const same = healModel(sh, model("acme", "a2"), { name: "chat" });
    await generate(first);
    await generate(same);
    // A model call names its model for GenAI backends; selfheal's name of it is the tool's.
    expect(otel.named("agent.tool_call").map((s) => s.attributes["selfheal.tool.name"])).toEqual([
      "chat",
      "chat",
    ]);
    expect(otel.named("agent.tool_call").map((s) => s.attributes["gen_ai.request.model"])).toEqual([
      "a1",
      "a2",
    ]);
    const other = configError(() =>
      healModel(sh, model("acme", "a3"), { name: "chat", fallback: model("backup", "b") }),
    );
    expect(other.field).toBe("healModel.options.name");
    expect(other.message).toContain(
      'model "chat" is already healed with routes acme; give this one its own name',
    );
  });

  it("selfHealMiddleware is a v3 middleware; a bad route fails its first call, under its name", () => {
    const { sh } = instance(NO_RECOVERY);
    const middleware = selfHealMiddleware(sh, {
      provider: "backup",
      fallback: model("backup", "b"),
    });
    expect(middleware.specificationVersion).toBe("v3");
    const acme = model("acme", "m");
    const error = configError(() => {
      void middleware.wrapGenerate({
        doGenerate: () => Promise.resolve(undefined),
        params: { prompt: PROMPT },
        model: acme,
      });
    });
    expect(error.field).toBe("selfHealMiddleware.options.fallback");
  });
});

describe("healModel: each model call", () => {
  it("reports the token usage the provider sent, and leaves out what it did not", async () => {
    const meters = recordingMeters();
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, {
      meterProvider: meters.meterProvider,
    });
    const tokens = async () =>
      [...(await meters.read()).keys()]
        .filter((k) => k.startsWith("gen_ai.client.token.usage"))
        .map(
          (k) =>
            `${/gen_ai\.request\.model=([^,}]*)/.exec(k)?.[1]}:${/gen_ai\.token\.type=(\w+)/.exec(k)?.[1]}`,
        )
        .sort();
    await generate(healModel(sh, model("acme", "counted"), { name: "counted" }));
    const silent = model("acme", "silent", () =>
      Promise.resolve(answer([{ type: "text", text: "ok" }], { usage: usage(undefined, 5) })),
    );
    await generate(healModel(sh, silent, { name: "silent" }));
    const names = await tokens();
    expect(names.filter((n) => n.endsWith(":input"))).toHaveLength(1);
    expect(names.filter((n) => n.endsWith(":output"))).toHaveLength(2);
    await meters.shutdown();
  });

  it("returns the primary's answer as it is; a fallback's names the model that answered", async () => {
    const { sh, clock } = instance();
    const own = answer([{ type: "text", text: "primary" }]);
    const healthy = healModel(
      sh,
      model("acme", "p1", () => Promise.resolve(own)),
      {
        name: "healthy",
      },
    );
    expect(await generate(healthy)).toBe(own);

    const down = model("acme", "p2", () => Promise.reject(unavailable()));
    const failover = healModel(sh, down, {
      name: "failover",
      fallback: model("backup", "b-model"),
    });
    const result = await clock.run(generate(failover), { stepMs: 1_000 });
    expect(result.response?.modelId).toBe("b-model");
    expect(result.content).toEqual([{ type: "text", text: "ok" }]);

    const named = model("third", "t-model", () =>
      Promise.resolve(answer([{ type: "text", text: "x" }], { response: { modelId: "t-2026" } })),
    );
    const kept = healModel(
      sh,
      model("acme", "p3", () => Promise.reject(unavailable())),
      {
        name: "kept",
        fallback: { provider: "third", model: named },
      },
    );
    expect((await clock.run(generate(kept), { stepMs: 1_000 })).response).toEqual({
      modelId: "t-2026",
    });
  });

  it("counts an answer empty when it says nothing and calls nothing", async () => {
    const { sh } = instance(NO_RECOVERY);
    const cases: [GenerateResult["content"], boolean][] = [
      [[], true],
      [[{ type: "text", text: "  \n" }], true],
      [[{ type: "text" }], true],
      [[{ type: "reasoning", text: "let me think" }], true],
      [[{ type: "source" }], true],
      [[{ type: "text", text: "yes" }], false],
      [[{ type: "tool-call" }], false],
      [[{ type: "tool-approval-request" }], false],
      [[{ type: "file" }], false],
      [[{ type: "reasoning", text: "hm" }, { type: "file" }], false],
    ];
    for (const [i, [content, empty]] of cases.entries()) {
      otel.reset();
      const healed = healModel(
        sh,
        model("acme", `m${i}`, () => Promise.resolve(answer(content))),
      );
      await generate(healed).catch(() => undefined);
      expect([i, attrs()["selfheal.response.empty"] === true]).toEqual([i, empty]);
    }
  });

  it("gives the model selfheal's signal, aborted when the caller's is", async () => {
    const { sh } = instance(NO_RECOVERY);
    const hanging = model("acme", "hang", (options) => {
      const signal = options.abortSignal as AbortSignal;
      return new Promise((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          reject(new Error("aborted by signal"));
        });
      });
    });
    const healed = healModel(sh, hanging);
    const caller = new AbortController();
    const call = generate(healed, { abortSignal: caller.signal });
    await Promise.resolve();
    const given = hanging.seen[0]?.abortSignal as AbortSignal;
    expect(given).toBeInstanceOf(AbortSignal);
    expect(given).not.toBe(caller.signal);
    expect(given.aborted).toBe(false);
    caller.abort();
    await expect(call).rejects.toThrow();
    expect(given.aborted).toBe(true);
    expect(hanging.seen[0]?.prompt).toBe(PROMPT);
  });

  it("puts timeoutMs on the call, only when given", async () => {
    const { sh } = instance(NO_RECOVERY);
    await generate(
      healModel(sh, model("acme", "limited"), {
        timeoutMs: 4_000,
        deadlineMs: 9_000,
      }),
    );
    expect(attrs()["selfheal.call.timeout_ms"]).toBe(4_000);
    otel.reset();
    await generate(healModel(sh, model("acme", "open")));
    expect(attrs()["selfheal.call.timeout_ms"]).toBeUndefined();
  });

  it("ends a call at its deadlineMs", async () => {
    const { sh, clock } = instance(NO_RECOVERY);
    const hanging = () =>
      model("acme", "hang", (options) => {
        const signal = options.abortSignal as AbortSignal;
        return new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        });
      });
    const endOf = async (healed: LanguageModel) => {
      const started = clock.now();
      await clock.run(
        generate(healed).catch(() => undefined),
        { stepMs: 500 },
      );
      return clock.now() - started;
    };
    expect(
      await endOf(healModel(sh, hanging(), { name: "short", deadlineMs: 3_000 })),
    ).toBeLessThanOrEqual(3_500);
    expect(await endOf(healModel(sh, hanging(), { name: "long" }))).toBeGreaterThan(3_500);
  });

  it("runs the plans it is given: none for an empty answer means one attempt", async () => {
    const { sh, clock } = instance();
    const empty = () => Promise.resolve(answer([]));
    const planned = model("acme", "planned", empty);
    await generate(healModel(sh, planned, { plans: { EMPTY_LLM_RESPONSE: [] } })).catch(
      () => undefined,
    );
    expect(planned.seen).toHaveLength(1);
    const defaults = model("acme", "defaults", empty);
    await clock.run(
      generate(healModel(sh, defaults)).catch(() => undefined),
      { stepMs: 1_000 },
    );
    expect(defaults.seen.length).toBeGreaterThan(1);
  });

  it('with spans: "attach" writes on the SDK\'s doGenerate span: no span of its own', async () => {
    const { sh } = instance(NO_RECOVERY);
    const tracer = otel.provider.getTracer("ai");
    const healed = healModel(sh, model("acme", "attached"), { spans: "attach" });
    await tracer.startActiveSpan("ai.generateText.doGenerate", async (span) => {
      await generate(healed);
      span.end();
    });
    expect(otel.named("agent.tool_call")).toHaveLength(0);
    const written = attrs("ai.generateText.doGenerate");
    expect(written).toMatchObject({ "selfheal.call.outcome": "success" });
    // A model span names no tool: GenAI conventions give one to execute_tool spans only.
    expect(written).not.toHaveProperty("gen_ai.tool.name");
  });

  it("records the prompt as the call's arguments, not the settings or the signal", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, { recordArguments: true });
    await generate(healModel(sh, model("acme", "recorded")), {
      temperature: 0.2,
      abortSignal: new AbortController().signal,
    });
    expect(attrs()["gen_ai.tool.call.arguments"]).toBe(JSON.stringify(PROMPT));
  });

  it("records the prompt of a streamed call too, not the settings or the models", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, { recordArguments: true });
    const { stream } = await healModel(sh, model("acme", "recorded")).doStream({
      prompt: PROMPT,
    });
    await stream.pipeTo(new WritableStream());
    expect(attrs()["gen_ai.tool.call.arguments"]).toBe(JSON.stringify(PROMPT));
  });

  it("streams: a provider's raw parts pass; a restart is a raw part only when raw chunks were asked for", async () => {
    const finish = {
      type: "finish",
      finishReason: { unified: "stop", raw: "stop" },
      usage: usage(1, 1),
    } as const;
    const { sh, clock } = instance();
    const primary = model("acme", "cut", undefined, "v3", [
      { type: "raw", rawValue: { id: 1 } },
      { type: "text-delta", delta: "Refunds are" },
      { type: "error", error: unavailable() },
    ]);
    const backup = model("backup", "whole", undefined, "v3", [
      { type: "text-delta", delta: "Refunds are free." },
      finish,
    ]);
    const healed = healModel(sh, primary, { fallback: backup, afterFirstToken: "restart" });
    const read = async (includeRawChunks: boolean) => {
      const types: string[] = [];
      const reading = (async () => {
        const { stream } = await healed.doStream({ prompt: PROMPT, includeRawChunks });
        for await (const part of stream as unknown as AsyncIterable<StreamPart>) {
          types.push(isRestartPart(part) ? "restart" : part.type);
        }
      })();
      await clock.run(reading, { stepMs: 500 });
      return types;
    };
    // Parts flow as they come (restart mode): the cut attempt's error part too, then the restart.
    expect(await read(true)).toEqual([
      "raw",
      "text-delta",
      "error",
      "restart",
      "text-delta",
      "finish",
    ]);
    expect(await read(false)).toEqual(["raw", "text-delta", "error", "text-delta", "finish"]);
  });
});

describe("stream parts as selfheal reads them", () => {
  const read = (part: StreamPart) => AI_SDK_PARTS.read(part);

  it("text is an answer, blank text progress, no text nothing", () => {
    expect(read({ type: "text-delta", delta: "Refunds" })).toEqual({ token: true, answer: true });
    expect(read({ type: "text-delta", delta: " \n" })).toEqual({ token: true });
    expect(read({ type: "text-delta", delta: "" })).toBeUndefined();
  });

  it("reasoning is progress, never an answer", () => {
    expect(read({ type: "reasoning-delta", delta: "thinking" })).toEqual({ token: true });
    expect(read({ type: "reasoning-delta", delta: "" })).toBeUndefined();
    expect(read({ type: "reasoning-file" })).toEqual({ token: true });
  });

  it("tool input, tool calls, approvals and files are answers", () => {
    for (const type of [
      "tool-input-start",
      "tool-input-delta",
      "tool-call",
      "tool-approval-request",
      "file",
    ])
      expect([type, read({ type, delta: "{" } as StreamPart)]).toEqual([
        type,
        { token: true, answer: true },
      ]);
  });

  it("finish carries the unified reason and output tokens; error the provider's error", () => {
    const finish = {
      type: "finish",
      finishReason: { unified: "length", raw: "max_tokens" },
      usage: usage(3, 40),
    } as const;
    expect(read(finish)).toEqual({ finishReason: "length", outputTokens: 40 });
    const error = new Error("overloaded");
    expect(read({ type: "error", error })).toEqual({ error });
  });

  it("the rest is no token", () => {
    for (const type of [
      "stream-start",
      "response-metadata",
      "source",
      "raw",
      "ping",
      "custom",
      "text-start",
    ])
      expect([type, read({ type })]).toEqual([type, undefined]);
  });

  it("tells selfheal's restart part from any other raw part", () => {
    expect(
      isRestartPart({ type: "raw", rawValue: { type: AI_SDK_RESTART_TYPE, discard: 2 } }),
    ).toBe(true);
    expect(isRestartPart({ type: "raw", rawValue: { type: "other" } })).toBe(false);
    expect(isRestartPart({ type: "raw", rawValue: null })).toBe(false);
    expect(isRestartPart({ type: "text-delta", rawValue: { type: AI_SDK_RESTART_TYPE } })).toBe(
      false,
    );
  });
});

describe("the stream handed to the SDK", () => {
  /** A healed stream of `items` whose iterator records return(). */
  function healedOf(items: (StreamPart | StreamRestart)[]) {
    const closed = { returned: 0 };
    let i = 0;
    const iterator: AsyncIterator<StreamPart | StreamRestart> = {
      next: () =>
        Promise.resolve(
          i < items.length
            ? { done: false, value: items[i++] as StreamPart | StreamRestart }
            : { done: true, value: undefined },
        ),
      return: () => {
        closed.returned++;
        return Promise.resolve({ done: true, value: undefined });
      },
    };
    const healed = {
      result: Promise.resolve(),
      [Symbol.asyncIterator]: () => iterator,
    } as unknown as HealedStream<StreamPart | StreamRestart>;
    return { healed, iterator, closed };
  }

  const text = (delta: string): StreamPart => ({ type: "text-delta", delta });

  async function drain(stream: ReadableStream<StreamPart>): Promise<StreamPart[]> {
    const out: StreamPart[] = [];
    for await (const part of stream as unknown as AsyncIterable<StreamPart>) out.push(part);
    return out;
  }

  it("a restart calls onRestart and, with raw chunks on, becomes a raw part saying what to discard", async () => {
    const restart = new StreamRestart(2, 2, "backup", new Error("cut"));
    for (const raw of [true, false]) {
      const { healed, iterator } = healedOf([text("b"), restart, text("c")]);
      const seen: StreamRestart[] = [];
      const stream = toReadableStream(
        healed,
        { done: false, value: text("a") },
        iterator,
        raw,
        (r) => seen.push(r),
      );
      const parts = await drain(stream);
      expect(seen).toEqual([restart]);
      expect(parts).toEqual(
        raw
          ? [
              text("a"),
              text("b"),
              {
                type: "raw",
                rawValue: { type: AI_SDK_RESTART_TYPE, discard: 2, attempt: 2, provider: "backup" },
              },
              text("c"),
            ]
          : [text("a"), text("b"), text("c")],
      );
    }
    const { healed, iterator } = healedOf([restart]);
    expect(
      await drain(
        toReadableStream(healed, { done: false, value: text("a") }, iterator, true, undefined),
      ),
    ).toHaveLength(2);
  });

  it("cancelled by the SDK, it closes the healed stream", async () => {
    const { healed, iterator, closed } = healedOf([text("b"), text("c")]);
    const stream = toReadableStream(
      healed,
      { done: false, value: text("a") },
      iterator,
      false,
      undefined,
    );
    const reader = stream.getReader();
    expect((await reader.read()).value).toEqual(text("a"));
    await reader.cancel();
    expect(closed.returned).toBe(1);
  });

  it("readParts: return() ends the iteration at once and cancels the stream underneath", async () => {
    let cancelled = false;
    const stream = new ReadableStream<StreamPart>({
      pull: () => new Promise(() => undefined), // never answers: a stalled provider
      cancel: () => {
        cancelled = true;
      },
    });
    const parts = readParts(stream);
    expect(parts[Symbol.asyncIterator]()).toBe(parts);
    expect(await parts.return?.()).toEqual({ done: true, value: undefined });
    await Promise.resolve();
    expect(cancelled).toBe(true);
  });
});

describe("healTools: what execute gets", () => {
  type Execute = (input: unknown, options: Record<string, unknown>) => unknown;
  const sdkTool = (execute: Execute) => ({ description: "d", inputSchema: {}, execute });
  const call = (
    tools: Record<string, { execute?: unknown }>,
    name: string,
    input: unknown,
    options: Record<string, unknown>,
  ) => (tools[name]?.execute as (i: unknown, o: unknown) => Promise<unknown>)(input, options);

  it("the SDK's options with selfheal's signal, aborted when the SDK's is; a blank call id left out", async () => {
    const { sh } = instance(NO_RECOVERY);
    const seen: Record<string, unknown>[] = [];
    const tools = healTools(
      sh,
      {
        lookup: sdkTool((_input, options) => {
          seen.push(options);
          return new Promise((_resolve, reject) => {
            (options.abortSignal as AbortSignal).addEventListener("abort", () => {
              reject(new Error("aborted"));
            });
          });
        }),
      },
      { readOnly: ["lookup"] },
    );
    const sdk = new AbortController();
    const messages = [{ role: "user", content: "?" }];
    const running = call(
      tools,
      "lookup",
      { q: 1 },
      { toolCallId: "call_9", messages, abortSignal: sdk.signal },
    );
    await Promise.resolve();
    const given = seen[0]?.abortSignal as AbortSignal;
    expect(seen[0]).toMatchObject({ toolCallId: "call_9", messages });
    expect(given).not.toBe(sdk.signal);
    sdk.abort();
    await expect(running).rejects.toThrow();
    expect(given.aborted).toBe(true);
    expect(attrs()["gen_ai.tool.call.id"]).toBe("call_9");

    otel.reset();
    const answering = healTools(sh, { whoami: sdkTool(() => "ada") }, { readOnly: ["whoami"] });
    expect(await call(answering, "whoami", {}, { toolCallId: "  ", messages: [] })).toBe("ada");
    expect(attrs()["gen_ai.tool.call.id"]).toBeUndefined();
  });

  it("an async iterable is read to its last value; anything else is the output as it is", async () => {
    const { sh } = instance(NO_RECOVERY);
    async function* progress() {
      yield "10 %";
      await Promise.resolve();
      yield "done";
    }
    const notIterable = { [Symbol.asyncIterator]: "no" };
    const outputs: [string, unknown, unknown][] = [
      ["streams", progress, "done"],
      ["nothing", () => null, null],
      ["record", () => ({ id: 1 }), { id: 1 }],
      ["odd", () => notIterable, notIterable],
      ["text", () => "plain", "plain"],
    ];
    for (const [name, execute, expected] of outputs) {
      const tools = healTools(sh, { [name]: sdkTool(execute as Execute) }, { readOnly: [name] });
      expect([name, await call(tools, name, {}, { toolCallId: "c", messages: [] })]).toEqual([
        name,
        expected,
      ]);
    }
  });

  it("records the tool's input as its arguments, not the conversation", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, { recordArguments: true });
    const tools = healTools(sh, { find: sdkTool(() => "x") }, { readOnly: ["find"] });
    await call(
      tools,
      "find",
      { q: "refund" },
      { toolCallId: "c1", messages: [{ role: "user", content: "secret" }] },
    );
    expect(attrs()["gen_ai.tool.call.arguments"]).toBe('{"q":"refund"}');
  });

  it('with spans: "attach" writes on the SDK\'s ai.toolCall span, and only there', async () => {
    const { sh } = instance(NO_RECOVERY);
    const tracer = otel.provider.getTracer("ai");
    const tools = healTools(
      sh,
      { find: sdkTool(() => "x") },
      { readOnly: ["find"], spans: "attach" },
    );
    await tracer.startActiveSpan("ai.toolCall", async (span) => {
      await call(tools, "find", {}, { toolCallId: "c1", messages: [] });
      span.end();
    });
    expect(otel.named("agent.tool_call")).toHaveLength(0);
    expect(attrs("ai.toolCall")["gen_ai.tool.name"]).toBe("find");
    otel.reset();
    // Under a span that is not the SDK's (a request span), the call opens its own.
    await context.with(trace.setSpan(context.active(), tracer.startSpan("request")), () =>
      call(tools, "find", {}, { toolCallId: "c2", messages: [] }),
    );
    expect(otel.named("agent.tool_call")).toHaveLength(1);
  });
});
