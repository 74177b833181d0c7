/**
 * selfheal quick start: wrap two tools, run a task, then watch an outage be diagnosed and
 * recovered from (circuit open, read-only mode, escalation) and a write refused, all in memory,
 * no server. Run: npx tsx examples/quickstart.ts
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
import { createSelfHealing, HttpResponseError } from "selfheal";

// An OpenTelemetry SDK that prints one line per finished span.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of spans) {
      const a = s.attributes;
      const depth = s.parentSpanContext ? "    " : "";
      const error = s.status.message ? `  error="${s.status.message}"` : "";
      console.log(
        `${depth}span ${s.name}  tool=${String(a["gen_ai.tool.name"] ?? a["selfheal.tool.name"] ?? "")} outcome=${String(a["selfheal.call.outcome"] ?? "-")}${error}`,
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

// The docs service, answered in process (no network): a Response, as fetch() returns it.
let docsUp = true;
const docsService = (query: string) =>
  docsUp
    ? new Response(JSON.stringify(`3 articles about ${query}`), { status: 200 })
    : new Response("Service Unavailable (api_key=sk-live-do-not-log-me-123456)", { status: 503 });
const searchDocs = sh.tool(
  "search_docs",
  { readOnly: true, timeoutMs: 5_000 },
  async (query: string) => {
    const res = docsService(query);
    if (!res.ok) throw await HttpResponseError.from(res); // a 503 is healed, not returned as an answer
    return (await res.json()) as string;
  },
);
const issueRefund = sh.tool(
  "issue_refund",
  { readOnly: false, idempotencyKey: (a: { orderId: string }) => `refund-${a.orderId}` },
  (a: { orderId: string }, ctx) => `refunded ${a.orderId} (key ${String(ctx.idempotencyKey)})`,
);
sh.on("diagnosis", (d) => {
  console.log(`diagnosis ${d.tool}: ${d.pattern} (rule ${d.rule}, confidence ${d.confidence})`);
});
sh.on("recovery", (e) => {
  console.log(
    `recovery ${e.tool}: ${e.steps.map((s) => (s.skipped ? `${s.strategy} (skipped)` : s.strategy)).join(" -> ")} => ${e.outcome}`,
  );
});

await sh.task("ticket-1", async () => {
  console.log(await searchDocs("refund policy"));
  console.log(await issueRefund({ orderId: "A-42" }));
});

// The docs service goes down. The 503 is diagnosed SERVICE_DOWN and its plan runs: one quick
// retry, no secondary to fail over to, so the circuit opens, the agent turns read-only and a
// human is asked to look.
docsUp = false;
await searchDocs("refund policy").catch((e: unknown) => {
  console.log(`search failed: ${(e as Error).name}`);
});
// While read-only, writes are refused before they reach the tool. A call that finds the circuit
// open waits for its probe if that fits in its deadline; this one cannot wait a second.
await issueRefund({ orderId: "A-43" }).catch((e: unknown) => {
  console.log(`refund refused: ${(e as Error).message}`);
});
await searchDocs("refund policy", { deadlineMs: 1_000 }).catch((e: unknown) => {
  console.log(`search: ${(e as Error).message}`);
});
const report = await sh.status();
const rate = report.signals.find((s) => s.signal === "success_rate")?.value;
console.log(
  `status: ${report.status} (success rate ${rate === null || rate === undefined ? "n/a" : rate.toFixed(2)}, read-only ${String(report.readOnly)}, open circuits ${JSON.stringify(report.circuits)})`,
);
await sh.close();
