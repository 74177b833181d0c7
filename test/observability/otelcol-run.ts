/**
 * Running the real Collector (the distribution scripts/build-collector.sh builds from
 * collector/build/) on the shipped configurations of collector/, for the suites that send
 * telemetry through it: each process on 127.0.0.1 and free ports set through the configurations'
 * own variables, ready once its health_check answers, stopped by its PID. A "sink" Collector
 * (OTLP/gRPC and OTLP/HTTP in, file exporter out) stands in for a backend (Tempo, Honeycomb,
 * a tier-2 Collector's exporters) so a test reads what would have reached it.
 *
 * The binary: $SELFHEAL_OTELCOL if set, else the one the script has already built for the current
 * sources (these suites do not build it: CI builds it before the checks, and
 * collector-validate.test.ts builds it when Go is there). Without one, `collectorAvailable` skips
 * the suite with a notice locally and throws under CI=true.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { freePort, haveAll, which } from "../helpers/binaries.js";
import { decodeSpans, type ReceivedSpan } from "../helpers/otlp.js";
import { BUILD_SCRIPT } from "./collector-dist.js";
import { ROOT } from "./config-files.js";

/** The built Collector, if there is one (see the header). */
export const OTELCOL: string | undefined = (() => {
  const override = process.env.SELFHEAL_OTELCOL;
  if (override !== undefined) {
    if (which("otelcol", override) === undefined)
      throw new Error(`SELFHEAL_OTELCOL=${override} is not an executable file`);
    return override;
  }
  const r = spawnSync("bash", [BUILD_SCRIPT, "--path"], { encoding: "utf8" });
  const path = r.status === 0 ? r.stdout.trim().split("\n").pop() : undefined;
  return path !== undefined ? which("otelcol", path) : undefined;
})();

/** Whether a suite can run: a notice and false locally without the binary, an error under CI. */
export function collectorAvailable(suite: string): boolean {
  return haveAll(
    suite,
    OTELCOL === undefined ? ["built Collector (otelcol-selfheal)"] : [],
    "bash scripts/build-collector.sh, or set SELFHEAL_OTELCOL",
  );
}

/**
 * A configuration of collector/ by file name (`local.yaml`, `overlays/tier2-tls.yaml`).
 * SELFHEAL_COLLECTOR_DIR points the suites at another copy of the directory (an older commit's,
 * to show what a fix changed).
 */
export const collectorFile = (file: string): string =>
  join(process.env.SELFHEAL_COLLECTOR_DIR ?? join(ROOT, "collector"), file);

/**
 * The environment of a Collector child: none of the variables its configurations read leak in
 * from the test's own environment, so only what a test sets (and the files' defaults) applies.
 */
export function collectorEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(OTELCOL_|HONEYCOMB_|GRAFANA_CLOUD_|TEMPO_|PROMETHEUS_|SELFHEAL_)/.test(k) &&
        !k.startsWith("OTEL_"),
    ),
  );
  return { ...env, ...extra };
}

export interface RunningCollector {
  name: string;
  pid: number;
  /** The OTLP receiver's addresses (those the test set). */
  grpcEndpoint: string;
  httpUrl: string;
  /** The last 16 kB of its log (stderr). */
  log: () => string;
  /** SIGTERM to its PID, then SIGKILL after `graceMs`; resolves with its exit code. */
  stop: (graceMs?: number) => Promise<number | null>;
}

export interface CollectorOptions {
  /** Shown in failures. */
  name: string;
  /** `--config` arguments in order (files, or `yaml:` snippets); later ones merge over earlier. */
  configs: string[];
  /** Variables for the configurations; the OTLP, health and telemetry addresses are added. */
  env?: Record<string, string>;
  /** How long to wait for the health check, ms (default 60 s: a busy machine is slow). */
  readyTimeoutMs?: number;
}

/** Every Collector started by this module and not stopped yet (for afterAll clean-ups). */
const running = new Set<RunningCollector>();

