import { createServer, type Server } from "node:net";
import { diag, DiagLogLevel, ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";
import { AlwaysOffSampler, type ReadableSpan } from "@opentelemetry/sdk-trace-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { isSelfHealConfigError } from "../../src/index.js";
import * as guard from "../../src/otel/guard.js";
import {
  startOtel,
  startTelemetry,
  type SamplerName,
  type Telemetry,
  type TelemetryOptions,
} from "../../src/otel/sdk.js";
import { closedPort, startReceiver } from "../helpers/otlp.js";

// The guards are the real ones; the test reads what each exporter was wrapped with.
vi.mock("../../src/otel/guard.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/otel/guard.js")>();
  return {
    ...real,
    guardSpanExporter: vi.fn(real.guardSpanExporter),
    guardMetricExporter: vi.fn(real.guardMetricExporter),
  };
});

const diagErrors: unknown[] = [];
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  receiver = await startReceiver();
  diag.setLogger(
    {
      error: (...args) => diagErrors.push(args),
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    DiagLogLevel.ERROR,
  );
});
afterAll(async () => {
  diag.disable();
  await receiver.close();
});

const started: Telemetry[] = [];
const servers: Server[] = [];
beforeEach(() => {
  vi.clearAllMocks();
  // The console exporters print what they export.
  vi.spyOn(console, "dir").mockImplementation(() => undefined);
  vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((t) => t.shutdown()));
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise((resolve) => {
          s.close(resolve);
        }),
    ),
  );
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  receiver.received.length = 0;
  diagErrors.length = 0;
});

/** startTelemetry on its own (nothing registered globally), exporting to the receiver. */
async function start(options: TelemetryOptions = {}) {
  const telemetry = await startTelemetry({
    endpoint: receiver.url,
    register: false,
    logger: { warn: () => undefined },
    ...options,
  });
  started.push(telemetry);
  return telemetry;
}

/** [target, deadline] of every exporter the guard wrapped, per signal. */
const guarded = () => ({
  traces: vi.mocked(guard.guardSpanExporter).mock.calls.map((c) => [c[2], c[3]]),
  metrics: vi.mocked(guard.guardMetricExporter).mock.calls.map((c) => [c[2], c[3]]),
});

describe("each exporter is guarded with its target and a deadline past its own", () => {
  it.each<[string, TelemetryOptions, (url: string) => ReturnType<typeof guarded>]>([
    [
      "OTLP and console for both signals: 1 s past the export timeout, 1 s for the console",
      {
        tracesExporter: ["otlp", "console"],
        metricsExporter: ["otlp", "console"],
        exportTimeoutMillis: 2_000,
      },
      (url) => ({
        traces: [
          [`${url}/v1/traces`, 3_000],
          ["console", 1_000],
        ],
        metrics: [
          [`${url}/v1/metrics`, 3_000],
          ["console", 1_000],
        ],
      }),
    ],
    [
      "a short metric interval: the metric deadline stays 50 ms inside the reader's bound",
      { tracesExporter: "none", metricsExporter: "otlp", metricsIntervalMillis: 1_000 },
      (url) => ({ traces: [], metrics: [[`${url}/v1/metrics`, 950]] }),
    ],
  ])("%s", async (_what, options, expected) => {
    await start(options);
    expect(guarded()).toEqual(expected(receiver.url));
  });

  it("OTLP metrics beside a Prometheus endpoint: the OTLP exporter is still built and guarded", async () => {
    const port = await closedPort();
    const telemetry = await start({
      tracesExporter: "none",
      metricsExporter: "otlp",
      metricsPort: port,
    });
    expect(guarded().metrics).toEqual([[`${receiver.url}/v1/metrics`, 11_000]]);
    expect(telemetry.metricsUrl).toBe(`http://127.0.0.1:${port}/metrics`);
  });
});

