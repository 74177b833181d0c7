/**
 * What `startTelemetry` will build, from its options and the standard OpenTelemetry environment
 * (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/). Pure: no
 * SDK import, so it is tested without one. An option always wins over its variable; a bad value,
 * from either, is a `SelfHealConfigError` naming the option or the variable.
 *
 * Split of the work with the SDK (nothing is applied twice): this file resolves what selfheal
 * passes explicitly (endpoints, protocol, timeouts, sampler, batch sizes, temporality, the
 * Prometheus address); the OTLP exporters read the rest themselves: headers
 * (`OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]HEADERS`, merged under the `headers` option key by
 * key), compression and TLS files (`..._COMPRESSION`, `..._CERTIFICATE`, `..._CLIENT_KEY`,
 * `..._CLIENT_CERTIFICATE`); the resource detector reads `OTEL_SERVICE_NAME` and
 * `OTEL_RESOURCE_ATTRIBUTES`.
 */
import { SelfHealConfigError } from "../errors.js";

export type OtlpProtocol = "http/protobuf" | "http/json";
export type TracesExporterName = "otlp" | "console" | "none";
export type MetricsExporterName = "otlp" | "prometheus" | "console" | "none";
export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio";
/** `cumulative` (default: Prometheus, Mimir/Grafana Cloud), `delta` (Honeycomb, Datadog, Dynatrace), `lowmemory`. */
export type Temporality = "cumulative" | "delta" | "lowmemory";

/**
 * The options `startTelemetry` resolves here (`TelemetryOptions` adds the SDK objects). Each
 * wins over its environment variable (in brackets); defaults are the specification's unless said.
 */
export interface ConfigOptions {
  /** OTLP/HTTP base URL [OTEL_EXPORTER_OTLP_ENDPOINT]; `/v1/traces`, `/v1/metrics` are appended. Default http://localhost:4318. */
  endpoint?: string | undefined;
  /** Full traces URL [OTEL_EXPORTER_OTLP_TRACES_ENDPOINT]. */
  tracesEndpoint?: string | undefined;
  /** Full metrics URL [OTEL_EXPORTER_OTLP_METRICS_ENDPOINT]. */
  metricsEndpoint?: string | undefined;
  /** [OTEL_EXPORTER_OTLP_PROTOCOL, per signal OTEL_EXPORTER_OTLP_TRACES_PROTOCOL/_METRICS_PROTOCOL]; default http/protobuf. grpc is refused with a clear error. */
  protocol?: OtlpProtocol | undefined;
  /** Deadline of one OTLP export, retries included [OTEL_EXPORTER_OTLP_TIMEOUT, per signal ..._TRACES_TIMEOUT/_METRICS_TIMEOUT]; default 10000. */
  exportTimeoutMillis?: number | undefined;
  /** [OTEL_TRACES_EXPORTER]: otlp (default), console, none. */
  tracesExporter?: TracesExporterName | readonly TracesExporterName[] | undefined;
  /** A sampler name [OTEL_TRACES_SAMPLER]; default parentbased_always_on. */
  sampler?: SamplerName | undefined;
  /** Ratio of the traceidratio samplers [OTEL_TRACES_SAMPLER_ARG]; default 1. */
  samplerRatio?: number | undefined;
  /** Spans buffered for export [OTEL_BSP_MAX_QUEUE_SIZE]; default 2048. More are dropped, never blocked on. */
  maxQueueSize?: number | undefined;
  /** [OTEL_BSP_MAX_EXPORT_BATCH_SIZE]; default 512. */
  maxExportBatchSize?: number | undefined;
  /** [OTEL_BSP_SCHEDULE_DELAY]; default 5000. */
  scheduledDelayMillis?: number | undefined;
  /** [OTEL_METRICS_EXPORTER]: otlp (default), prometheus, console, none, or a list of them. */
  metricsExporter?: MetricsExporterName | readonly MetricsExporterName[] | undefined;
  /** Serve Prometheus metrics on this port at /metrics [OTEL_EXPORTER_PROMETHEUS_PORT, default 9464]; setting it adds the prometheus exporter. */
  metricsPort?: number | undefined;
  /** [OTEL_EXPORTER_PROMETHEUS_HOST]; default 127.0.0.1 (not the spec's all interfaces): nothing is exposed beyond the machine unless asked. */
  metricsHost?: string | undefined;
  /** OTLP metric export interval [OTEL_METRIC_EXPORT_INTERVAL]; default 60000. */
  metricsIntervalMillis?: number | undefined;
  /** [OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE]; default cumulative; delta for backends that want it (Honeycomb, Datadog, Dynatrace). */
  temporality?: Temporality | undefined;
  /** At most one failure line per this many ms; default 60000. */
  errorLogIntervalMillis?: number | undefined;
  /** Bound on `forceFlush()` and `shutdown()`; default 5000. */
  shutdownTimeoutMillis?: number | undefined;
}