/**
 * Starts the Collector on collector/ configurations with the variables they read for their
 * listeners set to free ports on 127.0.0.1 (OTELCOL_OTLP_GRPC_ENDPOINT, OTELCOL_OTLP_HTTP_ENDPOINT,
 * OTELCOL_HEALTH_ENDPOINT, OTELCOL_TELEMETRY_HOST/PORT), and waits until its health_check answers
 * 200 (every pipeline started).
 */
export async function startCollector(options: CollectorOptions): Promise<RunningCollector> {
  if (OTELCOL === undefined) throw new Error("no Collector binary");
  const [grpc, http, health, telemetry] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const env = collectorEnv({
    OTELCOL_OTLP_GRPC_ENDPOINT: `127.0.0.1:${String(grpc)}`,
    OTELCOL_OTLP_HTTP_ENDPOINT: `127.0.0.1:${String(http)}`,
    OTELCOL_HEALTH_ENDPOINT: `127.0.0.1:${String(health)}`,
    OTELCOL_TELEMETRY_HOST: "127.0.0.1",
    OTELCOL_TELEMETRY_PORT: String(telemetry),
    ...options.env,
  });
  const child: ChildProcess = spawn(
    OTELCOL,
    options.configs.flatMap((c) => ["--config", c]),
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-16_000);
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => {
      resolve(code);
    });
    child.once("error", (e) => {
      log += `\n${e.message}`;
      resolve(null);
    });
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${options.name}: no PID (${log})`);
  const handle: RunningCollector = {
    name: options.name,
    pid,
    grpcEndpoint: `127.0.0.1:${String(grpc)}`,
    httpUrl: `http://127.0.0.1:${String(http)}`,
    log: () => log,
    stop: async (graceMs = 5_000) => {
      running.delete(handle);
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(pid, "SIGTERM");
        const timer = setTimeout(() => {
          if (child.exitCode === null && child.signalCode === null) process.kill(pid, "SIGKILL");
        }, graceMs);
        const code = await exited;
        clearTimeout(timer);
        return code;
      }
      return exited;
    },
  };
  running.add(handle);

  // Generous: a busy machine may take seconds to start a Collector (issue 27).
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      running.delete(handle);
      throw new Error(`${options.name} exited at start (${String(child.exitCode)}):\n${log}`);
    }
    const ok = await fetch(`http://127.0.0.1:${String(health)}/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      await handle.stop(1_000);
      throw new Error(`${options.name} not healthy in time:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return handle;
}

/** Stops every Collector this module started that is still running. */
export async function stopAllCollectors(): Promise<void> {
  await Promise.all([...running].map((c) => c.stop(2_000)));
}

export interface Sink extends RunningCollector {
  /** Every span written so far (file exporter, OTLP JSON), flattened. */
  spans: () => ReceivedSpan[];
  /** Every metrics request written so far, as OTLP JSON objects. */
  metricRequests: () => OtlpJsonMetrics[];
}

/** The subset of OTLP JSON metrics that tests read. */
export interface OtlpJsonMetrics {
  resourceMetrics?: {
    resource?: { attributes?: OtlpJsonAttribute[] };
    scopeMetrics?: {
      metrics?: {
        name: string;
        sum?: { dataPoints?: OtlpJsonPoint[] };
        gauge?: { dataPoints?: OtlpJsonPoint[] };
        histogram?: { dataPoints?: OtlpJsonPoint[] };
      }[];
    }[];
  }[];
}
export interface OtlpJsonAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
}
export interface OtlpJsonPoint {
  attributes?: OtlpJsonAttribute[];
  asInt?: string;
  asDouble?: number;
  count?: string;
  exemplars?: { traceId?: string; spanId?: string }[];
}

function jsonLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "");
}

/**
 * A backend stand-in: a Collector taking OTLP over gRPC and HTTP (TLS when `tls` is given) and
 * writing traces and metrics to files in `dir`.
 */
