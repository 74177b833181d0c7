/**
 * One candidate of `npm run bench:overhead`, run in its own process from a scratch project that
 * installed the packed package (so it measures what a user's `import "selfheal"` gets).
 *   node candidate.mjs SETUP CASE CALLS
 * SETUP: none (no OpenTelemetry SDK) | als (NodeTracerProvider.register(): recording SDK,
 * AsyncLocalStorage context) | nocm (recording SDK, no context manager).
 * CASE: bare (the tool alone) | span (a hand-written active span) | cockatiel (retry + breaker)
 * | selfheal (a read-only selfheal tool).
 * Prints one JSON line: { ns } per awaited call, GC included (users pay it too).
 */
import process from "node:process";
import { trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import {
  ConsecutiveBreaker,
  ExponentialBackoff,
  circuitBreaker,
  handleAll,
  retry,
  wrap,
} from "cockatiel";
import { createSelfHealing } from "selfheal";

const [setup, kind, callsArg] = process.argv.slice(2);
const calls = Number(callsArg);

/** Spans are batched and dropped: the cost measured is the instrumentation, not an exporter. */
const discard = {
  export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }),
  shutdown: () => Promise.resolve(),
};
const processor = () =>
  new BatchSpanProcessor(discard, { maxQueueSize: 65_536, scheduledDelayMillis: 50 });
if (setup === "als") new NodeTracerProvider({ spanProcessors: [processor()] }).register();
else if (setup === "nocm")
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [processor()] }));
else if (setup !== "none") throw new Error(`unknown setup ${setup}`);

const tool = (q) => Promise.resolve(q.length);
const tracer = trace.getTracer("bench");

function build() {
  switch (kind) {
    case "bare":
      return tool;
    case "span":
      // What a hand-instrumented call looks like: one active span with the tool's attributes.
      return (q) =>
        tracer.startActiveSpan(
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
    case "cockatiel": {
      // cockatiel's README pairing: a retry with backoff around a consecutive-failure breaker.
      const policy = wrap(
        retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() }),
        circuitBreaker(handleAll, { halfOpenAfter: 10_000, breaker: new ConsecutiveBreaker(5) }),
      );
      return (q) => policy.execute(() => tool(q));
    }
    case "selfheal":
      return createSelfHealing({ agent: "bench" }).tool("search", { readOnly: true }, tool);
    default:
      throw new Error(`unknown case ${kind}`);
  }
}

const call = build();
const loop = async (n) => {
  for (let i = 0; i < n; i++) await call("weather in Paris");
};
await loop(Math.min(50_000, calls)); // warm-up: the JIT settles
const started = process.hrtime.bigint();
await loop(calls);
const ns = Number(process.hrtime.bigint() - started) / calls;
process.stdout.write(JSON.stringify({ ns }) + "\n");
process.exit(0); // the batch processor's timer would keep the process up
