/**
 * selfheal/mcp: one line heals an MCP client. An MCP server runs in process (no network, no
 * key); a scripted agent, standing in for the model, calls its tools through the healed client.
 * A throttled answer is diagnosed and retried, failures turn the agent critical, and a write is
 * then refused as an isError result the model can read. Run: npx tsx examples/mcp.ts
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
import { Client, InMemoryTransport, type CallToolResult } from "@modelcontextprotocol/client";
import { McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { createSelfHealing } from "selfheal";
import { healMcpClient } from "selfheal/mcp";

// An OpenTelemetry SDK that prints one line per finished span (but while `quiet`).
let quiet = false;
const SHOWN = [
  "mcp.method.name",
  "network.transport",
  "error.type",
  "selfheal.diagnosis.pattern",
  "selfheal.recovery.strategy",
  "selfheal.recovery.wait_ms",
];
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const printer: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    for (const s of quiet ? [] : spans) {
      const a = s.attributes;
      const call =
        s.name === "agent.tool_call"
          ? `  tool=${String(a["gen_ai.tool.name"] ?? a["selfheal.tool.name"])} outcome=${String(a["selfheal.call.outcome"])}`
          : "";
      const value = (v: unknown) => String(typeof v === "number" ? Math.round(v) : v);
      const shown = SHOWN.filter((k) => a[k] !== undefined).map((k) => `${k}=${value(a[k])}`);
      console.log(`${s.parentSpanContext ? "    " : ""}span ${s.name}${call}  ${shown.join(" ")}`);
    }
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(printer)],
});

// --- an MCP server: a read-only search, a throttled search, a write, a broken tool ----------
const text = (value: string) => ({ content: [{ type: "text" as const, text: value }] });
const server = new McpServer({ name: "helpdesk", version: "1.0.0" });
server.registerTool(
  "search_docs",
  { inputSchema: z.object({ q: z.string() }), annotations: { readOnlyHint: true } },
  ({ q }) => text(`3 articles about ${q}`),
);
let quotaCalls = 0;
server.registerTool("quota_search", { annotations: { readOnlyHint: true } }, () =>
  quotaCalls++ === 0
    ? { ...text("429 Too Many Requests: the quota for this minute is spent"), isError: true }
    : text("quota search: 1 hit"),
);
server.registerTool("inventory", { annotations: { readOnlyHint: true } }, () => {
  throw new Error("inventory database unreachable");
});
// No readOnlyHint: a write, refused while the agent is critical.
server.registerTool(
  "create_ticket",
  { inputSchema: z.object({ title: z.string() }) },
  ({ title }) => text(`created ticket: ${title}`),
);
const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
await server.connect(serverSide);

// --- the one line ---------------------------------------------------------------------------
// cacheMs: 0 re-evaluates health on every read; minSamples: 4 lets four failures count.
const sh = createSelfHealing({
  agent: "helpdesk-agent",
  tracerProvider,
  health: { cacheMs: 0, successRate: { minSamples: 4 } },
});
const client = healMcpClient(sh, new Client({ name: "helpdesk-agent", version: "1.0.0" }));
await client.connect(clientSide);

sh.on("diagnosis", (d) => {
  if (!quiet)
    console.log(`diagnosis ${d.tool}: ${d.pattern} (rule ${d.rule}, evidence ${d.evidence})`);
});
sh.on("recovery", (e) => {
  if (!quiet)
    console.log(
      `recovery ${e.tool}: ${e.steps.map((s) => s.strategy).join(" -> ")} => ${e.outcome}`,
    );
});
const say = (r: CallToolResult) =>
  r.content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join(" ");

// --- the agent's turns (a model would choose these calls) ------------------------------------
console.log(`tools: ${(await client.listTools()).tools.map((t) => t.name).join(", ")}`);
console.log(say(await client.callTool({ name: "search_docs", arguments: { q: "refunds" } })));

// Throttled in words only: one quick retry for this call, nothing switched off.
const quota = await client.callTool({ name: "quota_search" });
console.log(`quota_search answered: ${say(quota)}`);

// The inventory keeps failing (each failure diagnosed and retried once, printing muted): its
// isError results are what the model sees, and they count, until the agent is critical.
quiet = true;
let failed = "";
for (let i = 0; i < 4; i++) failed = say(await client.callTool({ name: "inventory" }));
quiet = false;
console.log(`inventory failed 4 times: ${failed}`);
console.log(`status: ${(await sh.status()).status}`);

// Now a write is refused before it reaches the server; reads still run.
const ticket = await client.callTool({ name: "create_ticket", arguments: { title: "refund" } });
console.log(`create_ticket refused (${ticket.isError ? "isError" : "?"}): ${say(ticket)}`);
console.log(say(await client.callTool({ name: "search_docs", arguments: { q: "status" } })));

await client.close();
await sh.close();
