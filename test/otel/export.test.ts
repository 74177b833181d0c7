import {
  context,
  createContextKey,
  diag,
  DiagLogLevel,
  metrics,
  ROOT_CONTEXT,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createSelfHealing, isSelfHealConfigError } from "../../src/index.js";
import { startTelemetry, type Telemetry, type TelemetryOptions } from "../../src/otel/index.js";
import { FailureInjector } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { closedPort, spanTree, startReceiver, type ReceivedSpan } from "../helpers/otlp.js";

let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const started: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((t) => t.shutdown()));
  vi.unstubAllEnvs();
  receiver.received.length = 0;
});

/** startTelemetry against the test receiver; short intervals, nothing left running after the test. */
async function start(options: TelemetryOptions = {}) {
  const telemetry = await startTelemetry({
    endpoint: receiver.url,
    scheduledDelayMillis: 20,
    metricsIntervalMillis: 60_000,
    logger: { warn: () => undefined },
    ...options,
  });
  started.push(telemetry);
  return telemetry;
}

/** One call through selfheal that fails once (HTTP 503) and is recovered by a retry. */
async function recoveredCall() {
  const { sh, clock } = virtualInstance({ recovery: { random: () => 0 } });
  const injector = new FailureInjector({ clock });
  injector.inject("http_503", { first: 1 });
  const search = sh.tool(
    "search",
    { readOnly: true, provider: "acme" },
    injector.wrap((q: string) => Promise.resolve(`found ${q}`)),
  );
  await expect(clock.run(search("cats"), { stepMs: 100 })).resolves.toBe("found cats");
  await sh.close();
}

const byName = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

describe("startTelemetry exports to a real OTLP/HTTP receiver", () => {
  for (const protocol of ["http/json", "http/protobuf"] as const) {
    it(`${protocol}: the contract's span tree and attributes, from a selfheal that was given no provider (global registration)`, async () => {
      const telemetry = await start({ protocol, serviceName: "support-bot" });
      await recoveredCall();
      await telemetry.forceFlush();

      const traces = receiver.received.filter((r) => r.path === "/v1/traces");
      expect(traces.length).toBeGreaterThan(0);
      expect(String(traces[0]?.headers["content-type"])).toBe(
        protocol === "http/json" ? "application/json" : "application/x-protobuf",
      );
      const spans = receiver.spans();
      expect(spanTree(spans)).toEqual([
        { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
      ]);
      const [call] = byName(spans, "agent.tool_call");
      expect(call?.kind).toBe(1); // INTERNAL
      expect(call?.resource["service.name"]).toBe("support-bot");
      expect(call?.attributes).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "selfheal.agent.name": "test-agent",
        "gen_ai.provider.name": "acme",
        "selfheal.call.outcome": "recovered",
      });
      const [error] = byName(spans, "agent.tool_call.error");
      expect(error?.statusCode).toBe(2); // ERROR
      expect(error?.events).toEqual(["exception"]);
      expect(error?.attributes["selfheal.recovery.attempt"]).toBe(1);
      expect(byName(spans, "agent.diagnosis")[0]?.attributes).toMatchObject({
        "selfheal.diagnosis.pattern": "SERVICE_DOWN",
        "selfheal.diagnosis.rule": expect.any(String) as unknown,
      });
      expect(byName(spans, "agent.recovery")[0]?.attributes).toMatchObject({
        "selfheal.recovery.strategy": expect.any(String) as unknown,
        "selfheal.recovery.attempt": 2,
        "selfheal.recovery.outcome": "success",
      });
      // Every span of the call is in one trace.
      expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
      expect(telemetry.exportErrors()).toEqual({
        traces: 0,
        metrics: 0,
        spansLost: 0,
        last: undefined,
      });
    });
  }

  it("metrics reach the receiver over OTLP (cumulative by default, delta when asked), with the contract's names", async () => {
    const telemetry = await start({ protocol: "http/json" });
    await recoveredCall();
    await telemetry.forceFlush();
    const received = receiver.metrics();
    const calls = received.find((m) => m.name === "selfheal_tool_calls");
    expect(calls?.temporality).toBe(2);
    expect(calls?.points).toContainEqual({
      attributes: { agent: "test-agent", tool: "search", outcome: "recovered" },
      value: 1,
    });
    // Alerts divide by these: every outcome exists from the start.
    expect(calls?.points.map((p) => p.attributes.outcome).sort()).toEqual([
      "blocked",
      "error",
      "recovered",
      "success",
    ]);
    const names = new Set(received.map((m) => m.name));
    for (const name of [
      "selfheal_tool_call_duration_seconds",
      "selfheal_incidents",
      "selfheal_recoveries",
      "selfheal_recovery_duration_seconds",
    ])
      expect(names).toContain(name);
    await telemetry.shutdown();

    receiver.received.length = 0;
    const delta = await start({ protocol: "http/json", temporality: "delta" });
    await recoveredCall();
    await delta.forceFlush();
    expect(receiver.metrics().find((m) => m.name === "selfheal_tool_calls")?.temporality).toBe(1);
  });

  it("metrics over protobuf too", async () => {
    const telemetry = await start({ tracesExporter: "none" });
    await recoveredCall();
    await telemetry.forceFlush();
    const metricsRequests = receiver.received.filter((r) => r.path === "/v1/metrics");
    expect(metricsRequests[0]?.headers["content-type"]).toBe("application/x-protobuf");
    expect(receiver.metrics().map((m) => m.name)).toContain("selfheal_recoveries");
    expect(receiver.received.filter((r) => r.path === "/v1/traces")).toEqual([]);
  });
});

