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

type Otel = typeof import("../otel/index.js");
/** How the CLI gets `selfheal/otel` (a test hands in one whose SDK is missing). */
export type OtelLoader = () => Promise<Pick<Otel, "startTelemetry" | "OTEL_PEERS">>;

const ENDPOINT_VARIABLES = [
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
] as const;

/**
 * Whether `error` says an OpenTelemetry SDK package cannot be loaded: selfheal/otel's
 * MissingPeerError, or the module-resolution failure under it when a peer resolves for
 * `require` but not for `import` (an install half done).
 */
function missingSdk(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code === "ERR_SELFHEAL_MISSING_PEER") return true;
  return (
    (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") &&
    typeof message === "string" &&
    message.includes("@opentelemetry/")
  );
}

/**
 * The SDK for a command's own spans and metrics, loaded only when asked for: a metrics port, or
 * an OTLP endpoint in the environment. Undefined when neither is set. When the SDK's optional
 * peers are not installed: a UsageError (one line, exit 2) naming what asked for it and the
 * command that installs them.
 */
export async function startCliTelemetry(
  serviceName: string,
  metricsPort: number | undefined,
  options: { maxQueueSize?: number; maxExportBatchSize?: number } = {},
  load: OtelLoader = () => import("../otel/index.js"),
) {
  const env = process.env;
  const endpoint = ENDPOINT_VARIABLES.find((name) => Boolean(env[name]));
  const otlp = endpoint !== undefined;
  if (metricsPort === undefined && !otlp) return undefined;
  const { startTelemetry, OTEL_PEERS } = await load();
  try {
    return await startTelemetry({
      // OTEL_SERVICE_NAME, when set, names the run; options would win over it.
      ...(!env.OTEL_SERVICE_NAME && { serviceName }),
      // No endpoint set: nothing goes over OTLP (the spec's default would be localhost:4318).
      ...(!otlp && { tracesExporter: "none" as const, metricsExporter: "none" as const }),
      metricsPort,
      // An interactive run should not linger 10 s (the spec's default) on a collector that is down.
      ...(!env.OTEL_EXPORTER_OTLP_TIMEOUT && { exportTimeoutMillis: 3_000 }),
      ...options,
    });
  } catch (error) {
    if (!missingSdk(error)) throw error;
    const asker = endpoint !== undefined ? `${endpoint} is set: exporting` : "--metrics-port";
    throw new UsageError(
      `${asker} needs the OpenTelemetry SDK (optional peers of selfheal), not installed; ` +
        `install it with: npm install ${OTEL_PEERS.join(" ")}`,
    );
  }
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
