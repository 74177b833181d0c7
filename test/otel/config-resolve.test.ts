import { describe, expect, it } from "vitest";
import { isSelfHealConfigError } from "../../src/index.js";
import { resolveConfig, type ConfigOptions, type ResolvedConfig } from "../../src/otel/config.js";

type Env = Record<string, string>;

/** What `resolveConfig` throws: the field it names and its whole message. */
function thrown(options: ConfigOptions, env: Env) {
  try {
    resolveConfig(options, env);
  } catch (error) {
    expect(isSelfHealConfigError(error)).toBe(true);
    return { field: (error as { field: string }).field, message: (error as Error).message };
  }
  throw new Error("expected a configuration error");
}

const SAMPLERS =
  "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio";
const positiveMs = "expected a positive number of milliseconds, got";

describe("resolveConfig: every bad value names its option or variable, with the whole problem", () => {
  // [field named, options, env, the problem after "invalid option `field`: "]
  it.each<[string, ConfigOptions, Env, string]>([
    ["maxQueueSize", { maxQueueSize: 0 }, {}, "expected a positive integer, got 0"],
    ["maxQueueSize", { maxQueueSize: 1.5 }, {}, "expected a positive integer, got 1.5"],
    ["maxExportBatchSize", { maxExportBatchSize: 0 }, {}, "expected a positive integer, got 0"],
    [
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
      {},
      { OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "-3" },
      "expected a positive integer, got -3",
    ],
    ["scheduledDelayMillis", { scheduledDelayMillis: -1 }, {}, `${positiveMs} -1`],
    ["exportTimeoutMillis", { exportTimeoutMillis: 0 }, {}, `${positiveMs} 0`],
    ["metricsIntervalMillis", { metricsIntervalMillis: Infinity }, {}, `${positiveMs} Infinity`],
    [
      "OTEL_METRIC_EXPORT_TIMEOUT",
      {},
      { OTEL_METRIC_EXPORT_TIMEOUT: "soon" },
      `${positiveMs} soon`,
    ],
    ["shutdownTimeoutMillis", { shutdownTimeoutMillis: 0 }, {}, `${positiveMs} 0`],
    [
      "errorLogIntervalMillis",
      { errorLogIntervalMillis: -1 },
      {},
      "expected a number of milliseconds (0 logs every failure), got -1",
    ],
    [
      "errorLogIntervalMillis",
      { errorLogIntervalMillis: Infinity },
      {},
      "expected a number of milliseconds (0 logs every failure), got Infinity",
    ],
    [
      "sampler",
      { sampler: "jaeger_remote" as "always_on" },
      {},
      `unsupported sampler "jaeger_remote" (supported: ${SAMPLERS})`,
    ],
    [
      "samplerRatio",
      { sampler: "traceidratio", samplerRatio: 1.5 },
      {},
      "expected a ratio between 0 and 1, got 1.5",
    ],
    [
      "tracesExporter",
      { tracesExporter: "zipkin" as "otlp" },
      {},
      'unsupported exporter "zipkin" (supported: otlp, console, none)',
    ],
    [
      "metricsExporter",
      { metricsExporter: ["otlp", "statsd"] as ConfigOptions["metricsExporter"] },
      {},
      'unsupported exporter "statsd" (supported: otlp, prometheus, console, none)',
    ],
    [
      "temporality",
      { temporality: "sometimes" as "delta" },
      {},
      'expected cumulative, delta or lowmemory, got "sometimes"',
    ],
    ["metricsPort", { metricsPort: 0 }, {}, "expected a port number (1-65535), got 0"],
    ["metricsPort", { metricsPort: 65_536 }, {}, "expected a port number (1-65535), got 65536"],
    ["metricsPort", { metricsPort: 80.5 }, {}, "expected a port number (1-65535), got 80.5"],
    [
      "OTEL_EXPORTER_PROMETHEUS_PORT",
      {},
      { OTEL_METRICS_EXPORTER: "prometheus", OTEL_EXPORTER_PROMETHEUS_PORT: "http" },
      "expected a port number (1-65535), got http",
    ],
    ["endpoint", { endpoint: "nope" }, {}, 'not a URL: "nope"'],
    [
      "metricsEndpoint",
      { metricsEndpoint: "ftp://collector/m" },
      {},
      'expected an http:// or https:// URL (OTLP/HTTP), got "ftp://collector/m"',
    ],
    [
      "tracesEndpoint",
      { tracesEndpoint: "collector:4318" },
      {},
      'expected an http:// or https:// URL (OTLP/HTTP), got "collector:4318"',
    ],
    [
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      {},
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "nowhere" },
      'not a URL: "nowhere"',
    ],
    [
      "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
      {},
      { OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "nowhere" },
      'not a URL: "nowhere"',
    ],
    [
      "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
      {},
      { OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: "thrift" },
      'unknown OTLP protocol "thrift" (supported: http/protobuf, http/json)',
    ],
  ])("`%s` from %j %j", (field, options, env, problem) => {
    expect(thrown(options, env)).toEqual({
      field,
      message: `selfheal: invalid option \`${field}\`: ${problem}`,
    });
  });
});

