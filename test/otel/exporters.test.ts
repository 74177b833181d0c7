import {
  AggregationTemporality,
  InstrumentType,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { OtlpProtocol, Temporality } from "../../src/otel/config.js";
import { otlpMetricExporter, otlpSpanExporter } from "../../src/otel/exporters.js";
import { suiteReceiver } from "../helpers/otlp.js";

const receiver = suiteReceiver();
afterEach(() => {
  vi.unstubAllEnvs();
  receiver().received.length = 0;
});

const target = (protocol: OtlpProtocol, path: string) => ({
  url: `${receiver().url}${path}`,
  protocol,
  timeoutMillis: 10_000,
});

/** One span through `otlpSpanExporter`, or one counter point through `otlpMetricExporter`. */
const send = {
  traces: async (protocol: OtlpProtocol, headers: Record<string, string> | undefined) => {
    const exporter = otlpSpanExporter(target(protocol, "/t"), headers);
    const provider = new NodeTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    provider.getTracer("test").startSpan("s").end();
    await provider.shutdown();
  },
  metrics: async (protocol: OtlpProtocol, headers: Record<string, string> | undefined) => {
    const exporter = otlpMetricExporter(target(protocol, "/m"), headers, "cumulative");
    const provider = new MeterProvider({
      readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 })],
    });
    provider.getMeter("test").createCounter("c").add(1);
    await provider.shutdown();
  },
};

const CONTENT_TYPE: Record<OtlpProtocol, string> = {
  "http/json": "application/json",
  "http/protobuf": "application/x-protobuf",
};

describe("the OTLP exporters send to the URL given, with the headers of the option and of their signal's variables", () => {
  it.each([
    ["traces", "http/json", "/t", "TRACES", "METRICS"],
    ["traces", "http/protobuf", "/t", "TRACES", "METRICS"],
    ["metrics", "http/json", "/m", "METRICS", "TRACES"],
    ["metrics", "http/protobuf", "/m", "METRICS", "TRACES"],
  ] as const)("%s over %s", async (signal, protocol, path, own, other) => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_HEADERS", "x-shared=env,x-key=env");
    vi.stubEnv(`OTEL_EXPORTER_OTLP_${own}_HEADERS`, "x-signal=own");
    vi.stubEnv(`OTEL_EXPORTER_OTLP_${other}_HEADERS`, "x-other=other");
    await send[signal](protocol, { "x-key": "option" });
    expect(receiver().received.map((r) => r.path)).toEqual([path]);
    expect(receiver().received[0]?.headers).toMatchObject({
      "content-type": CONTENT_TYPE[protocol],
      "x-shared": "env",
      "x-key": "option",
      "x-signal": "own",
    });
    expect(receiver().received[0]?.headers["x-other"]).toBeUndefined();
  });

  it.each(["http/json", "http/protobuf"] as const)(
    "no headers option (%s): the variables' headers alone",
    async (protocol) => {
      vi.stubEnv("OTEL_EXPORTER_OTLP_HEADERS", "x-shared=env");
      await send.traces(protocol, undefined);
      expect(receiver().received[0]?.headers["x-shared"]).toBe("env");
    },
  );
});

const { CUMULATIVE, DELTA } = AggregationTemporality;
describe("the OTLP metric exporter asks for the temporality configured", () => {
  // Per instrument: counter, observable counter, up-down counter, histogram.
  const expected: Record<Temporality, AggregationTemporality[]> = {
    cumulative: [CUMULATIVE, CUMULATIVE, CUMULATIVE, CUMULATIVE],
    delta: [DELTA, DELTA, CUMULATIVE, DELTA],
    lowmemory: [DELTA, CUMULATIVE, CUMULATIVE, DELTA],
  };
  const instruments = [
    InstrumentType.COUNTER,
    InstrumentType.OBSERVABLE_COUNTER,
    InstrumentType.UP_DOWN_COUNTER,
    InstrumentType.HISTOGRAM,
  ];
  it.each(
    (["http/json", "http/protobuf"] as const).flatMap((protocol) =>
      (["cumulative", "delta", "lowmemory"] as const).map((t) => [protocol, t] as const),
    ),
  )("%s, %s", async (protocol, temporality) => {
    const exporter = otlpMetricExporter(target(protocol, "/m"), undefined, temporality);
    expect(instruments.map((i) => exporter.selectAggregationTemporality?.(i))).toEqual(
      expected[temporality],
    );
    await exporter.shutdown();
  });
});
