/**
 * Which attempts count as model spend (src/engine/attempt.ts): an LLM tool's, or any tool's that
 * reports tokens; a priced API that is not a model (payments) is not model spend.
 */
import { describe, expect, it } from "vitest";
import type { CallContext } from "../../src/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { recordingMeters } from "../helpers/otel.js";

const COST = "selfheal_llm_cost_usd";

async function spend(kind: "llm" | undefined, report?: (ctx: CallContext) => void) {
  const meters = recordingMeters();
  const { sh } = virtualInstance({
    meterProvider: meters.meterProvider,
    recovery: { providers: [{ name: "p", model: "m-1", usdPerCall: 0.02 }] },
  });
  const t = sh.tool(
    "t",
    { readOnly: true, providers: ["p"], ...(kind && { kind }) },
    (_: undefined, ctx: CallContext) => {
      report?.(ctx);
      return "ok";
    },
  );
  await t(undefined);
  const points = await meters.read();
  await meters.shutdown();
  return {
    cost: points.get(`${COST}{agent=test-agent,tool=t,provider=p,model=m-1}`),
    tokens: [...points.keys()].filter((k) => k.startsWith("gen_ai.client.token.usage")),
  };
}

describe("model spend", () => {
  it("an LLM tool's attempt is model spend at the route's price, with no tokens reported", async () => {
    expect(await spend("llm")).toEqual({ cost: 0.02, tokens: [] });
  });

  it("a priced tool that is not a model is not model spend", async () => {
    expect(await spend(undefined)).toEqual({ cost: undefined, tokens: [] });
  });

  it("a tool that reports tokens is a model call: its tokens and its cost", async () => {
    const { cost, tokens } = await spend(undefined, (ctx) => {
      ctx.reportUsage({ inputTokens: 10 });
    });
    expect(cost).toBe(0.02);
    expect(tokens).toEqual([
      "gen_ai.client.token.usage{agent=test-agent,tool=t,gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m-1,gen_ai.token.type=input}",
    ]);
  });
});
