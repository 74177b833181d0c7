import { describe, expect, it } from "vitest";
import { isSelfHealConfigError } from "../../src/index.js";
import { resolveConfig, type ConfigOptions } from "../../src/otel/config.js";

const resolve = (options: ConfigOptions = {}, env: Record<string, string> = {}) =>
  resolveConfig(options, env);

/** The message of what `resolve` throws, checked to be a config error naming `field`. */
function failure(field: string, options: ConfigOptions, env: Record<string, string> = {}) {
  try {
    resolve(options, env);
  } catch (error) {
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as { field: string }).field).toBe(field);
    return (error as Error).message;
  }
  throw new Error("expected a configuration error");
}

describe("startTelemetry configuration: options, then OTEL_* variables, then the spec's defaults", () => {
  it("defaults: OTLP http/protobuf to localhost:4318 for traces and metrics, parent-based always-on, cumulative", () => {
    const c = resolve();
    expect(c.traces).toEqual({
      exporters: ["otlp"],
      otlp: {
        url: "http://localhost:4318/v1/traces",
        protocol: "http/protobuf",
        timeoutMillis: 10_000,
      },
      sampler: { name: "parentbased_always_on", ratio: 1 },
      maxQueueSize: 2_048,
      maxExportBatchSize: 512,
      scheduledDelayMillis: 5_000,
    });
    expect(c.metrics).toMatchObject({
      exporters: ["otlp"],
      otlp: { url: "http://localhost:4318/v1/metrics", protocol: "http/protobuf" },
      intervalMillis: 60_000,
      timeoutMillis: 30_000,
      temporality: "cumulative",
      prometheus: undefined,
    });
    expect(c.errorLogIntervalMillis).toBe(60_000);
  });

  it("the base endpoint gets /v1/<signal> after its own path; a per-signal endpoint is used as given and wins over the base", () => {
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/",
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "https://metrics.example.com/custom/path",
    };
    const c = resolve({}, env);
    expect(c.traces.otlp?.url).toBe(
      "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/traces",
    );
    expect(c.metrics.otlp?.url).toBe("https://metrics.example.com/custom/path");
  });

  it("options win over every variable, the base endpoint option over a per-signal variable too", () => {
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://env:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://env-traces:4318/v1/traces",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TIMEOUT: "3000",
      OTEL_TRACES_SAMPLER: "always_off",
      OTEL_BSP_MAX_QUEUE_SIZE: "10",
      OTEL_METRICS_EXPORTER: "none",
    };
    const c = resolve(
      {
        endpoint: "http://option:4318",
        protocol: "http/json",
        exportTimeoutMillis: 1_500,
        sampler: "traceidratio",
        samplerRatio: 0.25,
        maxQueueSize: 100,
        metricsExporter: ["otlp"],
        metricsEndpoint: "http://option-metrics:9/m",
      },
      env,
    );
    expect(c.traces.otlp).toEqual({
      url: "http://option:4318/v1/traces",
      protocol: "http/json",
      timeoutMillis: 1_500,
    });
    expect(c.traces.sampler).toEqual({ name: "traceidratio", ratio: 0.25 });
    expect(c.traces.maxQueueSize).toBe(100);
    expect(c.metrics.exporters).toEqual(["otlp"]);
    expect(c.metrics.otlp?.url).toBe("http://option-metrics:9/m");
  });

  it("variables: per-signal protocol and timeout, sampler with its argument, batch settings, temporality", () => {
    const c = resolve(
      {},
      {
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
        OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: "700",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.1",
        OTEL_BSP_MAX_QUEUE_SIZE: "300",
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1000",
        OTEL_BSP_SCHEDULE_DELAY: "250",
        OTEL_METRIC_EXPORT_INTERVAL: "15000",
        OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: "DELTA",
      },
    );
    expect(c.traces.otlp).toMatchObject({ protocol: "http/json", timeoutMillis: 2_000 });
    expect(c.metrics.otlp).toMatchObject({ protocol: "http/protobuf", timeoutMillis: 700 });
    expect(c.traces.sampler).toEqual({ name: "parentbased_traceidratio", ratio: 0.1 });
    // A batch never exceeds the queue.
    expect(c.traces).toMatchObject({
      maxQueueSize: 300,
      maxExportBatchSize: 300,
      scheduledDelayMillis: 250,
    });
    expect(c.metrics).toMatchObject({
      intervalMillis: 15_000,
      timeoutMillis: 15_000,
      temporality: "delta",
    });
  });

  it("a metric export request gives up before its reader's bound (interval or OTEL_METRIC_EXPORT_TIMEOUT)", () => {
    expect(resolve({ metricsIntervalMillis: 500 }).metrics).toMatchObject({
      timeoutMillis: 500,
      otlp: { timeoutMillis: 400 },
    });
    expect(resolve({}, { OTEL_METRIC_EXPORT_TIMEOUT: "2000" }).metrics).toMatchObject({
      timeoutMillis: 2_000,
      otlp: { timeoutMillis: 1_900 },
    });
  });

  it("grpc is refused with a clear error naming the variable or option", () => {
    const message = failure(
      "OTEL_EXPORTER_OTLP_PROTOCOL",
      {},
      {
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      },
    );
    expect(message).toMatch(/grpc is not supported/);
    expect(message).toMatch(/http\/protobuf/);
    expect(message).toMatch(/4318/);
    failure(
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      {},
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc" },
    );
    failure("protocol", { protocol: "grpc" as "http/json" });
    expect(
      failure("OTEL_EXPORTER_OTLP_PROTOCOL", {}, { OTEL_EXPORTER_OTLP_PROTOCOL: "thrift" }),
    ).toMatch(/unknown OTLP protocol "thrift"/);
    // No OTLP exporter, no protocol to check.
    expect(() =>
      resolve(
        { tracesExporter: "none", metricsExporter: "none" },
        { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
      ),
    ).not.toThrow();
  });

  it("exporter lists: comma lists, none, unknown names; metricsPort adds the Prometheus endpoint on 127.0.0.1", () => {
    expect(resolve({}, { OTEL_METRICS_EXPORTER: "otlp, prometheus" }).metrics).toMatchObject({
      exporters: ["otlp", "prometheus"],
      prometheus: { host: "127.0.0.1", port: 9_464 },
    });
    expect(resolve({}, { OTEL_METRICS_EXPORTER: "none" }).metrics.exporters).toEqual([]);
    expect(resolve({}, { OTEL_TRACES_EXPORTER: "none" }).traces).toMatchObject({
      exporters: [],
      otlp: undefined,
    });
    expect(
      resolve({ metricsPort: 9_999 }, { OTEL_METRICS_EXPORTER: "none" }).metrics,
    ).toMatchObject({ exporters: ["prometheus"], prometheus: { host: "127.0.0.1", port: 9_999 } });
    expect(
      resolve(
        {},
        {
          OTEL_METRICS_EXPORTER: "prometheus",
          OTEL_EXPORTER_PROMETHEUS_HOST: "0.0.0.0",
          OTEL_EXPORTER_PROMETHEUS_PORT: "9100",
        },
      ).metrics.prometheus,
    ).toEqual({ host: "0.0.0.0", port: 9_100 });
    expect(failure("OTEL_METRICS_EXPORTER", {}, { OTEL_METRICS_EXPORTER: "otlp,statsd" })).toMatch(
      /unsupported exporter "statsd"/,
    );
    failure("OTEL_TRACES_EXPORTER", {}, { OTEL_TRACES_EXPORTER: "zipkin" });
    failure("metricsPort", { metricsPort: 70_000 });
  });

  it("bad values name their source: sampler, ratio, numbers, URLs", () => {
    expect(failure("OTEL_TRACES_SAMPLER", {}, { OTEL_TRACES_SAMPLER: "jaeger_remote" })).toMatch(
      /unsupported sampler "jaeger_remote"/,
    );
    failure(
      "OTEL_TRACES_SAMPLER_ARG",
      {},
      { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "2" },
    );
    failure("samplerRatio", { sampler: "traceidratio", samplerRatio: -1 });
    failure("OTEL_BSP_MAX_QUEUE_SIZE", {}, { OTEL_BSP_MAX_QUEUE_SIZE: "lots" });
    failure("OTEL_EXPORTER_OTLP_TIMEOUT", {}, { OTEL_EXPORTER_OTLP_TIMEOUT: "0" });
    expect(
      failure("OTEL_EXPORTER_OTLP_ENDPOINT", {}, { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }),
    ).toMatch(/expected an http:\/\/ or https:\/\/ URL/);
    failure("tracesEndpoint", { tracesEndpoint: "not a url" });
    failure(
      "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
      {},
      {
        OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: "sometimes",
      },
    );
    // The ratio of a sampler that has none is not read.
    expect(resolve({}, { OTEL_TRACES_SAMPLER_ARG: "junk" }).traces.sampler.ratio).toBe(1);
  });

  it("OTEL_SDK_DISABLED=true: no exporter and nothing else read", () => {
    const c = resolve({}, { OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" });
    expect(c.disabled).toBe(true);
    expect(c.traces.exporters).toEqual([]);
    expect(c.metrics.exporters).toEqual([]);
  });
});
