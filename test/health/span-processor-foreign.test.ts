import { SpanStatusCode, type Attributes } from "@opentelemetry/api";
import { generateText, stepCountIs, tool } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { healModel, healTools } from "../../src/adapters/ai-sdk.js";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { AgentStatus, HealthSpanProcessor } from "../../src/index.js";
import { scriptedModel, textTurn, toolTurn } from "../fixtures/adapters/ai-sdk-models.js";
import { virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

/**
 * An instance whose span processor reads every span of a recording provider, selfheal's own
 * included (they go to the same provider, as with a global SDK).
 */
function setup() {
  const target: { health?: HealthSpanProcessor } = {};
  const forward = {
    onStart: (span: ReadableSpan) => target.health?.onStart(span),
    onEnd: (span: ReadableSpan) => target.health?.onEnd(span),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  const otel = recordingProvider([forward]);
  const vi = virtualInstance({ tracerProvider: otel.provider, health: { cacheMs: 0 } });
  target.health = vi.sh.spanProcessor();
  return { ...vi, otel, tracer: otel.provider.getTracer("ai") };
}

/** A reading of one tool's signal. */
const signal = (report: AgentStatus, tool: string, name: string) =>
  report.tools[tool]?.signals.find((s) => s.signal === name);

describe("HealthSpanProcessor reads the AI SDK's own spans as well as GenAI ones", () => {
  it("counts ai.toolCall spans as tool calls and ai.*.doGenerate / doStream as model calls, beside execute_tool and chat", async () => {
    const { sh, tracer } = setup();
    const emit = (name: string, attributes: Attributes, failed = false) => {
      const span = tracer.startSpan(name, { attributes });
      if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    // GenAI shape: ten execute_tool spans, two failing (one by status, one by error.type only).
    for (let i = 0; i < 10; i++) {
      emit(
        "execute_tool weather",
        {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "weather",
          ...(i === 1 && { "error.type": "TimeoutError" }),
        },
        i === 0,
      );
    }
    // AI SDK shape: ten ai.toolCall spans (a functionId in operation.name), six failing.
    for (let i = 0; i < 10; i++) {
      emit(
        "ai.toolCall",
        {
          "operation.name": "ai.toolCall support-bot",
          "ai.operationId": "ai.toolCall",
          "ai.toolCall.name": "lookup_order",
          "ai.toolCall.id": `call-${i}`,
        },
        i < 6,
      );
    }
    // Twenty model calls of one model through generateText, streamText and generateObject,
    // five of them empty (zero output tokens, each API's own attribute).
    const usage = [
      ["ai.generateText.doGenerate", "gen_ai.usage.output_tokens"],
      ["ai.streamText.doStream", "ai.usage.outputTokens"],
      ["ai.generateObject.doGenerate", "ai.usage.completionTokens"],
    ] as const;
    for (let i = 0; i < 20; i++) {
      const [operation, tokens] = usage[i % 3] as (typeof usage)[number];
      emit(operation, {
        "ai.operationId": operation,
        "ai.model.id": "gpt-x",
        [tokens]: i < 5 ? 0 : 40,
      });
    }
    // The outer spans of a run and spans of other kinds say nothing about a call.
    emit("ai.generateText", { "ai.operationId": "ai.generateText" });
    emit("GET /health", {});

    const report = await sh.status();
    expect(signal(report, "weather", "success_rate")).toMatchObject({ value: 0.8, samples: 10 });
    expect(signal(report, "lookup_order", "success_rate")).toMatchObject({
      value: 0.4,
      samples: 10,
      status: "critical",
    });
    expect(signal(report, "gpt-x", "empty_response_rate")).toMatchObject({
      value: 0.25,
      samples: 20,
      status: "critical",
    });
    expect(Object.keys(report.tools).sort()).toEqual(["gpt-x", "lookup_order", "weather"]);
    expect(report.status).toBe("critical");
  });

  it("counts a GenAI model span under its gen_ai.request.model, as a healed model is counted", async () => {
    const { sh, tracer } = setup();
    for (let i = 0; i < 3; i++) {
      const attributes = { "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x" };
      tracer.startSpan("chat gpt-x", { attributes }).end();
    }
    const report = await sh.status();
    expect(Object.keys(report.tools)).toEqual(["gpt-x"]);
    expect(signal(report, "gpt-x", "success_rate")).toMatchObject({ samples: 3 });
  });

  it("a GenAI span opened inside a healed call (a model instrumentation's chat span) is that call, counted once", async () => {
    const { sh, tracer } = setup();
    const model = sh.tool("model", { readOnly: true, kind: "llm" }, () =>
      tracer.startActiveSpan(
        "chat gpt-x",
        { attributes: { "gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 5 } },
        (span) => {
          span.end();
          return "hi";
        },
      ),
    );
    for (let i = 0; i < 3; i++) await model(undefined);
    // The same span outside any healed call is counted.
    tracer.startSpan("chat gpt-x", { attributes: { "gen_ai.operation.name": "chat" } }).end();
    const report = await sh.status();
    expect(signal(report, "model", "success_rate")).toMatchObject({ samples: 3 });
    expect(signal(report, "chat gpt-x", "success_rate")).toMatchObject({ samples: 1 });
  });

  it("feeds health from real generateText spans (telemetry on, nothing wrapped): failing tools and empty answers", async () => {
    const { sh, tracer } = setup();
    let calls = 0;
    const tools = {
      flaky_search: tool({
        inputSchema: z.object({ query: z.string() }),
        execute: ({ query }) => {
          if (++calls <= 4) throw new Error(`search backend timed out for ${query}`);
          return "found";
        },
      }),
    };
    const searches = Array.from(
      { length: 10 },
      (_, i) => ["flaky_search", { query: `q${i}` }, `c${i}`] as [string, unknown, string],
    );
    const model = scriptedModel([toolTurn(...searches), textTurn(""), textTurn("")], {
      modelId: "mock-large",
    });
    const telemetry = { isEnabled: true, tracer };
    const result = await generateText({
      model,
      prompt: "search",
      tools,
      stopWhen: stepCountIs(2),
      experimental_telemetry: telemetry,
    });
    // The SDK reports the four failures to the model as tool-error parts.
    expect(result.steps[0]?.content.filter((p) => p.type === "tool-error")).toHaveLength(4);
    await generateText({ model, prompt: "again", experimental_telemetry: telemetry });

    const report = await sh.status();
    expect(signal(report, "flaky_search", "success_rate")).toMatchObject({
      value: 0.6,
      samples: 10,
    });
    // Three model calls (two steps, one more run), the two last answered nothing.
    expect(signal(report, "mock-large", "empty_response_rate")).toMatchObject({ samples: 3 });
  });

  it("counts a healed tool or model call once: the SDK's span around selfheal's own is skipped, in child and attach mode", async () => {
    for (const spans of ["child", "attach"] as const) {
      const { sh, tracer, otel } = setup();
      const tools = healTools(
        sh,
        {
          search_docs: tool({
            inputSchema: z.object({ query: z.string() }),
            execute: () => "found",
          }),
        },
        { readOnly: ["search_docs"], spans },
      );
      const model = healModel(
        sh,
        scriptedModel([toolTurn(["search_docs", { query: "a" }, "c1"]), textTurn("done")], {
          modelId: "healed-model",
        }),
        { spans },
      );
      await generateText({
        model,
        prompt: "?",
        tools,
        stopWhen: stepCountIs(2),
        experimental_telemetry: { isEnabled: true, tracer },
      });
      // Both shapes were emitted: the SDK's spans are there to be read.
      expect(otel.named("ai.toolCall")).toHaveLength(1);
      expect(otel.named("ai.generateText.doGenerate")).toHaveLength(2);
      const report = await sh.status();
      expect(signal(report, "search_docs", "success_rate")?.samples).toBe(1);
      expect(signal(report, "healed-model", "success_rate")?.samples).toBe(2);
      // The model's streamed calls are a scope of their own, registered with it and unused here.
      expect(Object.keys(report.tools).sort()).toEqual([
        "healed-model",
        "healed-model:stream",
        "search_docs",
      ]);
      expect(signal(report, "healed-model:stream", "success_rate")?.samples ?? 0).toBe(0);
    }
  });
});
