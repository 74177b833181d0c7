import { describe, expect, it } from "vitest";
import type { CallContext } from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";
import { recordingMeters } from "../helpers/otel.js";

describe("metrics", () => {
  it("counts calls, durations, LLM responses and tasks under the contract's names, with zeroed series", async () => {
    const m = recordingMeters();
    const { sh, clock } = virtualInstance({ meterProvider: m.meterProvider });
    const search = sh.tool("search", { readOnly: true }, async () => {
      await clock.sleep(250);
      return "r";
    });
    const llm = sh.tool("answer", { readOnly: true, kind: "llm", provider: "openai" }, () => "");
    await sh.task("t1", async () => {
      await clock.run(search(undefined));
      await llm(undefined);
    });
    await clock.advance(5_000);
    await sh.status();
    const points = await m.read();
    await m.shutdown();
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=success}")).toBe(1);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=error}")).toBe(0);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=blocked}")).toBe(0);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=recovered}")).toBe(
      0,
    );
    expect(points.get("selfheal_tool_call_duration_seconds{agent=test-agent,tool=search}")).toBe(1);
    expect(points.get("selfheal_llm_responses{agent=test-agent,provider=openai,empty=true}")).toBe(
      1,
    );
    expect(points.get("selfheal_llm_responses{agent=test-agent,provider=openai,empty=false}")).toBe(
      0,
    );
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=completed}")).toBe(1);
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=failed}")).toBe(0);
    expect(points.get("selfheal_health_status{agent=test-agent}")).toBe(0);
  });
});

describe("model spend: token usage (GenAI conventions) and cost per model", () => {
  it("each attempt's tokens by type and its cost by provider and model, recovery's attempts included", async () => {
    const m = recordingMeters();
    const { sh, clock } = virtualInstance({
      meterProvider: m.meterProvider,
      recovery: {
        ...NO_RECOVERY,
        random: () => 0,
        providers: [{ name: "openai", model: "gpt-4o", usdPer1kTokens: 0.01 }],
        plans: { ...NO_RECOVERY.plans, SERVICE_DOWN: ["retry_once"] },
      },
    });
    const answer = sh.tool(
      "answer",
      { readOnly: true, kind: "llm", providers: ["openai"] },
      (_: undefined, ctx: CallContext) => {
        ctx.reportUsage({ inputTokens: 1_200, outputTokens: 300 });
        if (ctx.attempt === 1) throw thrownFault("http_503");
        return "ok";
      },
    );
    const plain = sh.tool("lookup", { readOnly: true }, () => "r"); // no provider: no spend
    await clock.run(answer(undefined)); // the retry's backoff on virtual time
    await plain(undefined);
    const points = await m.read();
    await m.shutdown();
    const labels =
      "agent=test-agent,tool=answer,gen_ai.operation.name=chat,gen_ai.provider.name=openai,gen_ai.request.model=gpt-4o";
    // Two attempts (the failed first and the retry), each a point per token type.
    expect(points.get(`gen_ai.client.token.usage{${labels},gen_ai.token.type=input}`)).toBe(2);
    expect(points.get(`gen_ai.client.token.usage{${labels},gen_ai.token.type=output}`)).toBe(2);
    // 1,500 tokens at $0.01 per 1,000, twice.
    expect(
      points.get(
        "selfheal_llm_cost_usd{agent=test-agent,tool=answer,provider=openai,model=gpt-4o}",
      ),
    ).toBeCloseTo(0.03, 10);
    expect(
      [...points.keys()].filter((k) => k.includes("tool=lookup") && k.startsWith("gen_ai")),
    ).toEqual([]);
  });
});
