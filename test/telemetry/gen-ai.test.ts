/**
 * The GenAI semantic conventions on selfheal's spans and metrics, with the real OpenTelemetry
 * SDK (spans in memory, metrics read with a MetricReader): `gen_ai.*` only on the span the
 * conventions define it for (the tool name on an `execute_tool` call span, a model call's request
 * on an `llm` call span), selfheal's own names of the agent and tool on every span, `error.type`
 * on every failed span, and the `gen_ai.client.operation.duration` and `gen_ai.client.token.usage`
 * histograms per request (attempt).
 */
import { SpanStatusCode, type Attributes } from "@opentelemetry/api";
import {
  DataPointType,
  MeterProvider,
  MetricReader,
  type HistogramMetricData,
} from "@opentelemetry/sdk-metrics";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ChunkInfo, StreamFormat } from "../../src/index.js";
import {
  METRIC_GEN_AI_OPERATION_DURATION,
  METRIC_GEN_AI_TOKEN_USAGE,
} from "../../src/telemetry/conventions.js";
import type { VirtualClock } from "../../src/testing/index.js";
import { recoveryInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();

class Reader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const meterProviders: MeterProvider[] = [];
afterEach(async () => {
  await Promise.all(meterProviders.splice(0).map((p) => p.shutdown()));
});

/** The points of a histogram: attributes, count and sum. */
function histograms() {
  const reader = new Reader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  meterProviders.push(meterProvider);
  const points = async (name: string) => {
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    if (!metric) return [];
    expect(metric.dataPointType).toBe(DataPointType.HISTOGRAM);
    return (metric as HistogramMetricData).dataPoints.map((p) => ({
      attributes: p.attributes,
      count: p.value.count,
      sum: p.value.sum,
    }));
  };
  return { meterProvider, points };
}

const ROUTES = {
  providers: [
    { name: "primary", model: "model-a" },
    { name: "backup", model: "model-b" },
  ],
  plans: { SERVICE_DOWN: ["failover_to_secondary"] as const },
};

const down = () => Object.assign(new Error("upstream down"), { status: 503 });
const genAiKeys = (a: Attributes) => Object.keys(a).filter((k) => k.startsWith("gen_ai."));

beforeEach(() => {
  otel.reset();
});

describe("gen_ai.* only where the conventions define it; selfheal's names on every span", () => {
  it("a tool that fails, fails again in recovery and then answers: one span names the tool for GenAI", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, {
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    let calls = 0;
    const search = sh.tool("search", { readOnly: true, provider: "acme" }, () => {
      if (++calls < 3) throw down();
      return "ok";
    });
    await expect(clock.run(search(undefined), { stepMs: 100 })).resolves.toBe("ok");

    const spans = otel.spans();
    expect(spans.map((s) => s.name).sort()).toEqual([
      "agent.diagnosis",
      "agent.diagnosis",
      "agent.recovery",
      "agent.recovery",
      "agent.tool_call",
      "agent.tool_call.error",
      "agent.tool_call.error",
    ]);
    // What a GenAI backend counts tool calls by: exactly one span, the call's, which names the
    // tool once (each attribute costs a recording SDK): the children in selfheal's names.
    const [call] = spans.filter((s) => s.attributes["gen_ai.tool.name"] !== undefined);
    expect(spans.filter((s) => s.attributes["gen_ai.tool.name"] !== undefined)).toHaveLength(1);
    expect(call?.name).toBe("agent.tool_call");
    expect(call?.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search",
      "selfheal.agent.name": "test-agent",
    });
    expect(call?.attributes).not.toHaveProperty("selfheal.tool.name");
    expect(call?.attributes).not.toHaveProperty("gen_ai.agent.name");
    for (const span of spans.filter((s) => s !== call)) {
      expect(span.attributes, span.name).toMatchObject({
        "selfheal.agent.name": "test-agent",
        "selfheal.tool.name": "search",
      });
      expect(genAiKeys(span.attributes), span.name).toEqual([]);
    }
    // Every failed span says its error class: each error child and the recovery attempt that failed.
    const failed = spans.filter((s) => s.status.code === SpanStatusCode.ERROR);
    expect(failed.map((s) => s.name).sort()).toEqual([
      "agent.recovery",
      "agent.tool_call.error",
      "agent.tool_call.error",
    ]);
    for (const span of failed) expect(span.attributes["error.type"], span.name).toBe("Error");
    const recoveries = spans.filter((s) => s.name === "agent.recovery");
    expect(recoveries.map((s) => s.attributes["selfheal.recovery.outcome"]).sort()).toEqual([
      "failure",
      "success",
    ]);
    const answered = recoveries.find(
      (s) => s.attributes["selfheal.recovery.outcome"] === "success",
    );
    expect(answered?.attributes).not.toHaveProperty("error.type");
  });

  it("a call that fails has error.type on its own span; a plain tool records no GenAI metric", async () => {
    const { meterProvider, points } = histograms();
    const { sh, clock } = recoveryInstance(otel.provider, { plans: {} }, { meterProvider });
    const pay = sh.tool("pay", { readOnly: true }, () => {
      throw new TypeError("bad card");
    });
    await expect(clock.run(pay(undefined))).rejects.toThrow("bad card");
    const call = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(call?.status.code).toBe(SpanStatusCode.ERROR);
    expect(call?.attributes["error.type"]).toBe("TypeError");
    expect(call?.attributes["gen_ai.operation.name"]).toBe("execute_tool");
    expect(await points(METRIC_GEN_AI_OPERATION_DURATION)).toEqual([]);
  });
});

