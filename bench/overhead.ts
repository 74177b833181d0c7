/**
 * Per-call overhead of the selfheal wrapper, side by side in one process:
 *   bare async call | bare OTel span around it (recording SDK) |
 *   selfheal wrapper, no SDK | selfheal wrapper, recording SDK.
 * Compare the ratios, not the absolute numbers: they depend on the machine.
 *
 * Run: npm run bench:overhead   (writes bench/results/overhead.json)
 */
import { writeFileSync, mkdirSync } from "node:fs";
import { context, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { ExportResultCode } from "@opentelemetry/core";
import { Bench } from "tinybench";
import { createSelfHealing } from "../src/index.js";

/** Calls per measured iteration: one async call is too short for a timer to see. */
const BATCH = 100;
/** Many short rounds, so a burst of machine noise hits every case alike; medians are kept. */
const ROUNDS = 15;

type Call = (q: string) => Promise<number>;
const tool: Call = (q) => Promise.resolve(q.length);

/** Median ns per call of each case, over ROUNDS interleaved tinybench runs. */
async function measure(cases: Record<string, Call>): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    const bench = new Bench({ time: 300, warmupTime: 100 });
    for (const [name, fn] of Object.entries(cases)) {
      bench.add(name, async () => {
        for (let i = 0; i < BATCH; i++) await fn("weather in Paris");
      });
    }
    await bench.run();
    // Let the batch span processor drain between rounds, as it would between bursts.
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== "completed") throw new Error(`${task.name}: ${result.state}`);
      (samples[task.name] ??= []).push((result.latency.mean * 1e6) / BATCH);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
}

// Phase 1, as an app without an OpenTelemetry SDK runs: no context manager, no-op tracer.
const noSdk = createSelfHealing({ agent: "bench" });
const withoutSdk = await measure({
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
const withSdkNs = await measure({
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
console.table(rows);

const summary = {
  "selfheal without SDK, ns added per call (target <= 1000)": Math.round(
    (ns["selfheal, no SDK"] ?? NaN) - bare,
  ),
  "selfheal with SDK / bare span (target <= 1.3)": +(
    (ns["selfheal, recording SDK"] ?? NaN) / span
  ).toFixed(2),
};
console.log(summary);

mkdirSync(new URL("results/", import.meta.url), { recursive: true });
writeFileSync(
  new URL("results/overhead.json", import.meta.url),
  JSON.stringify(
    { node: process.version, batch: BATCH, rounds: ROUNDS, perCallNs: ns, rows, summary },
    null,
    2,
  ) + "\n",
);
await Promise.all([noSdk.close(), withSdk.close(), sdk.shutdown()]);
