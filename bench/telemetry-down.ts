/**
 * What a collector that is down or hung costs the agent, side by side in one process: the same
 * selfheal tool call, each case with its own `startTelemetry` (traces and metrics over OTLP/HTTP
 * protobuf, the defaults otherwise: 2048-span queue, 512-span batches, 10 s export deadline),
 * exporting to
 *   a healthy receiver | a closed port (collector down) | a receiver that never answers.
 * The receivers run in a child process, so their work is not billed to the agent's process.
 * Target: the collector down costs < 5 % more per call than a healthy one.
 *
 * Run: npm run bench:telemetry-down   (writes bench/results/telemetry-down.json)
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { createSelfHealing } from "../dist/index.js";
import { startTelemetry, type Telemetry } from "../dist/otel/index.js";
import { measure, report } from "./harness.js";

const BATCH = 100;
const ROUNDS = 15;
/** Short enough that metric exports happen during the measurement. */
const METRICS_INTERVAL_MS = 1_000;

/** Two OTLP/HTTP receivers in a child process: one answers 200 at once, one never answers. */
const RECEIVERS = `
const http = require("node:http");
const ok = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
});
const hung = http.createServer((req) => { req.resume(); });
ok.listen(0, "127.0.0.1", () => hung.listen(0, "127.0.0.1", () =>
  console.log(JSON.stringify({ ok: ok.address().port, hung: hung.address().port }))));
`;

async function startReceivers() {
  const child = spawn(process.execPath, ["-e", RECEIVERS], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const ports = await new Promise<{ ok: number; hung: number }>((resolve, reject) => {
    child.stdout.once("data", (chunk: Buffer) => {
      resolve(JSON.parse(chunk.toString()) as { ok: number; hung: number });
    });
    child.once("error", reject);
  });
  return { ...ports, stop: () => child.kill() };
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => {
        resolve(port);
      });
    });
  });
}

// One context manager for every case, as an app has (each case registers nothing globally).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const receivers = await startReceivers();
const targets = {
  "collector healthy": `http://127.0.0.1:${receivers.ok}`,
  "collector down (closed port)": `http://127.0.0.1:${await closedPort()}`,
  "collector hung (never answers)": `http://127.0.0.1:${receivers.hung}`,
};

const logLines: string[] = [];
const telemetry: Record<string, Telemetry> = {};
const cases: Record<string, () => Promise<unknown>> = {};
const closers: (() => Promise<void>)[] = [];
for (const [name, endpoint] of Object.entries(targets)) {
  const t = await startTelemetry({
    endpoint,
    serviceName: "bench",
    register: false,
    metricsIntervalMillis: METRICS_INTERVAL_MS,
    logger: { warn: (line) => logLines.push(`${name}: ${line}`) },
  });
  telemetry[name] = t;
  if (!t.tracerProvider || !t.meterProvider) throw new Error("providers expected");
  const sh = createSelfHealing({
    agent: "bench",
    tracerProvider: t.tracerProvider,
    meterProvider: t.meterProvider,
  });
  const tool = sh.tool("search", { readOnly: true }, (q: string) => Promise.resolve(q.length));
  cases[name] = () => tool("weather in Paris");
  closers.push(
    () => sh.close(),
    () => t.shutdown(),
  );
}

const ns = await measure(cases, { batch: BATCH, rounds: ROUNDS, pauseMs: 50 });

const healthy = ns["collector healthy"] ?? NaN;
const rows = Object.entries(ns).map(([name, value]) => {
  const errors = telemetry[name]?.exportErrors();
  return {
    case: name,
    "ns/call": Math.round(value),
    "x healthy": +(value / healthy).toFixed(3),
    "failed exports (traces/metrics)": `${errors?.traces ?? 0}/${errors?.metrics ?? 0}`,
  };
});
const down = ns["collector down (closed port)"] ?? NaN;
const hung = ns["collector hung (never answers)"] ?? NaN;
const summary = {
  "collector down, extra cost per call vs healthy, % (target < 5)": +(
    (down / healthy - 1) *
    100
  ).toFixed(1),
  "collector hung, extra cost per call vs healthy, %": +((hung / healthy - 1) * 100).toFixed(1),
  "log lines (one per case at most, per minute)": logLines.length,
};
report("telemetry-down", rows, summary, {
  batch: BATCH,
  rounds: ROUNDS,
  settings: {
    protocol: "http/protobuf",
    maxQueueSize: 2_048,
    maxExportBatchSize: 512,
    exportTimeoutMillis: 10_000,
    metricsIntervalMillis: METRICS_INTERVAL_MS,
  },
  perCallNs: ns,
  logLines,
});
await Promise.all(closers.map((close) => close()));
receivers.stop();
