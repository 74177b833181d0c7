/**
 * Per-call overhead of the selfheal wrapper, side by side in one process:
 *   bare async call | bare OTel span around it (recording SDK) |
 *   selfheal wrapper, no SDK | selfheal wrapper, recording SDK.
 * Compare the ratios, not the absolute numbers: they depend on the machine.
 *
 * Run: npm run bench:overhead   (writes bench/results/overhead.json)
 */
import { context, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { ExportResultCode } from "@opentelemetry/core";
import { createSelfHealing } from "../dist/index.js";
import { measure, report } from "./harness.js";

const BATCH = 100;
const ROUNDS = 15;

type Call = (q: string) => Promise<number>;
const tool: Call = (q) => Promise.resolve(q.length);

/** Median ns per call of each case. */
const run = (cases: Record<string, Call>) =>
  measure(
    Object.fromEntries(
      Object.entries(cases).map(([name, fn]) => [name, () => fn("weather in Paris")]),
    ),
    { batch: BATCH, rounds: ROUNDS, pauseMs: 50 },
  );

// Phase 1, as an app without an OpenTelemetry SDK runs: no context manager, no-op tracer.
const noSdk = createSelfHealing({ agent: "bench" });
const withoutSdk = await run({
  "bare async call": tool,
  "selfheal, no SDK": noSdk.tool("search", { readOnly: true }, tool),
});

// Phase 2, as an app with an SDK runs: async context, batch processor, an exporter that drops.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const discard: SpanExporter = {
  export: (_spans, done) => {
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: () => Promise.resolve(),
};
const sdk = new BasicTracerProvider({
  spanProcessors: [
    new BatchSpanProcessor(discard, { maxQueueSize: 65_536, scheduledDelayMillis: 50 }),
  ],
});
const sdkTracer: Tracer = sdk.getTracer("bench");

/** What a hand-instrumented call looks like: one active span with the tool's GenAI attributes. */
const bareSpan: Call = (q) =>
  sdkTracer.startActiveSpan(
    "execute_tool search",
    { attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search" } },
    async (span) => {
      try {
        return await tool(q);
      } finally {
        span.end();
      }
    },
  );
const withSdk = createSelfHealing({ agent: "bench", tracerProvider: sdk });
const withSdkNs = await run({
  "bare async call (SDK phase)": tool,
  "bare OTel span (SDK)": bareSpan,
  "selfheal, recording SDK": withSdk.tool("search", { readOnly: true }, tool),
});

const ns = { ...withoutSdk, ...withSdkNs };
const bare = ns["bare async call"] ?? NaN;
const span = ns["bare OTel span (SDK)"] ?? NaN;
const rows = Object.entries(ns).map(([name, value]) => ({
  case: name,
  "ns/call": Math.round(value),
  "x bare call": +(value / bare).toFixed(2),
  "x bare span": +(value / span).toFixed(2),
}));
const summary = {
  "selfheal without SDK, ns added per call (target <= 1000)": Math.round(
    (ns["selfheal, no SDK"] ?? NaN) - bare,
  ),
  "selfheal with SDK / bare span (target <= 1.3)": +(
    (ns["selfheal, recording SDK"] ?? NaN) / span
  ).toFixed(2),
};
report("overhead", rows, summary, { batch: BATCH, rounds: ROUNDS, perCallNs: ns });
await Promise.all([noSdk.close(), withSdk.close(), sdk.shutdown()]);