export interface OtlpTarget {
  url: string;
  protocol: OtlpProtocol;
  /** One export request, retries included (the exporter's deadline). */
  timeoutMillis: number;
}

export interface ResolvedConfig {
  /** `OTEL_SDK_DISABLED=true`: nothing is started. */
  disabled: boolean;
  traces: {
    exporters: ("otlp" | "console")[];
    otlp: OtlpTarget | undefined;
    sampler: { name: SamplerName; ratio: number };
    maxQueueSize: number;
    maxExportBatchSize: number;
    scheduledDelayMillis: number;
  };
  metrics: {
    exporters: ("otlp" | "prometheus" | "console")[];
    otlp: OtlpTarget | undefined;
    intervalMillis: number;
    /** The reader's bound on one collect + export. */
    timeoutMillis: number;
    temporality: Temporality;
    prometheus: { host: string; port: number } | undefined;
  };
  errorLogIntervalMillis: number;
  shutdownTimeoutMillis: number;
}

type Env = Record<string, string | undefined>;

/** A value and where it came from (the option or variable a message names). */
interface Sourced<T> {
  value: T;
  field: string;
}

const DEFAULT_ENDPOINT = "http://localhost:4318";
const DEFAULT_EXPORT_TIMEOUT = 10_000;
const PROTOCOLS: readonly string[] = ["http/protobuf", "http/json"];
const SAMPLERS: readonly string[] = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];
const TEMPORALITIES: readonly string[] = ["cumulative", "delta", "lowmemory"];