describe("a model call (kind llm): the GenAI client span attributes and metrics", () => {
  it("fails over: the span ends with the answering route's request and tokens; a duration point per request", async () => {
    const { meterProvider, points } = histograms();
    const { sh, clock } = recoveryInstance(otel.provider, ROUTES, { meterProvider });
    const answer = sh.tool(
      "answer",
      { readOnly: true, kind: "llm", providers: ["primary", "backup"] },
      async (_: undefined, ctx) => {
        await clock.sleep(ctx.provider === "primary" ? 200 : 700);
        if (ctx.provider === "primary") throw down();
        ctx.reportUsage({ inputTokens: 120, outputTokens: 30 });
        ctx.reportModel({ responseModel: "model-b-2025-01" });
        return "hello";
      },
    );
    await expect(clock.run(answer(undefined), { stepMs: 100 })).resolves.toBe("hello");

    const call = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(call?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "backup",
      "gen_ai.request.model": "model-b",
      "gen_ai.response.model": "model-b-2025-01",
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 30,
      "selfheal.tool.name": "answer",
      "selfheal.call.outcome": "recovered",
    });
    // A model call is no tool execution: no tool name for GenAI backends to count.
    expect(call?.attributes).not.toHaveProperty("gen_ai.tool.name");
    expect(call?.attributes).not.toHaveProperty("gen_ai.request.stream");

    const durations = await points(METRIC_GEN_AI_OPERATION_DURATION);
    const chat = { agent: "test-agent", tool: "answer", "gen_ai.operation.name": "chat" };
    expect(durations).toEqual([
      {
        attributes: {
          ...chat,
          "gen_ai.provider.name": "primary",
          "gen_ai.request.model": "model-a",
          "error.type": "Error",
        },
        count: 1,
        sum: 0.2,
      },
      {
        attributes: {
          ...chat,
          "gen_ai.provider.name": "backup",
          "gen_ai.request.model": "model-b",
          "gen_ai.response.model": "model-b-2025-01",
        },
        count: 1,
        sum: 0.7,
      },
    ]);
    const tokens = await points(METRIC_GEN_AI_TOKEN_USAGE);
    expect(tokens.map((p) => [p.attributes["gen_ai.token.type"], p.sum])).toEqual([
      ["input", 120],
      ["output", 30],
    ]);
    for (const p of tokens) expect(p.attributes).toMatchObject(durations[1]?.attributes ?? {});
  });

  it("what the client reports wins: operation, provider, models; a first-call failure keeps the primary's", async () => {
    const { meterProvider, points } = histograms();
    const { sh, clock } = recoveryInstance(
      otel.provider,
      { ...ROUTES, plans: {} },
      { meterProvider },
    );
    let fail = false;
    const generate = sh.tool(
      "generate",
      { readOnly: true, kind: "llm", provider: "primary" },
      (_: undefined, ctx) => {
        ctx.reportModel({
          operation: "generate_content",
          provider: "gcp.gemini",
          requestModel: "gemini-2.5-flash",
        });
        if (fail) throw Object.assign(new Error("bad request"), { name: "ApiError", status: 400 });
        ctx.reportModel({ responseModel: "gemini-2.5-flash-001" });
        return "hi";
      },
    );
    await clock.run(generate(undefined));
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "generate_content",
      "gen_ai.provider.name": "gcp.gemini",
      "gen_ai.request.model": "gemini-2.5-flash",
      "gen_ai.response.model": "gemini-2.5-flash-001",
    });
    otel.reset();
    fail = true;
    await expect(clock.run(generate(undefined))).rejects.toThrow("bad request");
    const [span] = otel.spans().filter((s) => s.name === "agent.tool_call");
    expect(span?.attributes).toMatchObject({
      "gen_ai.operation.name": "generate_content",
      "gen_ai.request.model": "gemini-2.5-flash",
      "error.type": "ApiError",
    });
    expect(span?.attributes).not.toHaveProperty("gen_ai.response.model");
    const durations = await points(METRIC_GEN_AI_OPERATION_DURATION);
    expect(durations.map((p) => p.attributes["error.type"])).toEqual([undefined, "ApiError"]);
  });

  it("an operation set on the call (its attributes) stays unless an attempt reports one", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, { ...ROUTES, plans: {} });
    const generate = sh.tool(
      "generate",
      { readOnly: true, kind: "llm", provider: "primary" },
      () => "hi",
    );
    await clock.run(
      generate(undefined, { attributes: { "gen_ai.operation.name": "generate_content" } }),
    );
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "generate_content",
      "gen_ai.request.model": "model-a",
    });
  });

  it("a call the caller aborted before its model call ran names the primary route's model", async () => {
    const { meterProvider, points } = histograms();
    const { sh, clock } = recoveryInstance(
      otel.provider,
      { ...ROUTES, plans: {} },
      { meterProvider },
    );
    const answer = sh.tool("answer", { readOnly: true, kind: "llm", provider: "primary" }, () => {
      throw down();
    });
    const aborted = new AbortController();
    aborted.abort(new Error("caller gone"));
    await expect(clock.run(answer(undefined, { signal: aborted.signal }))).rejects.toThrow(
      "caller gone",
    );
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "primary",
      "gen_ai.request.model": "model-a",
    });
    // No request was sent: no operation to time.
    expect(await points(METRIC_GEN_AI_OPERATION_DURATION)).toEqual([]);
  });

  it("reported names are outside text: one line, cut to 128 characters; junk reports are ignored", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, { plans: {} });
    const answer = sh.tool("answer", { readOnly: true, kind: "llm" }, (_: undefined, ctx) => {
      ctx.reportModel({ responseModel: `evil\n\u001b[31m${"m".repeat(500)}` });
      ctx.reportModel(null as never);
      ctx.reportModel({ requestModel: 42 as never, provider: "" });
      ctx.reportModel(
        Object.defineProperty({}, "operation", {
          get: () => {
            throw new Error("hostile getter");
          },
          enumerable: true,
        }),
      );
      return "hi";
    });
    await clock.run(answer(undefined));
    const attributes = otel.spans()[0]?.attributes ?? {};
    const model = String(attributes["gen_ai.response.model"]);
    expect(model.includes("\n") || model.includes("\u001b")).toBe(false);
    expect(model.startsWith("evil\\n")).toBe(true);
    expect(model.length).toBeLessThanOrEqual(128 + 8); // the escapes of the cut text
    expect(attributes["gen_ai.operation.name"]).toBe("chat");
    expect(attributes).not.toHaveProperty("gen_ai.request.model");
    expect(attributes).not.toHaveProperty("gen_ai.provider.name");
  });
});

