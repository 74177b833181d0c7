/**
 * The Collector's own metrics that alerts/collector.rules.yml may read, as otelcol-contrib
 * v0.161.0 documents them (the documentation.md that mdatagen writes from each component's
 * metadata.yaml): go.opentelemetry.io/collector/exporter/exporterhelper v0.161.0,
 * go.opentelemetry.io/collector/receiver/receiverhelper v0.161.0 and
 * github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor
 * v0.161.0. Kinds: a monotonic Sum is a counter, a Gauge or a non-monotonic Sum a gauge.
 * collector-alerts.test.ts checks the names against a running Collector of that release.
 */
export type OtelcolKind = "counter" | "gauge" | "histogram";

const counters = (prefix: string, signals: string[]) =>
  signals.map((s) => [`${prefix}_${s}`, "counter"] as const);
const SIGNALS = ["spans", "metric_points", "log_records", "profile_samples"];

export const OTELCOL_METRICS: ReadonlyMap<string, OtelcolKind> = new Map<string, OtelcolKind>([
  // exporterhelper
  ...counters("otelcol_exporter_sent", SIGNALS),
  ...counters("otelcol_exporter_send_failed", SIGNALS),
  ...counters("otelcol_exporter_enqueue_failed", SIGNALS),
  ["otelcol_exporter_queue_size", "gauge"],
  ["otelcol_exporter_queue_capacity", "gauge"],
  ["otelcol_exporter_in_flight_requests", "gauge"],
  ["otelcol_exporter_enqueue_size", "histogram"],
  ["otelcol_exporter_queue_batch_send_size", "histogram"],
  // receiverhelper
  ...counters("otelcol_receiver_accepted", SIGNALS),
  ...counters("otelcol_receiver_refused", SIGNALS),
  ...counters("otelcol_receiver_failed", SIGNALS),
  ["otelcol_receiver_requests", "counter"],
  // tail_sampling processor
  ["otelcol_processor_tail_sampling_count_traces_sampled", "counter"],
  ["otelcol_processor_tail_sampling_count_spans_sampled", "counter"],
  ["otelcol_processor_tail_sampling_global_count_traces_sampled", "counter"],
  ["otelcol_processor_tail_sampling_new_trace_id_received", "counter"],
  ["otelcol_processor_tail_sampling_sampling_trace_dropped_too_early", "counter"],
  ["otelcol_processor_tail_sampling_traces_dropped_too_large", "counter"],
  ["otelcol_processor_tail_sampling_sampling_policy_evaluation_error", "counter"],
  ["otelcol_processor_tail_sampling_sampling_traces_on_memory", "gauge"],
  ["otelcol_processor_tail_sampling_sampling_decision_timer_latency", "histogram"],
]);
