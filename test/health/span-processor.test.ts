import { SpanStatusCode } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { recordingProvider } from "../helpers/otel.js";
import { virtualInstance } from "../helpers/engine.js";

describe("HealthSpanProcessor", () => {
  it("feeds per-tool health from foreign GenAI execute_tool and chat spans, and skips selfheal's own; status() lists foreign and wrapped tools", async () => {
    const { sh, clock } = virtualInstance();
    const otel = recordingProvider([sh.spanProcessor()]);
    const tracer = otel.provider.getTracer("ai-sdk");
    sh.tool("own", { readOnly: true }, () => 1);
    // Ten foreign tool calls, four failing, as the AI SDK or Mastra would emit them.
    for (let i = 0; i < 10; i++) {
      const span = tracer.startSpan("execute_tool weather", {
        attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather" },
      });
      if (i < 4) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
    // Twenty chat spans, five with zero output tokens (empty answers).
    for (let i = 0; i < 20; i++) {
      tracer
        .startSpan("chat gpt-4o", {
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.output_tokens": i < 5 ? 0 : 120,
          },
        })
        .end();
    }
    // Not GenAI: ignored.
    tracer.startSpan("GET /health").end();
    // selfheal's own span through the same provider: counted once, by the wrapper.
    const own = virtualInstance({ tracerProvider: otel.provider });
    await own.sh.tool("own", { readOnly: true }, () => 1)(undefined);

    await clock.advance(5_000);
    const report = await sh.status();
    expect(report.tools.weather?.signals[0]).toMatchObject({
      signal: "success_rate",
      value: 0.6,
      samples: 10,
    });
    expect(
      report.tools["chat gpt-4o"]?.signals.find((s) => s.signal === "empty_response_rate"),
    ).toMatchObject({
      value: 0.25,
      status: "critical",
    });
    // The tool wrapped here is listed (with its circuit) but has no calls: the other instance's
    // span of a tool with the same name was counted by that instance only.
    expect(report.tools.own).toEqual({
      status: "healthy",
      signals: [],
      circuits: { own: "closed" },
    });
    expect(Object.keys(report.tools).sort()).toEqual(["chat gpt-4o", "own", "weather"]);
  });
});