describe("resolveConfig: what good values resolve to", () => {
  // [what, options, env, the part of the resolved config read, its value]
  it.each<[string, ConfigOptions, Env, (c: ResolvedConfig) => unknown, unknown]>([
    [
      "the defaults",
      {},
      {},
      (c) => [c.traces.otlp, c.metrics.otlp?.url, c.metrics.temporality],
      [
        {
          url: "http://localhost:4318/v1/traces",
          protocol: "http/protobuf",
          timeoutMillis: 10_000,
        },
        "http://localhost:4318/v1/metrics",
        "cumulative",
      ],
    ],
    [
      "the delta temporality",
      {},
      { OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: "delta" },
      (c) => c.metrics.temporality,
      "delta",
    ],
    [
      "a variable is trimmed",
      {},
      { OTEL_TRACES_SAMPLER: "  always_off \t" },
      (c) => c.traces.sampler.name,
      "always_off",
    ],
    [
      "a blank variable is unset",
      {},
      { OTEL_TRACES_SAMPLER: "   " },
      (c) => c.traces.sampler.name,
      "parentbased_always_on",
    ],
    [
      "a sampler name in capitals",
      {},
      { OTEL_TRACES_SAMPLER: "Parentbased_Always_Off" },
      (c) => c.traces.sampler,
      { name: "parentbased_always_off", ratio: 1 },
    ],
    [
      "trailing slashes of a base endpoint",
      { endpoint: "http://c:4318/otlp//" },
      {},
      (c) => c.traces.otlp?.url,
      "http://c:4318/otlp/v1/traces",
    ],
    [
      "a base endpoint variable",
      {},
      { OTEL_EXPORTER_OTLP_ENDPOINT: "https://gw.example/otlp" },
      (c) => c.metrics.otlp?.url,
      "https://gw.example/otlp/v1/metrics",
    ],
    [
      "a per-signal endpoint variable, as given",
      {},
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" },
      (c) => c.traces.otlp?.url,
      "http://t:1/x",
    ],
    [
      "empty items of an exporter list",
      {},
      { OTEL_TRACES_EXPORTER: "otlp,, console ," },
      (c) => c.traces.exporters,
      ["otlp", "console"],
    ],
    [
      "none anywhere in a list",
      {},
      { OTEL_METRICS_EXPORTER: "otlp,none" },
      (c) => c.metrics.exporters,
      [],
    ],
    [
      "none anywhere in an option list",
      { tracesExporter: ["console", "none"] },
      {},
      (c) => c.traces,
      expect.objectContaining({ exporters: [], otlp: undefined }),
    ],
    [
      "duplicates in a list",
      {},
      { OTEL_TRACES_EXPORTER: "otlp,OTLP" },
      (c) => c.traces.exporters,
      ["otlp"],
    ],
    [
      "console metrics",
      { metricsExporter: "console" },
      {},
      (c) => c.metrics,
      expect.objectContaining({ exporters: ["console"], otlp: undefined, prometheus: undefined }),
    ],
    [
      "metricsPort with prometheus already listed",
      { metricsPort: 9_100 },
      { OTEL_METRICS_EXPORTER: "prometheus" },
      (c) => c.metrics.exporters,
      ["prometheus"],
    ],
    [
      "the lowest port",
      { metricsPort: 1 },
      {},
      (c) => c.metrics.prometheus,
      { host: "127.0.0.1", port: 1 },
    ],
    [
      "the highest port",
      { metricsPort: 65_535, metricsHost: "::1" },
      {},
      (c) => c.metrics.prometheus,
      { host: "::1", port: 65_535 },
    ],
    [
      "a ratio of 1",
      { sampler: "parentbased_traceidratio", samplerRatio: 1 },
      {},
      (c) => c.traces.sampler.ratio,
      1,
    ],
    [
      "a ratio of 0",
      {},
      { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" },
      (c) => c.traces.sampler.ratio,
      0,
    ],
    ["the queue size option", { maxQueueSize: 1 }, {}, (c) => c.traces.maxQueueSize, 1],
    [
      "the batch size option",
      { maxExportBatchSize: 100 },
      {},
      (c) => c.traces.maxExportBatchSize,
      100,
    ],
    [
      "the batch size variable",
      {},
      { OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "64" },
      (c) => c.traces.maxExportBatchSize,
      64,
    ],
    [
      "the schedule delay option",
      { scheduledDelayMillis: 250 },
      {},
      (c) => c.traces.scheduledDelayMillis,
      250,
    ],
    [
      "the metrics interval option",
      { metricsIntervalMillis: 90_000 },
      {},
      (c) => [c.metrics.intervalMillis, c.metrics.timeoutMillis],
      [90_000, 30_000],
    ],
    [
      "the per-signal timeout over the shared one",
      {},
      { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "1234", OTEL_EXPORTER_OTLP_TIMEOUT: "99" },
      (c) => [c.traces.otlp?.timeoutMillis, c.metrics.otlp?.timeoutMillis],
      [1_234, 99],
    ],
    [
      "the lowmemory temporality",
      { temporality: "lowmemory" },
      {},
      (c) => c.metrics.temporality,
      "lowmemory",
    ],
    [
      "a log interval of 0 (every failure)",
      { errorLogIntervalMillis: 0 },
      {},
      (c) => c.errorLogIntervalMillis,
      0,
    ],
    [
      "the shutdown bound",
      { shutdownTimeoutMillis: 1_234 },
      {},
      (c) => c.shutdownTimeoutMillis,
      1_234,
    ],
    ["an enabled SDK", {}, { OTEL_SDK_DISABLED: "false" }, (c) => c.disabled, false],
  ])("%s", (_what, options, env, pick, expected) => {
    expect(pick(resolveConfig(options, env))).toEqual(expected);
  });

  it.each(["true", " TRUE "])("OTEL_SDK_DISABLED=%j: everything off, at the defaults", (value) => {
    expect(resolveConfig({ maxQueueSize: -1 }, { OTEL_SDK_DISABLED: value })).toEqual({
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
    });
  });
});