/** The variable's text, trimmed; undefined when unset or blank (as the SDK reads it). */
function text(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

function first<T>(
  option: Sourced<T | undefined>,
  env: Env,
  names: string[],
): Sourced<string | T> | undefined {
  if (option.value !== undefined) return option as Sourced<T>;
  for (const name of names) {
    const v = text(env, name);
    if (v !== undefined) return { value: v, field: name };
  }
  return undefined;
}

function number(
  source: Sourced<string | number> | undefined,
  fallback: number,
  check: (n: number) => boolean,
  expected: string,
): number {
  if (source === undefined) return fallback;
  const n = typeof source.value === "number" ? source.value : Number(source.value);
  if (!check(n))
    throw new SelfHealConfigError(
      source.field,
      `expected ${expected}, got ${String(source.value)}`,
    );
  return n;
}

const positiveInt = (n: number) => Number.isInteger(n) && n > 0;
const positive = (n: number) => Number.isFinite(n) && n > 0;

function url(source: Sourced<string>, suffix: string | undefined): string {
  let parsed: URL;
  try {
    parsed = new URL(source.value);
  } catch {
    throw new SelfHealConfigError(source.field, `not a URL: "${source.value}"`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new SelfHealConfigError(
      source.field,
      `expected an http:// or https:// URL (OTLP/HTTP), got "${source.value}"`,
    );
  }
  if (suffix === undefined) return parsed.href;
  // A base endpoint gets the signal's path appended, after whatever path it has
  // (https://otlp-gateway-prod-eu-west-2.grafana.net/otlp -> .../otlp/v1/traces).
  let end = parsed.href.length;
  while (parsed.href.charAt(end - 1) === "/") end--;
  return `${parsed.href.slice(0, end)}/${suffix}`;
}

function otlpTarget(
  options: ConfigOptions,
  env: Env,
  signal: "TRACES" | "METRICS",
  maxTimeout = Infinity,
): OtlpTarget {
  const specific = signal === "TRACES" ? options.tracesEndpoint : options.metricsEndpoint;
  const path = signal === "TRACES" ? "v1/traces" : "v1/metrics";
  const optionName = signal === "TRACES" ? "tracesEndpoint" : "metricsEndpoint";
  // Options win over variables; within each, the signal's own endpoint wins over the base.
  let target: string;
  if (specific !== undefined) target = url({ value: specific, field: optionName }, undefined);
  else if (options.endpoint !== undefined)
    target = url({ value: options.endpoint, field: "endpoint" }, path);
  else {
    const own = text(env, `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`);
    const base = text(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
    target =
      own !== undefined
        ? url({ value: own, field: `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT` }, undefined)
        : base !== undefined
          ? url({ value: base, field: "OTEL_EXPORTER_OTLP_ENDPOINT" }, path)
          : url({ value: DEFAULT_ENDPOINT, field: "endpoint" }, path);
  }
  const protocol = first({ value: options.protocol, field: "protocol" }, env, [
    `OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`,
    "OTEL_EXPORTER_OTLP_PROTOCOL",
  ]) ?? { value: "http/protobuf", field: "protocol" };
  const p = protocol.value.toLowerCase();
  if (p === "grpc") {
    throw new SelfHealConfigError(
      protocol.field,
      "grpc is not supported: selfheal/otel exports OTLP over HTTP only. Use http/protobuf (the default) or http/json, on the OTLP/HTTP port (4318 on a Collector); to reach a gRPC-only backend, put an OpenTelemetry Collector in between",
    );
  }
  if (!PROTOCOLS.includes(p)) {
    throw new SelfHealConfigError(
      protocol.field,
      `unknown OTLP protocol "${protocol.value}" (supported: http/protobuf, http/json)`,
    );
  }
  const timeout = number(
    first({ value: options.exportTimeoutMillis, field: "exportTimeoutMillis" }, env, [
      `OTEL_EXPORTER_OTLP_${signal}_TIMEOUT`,
      "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]),
    DEFAULT_EXPORT_TIMEOUT,
    positive,
    "a positive number of milliseconds",
  );
  return { url: target, protocol: p as OtlpProtocol, timeoutMillis: Math.min(timeout, maxTimeout) };
}

/** A comma list (variable) or a name or array (option), checked against `known`. */
function exporterList<T extends string>(
  option: T | readonly T[] | undefined,
  optionField: string,
  env: Env,
  variable: string,
  fallback: T,
  known: readonly string[],
): { names: T[]; field: string } {
  const envText = text(env, variable);
  const [raw, field] =
    option !== undefined
      ? [typeof option === "string" ? [option] : [...option], optionField]
      : [envText !== undefined ? envText.split(",") : [fallback], variable];
  const names = raw.map((n) => n.trim().toLowerCase()).filter(Boolean);
  for (const n of names) {
    if (!known.includes(n)) {
      throw new SelfHealConfigError(
        field,
        `unsupported exporter "${n}" (supported: ${known.join(", ")})`,
      );
    }
  }
  // "none" anywhere in the list means no exporter (as the Node SDK reads it).
  return { names: names.includes("none") ? [] : [...new Set(names as T[])], field };
}

/** `OTEL_SDK_DISABLED=true`: no exporter, nothing else read (a disabled SDK cannot be misconfigured). */
const DISABLED: ResolvedConfig = {
  disabled: true,
  traces: {
    exporters: [],
    otlp: undefined,
    sampler: { name: "parentbased_always_on", ratio: 1 },
    maxQueueSize: 2_048,
    maxExportBatchSize: 512,
    scheduledDelayMillis: 5_000,
  },
  metrics: {
    exporters: [],
    otlp: undefined,
    intervalMillis: 60_000,
    timeoutMillis: 30_000,
    temporality: "cumulative",
    prometheus: undefined,
  },
  errorLogIntervalMillis: 60_000,
  shutdownTimeoutMillis: 5_000,
};

// Long on purpose: every option beside its OTEL_* variable, in one flat list.
export function resolveConfig(options: ConfigOptions, env: Env = process.env): ResolvedConfig {
  if (text(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return DISABLED;

  const traceNames = exporterList<TracesExporterName>(
    options.tracesExporter,
    "tracesExporter",
    env,
    "OTEL_TRACES_EXPORTER",
    "otlp",
    ["otlp", "console", "none"],
  ).names.filter((n): n is "otlp" | "console" => n !== "none");

  const samplerSource = first({ value: options.sampler, field: "sampler" }, env, [
    "OTEL_TRACES_SAMPLER",
  ]) ?? { value: "parentbased_always_on", field: "sampler" };
  const samplerName = samplerSource.value.toLowerCase();
  if (!SAMPLERS.includes(samplerName)) {
    throw new SelfHealConfigError(
      samplerSource.field,
      `unsupported sampler "${samplerSource.value}" (supported: ${SAMPLERS.join(", ")})`,
    );
  }
  const ratio = samplerName.endsWith("traceidratio")
    ? number(
        first({ value: options.samplerRatio, field: "samplerRatio" }, env, [
          "OTEL_TRACES_SAMPLER_ARG",
        ]),
        1,
        (n) => Number.isFinite(n) && n >= 0 && n <= 1,
        "a ratio between 0 and 1",
      )
    : 1;

  const maxQueueSize = number(
    first({ value: options.maxQueueSize, field: "maxQueueSize" }, env, ["OTEL_BSP_MAX_QUEUE_SIZE"]),
    2_048,
    positiveInt,
    "a positive integer",
  );
  const maxExportBatchSize = Math.min(
    maxQueueSize,
    number(
      first({ value: options.maxExportBatchSize, field: "maxExportBatchSize" }, env, [
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
      ]),
      512,
      positiveInt,
      "a positive integer",
    ),
  );
  const scheduledDelayMillis = number(
    first({ value: options.scheduledDelayMillis, field: "scheduledDelayMillis" }, env, [
      "OTEL_BSP_SCHEDULE_DELAY",
    ]),
    5_000,
    positive,
    "a positive number of milliseconds",
  );

  const metricNames = exporterList<MetricsExporterName>(
    options.metricsExporter,
    "metricsExporter",
    env,
    "OTEL_METRICS_EXPORTER",
    "otlp",
    ["otlp", "prometheus", "console", "none"],
  ).names.filter((n): n is "otlp" | "prometheus" | "console" => n !== "none");
  // Asking for a scrape port asks for the scrape endpoint.
  if (options.metricsPort !== undefined && !metricNames.includes("prometheus"))
    metricNames.push("prometheus");

  const intervalMillis = number(
    first({ value: options.metricsIntervalMillis, field: "metricsIntervalMillis" }, env, [
      "OTEL_METRIC_EXPORT_INTERVAL",
    ]),
    60_000,
    positive,
    "a positive number of milliseconds",
  );
  const readerTimeout = Math.min(
    intervalMillis,
    number(
      first<number>({ value: undefined, field: "OTEL_METRIC_EXPORT_TIMEOUT" }, env, [
        "OTEL_METRIC_EXPORT_TIMEOUT",
      ]),
      30_000,
      positive,
      "a positive number of milliseconds",
    ),
  );
  const temporalitySource = first({ value: options.temporality, field: "temporality" }, env, [
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
  ]) ?? { value: "cumulative", field: "temporality" };
  const temporality = temporalitySource.value.toLowerCase();
  if (!TEMPORALITIES.includes(temporality)) {
    throw new SelfHealConfigError(
      temporalitySource.field,
      `expected cumulative, delta or lowmemory, got "${temporalitySource.value}"`,
    );
  }

  let prometheus: ResolvedConfig["metrics"]["prometheus"];
  if (metricNames.includes("prometheus")) {
    const port = number(
      first({ value: options.metricsPort, field: "metricsPort" }, env, [
        "OTEL_EXPORTER_PROMETHEUS_PORT",
      ]),
      9_464,
      (n) => Number.isInteger(n) && n >= 1 && n <= 65_535,
      "a port number (1-65535)",
    );
    // 127.0.0.1 unless asked: nothing is exposed beyond the machine by default.
    const host = options.metricsHost ?? text(env, "OTEL_EXPORTER_PROMETHEUS_HOST") ?? "127.0.0.1";
    prometheus = { host, port };
  }

  return {
    disabled: false,
    traces: {
      exporters: traceNames,
      otlp: traceNames.includes("otlp") ? otlpTarget(options, env, "TRACES") : undefined,
      sampler: { name: samplerName as SamplerName, ratio },
      maxQueueSize,
      maxExportBatchSize,
      scheduledDelayMillis,
    },
    metrics: {
      exporters: metricNames,
      // The request gives up before the reader's own bound, so the reader never times out.
      otlp: metricNames.includes("otlp")
        ? otlpTarget(options, env, "METRICS", Math.max(1, readerTimeout - 100))
        : undefined,
      intervalMillis,
      timeoutMillis: readerTimeout,
      temporality: temporality as Temporality,
      prometheus,
    },
    errorLogIntervalMillis: number(
      options.errorLogIntervalMillis === undefined
        ? undefined
        : { value: options.errorLogIntervalMillis, field: "errorLogIntervalMillis" },
      60_000,
      (n) => Number.isFinite(n) && n >= 0,
      "a number of milliseconds (0 logs every failure)",
    ),
    shutdownTimeoutMillis: number(
      options.shutdownTimeoutMillis === undefined
        ? undefined
        : { value: options.shutdownTimeoutMillis, field: "shutdownTimeoutMillis" },
      5_000,
      positive,
      "a positive number of milliseconds",
    ),
  };
}