describe("samplers", () => {
  const parent = (flags: TraceFlags) =>
    trace.setSpanContext(ROOT_CONTEXT, {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: flags,
      isRemote: true,
    });
  const sampled = (t: Telemetry, context = ROOT_CONTEXT) =>
    t.tracerProvider?.getTracer("t").startSpan("s", {}, context).isRecording();

  // [sampler, OTEL_TRACES_SAMPLER (which the option must win over), no parent, sampled parent, unsampled parent]
  it.each<[SamplerName, string, boolean, boolean, boolean]>([
    ["always_on", "always_off", true, true, true],
    ["always_off", "always_on", false, false, false],
    ["traceidratio", "always_on", false, false, false],
    ["parentbased_always_on", "always_off", true, true, false],
    ["parentbased_always_off", "always_on", false, true, false],
    ["parentbased_traceidratio", "always_on", false, true, false],
  ])(
    "%s (over OTEL_TRACES_SAMPLER=%s)",
    async (sampler, env, root, underSampled, underUnsampled) => {
      vi.stubEnv("OTEL_TRACES_SAMPLER", env);
      const t = await start({ sampler, samplerRatio: 0, metricsExporter: "none" });
      expect(t.config.traces.sampler.name).toBe(sampler);
      expect([
        sampled(t),
        sampled(t, parent(TraceFlags.SAMPLED)),
        sampled(t, parent(TraceFlags.NONE)),
      ]).toEqual([root, underSampled, underUnsampled]);
    },
  );

  it("a Sampler object is used as is; the configuration keeps the default name", async () => {
    const t = await start({ sampler: new AlwaysOffSampler(), metricsExporter: "none" });
    expect(t.config.traces.sampler.name).toBe("parentbased_always_on");
    expect(sampled(t)).toBe(false);
  });
});

describe("the rest of the setup", () => {
  it("without the serviceName option, OTEL_SERVICE_NAME names the service", async () => {
    vi.stubEnv("OTEL_SERVICE_NAME", "from-env");
    const t = await start({ metricsExporter: "none", resourceAttributes: { team: "ops" } });
    const span = t.tracerProvider?.getTracer("t").startSpan("s") as unknown as ReadableSpan;
    expect(span.resource.attributes).toMatchObject({ "service.name": "from-env", team: "ops" });
  });

  it("shutdown exports the spans still buffered", async () => {
    const t = await start({ metricsExporter: "none", scheduledDelayMillis: 600_000 });
    t.tracerProvider?.getTracer("t").startSpan("buffered").end();
    expect(receiver.received).toEqual([]);
    await t.shutdown();
    expect(receiver.spans().map((s) => s.name)).toEqual(["buffered"]);
  });

  it("forceFlush and shutdown leave no timer behind", async () => {
    const t = await start({ tracesExporter: "none", metricsExporter: "none" });
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    await t.forceFlush();
    expect(vi.getTimerCount()).toBe(0);
    await t.shutdown();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("the deprecated startOtel without an endpoint starts nothing", async () => {
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- its old behaviour is kept
    const t = await startOtel({ serviceName: "old" });
    started.push(t);
    expect([t.tracerProvider, t.meterProvider, t.metricsUrl]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe("the Prometheus endpoint", () => {
  /** A port something already listens on. */
  async function busyPort() {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return (server.address() as { port: number }).port;
  }

  it("a port in use, from OTEL_EXPORTER_PROMETHEUS_PORT: a config error naming the variable, nothing said to diag", async () => {
    const port = await busyPort();
    vi.stubEnv("OTEL_EXPORTER_PROMETHEUS_PORT", String(port));
    const error = await start({ tracesExporter: "none", metricsExporter: "prometheus" }).catch(
      (e: unknown) => e,
    );
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as { field: string }).field).toBe("OTEL_EXPORTER_PROMETHEUS_PORT");
    expect((error as Error).message).toMatch(
      new RegExp(`cannot serve Prometheus metrics on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`),
    );
    expect(diagErrors).toEqual([]);
  });

  it("on an IPv6 host: the URL brackets it; shutdown stops serving", async () => {
    const port = await closedPort();
    const t = await start({
      tracesExporter: "none",
      metricsExporter: "none",
      metricsPort: port,
      metricsHost: "::1",
    });
    expect(t.metricsUrl).toBe(`http://[::1]:${port}/metrics`);
    const url = t.metricsUrl ?? "";
    // Served (the upstream exporter answers 400 on an IPv6 host: it cannot parse its own base
    // URL, http://::1:port/; the scrape itself is its business, the address is selfheal's).
    await expect(fetch(url)).resolves.toBeInstanceOf(Response);
    await t.shutdown();
    await expect(fetch(url)).rejects.toThrow();
  });
});
