/**
 * selfheal with the Vercel AI SDK: heal an agent's tools and model calls in one line each, then
 * watch a rate limit recovered, an empty answer failed over to a second model, and a write
 * refused once an outage made the agent read-only. Mock models, no API key, no network.
 * Runs with `ai` 6 or 7 installed (7 on Node 22+). AI SDK 7 opens no `ai.*` spans of its own
 * (OpenTelemetry moved to @ai-sdk/otel): there selfheal's spans are the roots of the tree.
 * Run: npx tsx examples/ai-sdk.ts
 */
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { createSelfHealing, HttpResponseError } from "selfheal";
import { healModel, healTools } from "selfheal/ai-sdk";
import { z } from "zod";

// An OpenTelemetry SDK keeping spans in memory; each run prints its span tree.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
// AI SDK 6 opens its spans on this tracer; AI SDK 7 ignores `tracer` (@ai-sdk/otel takes it).
const telemetry = { isEnabled: true, tracer: tracerProvider.getTracer("ai") };

// --- the setup ---------------------------------------------------------------------------------
const sh = createSelfHealing({
  agent: "support-bot",
  tracerProvider,
  recovery: { providers: [{ name: "acme" }, { name: "backup" }] },
});
sh.on("diagnosis", (d) => {
  console.log(`diagnosis ${d.tool}: ${d.pattern}`);
});
sh.on("recovery", (e) => {
  const steps = e.steps.map((s) => (s.skipped ? `${s.strategy} (skipped)` : s.strategy));
  console.log(`recovery ${e.tool}: ${steps.join(" -> ")} => ${e.outcome}`);
});

let searches = 0;
let ordersUp = true;
const tools = healTools(
  sh,
  {
    search_docs: tool({
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
    lookup_order: tool({
      description: "Reads an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => {
        if (!ordersUp) throw new HttpResponseError(503, new Headers(), "unavailable", "orders");
        return { orderId, status: "delivered" };
      },
    }),
    issue_refund: tool({
      description: "Refunds an order",
      inputSchema: z.object({ orderId: z.string() }),
      execute: ({ orderId }) => `refunded ${orderId}`,
    }),
  },
  { readOnly: ["search_docs", "lookup_order"] }, // issue_refund writes: refused while unhealthy
);

// Mock models answering from a script (an empty string is an empty answer).
type Turn = string | [tool: string, input: object];
function mockModel(provider: string, modelId: string, script: Turn[]) {
  let next = 0;
  return new MockLanguageModelV3({
    provider,
    modelId,
    doGenerate: () => {
      const turn = script[Math.min(next++, script.length - 1)] ?? "";
      const usage = {
        inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: turn === "" ? 0 : 10, text: undefined, reasoning: undefined },
      };
      const content =
        typeof turn === "string"
          ? turn === ""
            ? []
            : [{ type: "text" as const, text: turn }]
          : [
              {
                type: "tool-call" as const,
                toolCallId: `call-${next}`,
                toolName: turn[0],
                input: JSON.stringify(turn[1]),
              },
            ];
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

/** What selfheal wrote on a span, briefly. */
function facts(span: ReadableSpan): string {
  const a = span.attributes;
  const shown: [string, unknown][] = [
    ["tool", a["gen_ai.tool.name"] ?? a["selfheal.tool.name"]],
    ["outcome", a["selfheal.call.outcome"]],
    ["pattern", a["selfheal.diagnosis.pattern"]],
    ["strategy", a["selfheal.recovery.strategy"]],
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

/** The tool errors the model was shown (the SDK reports them as tool-error parts). */
function printToolErrors(steps: { content: { type: string }[] }[]): void {
  for (const part of steps.flatMap((s) => s.content)) {
    if (part.type !== "tool-error") continue;
    const { toolName, error } = part as { type: string; toolName?: string; error?: unknown };
    const e = error instanceof Error ? error : new Error(String(error));
    console.log(`  tool-error ${String(toolName)}: ${e.name}: ${e.message}`);
  }
}

// --- 1. a throttled tool: the 429 is retried after its Retry-After, the model gets the answer ---
console.log("\n1. search_docs is rate-limited once");
const first = await generateText({
  model: healModel(
    sh,
    mockModel("acme", "acme-large", [
      ["search_docs", { query: "refunds" }],
      "Refunds take 5 days.",
    ]),
  ),
  prompt: "How long do refunds take?",
  tools,
  stopWhen: stepCountIs(3),
  maxRetries: 0, // selfheal retries; the SDK's own retries would run around it
  experimental_telemetry: telemetry,
});
printSpans();
console.log(`answer: ${first.text}`);

// --- 2. an empty answer from the primary model: failover to the second one ---------------------
console.log("\n2. the primary model answers with nothing");
const model = healModel(sh, mockModel("acme", "acme-small", [""]), {
  fallback: mockModel("backup", "backup-large", ["Paris."]),
  plans: { EMPTY_LLM_RESPONSE: ["failover_to_secondary"] }, // no backoff on the empty model
});
const second = await generateText({ model, prompt: "Capital of France?", maxRetries: 0 });
console.log(
  `model answered after failover: ${second.response.modelId === "backup-large" ? "backup" : "primary"}: ${second.text}`,
);

// --- 3. the orders service goes down: the agent turns read-only, the refund is refused ---------
console.log("\n3. the orders service is down, then the model asks for a refund");
ordersUp = false;
const third = await generateText({
  model: healModel(
    sh,
    mockModel("acme", "acme-agent", [
      ["lookup_order", { orderId: "A-42" }],
      ["issue_refund", { orderId: "A-42" }],
      "I could not refund A-42 right now.",
    ]),
  ),
  prompt: "Refund order A-42",
  tools,
  stopWhen: stepCountIs(4),
  maxRetries: 0,
});
printToolErrors(third.steps);
const status = await sh.status();
console.log(`status: ${status.status}, read-only ${String(status.readOnly)}`);
console.log(`answer: ${third.text}`);
await sh.close();
