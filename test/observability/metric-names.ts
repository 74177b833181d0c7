import type { Meter, MeterProvider } from "@opentelemetry/api";
import { MeterProvider as SdkMeterProvider } from "@opentelemetry/sdk-metrics";
import * as conventions from "../../src/telemetry/conventions.js";
import { SelfHealMetrics } from "../../src/telemetry/metrics.js";
import { WatchdogTelemetry } from "../../src/watchdog/telemetry.js";

export type Kind = "counter" | "histogram" | "gauge";

const KIND_OF: Record<string, Kind> = {
  createCounter: "counter",
  createObservableCounter: "counter",
  createHistogram: "histogram",
  createGauge: "gauge",
  createObservableGauge: "gauge",
  // Non-monotonic sums are Prometheus gauges: no `_total`.
  createUpDownCounter: "gauge",
  createObservableUpDownCounter: "gauge",
};

/** The unit of each instrument metrics.ts creates (filled by instrumentKinds). */
const UNITS = new Map<string, string | undefined>();

/** The kind of instrument metrics.ts creates for each metric name, read off a real meter. */
function instrumentKinds(): Map<string, Kind> {
  const kinds = new Map<string, Kind>();
  const sdk = new SdkMeterProvider();
  const provider: MeterProvider = {
    getMeter: (...args: Parameters<MeterProvider["getMeter"]>) => {
      const meter = sdk.getMeter(...args);
      return new Proxy(meter, {
        get(target, key: keyof Meter) {
          const kind = KIND_OF[key];
          const value: unknown = Reflect.get(target, key, target);
          if (typeof value !== "function") return value;
          const method = value as (this: Meter, ...args: unknown[]) => unknown;
          return (name: string, ...rest: unknown[]) => {
            if (kind !== undefined) kinds.set(name, kind);
            UNITS.set(name, (rest[0] as { unit?: string } | undefined)?.unit);
            return method.call(target, name, ...rest);
          };
        },
      });
    },
  };
  new SelfHealMetrics(
    "probe",
    provider,
    () => undefined,
    () => [],
    () => undefined,
    () => undefined,
  );
  new WatchdogTelemetry({ agent: "probe", sessionId: "probe", meterProvider: provider });
  return kinds;
}

/**
 * Every metric of the contract (the `METRIC_*` constants of conventions.ts), with the kind of
 * instrument selfheal makes for it; undefined for a contract name nothing records yet.
 */
export function contractMetrics(): Map<string, Kind | undefined> {
  const kinds = instrumentKinds();
  const out = new Map<string, Kind | undefined>();
  for (const [key, value] of Object.entries(conventions)) {
    if (key.startsWith("METRIC_") && typeof value === "string") out.set(value, kinds.get(value));
  }
  return out;
}

const SUFFIXES: Record<Kind, string[]> = {
  counter: ["_total"],
  histogram: ["_bucket", "_sum", "_count"],
  gauge: [""],
};

/**
 * The contract metric a Prometheus series name stands for (`selfheal_tool_calls_total` ->
 * `selfheal_tool_calls`), or why it stands for none: not in conventions.ts, no instrument, or a
 * suffix its kind does not have (a counter without `_total`, a gauge with one, ...).
 */
export function resolveSeriesName(
  name: string,
  contract = contractMetrics(),
): { metric: string; kind: Kind } | { error: string } {
  // Several contract names may prefix the name (selfheal_recover... ): try each.
  for (const [metric, kind] of contract) {
    // OpenTelemetry names (gen_ai.client.token.usage) are stored with underscores, and a name
    // in seconds ends in `_seconds` (gen_ai_client_operation_duration_seconds).
    const escaped = metric.replace(/[^A-Za-z0-9_:]/g, "_");
    const stored =
      UNITS.get(metric) === "s" && !escaped.endsWith("_seconds") ? `${escaped}_seconds` : escaped;
    if (!name.startsWith(stored)) continue;
    const suffix = name.slice(stored.length);
    if (kind === undefined) return { error: `${name}: ${metric} has no instrument in metrics.ts` };
    if (SUFFIXES[kind].includes(suffix)) return { metric, kind };
  }
  return { error: `${name}: no metric of src/telemetry/conventions.ts is stored under this name` };
}
