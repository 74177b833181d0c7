/**
 * selfheal with the OpenAI Agents SDK: heal an agent's tools in one line, watch a 429 be
 * recovered inside a real run, then a failing tool the agent never healed drive it critical
 * (through the SDK's own traces) and a write be refused. A scripted model, no key, no network.
 * Run: npx tsx examples/openai-agents.ts
 */
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ExportResultCode } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import {
  Agent,
  run,
  setTraceProcessors,
  setTracingDisabled,
  tool,
  type AgentInputItem,
} from "@openai/agents";
import {
  ScriptedModel,
  assistantMessage,
  functionCall,
  modelResponder,
} from "@openai/agents/testing";
import { z } from "zod";
import { createSelfHealing, HttpResponseError } from "selfheal";
import { healTools, healthTraceProcessor } from "selfheal/openai-agents";

// An OpenTelemetry SDK that prints one line per finished span (as in examples/quickstart.ts).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of spans) {
      const a = s.attributes;
      const depth = s.parentSpanContext ? "    " : "";
      console.log(
        `${depth}span ${s.name}  tool=${String(a["gen_ai.tool.name"] ?? a["selfheal.tool.name"] ?? "")} outcome=${String(a["selfheal.call.outcome"] ?? "-")}`,
      );
    }
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(printer)],
});

// cacheMs: 0 re-evaluates health on every read and minSamples: 3 judges after three calls, so
// the demo shows a change at once (defaults: 5 s and 10 calls).
const sh = createSelfHealing({
  agent: "support-bot",
  tracerProvider,
  health: { cacheMs: 0, successRate: { minSamples: 3 } },
});
sh.on("diagnosis", (d) => {
  console.log(`diagnosis ${d.tool}: ${d.pattern} (rule ${d.rule})`);
});
sh.on("recovery", (e) => {
  console.log(`recovery ${e.tool}: ${e.steps.map((s) => s.strategy).join(" -> ")} => ${e.outcome}`);
});
// The SDK's spans feed selfheal's health; this also replaces the SDK's default exporter to
// OpenAI's trace ingest (keep it with addTraceProcessor instead when you use it).
setTraceProcessors([healthTraceProcessor(sh)]);
setTracingDisabled(false); // the SDK turns its tracing off under NODE_ENV=test

// --- the tools, as the Agents SDK defines them -----------------------------------------------
// errorFunction: null lets a tool's error reach selfheal (the SDK's default turns it into text).
let searches = 0;
const searchDocs = tool({
  name: "search_docs",
  description: "Searches the help center",
  parameters: z.object({ query: z.string() }),
  errorFunction: null,
  execute: ({ query }) => {
    // The docs API throttles the first request: 429 with Retry-After: 1 (seconds).
    if (++searches === 1) {
      throw new HttpResponseError(429, new Headers({ "retry-after": "1" }), "", "https://docs");
    }
    return `3 articles about ${query}`;
  },
});
const issueRefund = tool({
  name: "issue_refund",
  description: "Refunds an order",
  parameters: z.object({ orderId: z.string() }),
  errorFunction: null,
  execute: ({ orderId }) => `refunded ${orderId}`,
});
// A tool this agent does not heal: its failures still count, through the SDK's traces.
const checkInventory = tool({
  name: "check_inventory",
  description: "Checks stock",
  parameters: z.object({ sku: z.string() }),
  execute: () => {
    throw new Error("warehouse API down");
  },
});

// --- the one line ----------------------------------------------------------------------------
const tools = [
  ...healTools(sh, [searchDocs, issueRefund], { readOnly: ["search_docs"] }),
  checkInventory,
];

/** The text of the tool results the model was sent. */
const results = (input: string | AgentInputItem[]) =>
  (typeof input === "string" ? [] : input).flatMap((item) =>
    item.type === "function_call_result" && typeof item.output === "object"
      ? [String((item.output as { text?: unknown }).text)]
      : [],
  );

// A scripted model stands in for the LLM: it asks for tools, then answers with their results.
const model = new ScriptedModel([
  [functionCall("search_docs", { query: "refund policy" }, { callId: "call_1" })],
  modelResponder(({ request }) => [assistantMessage(results(request.input).join(" | "))]),
  [1, 2, 3].map((i) =>
    functionCall("check_inventory", { sku: `sku-${i}` }, { callId: `inv_${i}` }),
  ),
  [functionCall("issue_refund", { orderId: "A-42" }, { callId: "call_9" })],
  modelResponder(({ request }) => [assistantMessage(results(request.input).at(-1) ?? "")]),
]);
const agent = new Agent({ name: "support", instructions: "Help the customer.", model, tools });

const first = await run(agent, "What is your refund policy?");
console.log(`agent: ${String(first.finalOutput)}`);

const second = await run(agent, "Check stock, then refund order A-42.");
console.log(`agent: ${String(second.finalOutput)}`);

const report = await sh.status();
console.log(
  `status: ${report.status} (read-only ${String(report.readOnly)}; check_inventory ${report.tools.check_inventory?.status ?? "n/a"})`,
);
await sh.close();
