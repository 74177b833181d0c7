/**
 * OTLP/HTTP exporters for both encodings. http/json uses the exporter packages' own classes;
 * http/protobuf is built from the same parts the official `-otlp-proto` packages use (the
 * exporter base's HTTP delegate and the transformer's protobuf serializers), so no extra
 * package is needed. Headers given here are merged over `OTEL_EXPORTER_OTLP_*_HEADERS`, which
 * the exporter reads itself (with compression and TLS files).
 */
import {
  AggregationTemporalityPreference,
  OTLPMetricExporter,
  OTLPMetricExporterBase,
} from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import {
  OTLPExporterBase,
  type OTLPExporterNodeConfigBase,
} from "@opentelemetry/otlp-exporter-base";
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from "@opentelemetry/otlp-exporter-base/node-http";
import {
  MetricsExporterMetricsHelper,
  ProtobufMetricsSerializer,
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
} from "@opentelemetry/otlp-transformer";
import type { PushMetricExporter } from "@opentelemetry/sdk-metrics";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-node";
import type { OtlpTarget, Temporality } from "./config.js";

const PROTOBUF = { "Content-Type": "application/x-protobuf" };

function exporterConfig(
  target: OtlpTarget,
  headers: Record<string, string> | undefined,
): OTLPExporterNodeConfigBase {
  return {
    url: target.url,
    timeoutMillis: target.timeoutMillis,
    ...(headers !== undefined && { headers }),
  };
}

export function otlpSpanExporter(
  target: OtlpTarget,
  headers: Record<string, string> | undefined,
): SpanExporter {
  const config = exporterConfig(target, headers);
  if (target.protocol === "http/json") return new OTLPTraceExporter(config);
  return new OTLPExporterBase<ReadableSpan[]>(
    createOtlpHttpExportDelegate(
      // Deprecated for 2.0, and what @opentelemetry/exporter-trace-otlp-proto 0.223 calls: it
      // merges the options with the OTEL_EXPORTER_OTLP_* variables the same way for both encodings.
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      convertLegacyHttpOptions(config, "TRACES", "v1/traces", PROTOBUF),
      ProtobufTraceSerializer,
      "otlp_http_span_exporter",
      TraceExporterMetricsHelper,
      undefined,
    ),
  );
}

const TEMPORALITY: Record<Temporality, AggregationTemporalityPreference> = {
  cumulative: AggregationTemporalityPreference.CUMULATIVE,
  delta: AggregationTemporalityPreference.DELTA,
  lowmemory: AggregationTemporalityPreference.LOWMEMORY,
};

export function otlpMetricExporter(
  target: OtlpTarget,
  headers: Record<string, string> | undefined,
  temporality: Temporality,
): PushMetricExporter {
  const config = exporterConfig(target, headers);
  const temporalityPreference = TEMPORALITY[temporality];
  if (target.protocol === "http/json")
    return new OTLPMetricExporter({ ...config, temporalityPreference });
  return new OTLPMetricExporterBase(
    createOtlpHttpExportDelegate(
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      convertLegacyHttpOptions(config, "METRICS", "v1/metrics", PROTOBUF),
      ProtobufMetricsSerializer,
      "otlp_http_metric_exporter",
      MetricsExporterMetricsHelper,
      undefined,
    ),
    { temporalityPreference },
  );
}