export async function startSink(
  dir: string,
  name = "sink",
  tls?: { certFile: string; keyFile: string },
): Promise<Sink> {
  const id = randomBytes(4).toString("hex");
  const tracesFile = join(dir, `${name}-${id}-traces.jsonl`);
  const metricsFile = join(dir, `${name}-${id}-metrics.jsonl`);
  const configFile = join(dir, `${name}-${id}.yaml`);
  const tlsBlock = tls ? { tls: { cert_file: tls.certFile, key_file: tls.keyFile } } : {};
  writeFileSync(
    configFile,
    stringify({
      extensions: { health_check: { endpoint: "${env:OTELCOL_HEALTH_ENDPOINT}" } },
      receivers: {
        otlp: {
          protocols: {
            grpc: { endpoint: "${env:OTELCOL_OTLP_GRPC_ENDPOINT}", ...tlsBlock },
            http: { endpoint: "${env:OTELCOL_OTLP_HTTP_ENDPOINT}", ...tlsBlock },
          },
        },
      },
      exporters: {
        "file/traces": { path: tracesFile, flush_interval: "100ms" },
        "file/metrics": { path: metricsFile, flush_interval: "100ms" },
      },
      service: {
        extensions: ["health_check"],
        telemetry: { metrics: { level: "none" } },
        pipelines: {
          traces: { receivers: ["otlp"], exporters: ["file/traces"] },
          metrics: { receivers: ["otlp"], exporters: ["file/metrics"] },
        },
      },
    }),
  );
  const collector = await startCollector({ name, configs: [configFile] });
  return {
    ...collector,
    spans: () =>
      jsonLines(tracesFile).flatMap((line) =>
        decodeSpans({
          path: "/v1/traces",
          headers: { "content-type": "application/json" },
          body: Buffer.from(line),
        }),
      ),
    metricRequests: () => jsonLines(metricsFile).map((l) => JSON.parse(l) as OtlpJsonMetrics),
  };
}

// ---- Spans made by hand, sent as OTLP/HTTP JSON ---------------------------------------------

export interface HandSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** 0 unset, 1 ok, 2 error. */
  status?: 0 | 1 | 2;
  attributes?: Record<string, string | number | boolean>;
  /** Start and end, Unix ms (default: now - 10 ms, now). */
  startMs?: number;
  endMs?: number;
}

/** A trace id (32 hex digits) derived from a seed: the same seed, the same id. */
export const traceIdOf = (seed: string): string => sha256Hex(`trace:${seed}`).slice(0, 32);
/** A span id (16 hex digits) derived from a seed. */
export const spanIdOf = (seed: string): string => sha256Hex(`span:${seed}`).slice(0, 16);
const sha256Hex = (text: string): string => createHash("sha256").update(text).digest("hex");

const anyValue = (v: string | number | boolean) =>
  typeof v === "string"
    ? { stringValue: v }
    : typeof v === "boolean"
      ? { boolValue: v }
      : Number.isInteger(v)
        ? { intValue: String(v) }
        : { doubleValue: v };

/** An OTLP/HTTP JSON export request of these spans, from one service. */
export function spansRequest(service: string, spans: HandSpan[]): string {
  const now = Date.now();
  const ns = (ms: number) => (BigInt(Math.round(ms)) * 1_000_000n).toString();
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: "selfheal" },
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId !== undefined && { parentSpanId: s.parentSpanId }),
              name: s.name,
              kind: 1,
              startTimeUnixNano: ns(s.startMs ?? now - 10),
              endTimeUnixNano: ns(s.endMs ?? now),
              attributes: Object.entries(s.attributes ?? {}).map(([key, value]) => ({
                key,
                value: anyValue(value),
              })),
              ...(s.status !== undefined && { status: { code: s.status } }),
            })),
          },
        ],
      },
    ],
  });
}

/** Posts spans to a Collector's OTLP/HTTP receiver; throws unless it answers 200. */
export async function sendSpans(
  httpUrl: string,
  service: string,
  spans: HandSpan[],
): Promise<void> {
  const res = await fetch(`${httpUrl}/v1/traces`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: spansRequest(service, spans),
  });
  const text = await res.text();
  if (res.status !== 200)
    throw new Error(`POST ${httpUrl}/v1/traces: ${String(res.status)} ${text}`);
}

/** Waits until `check` holds, polling every 50 ms; false when `timeoutMs` passed first. */
export async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A duration in ms from an env variable (`NAME=1500`), else the default. */
export function envMs(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms < 0) throw new Error(`${name}=${raw} is not a number of ms`);
  return ms;
}
