/**
 * The SDK behind `selfheal/otel` (see index.ts, which loads this module only when
 * `startTelemetry` is called, so a missing optional peer gets a clear error instead of a bare
 * module-not-found at import).
 */
import {
  context,
  createContextKey,
  metrics,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Attributes,
  type MeterProvider as ApiMeterProvider,
  type TracerProvider as ApiTracerProvider,
} from "@opentelemetry/api";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
  type Resource,
} from "@opentelemetry/resources";
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  NodeTracerProvider,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from "@opentelemetry/sdk-trace-node";
import { SelfHealConfigError } from "../errors.js";
import { ATTR_SERVICE_NAME } from "../telemetry/conventions.js";
import { describeThrown, safeLogger } from "../telemetry/redact.js";
import {
  resolveConfig,
  type ConfigOptions,
  type MetricsExporterName,
  type OtlpProtocol,
  type ResolvedConfig,
  type SamplerName,
  type Temporality,
  type TracesExporterName,
} from "./config.js";
import { otlpMetricExporter, otlpSpanExporter } from "./exporters.js";
import { SelfHealPrometheusExporter } from "./prometheus.js";
import { ExportGuard, guardMetricExporter, guardSpanExporter, type ExportErrors } from "./guard.js";

export type {
  ExportErrors,
  MetricsExporterName,
  OtlpProtocol,
  ResolvedConfig,
  SamplerName,
  Temporality,
  TracesExporterName,
};

/**
 * Every option is optional and wins over its environment variable (named in brackets); the
 * defaults are the OpenTelemetry specification's unless said otherwise.
 */
export interface TelemetryOptions extends Omit<ConfigOptions, "sampler"> {
  /** `service.name` [OTEL_SERVICE_NAME]; default `unknown_service:node`. */
  serviceName?: string | undefined;
  /** Resource attributes, over those of [OTEL_RESOURCE_ATTRIBUTES]. */
  resourceAttributes?: Attributes | undefined;
  /**
   * Register the providers globally (default true): the tracer provider with an
   * AsyncLocalStorage context manager (context follows async code, so the spans of a call nest)
   * and W3C propagators, and the meter provider. `createSelfHealing()` then needs no provider
   * options. With `false`, pass `tracerProvider`/`meterProvider` to `createSelfHealing` and
   * register a context manager yourself. `shutdown()` unregisters what it registered.
   */
  register?: boolean | undefined;
  /** Request headers, merged key by key over [OTEL_EXPORTER_OTLP_HEADERS] and the per-signal variables. */
  headers?: Record<string, string> | undefined;
  /** A sampler name [OTEL_TRACES_SAMPLER] (default parentbased_always_on) or a `Sampler` object. */
  sampler?: SamplerName | Sampler | undefined;
  /** Where export failures are reported; default `console`. */
  logger?: { warn(message: string): void } | undefined;
}

export interface Telemetry {
  /** The tracer provider, for `createSelfHealing({ tracerProvider })`; undefined when traces are off. */
  tracerProvider: ApiTracerProvider | undefined;
  /** The meter provider, for `createSelfHealing({ meterProvider })`; undefined when metrics are off. */
  meterProvider: ApiMeterProvider | undefined;
  /** The Prometheus scrape URL, when served. */
  metricsUrl: string | undefined;
  /** What was resolved from the options and the environment (endpoints, protocol, sampler...). */
  config: ResolvedConfig;
  /** Failed exports since start, per signal. */
  exportErrors(): ExportErrors;
  /** Exports what is buffered now; never rejects, gives up after `shutdownTimeoutMillis`. */
  forceFlush(): Promise<void>;
  /** Flushes, stops the exporters and unregisters the globals it registered; never rejects, bounded like `forceFlush`. */
  shutdown(): Promise<void>;
}

function buildSampler({ name, ratio }: ResolvedConfig["traces"]["sampler"]): Sampler {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

function buildResource(options: TelemetryOptions): Resource {
  const own: Attributes = { ...options.resourceAttributes };
  if (options.serviceName !== undefined) own[ATTR_SERVICE_NAME] = options.serviceName;
  // Later wins: SDK defaults < OTEL_RESOURCE_ATTRIBUTES < OTEL_SERVICE_NAME < options.
  return defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes(own));
}