/** A chunk: metadata (no token), a token, or the end. */
type Chunk = { meta: true } | { text: string } | { finish: string; tokens: number };
const FORMAT: StreamFormat<Chunk> = {
  read: (c): ChunkInfo | undefined =>
    "meta" in c
      ? undefined
      : "text" in c
        ? { token: true, answer: true }
        : { finishReason: c.finish, outputTokens: c.tokens },
  completion: "finish",
};

async function* paced(clock: VirtualClock, signal: AbortSignal): AsyncGenerator<Chunk> {
  await clock.sleep(100, signal);
  yield { meta: true };
  await clock.sleep(200, signal);
  yield { text: "hel" };
  await clock.sleep(50, signal);
  yield { text: "lo" };
  yield { finish: "stop", tokens: 2 };
}

describe("a streamed model call", () => {
  it("gen_ai.request.stream, the time to first chunk (any chunk) in seconds, finish reasons and the tokens", async () => {
    const { meterProvider, points } = histograms();
    const { sh, clock } = recoveryInstance(otel.provider, { plans: {} }, { meterProvider });
    const chat = sh.stream("chat", { readOnly: true, format: FORMAT }, (_: undefined, ctx) =>
      paced(clock, ctx.signal),
    );
    const read = async () => {
      const chunks: Chunk[] = [];
      for await (const c of chat(undefined)) chunks.push(c);
      return chunks;
    };
    await expect(clock.run(read(), { stepMs: 50 })).resolves.toHaveLength(4);
    const attributes = otel.spans()[0]?.attributes;
    expect(attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.stream": true,
      "gen_ai.response.time_to_first_chunk": 0.1,
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.usage.output_tokens": 2,
      "selfheal.stream.first_token_ms": 300,
      "selfheal.tool.name": "chat",
    });
    expect(attributes).not.toHaveProperty("gen_ai.tool.name");
    // The request lasts until the stream completes.
    const [duration] = await points(METRIC_GEN_AI_OPERATION_DURATION);
    expect(duration?.sum).toBeCloseTo(0.35, 5);
  });

  it("a plain tool's stream (kind tool) is a tool execution: no model attributes", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, { plans: {} });
    const feed = sh.stream(
      "feed",
      { readOnly: true, kind: "tool", format: FORMAT },
      (_: undefined, ctx) => paced(clock, ctx.signal),
    );
    const read = async () => {
      for await (const c of feed(undefined)) expect(c).toBeDefined();
    };
    await clock.run(read(), { stepMs: 50 });
    const attributes = otel.spans()[0]?.attributes ?? {};
    expect(genAiKeys(attributes).sort()).toEqual(["gen_ai.operation.name", "gen_ai.tool.name"]);
    expect(attributes["gen_ai.operation.name"]).toBe("execute_tool");
    expect(attributes["selfheal.stream.first_token_ms"]).toBe(300);
  });
});
