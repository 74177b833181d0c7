import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import type { CollectionResult, ResourceMetrics } from "@opentelemetry/sdk-metrics";
import { INSTRUMENTATION_SCOPE } from "../telemetry/conventions.js";

const SECONDS_SUFFIX = "_seconds";

/**
 * The SDK's Prometheus exporter, naming selfheal's metrics as every other Prometheus path does
 * (Prometheus's and Mimir's OTLP intake, the Collector's exporters: UnderscoreEscapingWithSuffixes
 * adds the unit): a histogram in seconds ends in `_seconds`. The exporter adds `_total` to
 * counters but no unit, so the GenAI conventions' `gen_ai.client.operation.duration` (unit `s`)
 * would be `gen_ai_client_operation_duration` here and `gen_ai_client_operation_duration_seconds`
 * on the other paths; dashboards and alerts need one name. Only selfheal's scope is renamed: an
 * app's own metrics keep the names this exporter always gave them.
 */
export class SelfHealPrometheusExporter extends PrometheusExporter {
  override async collect(
    options?: Parameters<PrometheusExporter["collect"]>[0],
  ): Promise<CollectionResult> {
    const result = await super.collect(options);
    return { ...result, resourceMetrics: withSecondsSuffix(result.resourceMetrics) };
  }
}

/**
 * selfheal's metrics as the Prometheus paths name them: copies (the SDK's records are left as
 * they are) with `_seconds` added to a name in seconds that lacks it.
 */
export function withSecondsSuffix(resourceMetrics: ResourceMetrics): ResourceMetrics {
  return {
    ...resourceMetrics,
    scopeMetrics: resourceMetrics.scopeMetrics.map((scope) =>
      scope.scope.name !== INSTRUMENTATION_SCOPE
        ? scope
        : {
            ...scope,
            metrics: scope.metrics.map((metric) => {
              const { name, unit } = metric.descriptor;
              if (unit !== "s" || name.endsWith(SECONDS_SUFFIX)) return metric;
              return {
                ...metric,
                descriptor: { ...metric.descriptor, name: name + SECONDS_SUFFIX },
              };
            }),
          },
    ),
  };
}