/** `work`, but never longer than `ms` and never rejecting; the timer holds no process open. */
async function bounded(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  try {
    await Promise.race([work.then(noop, noop), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
const noop = () => undefined;

/** Grace over an OTLP export's own deadline before the guard gives up on it. */
const GUARD_GRACE_MS = 1_000;

/**
 * Starts the SDK as the options and the OTEL_* environment say. Throws `SelfHealConfigError`
 * (naming the option or variable) on a bad value, and when the Prometheus port cannot be bound;
 * never later: exports fail quietly into `exportErrors()` and one log line per window.
 */
// Long on purpose: the SDK's setup in the order it needs (exporters, providers, registration).
export async function startTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  const samplerObject = typeof options.sampler === "object" ? options.sampler : undefined;
  const config = resolveConfig({
    ...options,
    sampler: typeof options.sampler === "string" ? options.sampler : undefined,
  });
  const logger = safeLogger(options.logger ?? console);
  const guard = new ExportGuard(logger, config.errorLogIntervalMillis);
  const resource = buildResource(options);

  let tracerProvider: NodeTracerProvider | undefined;
  const { traces } = config;
  if (traces.exporters.length > 0) {
    const spanProcessors = traces.exporters.map((name) => {
      const otlp = name === "otlp" ? traces.otlp : undefined;
      const deadline = (otlp?.timeoutMillis ?? 0) + GUARD_GRACE_MS;
      const exporter = guardSpanExporter(
        otlp ? otlpSpanExporter(otlp, options.headers) : new ConsoleSpanExporter(),
        guard,
        otlp?.url ?? "console",
        deadline,
      );
      return new BatchSpanProcessor(exporter, {
        maxQueueSize: traces.maxQueueSize,
        maxExportBatchSize: traces.maxExportBatchSize,
        scheduledDelayMillis: traces.scheduledDelayMillis,
        // Past the guard's deadline: the guard always answers first, so the processor's own
        // timeout (which reports to the diag logger) never fires.
        exportTimeoutMillis: deadline + GUARD_GRACE_MS,
      });
    });
    tracerProvider = new NodeTracerProvider({
      resource,
      sampler: samplerObject ?? buildSampler(traces.sampler),
      spanProcessors,
    });
  }

  const readers: MetricReader[] = [];
  let prometheus: SelfHealPrometheusExporter | undefined;
  const { metrics: m } = config;
  for (const name of m.exporters) {
    if (name === "prometheus" && m.prometheus) {
      prometheus = new SelfHealPrometheusExporter({ ...m.prometheus, preventServerStart: true });
      readers.push(prometheus);
      continue;
    }
    const otlp = name === "otlp" ? m.otlp : undefined;
    const deadline = Math.max(
      1,
      Math.min((otlp?.timeoutMillis ?? 0) + GUARD_GRACE_MS, m.timeoutMillis - 50),
    );
    readers.push(
      new PeriodicExportingMetricReader({
        exporter: guardMetricExporter(
          otlp
            ? otlpMetricExporter(otlp, options.headers, m.temporality)
            : new ConsoleMetricExporter(),
          guard,
          otlp?.url ?? "console",
          deadline,
        ),
        exportIntervalMillis: m.intervalMillis,
        exportTimeoutMillis: m.timeoutMillis,
      }),
    );
  }
  const meterProvider = readers.length > 0 ? new MeterProvider({ resource, readers }) : undefined;

  const stop = () =>
    Promise.allSettled([tracerProvider?.shutdown(), meterProvider?.shutdown()]).then(noop);
  let metricsUrl: string | undefined;
  if (prometheus && m.prometheus) {
    const { host, port } = m.prometheus;
    try {
      await prometheus.startServer();
    } catch (error) {
      await bounded(stop(), config.shutdownTimeoutMillis);
      throw new SelfHealConfigError(
        options.metricsPort !== undefined ? "metricsPort" : "OTEL_EXPORTER_PROMETHEUS_PORT",
        `cannot serve Prometheus metrics on ${host}:${port}: ${describeThrown(error)}`,
      );
    }
    metricsUrl = `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics`;
  }

  let registered = { tracer: false, context: false, propagator: false, meter: false };
  if (options.register ?? true) {
    if (tracerProvider) {
      // What the app already has is kept (and not registered twice: the API would log an error).
      const ownContext = !hasContextManager();
      const ownPropagator = propagation.fields().length === 0;
      tracerProvider.register({
        ...(!ownContext && { contextManager: null }),
        ...(!ownPropagator && { propagator: null }),
      });
      registered = { ...registered, context: ownContext, propagator: ownPropagator };
      registered.tracer = globalTracerDelegate() === tracerProvider;
      if (!registered.tracer) {
        logger.warn(
          "selfheal/otel: another tracer provider is already registered globally; pass telemetry.tracerProvider to createSelfHealing",
        );
      }
    }
    if (meterProvider) registered.meter = metrics.setGlobalMeterProvider(meterProvider);
  }

  let shutdown: Promise<void> | undefined;
  return {
    tracerProvider,
    meterProvider,
    metricsUrl,
    config,
    exportErrors: () => guard.snapshot(),
    forceFlush: () =>
      bounded(
        Promise.allSettled([tracerProvider?.forceFlush(), meterProvider?.forceFlush()]),
        config.shutdownTimeoutMillis,
      ),
    shutdown: () =>
      (shutdown ??= (async () => {
        if (registered.tracer && globalTracerDelegate() === tracerProvider) trace.disable();
        if (registered.meter && metrics.getMeterProvider() === meterProvider) metrics.disable();
        if (registered.context) context.disable();
        if (registered.propagator) propagation.disable();
        await bounded(stop(), config.shutdownTimeoutMillis);
      })()),
  };
}

/** True when a context manager is registered (the no-op one never makes a context active). */
function hasContextManager(): boolean {
  const probe = ROOT_CONTEXT.setValue(PROBE, true);
  return context.with(probe, () => context.active() === probe);
}
const PROBE = createContextKey("selfheal/otel context manager probe");

/** The SDK provider behind the API's global proxy, if any. */
function globalTracerDelegate(): unknown {
  const global = trace.getTracerProvider() as ApiTracerProvider & { getDelegate?: () => unknown };
  return typeof global.getDelegate === "function" ? global.getDelegate() : global;
}

/** Options of the deprecated {@link startOtel}; see {@link TelemetryOptions}. */
export interface OtelOptions {
  serviceName: string;
  otlpEndpoint?: string | undefined;
  metricsPort?: number | undefined;
  metricsHost?: string;
}

/**
 * @deprecated Use {@link startTelemetry}. Kept with its old behaviour: traces only when an
 * endpoint is given (option or OTEL_EXPORTER_OTLP_ENDPOINT), metrics only on `metricsPort`,
 * nothing registered globally.
 */
export function startOtel(options: OtelOptions): Promise<Telemetry> {
  const endpoint = options.otlpEndpoint ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return startTelemetry({
    serviceName: options.serviceName,
    endpoint: endpoint || undefined,
    tracesExporter: endpoint ? "otlp" : "none",
    metricsExporter: "none",
    metricsPort: options.metricsPort,
    metricsHost: options.metricsHost,
    register: false,
  });
}
