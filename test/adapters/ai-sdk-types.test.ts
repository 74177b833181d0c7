/**
 * The adapter's public types against both AI SDKs' own: its results fit where AI SDK 6 and AI
 * SDK 7 take a model, a tool set and a middleware, with their own models (v3, v4) and tool
 * options. `tsc --noEmit` is the test (this file imports types only: it runs on any Node).
 */
import type { LanguageModelV2, LanguageModelV3 } from "@ai-sdk/provider";
import type { LanguageModelV4 } from "@ai-sdk/provider4";
import type * as Ai6 from "ai";
import type * as Ai7 from "ai7";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  callContextOf,
  healModel,
  healTools,
  selfHealMiddleware,
  type LanguageModel,
} from "../../src/adapters/ai-sdk.js";
import type { SelfHealing } from "../../src/index.js";

interface Sdks {
  ai6: typeof Ai6;
  ai7: typeof Ai7;
}

/** AI SDK 6: v3 models, its ToolSet, its LanguageModelMiddleware. */
function fitsAiSdk6(sh: SelfHealing, { ai6 }: Sdks, model: LanguageModelV3, tools: Ai6.ToolSet) {
  const healed: Ai6.LanguageModel = healModel(sh, model, { fallback: { provider: "b", model } });
  void ai6.generateText({ model: healed, tools: healTools(sh, tools), prompt: "?" });
  ai6.wrapLanguageModel({ model, middleware: [selfHealMiddleware(sh)] });
  ai6.tool({
    inputSchema: z.object({ q: z.string() }),
    execute: (_input, options) => callContextOf(options)?.attempt,
  });
}

/** AI SDK 7: v4 models (and v3 ones, which it still takes), its ToolSet, its middleware. */
function fitsAiSdk7(
  sh: SelfHealing,
  { ai7 }: Sdks,
  model: LanguageModelV4,
  older: LanguageModelV3,
  tools: Ai7.ToolSet,
) {
  const healed: Ai7.LanguageModel = healModel(sh, model, { fallback: [model] });
  void ai7.generateText({ model: healed, tools: healTools(sh, tools), prompt: "?" });
  void ai7.streamText({ model: healModel(sh, older), prompt: "?" });
  ai7.wrapLanguageModel({ model, middleware: selfHealMiddleware(sh) });
  ai7.tool({
    inputSchema: z.object({ q: z.string() }),
    execute: (_input, options) => callContextOf(options)?.attempt,
  });
}

/** The adapter's own model type is either specification's; AI SDK 5's v2 is not one. */
function models(sh: SelfHealing, v2: LanguageModelV2, v3: LanguageModelV3, v4: LanguageModelV4) {
  const accepted: LanguageModel[] = [v3, v4];
  // @ts-expect-error AI SDK 5 models (v2) are not healed
  healModel(sh, v2);
  return accepted;
}

describe("selfheal/ai-sdk types", () => {
  it("fit AI SDK 6's and AI SDK 7's models, tool sets and middleware (checked by tsc)", () => {
    expect([fitsAiSdk6, fitsAiSdk7, models].every((f) => typeof f === "function")).toBe(true);
  });
});
