// AI SDK 7 opens its spans only through the `@ai-sdk/otel` integration (`registerTelemetry(new
// OpenTelemetry())`), named by the GenAI conventions: `invoke_agent`, `chat {model}`,
// `execute_tool {tool}`. These cases run selfheal/ai-sdk under it: `attach` writes on those spans,
// never on another tool's, and health from them counts each call once.
import { context, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { healModel, healTools } from "../../src/adapters/ai-sdk.js";
import { HttpResponseError, type AgentStatus, type HealthSpanProcessor } from "../../src/index.js";
import { recoveryInstance } from "../helpers/engine.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import * as fixtures from "../fixtures/adapters/ai-sdk-models.js";
import { textTurn, toolTurn } from "../fixtures/adapters/ai-sdk-models.js";
import { aiSdks } from "../fixtures/adapters/ai-sdk-versions.js";

/** AI SDK 7 where it runs (Node 22+); on an older Node, none (aiSdks() says so). */
const SDK_7 = (await aiSdks()).filter((s) => s.major === 7);

/** The span processor of the instance under test, fed every span of the recording provider. */
const target: { health?: HealthSpanProcessor } = {};
const otel = recordingProvider([
  {
    onStart: (span) => target.health?.onStart(span),
    onEnd: (span) => target.health?.onEnd(span),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  },
]);

function setup() {
  otel.reset();
  const instance = recoveryInstance(otel.provider, {}, { health: { cacheMs: 0 } });
  target.health = instance.sh.spanProcessor();
  return instance;
}

const only = (name: string): ReadableSpan => {
  const spans = otel.named(name);
  expect(spans).toHaveLength(1);
  return spans[0] as ReadableSpan;
};

const samples = (report: AgentStatus, tool: string) =>
  report.tools[tool]?.signals.find((s) => s.signal === "success_rate")?.samples;

for (const sdk of SDK_7)
  describe(`${sdk.name} with @ai-sdk/otel (GenAI span names)`, () => {
    const { generateText, stepCountIs, tool } = sdk.ai;
    type Registry = { AI_SDK_TELEMETRY_INTEGRATIONS?: unknown[] };

    beforeAll(async () => {
      const [{ OpenTelemetry }, ai] = await Promise.all([import("@ai-sdk/otel"), import("ai7")]);
      ai.registerTelemetry(new OpenTelemetry({ tracer: otel.provider.getTracer("gen_ai") }));
    });
    afterAll(() => {
      // The SDK keeps registered integrations on globalThis.
      (globalThis as Registry).AI_SDK_TELEMETRY_INTEGRATIONS = [];
    });

    const searchTool = (answer: () => unknown) =>
      tool({
        description: "Searches the docs",
        inputSchema: z.object({ query: z.string() }),
        execute: answer,
      });

    /** One generateText run of a healed model and tool (a 503, then found); its counts of health. */
    async function healedRun(spans: "child" | "attach") {
      const { sh, clock } = setup();
      let calls = 0;
      const tools = healTools(
        sh,
        {
          search_docs: searchTool(() => {
            if (++calls === 1)
              throw new HttpResponseError(503, new Headers(), "busy", "https://d.test");
            return "found";
          }),
        },
        { readOnly: ["search_docs"], spans },
      );
      const model = healModel(
        sh,
        fixtures.scriptedModel(
          [toolTurn(["search_docs", { query: "q" }, "c9"]), textTurn("ok")],
          { modelId: "mock-large" },
          sdk,
        ),
        { spans },
      );
      const run = generateText({ model, prompt: "?", tools, stopWhen: stepCountIs(3) });
      await clock.run(run, { stepMs: 100 });
      const report = await sh.status();
      return {
        tool: samples(report, "search_docs"),
        model: samples(report, "mock-large"),
        tools: Object.keys(report.tools).sort(),
      };
    }

    it('spans: "attach" writes on execute_tool {tool} and chat {model}: no second span, error, diagnosis and recovery under them', async () => {
      const counts = await healedRun("attach");
      expect(otel.named("agent.tool_call")).toHaveLength(0);
      const recovered = ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"];
      expect(tree(otel.spans())).toEqual([
        {
          "invoke_agent mock-large": [
            { "step 1": ["chat mock-large", { "execute_tool search_docs": recovered }] },
            { "step 2": ["chat mock-large"] },
          ],
        },
      ]);
      expect(only("execute_tool search_docs").attributes).toMatchObject({
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "c9",
        "selfheal.call.outcome": "recovered",
      });
      for (const chat of otel.named("chat mock-large"))
        expect(chat.attributes).toMatchObject({ "selfheal.call.outcome": "success" });
      // Health counts selfheal's own records, never the spans it wrote on again: as with `child`.
      expect(counts).toEqual(await healedRun("child"));
      expect(tree(otel.spans())).toEqual([
        {
          "invoke_agent mock-large": [
            {
              "step 1": [
                { "chat mock-large": ["agent.tool_call"] },
                { "execute_tool search_docs": [{ "agent.tool_call": recovered }] },
              ],
            },
            { "step 2": [{ "chat mock-large": ["agent.tool_call"] }] },
          ],
        },
      ]);
    });

    it('spans: "attach" names no tool on chat {model}: a model call is not a tool (GenAI conventions name one on execute_tool only)', async () => {
      await healedRun("attach");
      const chats = otel.named("chat mock-large");
      expect(chats).toHaveLength(2);
      for (const chat of chats) {
        expect(chat.attributes).toMatchObject({
          "gen_ai.operation.name": "chat",
          "gen_ai.request.model": "mock-large",
          "selfheal.call.outcome": "success",
        });
        expect(chat.attributes).not.toHaveProperty("gen_ai.tool.name");
      }
      expect(only("execute_tool search_docs").attributes).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
      });
    });

    it("never writes on another tool's execute_tool span: the call opens its own under it", async () => {
      const { sh } = setup();
      const tools = healTools(
        sh,
        { search_docs: searchTool(() => "found") },
        { readOnly: ["search_docs"], spans: "attach" },
      );
      const execute = tools.search_docs.execute as (input: unknown, options: unknown) => unknown;
      const other = otel.provider.getTracer("gen_ai").startSpan("execute_tool refund_order");
      await context.with(trace.setSpan(context.active(), other), () =>
        execute({ query: "q" }, { toolCallId: "c1", messages: [] }),
      );
      other.end();
      expect(tree(otel.spans())).toEqual([{ "execute_tool refund_order": ["agent.tool_call"] }]);
      expect(only("execute_tool refund_order").attributes).toEqual({});
    });

    it("zero code: the integration's execute_tool and chat spans feed health, nothing wrapped", async () => {
      const { sh } = setup();
      let calls = 0;
      const tools = {
        flaky_search: searchTool(() => {
          if (++calls <= 2) throw new Error("search backend timed out");
          return "found";
        }),
      };
      const searches = Array.from(
        { length: 10 },
        (_, i) => ["flaky_search", { query: `q${i}` }, `c${i}`] as [string, unknown, string],
      );
      await generateText({
        model: fixtures.scriptedModel(
          [toolTurn(...searches), textTurn("")],
          { modelId: "m7" },
          sdk,
        ),
        prompt: "search",
        tools,
        stopWhen: stepCountIs(2),
      });
      const report = await sh.status();
      const success = report.tools["flaky_search"]?.signals.find(
        (s) => s.signal === "success_rate",
      );
      expect(success).toMatchObject({ value: 0.8, samples: 10 });
      // The model's calls under its id, as a healed model's are.
      expect(samples(report, "m7")).toBe(2);
    });
  });
