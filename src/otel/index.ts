/**
 * `selfheal/otel`: an OpenTelemetry SDK set up for selfheal in one call, for apps (and the CLI)
 * that have none: traces to an OTLP/HTTP endpoint, metrics on a Prometheus scrape endpoint.
 * Needs the optional peers `@opentelemetry/sdk-trace-base`, `@opentelemetry/sdk-metrics`,
 * `@opentelemetry/resources`, `@opentelemetry/exporter-trace-otlp-http` and
 * `@opentelemetry/exporter-prometheus`; the core never imports this entry.
 */
import type {
  MeterProvider as ApiMeterProvider,
  TracerProvider as ApiTracerProvider,
} from "@opentelemetry/api";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "../telemetry/conventions.js";

export interface OtelOptions {
  serviceName: string;
  /** OTLP/HTTP base URL, e.g. `http://localhost:4318`; default `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  otlpEndpoint?: string | undefined;
  /** Serve Prometheus metrics on this port (`/metrics`). */
  metricsPort?: number | undefined;
  /** Default 127.0.0.1: nothing is exposed beyond the machine unless asked. */
  metricsHost?: string;
}

export interface Otel {
  /** Pass to `createSelfHealing({ tracerProvider })`; undefined without an OTLP endpoint. */
  tracerProvider: ApiTracerProvider | undefined;
  /** Pass to `createSelfHealing({ meterProvider })`; undefined without a metrics port. */
  meterProvider: ApiMeterProvider | undefined;
  /** The scrape URL, when metrics are served. */
  metricsUrl: string | undefined;
  /** Flushes what is buffered and stops the exporters. */
  shutdown(): Promise<void>;
}

export async function startOtel(options: OtelOptions): Promise<Otel> {
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName });
  const endpoint = options.otlpEndpoint ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracerProvider =
    endpoint === undefined || endpoint === ""
      ? undefined
      : new BasicTracerProvider({
          resource,
          spanProcessors: [
            new BatchSpanProcessor(
              new OTLPTraceExporter({ url: `${endpoint.replace(/\/$/, "")}/v1/traces` }),
              {
                // A demo hour makes thousands of spans in a second: keep them all for the export.
                maxQueueSize: 100_000,
                maxExportBatchSize: 2_048,
              },
            ),
          ],
        });
  let meterProvider: MeterProvider | undefined;
  let metricsUrl: string | undefined;
  if (options.metricsPort !== undefined) {
    const host = options.metricsHost ?? "127.0.0.1";
    const exporter = new PrometheusExporter({
      port: options.metricsPort,
      host,
      preventServerStart: true,
    });
    await exporter.startServer();
    meterProvider = new MeterProvider({ resource, readers: [exporter] });
    metricsUrl = `http://${host}:${options.metricsPort}/metrics`;
  }
  return {
    tracerProvider,
    meterProvider,
    metricsUrl,
    shutdown: async () => {
      await Promise.all([tracerProvider?.shutdown(), meterProvider?.shutdown()]);
    },
  };
}
