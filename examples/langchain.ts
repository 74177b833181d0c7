/**
 * selfheal in a LangChain agent: one middleware heals its tool and model calls. A mock model
 * (no key, no network) drives a real `createAgent` loop while things go wrong: the model's
 * provider is down (failover to a second model), the docs search is rate-limited once (healed
 * after its Retry-After), the orders backend fails (diagnosed, circuit opened, read-only mode, a
 * human alerted), and the refund the model then asks for is refused before it is sent: the model
 * reads each failure as an error ToolMessage, as LangChain shows tool errors.
 * Run: npx tsx examples/langchain.ts
 */
import { ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ExportResultCode } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { createAgent, FakeToolCallingModel } from "langchain";
import { createSelfHealing, HttpResponseError } from "selfheal";
import { selfHealingMiddleware } from "selfheal/langchain";
import { z } from "zod";

// An OpenTelemetry SDK that prints one line per finished span (a call's children end first).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of spans) {
      const a = s.attributes;
      if (s.parentSpanContext) {
        const detail = a["selfheal.diagnosis.pattern"] ?? a["selfheal.recovery.strategy"] ?? "";
        console.log(`    span ${s.name} ${String(detail)}`.trimEnd());
      } else {
        console.log(
          `span ${s.name}  tool=${String(a["gen_ai.tool.name"] ?? a["selfheal.tool.name"])} outcome=${String(a["selfheal.call.outcome"])}`,
        );
      }
    }
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(printer)],
});

const sh = createSelfHealing({
  agent: "support-bot",
  tracerProvider,
  recovery: {
    providers: [{ name: "openai" }, { name: "anthropic" }],
    // A notifier that prints (selfheal/notify has Slack, webhook and Pushover ones).
    notifiers: [
      {
        channel: "console",
        send: (alert) => {
          console.log(`alert: ${alert.title}`);
          return Promise.resolve();
        },
      },
    ],
  },
});
sh.on("diagnosis", (d) => {
  console.log(`diagnosis ${d.tool}: ${d.pattern} (rule ${d.rule})`);
});
sh.on("recovery", (e) => {
  const steps = e.steps.map((s) => (s.skipped ? `${s.strategy} (skipped)` : s.strategy));
  console.log(
    `recovery ${e.tool}: ${steps.join(" -> ")} => ${e.outcome}${e.provider ? ` (${e.provider})` : ""}`,
  );
});

// --- the tools: in process, each failing the way real services fail ----------------------------
let searches = 0;
const searchDocs = tool(
  ({ q }) => {
    if (++searches === 1) {
      // Throttled once, with a Retry-After of 1 s (as fetch + HttpResponseError.from would see it).
      throw new HttpResponseError(429, new Headers({ "retry-after": "1" }), "", "https://docs");
    }
    return `Refunds within 30 days (${q}).`;
  },
  { name: "search_docs", description: "Search the docs", schema: z.object({ q: z.string() }) },
);
const lookupOrder = tool(
  () => {
    throw new HttpResponseError(503, new Headers(), "Service Unavailable", "https://orders");
  },
  { name: "lookup_order", description: "Find an order", schema: z.object({ id: z.string() }) },
);
let refundsSent = 0;
const issueRefund = tool(
  ({ id }) => {
    refundsSent++;
    return `refunded ${id}`;
  },
  { name: "issue_refund", description: "Refund an order", schema: z.object({ id: z.string() }) },
);

// --- the models: the primary's provider is down; the backup plays a short script -------------
class DownModel extends FakeToolCallingModel {
  override bindTools(): this {
    return this;
  }
  override _generate(): never {
    throw Object.assign(new Error("503 The server is overloaded or not ready yet."), {
      status: 503,
    });
  }
}
const backup = new FakeToolCallingModel({
  toolCalls: [
    [{ name: "search_docs", args: { q: "refund policy" }, id: "call_1" }],
    [{ name: "lookup_order", args: { id: "A-42" }, id: "call_2" }],
    [{ name: "issue_refund", args: { id: "A-42" }, id: "call_3" }],
    [],
  ],
});

// --- the one line: the middleware (search_docs and lookup_order read; issue_refund writes) ----
const agent = createAgent({
  model: new DownModel(),
  tools: [searchDocs, lookupOrder, issueRefund],
  middleware: [
    selfHealingMiddleware(sh, {
      readOnly: ["search_docs", "lookup_order"],
      model: { provider: "openai", fallbacks: [{ provider: "anthropic", model: backup }] },
    }),
  ],
});

const { messages } = await agent.invoke({
  messages: [{ role: "user", content: "Please refund order A-42." }],
});
for (const m of messages) {
  if (!ToolMessage.isInstance(m)) continue;
  const kind = m.status === "error" ? "error ToolMessage" : "ToolMessage";
  console.log(`${String(m.name)}: ${kind} ${JSON.stringify(m.content)}`);
}
console.log(`refunds sent: ${refundsSent}`);
const status = await sh.status();
console.log(`status: ${status.status}, read-only ${String(status.readOnly)}`);
await sh.close();
