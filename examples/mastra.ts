/**
 * selfheal with Mastra: heal an Agent's tools and its model in one line each, then watch a
 * throttled tool recovered after its Retry-After, a model's 429 from a real (local) server sent
 * again after its Retry-After, and a write refused once an outage made the agent critical.
 * Scripted models and a fake OpenAI-compatible server on 127.0.0.1: no API key, no network.
 * Mastra needs Node 22.13+.
 * Run: npx tsx examples/mastra.ts
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { MockLanguageModelV3 } from "ai/test";
import { createSelfHealing, HttpResponseError } from "selfheal";
import { healModel, healTools } from "selfheal/mastra";
import { startFakeProvider } from "selfheal/testing";
import { z } from "zod";

// An OpenTelemetry SDK keeping spans in memory; each run prints its span tree.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});

// --- the setup ---------------------------------------------------------------------------------
// cacheMs: 0 re-evaluates health on every read and minSamples: 3 judges after three calls, so
// the demo shows a change at once (defaults: 5 s and 10 calls).
const sh = createSelfHealing({
  agent: "support-bot",
  tracerProvider,
  health: { cacheMs: 0, successRate: { minSamples: 3 } },
});
sh.on("diagnosis", (d) => {
  const wait = d.retryAfterMs === undefined ? "" : ` (retry after ${d.retryAfterMs} ms)`;
  console.log(`diagnosis ${d.tool}: ${d.pattern}${wait}`);
});
sh.on("recovery", (e) => {
  const steps = e.steps.map((s) => (s.skipped ? `${s.strategy} (skipped)` : s.strategy));
  console.log(`recovery ${e.tool}: ${steps.join(" -> ")} => ${e.outcome}`);
});

// --- the tools, as Mastra defines them ---------------------------------------------------------
let searches = 0;
let ordersUp = true;
const refunds: string[] = [];
const tools = healTools(
  sh,
  {
    search_docs: createTool({
      id: "search-docs",
      description: "Searches the help center",
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => {
        // The first search is throttled: a 429 asking to come back in 1 s.
        if (++searches === 1) {
          const res = new Response("slow down", { status: 429, headers: { "retry-after": "1" } });
          throw await HttpResponseError.from(res);
        }
        return `2 articles about ${query}`;
      },
    }),
    lookup_order: createTool({
      id: "lookup-order",
      description: "Reads an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => {
        if (!ordersUp) throw new HttpResponseError(503, new Headers(), "unavailable", "orders");
        return Promise.resolve({ orderId, status: "delivered" });
      },
    }),
    issue_refund: createTool({
      id: "issue-refund",
      description: "Refunds an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => {
        refunds.push(orderId);
        return Promise.resolve(`refunded ${orderId}`);
      },
    }),
  },
  { readOnly: ["search_docs", "lookup_order"] }, // issue_refund writes: refused while critical
);

// A scripted model (the AI SDK's mock, a v3 model as Mastra takes it): one turn per call, each a
// text or the tool calls to make.
type Turn = string | [tool: string, input: object][];
function scriptedModel(script: Turn[]) {
  let next = 0;
  return new MockLanguageModelV3({
    provider: "scripted",
    modelId: "scripted-model",
    doGenerate: () => {
      const turn = script[Math.min(next++, script.length - 1)] ?? "";
      const usage = {
        inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 10, text: undefined, reasoning: undefined },
      };
      const content =
        typeof turn === "string"
          ? [{ type: "text" as const, text: turn }]
          : turn.map(([toolName, input], i) => ({
              type: "tool-call" as const,
              toolCallId: `call-${next}-${i}`,
              toolName,
              input: JSON.stringify(input),
            }));
      const finish = typeof turn === "string" ? "stop" : "tool-calls";
      return Promise.resolve({
        content,
        finishReason: { unified: finish, raw: finish },
        usage,
        warnings: [],
      });
    },
  });
}

const agentOn = (model: Agent["model"]) =>
  new Agent({
    id: "support",
    name: "Support",
    instructions: "Answer from the help center.",
    model,
    tools,
  });

/** What selfheal wrote on a span, briefly. */
function facts(span: ReadableSpan): string {
  const a = span.attributes;
  const shown: [string, unknown][] = [
    ["tool", a["gen_ai.tool.name"] ?? a["selfheal.tool.name"]],
    ["outcome", a["selfheal.call.outcome"]],
    ["pattern", a["selfheal.diagnosis.pattern"]],
    ["strategy", a["selfheal.recovery.strategy"]],
    ["wait_ms", a["selfheal.recovery.wait_ms"]],
  ];
  return shown
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(" ");
}

/** Prints the spans of the last run as a tree, then forgets them. */
function printSpans(): void {
  const spans = exporter.getFinishedSpans();
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const parentOf = (s: ReadableSpan) => {
    const parent = s.parentSpanContext?.spanId;
    return parent !== undefined && ids.has(parent) ? parent : undefined;
  };
  const print = (parent: ReadableSpan | undefined, depth: number) => {
    const children = spans.filter((s) => parentOf(s) === parent?.spanContext().spanId);
    children.sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
    for (const s of children) {
      const under = parent ? ` under ${parent.name}` : "";
      console.log(`${"  ".repeat(depth)}span ${s.name}${under}  ${facts(s)}`.trimEnd());
      print(s, depth + 1);
    }
  };
  print(undefined, 1);
  exporter.reset();
}

// --- 1. a throttled tool: the 429 is retried after its Retry-After, the model gets the answer ---
console.log("\n1. search_docs is rate-limited once");
const first = await agentOn(
  scriptedModel([[["search_docs", { query: "refunds" }]], "Refunds take 5 days."]),
).generate("How long do refunds take?");
printSpans();
console.log(`answer: ${first.text}`);

// --- 2. the model's provider answers 429 once (a real HTTP server on 127.0.0.1) ----------------
console.log("\n2. the model's provider is rate-limited once");
const server = await startFakeProvider({ reply: "Paris." });
server.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 1 });
const acme = createOpenAICompatible({ name: "acme", baseURL: server.url, apiKey: "sk-fake" });
// The Agent's maxRetries stays at its default 0: selfheal retries, Mastra's would run around it.
const second = await agentOn(healModel(sh, acme.chatModel("acme-large"))).generate(
  "Capital of France?",
);
printSpans();
console.log(`model answered after its rate limit: ${second.text} (${server.requests} requests)`);
await server.close();

// --- 3. the orders service goes down: the agent turns critical, the refund is refused ----------
console.log("\n3. the orders service is down, then the model asks for a refund");
ordersUp = false;
const third = await agentOn(
  scriptedModel([
    [
      ["lookup_order", { orderId: "A-40" }],
      ["lookup_order", { orderId: "A-41" }],
      ["lookup_order", { orderId: "A-42" }],
    ],
    [["issue_refund", { orderId: "A-42" }]],
    "I could not refund A-42 right now.",
  ]),
).generate("Refund order A-42");
for (const step of third.steps) {
  for (const part of step.content) {
    if (part.type === "tool-result" && part.toolName === "issue_refund") {
      const output = part.output as { type: string; value?: unknown };
      console.log(`the model read: ${String(output.value)}`);
    }
  }
}
const status = await sh.status();
console.log(`status: ${status.status}; refunds sent: ${refunds.length}`);
console.log(`answer: ${third.text}`);
await sh.close();
