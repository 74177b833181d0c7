import {
  context,
  createContextKey,
  diag,
  DiagLogLevel,
  metrics,
  propagation,
  ROOT_CONTEXT,
  trace,
  type TextMapPropagator,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { afterEach, describe, expect, it } from "vitest";
import { startTelemetry, type TelemetryOptions } from "../../src/otel/sdk.js";
import { suiteReceiver } from "../helpers/otlp.js";

const diagErrors: string[] = [];
const receiver = suiteReceiver();
afterEach(() => {
  trace.disable();
  metrics.disable();
  context.disable();
  propagation.disable();
  diag.disable();
  diagErrors.length = 0;
});

/** startTelemetry with the API's own complaints (duplicate registrations) and its warnings kept. */
async function start(options: TelemetryOptions = {}) {
  diag.setLogger(
    {
      error: (m) => diagErrors.push(m.split("\n")[0] ?? ""),
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    DiagLogLevel.ERROR,
  );
  const warnings: string[] = [];
  const telemetry = await startTelemetry({
    endpoint: receiver().url,
    logger: { warn: (line) => warnings.push(line) },
    ...options,
  });
  return { telemetry, warnings };
}

/** What is global now, as an app sees it. */
function globals() {
  const probe = ROOT_CONTEXT.setValue(createContextKey("probe"), 1);
  return {
    recording: trace.getTracerProvider().getTracer("x").startSpan("s").isRecording(),
    meterProvider: metrics.getMeterProvider(),
    contextManager: context.with(probe, () => context.active()) === probe,
    propagatorFields: propagation.fields(),
  };
}

/** What an app may have set up before (or after) startTelemetry. */
function appGlobals() {
  const tracerProvider = new NodeTracerProvider();
  const meterProvider = new MeterProvider();
  const propagator: TextMapPropagator = {
    inject: () => undefined,
    extract: (c) => c,
    fields: () => ["x-app"],
  };
  const install = () => {
    trace.setGlobalTracerProvider(tracerProvider);
    metrics.setGlobalMeterProvider(meterProvider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(propagator);
  };
  return { tracerProvider, meterProvider, install };
}

describe("global registration", () => {
  it("nothing global before: registers a tracer (with a context manager and W3C propagators) and the meter provider; shutdown takes them all back", async () => {
    const { telemetry, warnings } = await start();
    expect(globals()).toEqual({
      recording: true,
      meterProvider: telemetry.meterProvider,
      contextManager: true,
      propagatorFields: ["traceparent", "tracestate", "baggage"],
    });
    expect(warnings).toEqual([]);
    await telemetry.shutdown();
    expect(globals()).toMatchObject({
      recording: false,
      contextManager: false,
      propagatorFields: [],
    });
    expect(globals().meterProvider).not.toBe(telemetry.meterProvider);
    expect(diagErrors).toEqual([]);
  });

  it("an app's globals are kept (a warning for the tracer provider) and left in place at shutdown", async () => {
    const app = appGlobals();
    app.install();
    const { telemetry, warnings } = await start({ metricsExporter: "none" });
    expect(warnings).toEqual([
      "selfheal/otel: another tracer provider is already registered globally; pass telemetry.tracerProvider to createSelfHealing",
    ]);
    const kept = {
      recording: true,
      meterProvider: app.meterProvider,
      contextManager: true,
      propagatorFields: ["x-app"],
    };
    expect(globals()).toEqual(kept);
    await telemetry.shutdown();
    expect(globals()).toEqual(kept);
    // The tracer provider's own attempt is all the API complains of: nothing else is registered twice.
    expect(diagErrors).toEqual([
      "Error: @opentelemetry/api: Attempted duplicate registration of API: trace",
    ]);
  });

  it("register: false, then the app registers the providers itself: shutdown unregisters nothing", async () => {
    const { telemetry } = await start({ register: false });
    const { tracerProvider, meterProvider } = telemetry;
    if (!tracerProvider || !meterProvider) throw new Error("providers expected");
    appGlobals().install();
    trace.disable();
    metrics.disable();
    trace.setGlobalTracerProvider(tracerProvider);
    metrics.setGlobalMeterProvider(meterProvider);
    await telemetry.shutdown();
    expect(globals()).toEqual({
      recording: true, // still the global one (shut down, its spans still record)
      meterProvider,
      contextManager: true,
      propagatorFields: ["x-app"],
    });
  });

  it("globals the app replaced after startTelemetry are not taken back at shutdown", async () => {
    const { telemetry } = await start();
    const app = appGlobals();
    trace.disable();
    metrics.disable();
    trace.setGlobalTracerProvider(app.tracerProvider);
    metrics.setGlobalMeterProvider(app.meterProvider);
    await telemetry.shutdown();
    expect(globals()).toMatchObject({ recording: true, meterProvider: app.meterProvider });
  });
});
