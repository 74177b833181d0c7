import { eventLogProblem } from "../recovery/event-log.js";
import { UsageError } from "./errors.js";

/** `--metrics-port`: a port number, or undefined when the flag is absent. */
export function metricsPortFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65_535)
    throw new UsageError(`--metrics-port must be a port number, got "${value}"`);
  return port;
}

/** `--event-log`: a path selfheal can append to now, or undefined when the flag is absent. */
export function eventLogFlag(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  const problem = path.trim() === "" ? "empty path" : eventLogProblem(path);
  if (problem !== undefined) throw new UsageError(`--event-log ${path}: ${problem}`);
  return path;
}

/**
 * The SDK for a command's own spans and metrics, loaded only when asked for: a metrics port, or
 * an OTLP endpoint in the environment. Undefined when neither is set.
 */
export async function startCliTelemetry(
  serviceName: string,
  metricsPort: number | undefined,
  options: { maxQueueSize?: number; maxExportBatchSize?: number } = {},
) {
  const env = process.env;
  const otlp = Boolean(
    env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
  );
  if (metricsPort === undefined && !otlp) return undefined;
  const { startTelemetry } = await import("../otel/index.js");
  return startTelemetry({
    // OTEL_SERVICE_NAME, when set, names the run; options would win over it.
    ...(!env.OTEL_SERVICE_NAME && { serviceName }),
    // No endpoint set: nothing goes over OTLP (the spec's default would be localhost:4318).
    ...(!otlp && { tracesExporter: "none" as const, metricsExporter: "none" as const }),
    metricsPort,
    // An interactive run should not linger 10 s (the spec's default) on a collector that is down.
    ...(!env.OTEL_EXPORTER_OTLP_TIMEOUT && { exportTimeoutMillis: 3_000 }),
    ...options,
  });
}

/** Flushes the command's telemetry and says on stderr if exports failed (the run was unaffected). */
export async function stopCliTelemetry(
  telemetry: Awaited<ReturnType<typeof startCliTelemetry>>,
): Promise<void> {
  if (!telemetry) return;
  await telemetry.shutdown();
  const failed = telemetry.exportErrors();
  if (failed.traces + failed.metrics > 0) {
    process.stderr.write(
      `selfheal: ${failed.traces + failed.metrics} telemetry export(s) failed, the run was unaffected; last: ${failed.last ?? ""}\n`,
    );
  }
}