describe("the standard environment reaches the receiver", () => {
  it("OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_ENDPOINT/_HEADERS/_PROTOCOL; the headers option wins key by key", async () => {
    vi.stubEnv("OTEL_SERVICE_NAME", "billing-agent");
    vi.stubEnv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging,team=ops%20core");
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url);
    vi.stubEnv("OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team=env-key,x-tenant=acme");
    vi.stubEnv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    const telemetry = await startTelemetry({
      headers: { "x-honeycomb-team": "option-key" },
      scheduledDelayMillis: 20,
      logger: { warn: () => undefined },
    });
    started.push(telemetry);
    expect(telemetry.config.traces.otlp).toMatchObject({
      url: `${receiver.url}/v1/traces`,
      protocol: "http/json",
    });
    await recoveredCall();
    await telemetry.forceFlush();

    for (const path of ["/v1/traces", "/v1/metrics"]) {
      const request = receiver.received.find((r) => r.path === path);
      expect(request?.headers["x-honeycomb-team"]).toBe("option-key");
      expect(request?.headers["x-tenant"]).toBe("acme");
      expect(request?.headers["content-type"]).toBe("application/json");
    }
    expect(receiver.spans()[0]?.resource).toMatchObject({
      "service.name": "billing-agent",
      "deployment.environment.name": "staging",
      team: "ops core",
      "telemetry.sdk.language": "nodejs",
    });
    expect(receiver.metrics()[0]?.resource["service.name"]).toBe("billing-agent");
  });

  it("the serviceName option wins over OTEL_SERVICE_NAME; resourceAttributes over OTEL_RESOURCE_ATTRIBUTES", async () => {
    vi.stubEnv("OTEL_SERVICE_NAME", "from-env");
    vi.stubEnv("OTEL_RESOURCE_ATTRIBUTES", "team=env,region=eu");
    const telemetry = await start({
      protocol: "http/json",
      serviceName: "from-option",
      resourceAttributes: { team: "option" },
    });
    await recoveredCall();
    await telemetry.forceFlush();
    expect(receiver.spans()[0]?.resource).toMatchObject({
      "service.name": "from-option",
      team: "option",
      region: "eu",
    });
  });

  it("OTEL_TRACES_SAMPLER=traceidratio with OTEL_TRACES_SAMPLER_ARG=0 drops every span; metrics still flow", async () => {
    vi.stubEnv("OTEL_TRACES_SAMPLER", "traceidratio");
    vi.stubEnv("OTEL_TRACES_SAMPLER_ARG", "0");
    const telemetry = await start({ protocol: "http/json" });
    expect(telemetry.config.traces.sampler).toEqual({ name: "traceidratio", ratio: 0 });
    for (let i = 0; i < 5; i++) await recoveredCall();
    await telemetry.forceFlush();
    expect(receiver.spans()).toEqual([]);
    expect(receiver.metrics().map((m) => m.name)).toContain("selfheal_tool_calls");
  });

  it("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: startTelemetry rejects with a clear error and starts nothing", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    const error = await startTelemetry({ endpoint: receiver.url }).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /^selfheal: invalid option `OTEL_EXPORTER_OTLP_PROTOCOL`: grpc is not supported: selfheal\/otel exports OTLP over HTTP only/,
    );
    expect(trace.getTracerProvider().getTracer("x").startSpan("s").isRecording()).toBe(false);
  });

  it("OTEL_SDK_DISABLED=true starts nothing", async () => {
    vi.stubEnv("OTEL_SDK_DISABLED", "true");
    const telemetry = await start();
    expect(telemetry.tracerProvider).toBeUndefined();
    expect(telemetry.meterProvider).toBeUndefined();
  });
});

