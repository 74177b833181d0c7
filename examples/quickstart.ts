/**
 * selfheal quick start: wrap two tools, run tasks, watch health go critical and a write get
 * refused, all in memory, no server. Run: npx tsx examples/quickstart.ts
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
import { createSelfHealing, isHealthCheckFailedError } from "selfheal";

// An OpenTelemetry SDK that prints one line per finished span.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of spans) {
      const a = s.attributes;
      const depth = s.parentSpanContext ? "    " : "";
      const error = s.status.message ? `  error="${s.status.message}"` : "";
      console.log(
        `${depth}span ${s.name}  tool=${String(a["gen_ai.tool.name"] ?? "")} outcome=${String(a["selfheal.call.outcome"] ?? "-")}${error}`,
      );
    }
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(printer)],
});

// --- the quick start -------------------------------------------------------------------------
// cacheMs: 0 re-evaluates health on every read (default: every 5 s) so the demo shows it at once.
const sh = createSelfHealing({ agent: "support-bot", tracerProvider, health: { cacheMs: 0 } });

let docsUp = true;
const searchDocs = sh.tool("search_docs", { readOnly: true, timeoutMs: 5_000 }, (query: string) => {
  if (!docsUp) throw new Error("503 Service Unavailable (api_key=sk-live-do-not-log-me-123456)");
  return `3 articles about ${query}`;
});
const issueRefund = sh.tool(
  "issue_refund",
  { readOnly: false, idempotencyKey: (a: { orderId: string }) => `refund-${a.orderId}` },
  (a: { orderId: string }, ctx) => `refunded ${a.orderId} (key ${String(ctx.idempotencyKey)})`,
);
sh.on("status-change", (e) => {
  console.log(`status-change ${e.tool ?? "agent"}: ${e.from} -> ${e.to}`);
});

await sh.task("ticket-1", async () => {
  console.log(await searchDocs("refund policy"));
  console.log(await issueRefund({ orderId: "A-42" }));
});

// The docs service goes down: ten failed searches make the agent critical.
docsUp = false;
for (let i = 0; i < 10; i++) await searchDocs("refund policy").catch(() => undefined);
const report = await sh.status();
const rate = report.signals.find((s) => s.signal === "success_rate")?.value ?? 1;
console.log(`status: ${report.status} (success rate ${rate.toFixed(2)} over the last 10 min)`);

// While critical, writes are refused before they reach the tool; reads still run.
await issueRefund({ orderId: "A-43" }).catch((e: unknown) => {
  if (isHealthCheckFailedError(e)) console.log(`refused: ${e.message}`);
});
await sh.close();
