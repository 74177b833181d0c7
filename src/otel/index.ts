/**
 * `selfheal/otel`: an OpenTelemetry SDK for apps that have none, in one call. Traces through a
 * `NodeTracerProvider` (registered with its AsyncLocalStorage context manager unless
 * `register: false`), metrics through a `MeterProvider`: OTLP/HTTP (protobuf or JSON) to a
 * Collector, Honeycomb or Grafana Cloud, and/or a Prometheus scrape endpoint. Configured by the
 * standard OTEL_* environment, options winning; a collector that is down or slow costs the
 * agent nothing (see guard.ts). Needs the optional peers listed in {@link OTEL_PEERS}; the core
 * (`selfheal`) never imports this entry.
 *
 * This module imports none of the peers itself: the SDK (sdk.ts) is loaded when
 * `startTelemetry` is first called, and a peer that is not installed fails that call with an
 * error naming every missing package and the command that installs them.
 */
import { createRequire } from "node:module";
import type { OtelOptions, Telemetry, TelemetryOptions } from "./sdk.js";

export type {
  ExportErrors,
  MetricsExporterName,
  OtelOptions,
  OtlpProtocol,
  ResolvedConfig,
  SamplerName,
  Telemetry,
  TelemetryOptions,
  Temporality,
  TracesExporterName,
} from "./sdk.js";

/** The optional peer dependencies `selfheal/otel` needs (package.json `peerDependencies`). */
export const OTEL_PEERS: readonly string[] = [
  "@opentelemetry/sdk-trace-node",
  "@opentelemetry/sdk-metrics",
  "@opentelemetry/resources",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/exporter-metrics-otlp-http",
  "@opentelemetry/otlp-exporter-base",
  "@opentelemetry/otlp-transformer",
  "@opentelemetry/exporter-prometheus",
];

/** The peers that cannot be resolved from this package. */
function missingPeers(): string[] {
  const require = createRequire(import.meta.url);
  return OTEL_PEERS.filter((name) => {
    try {
      require.resolve(name);
      return false;
    } catch {
      return true;
    }
  });
}

/** Thrown by `startTelemetry` when an optional peer is not installed; `missing` names them. */
export interface MissingPeerError extends Error {
  code: "ERR_SELFHEAL_MISSING_PEER";
  missing: string[];
}

type Sdk = typeof import("./sdk.js");
let sdk: Promise<Sdk> | undefined;

async function loadSdk(): Promise<Sdk> {
  sdk ??= import("./sdk.js").catch((error: unknown) => {
    sdk = undefined; // installing the peers and calling again works
    const missing = missingPeers();
    if (missing.length === 0) throw error;
    const e = new Error(
      `selfheal/otel needs the optional peer dependencies ${missing.join(", ")}, not installed. ` +
        `Install them with: npm i ${OTEL_PEERS.join(" ")}`,
      { cause: error },
    ) as MissingPeerError;
    e.code = "ERR_SELFHEAL_MISSING_PEER";
    e.missing = missing;
    throw e;
  });
  return sdk;
}

/**
 * Starts the SDK as the options and the OTEL_* environment say. Throws `SelfHealConfigError`
 * (naming the option or variable) on a bad value, and when the Prometheus port cannot be bound;
 * never later: exports fail quietly into `exportErrors()` and one log line per window. Rejects
 * with a {@link MissingPeerError} when an optional peer is not installed.
 */
export async function startTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  return (await loadSdk()).startTelemetry(options);
}

/**
 * @deprecated Use {@link startTelemetry}. Kept with its old behaviour: traces only when an
 * endpoint is given (option or OTEL_EXPORTER_OTLP_ENDPOINT), metrics only on `metricsPort`,
 * nothing registered globally.
 */
export async function startOtel(options: OtelOptions): Promise<Telemetry> {
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the alias forwards to itself
  return (await loadSdk()).startOtel(options);
}