describe("registration and the Prometheus endpoint", () => {
  it("registers globally by default and unregisters on shutdown; register: false leaves the globals alone", async () => {
    const telemetry = await start({ protocol: "http/json" });
    expect(trace.getTracerProvider().getTracer("x").startSpan("s").isRecording()).toBe(true);
    expect(metrics.getMeterProvider()).toBe(telemetry.meterProvider);
    await telemetry.shutdown();
    await telemetry.shutdown(); // idempotent
    expect(trace.getTracerProvider().getTracer("x").startSpan("s").isRecording()).toBe(false);
    expect(metrics.getMeterProvider()).not.toBe(telemetry.meterProvider);

    const local = await start({ protocol: "http/json", register: false });
    expect(trace.getTracerProvider().getTracer("x").startSpan("s").isRecording()).toBe(false);
    expect(local.tracerProvider?.getTracer("x").startSpan("s").isRecording()).toBe(true);
    const { tracerProvider, meterProvider } = local;
    if (!tracerProvider || !meterProvider) throw new Error("providers expected");
    const sh = createSelfHealing({ agent: "explicit", tracerProvider, meterProvider });
    await sh.tool("t", { readOnly: true }, () => 1)(undefined);
    await sh.close();
    await local.forceFlush();
    expect(receiver.spans().map((s) => s.attributes["selfheal.agent.name"])).toEqual(["explicit"]);
  });

  it("keeps the context manager the app registered (no duplicate registration) and leaves it at shutdown", async () => {
    const diagErrors: string[] = [];
    diag.setLogger(
      {
        error: (m) => diagErrors.push(m),
        warn: () => undefined,
        info: () => undefined,
        debug: () => undefined,
        verbose: () => undefined,
      },
      DiagLogLevel.ERROR,
    );
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const telemetry = await start({ protocol: "http/json" });
    await recoveredCall();
    await telemetry.forceFlush();
    expect(spanTree(receiver.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"] },
    ]);
    await telemetry.shutdown();
    const probe = ROOT_CONTEXT.setValue(createContextKey("probe"), 1);
    expect(context.with(probe, () => context.active())).toBe(probe);
    expect(diagErrors).toEqual([]);
    context.disable();
    diag.disable();
  });

  it("metricsPort serves Prometheus on 127.0.0.1 alongside OTLP; a port in use is a clear error", async () => {
    const port = await closedPort();
    const telemetry = await start({ protocol: "http/json", metricsPort: port });
    expect(telemetry.metricsUrl).toBe(`http://127.0.0.1:${port}/metrics`);
    expect(telemetry.config.metrics.exporters).toEqual(["otlp", "prometheus"]);
    await createSelfHealing({ agent: "scraped" }).tool("t", { readOnly: true }, () => 1)(undefined);
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
    expect(text).toMatch(
      /selfheal_tool_calls_total\{[^}]*agent="scraped"[^}]*outcome="success"[^}]*\} 1/,
    );

    const error = await startTelemetry({
      metricsPort: port,
      metricsExporter: "none",
      tracesExporter: "none",
    }).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(
        `invalid option \`metricsPort\`: cannot serve Prometheus metrics on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`,
      ),
    );
  });

  it("the Prometheus endpoint names the GenAI duration as every Prometheus path does: with its unit", async () => {
    const port = await closedPort();
    const telemetry = await start({ protocol: "http/json", metricsPort: port, register: false });
    const { meterProvider } = telemetry;
    if (!meterProvider) throw new Error("a meter provider expected");
    const sh = createSelfHealing({ agent: "scraped", meterProvider });
    const answer = sh.tool(
      "answer",
      { readOnly: true, kind: "llm", provider: "openai" },
      (_, ctx) => {
        ctx.reportUsage({ inputTokens: 12, outputTokens: 3 });
        return "hi";
      },
    );
    await answer(undefined);
    // An app's own metric in seconds keeps the name this exporter always gave it.
    meterProvider.getMeter("app").createHistogram("app.request.duration", { unit: "s" }).record(1);
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
    const names = new Set(
      text
        .split("\n")
        .filter((l) => l !== "" && !l.startsWith("#"))
        .map((l) => l.replace(/[{ ].*$/, "")),
    );
    for (const name of [
      "gen_ai_client_operation_duration_seconds_bucket",
      "gen_ai_client_operation_duration_seconds_count",
      "gen_ai_client_token_usage_bucket",
      // Already in seconds: not doubled.
      "selfheal_tool_call_duration_seconds_bucket",
      "app_request_duration_bucket",
    ])
      expect(names, name).toContain(name);
    expect(
      [...names].filter((n) =>
        /_seconds_seconds|^gen_ai_client_operation_duration_(bucket|count|sum)$/.test(n),
      ),
    ).toEqual([]);
    expect(text).toMatch(
      /gen_ai_client_operation_duration_seconds_count\{[^}]*gen_ai_operation_name="chat"[^}]*gen_ai_provider_name="openai"[^}]*\} 1/,
    );
    await sh.close();
  });

  it("the deprecated startOtel keeps its old behaviour: nothing global, traces only with an endpoint", async () => {
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const { startOtel } = await import("../../src/otel/index.js");
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const otel = await startOtel({ serviceName: "old", otlpEndpoint: receiver.url });
    started.push(otel);
    expect(otel.meterProvider).toBeUndefined();
    expect(trace.getTracerProvider().getTracer("x").startSpan("s").isRecording()).toBe(false);
    if (!otel.tracerProvider) throw new Error("a tracer provider expected");
    const sh = createSelfHealing({ agent: "old", tracerProvider: otel.tracerProvider });
    await sh.tool("t", { readOnly: true }, () => 1)(undefined);
    await sh.close();
    await otel.forceFlush();
    expect(receiver.spans()[0]?.resource["service.name"]).toBe("old");
  });
});
