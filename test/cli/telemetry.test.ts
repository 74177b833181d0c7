/**
 * The CLI's telemetry: its flags (--metrics-port, --event-log), the options startCliTelemetry
 * hands selfheal/otel, and stopCliTelemetry's line on failed exports. The start-up when the
 * OpenTelemetry SDK (selfheal's optional peers) cannot be loaded: a UsageError (one line, exit 2)
 * naming what asked for it and the npm command, through the loader seam of startCliTelemetry (the
 * built CLI's test, with the peers made unresolvable, is in demo.test.ts).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { UsageError } from "../../src/cli/errors.js";
import {
  eventLogFlag,
  metricsPortFlag,
  startCliTelemetry,
  stopCliTelemetry,
  type OtelLoader,
} from "../../src/cli/telemetry.js";
import { OTEL_PEERS, type startTelemetry } from "../../src/otel/index.js";
import { tempDir } from "./in-process.js";

/** selfheal/otel whose SDK rejects as `error` does. */
const failingWith =
  (error: Error): OtelLoader =>
  () =>
    Promise.resolve({ OTEL_PEERS, startTelemetry: () => Promise.reject(error) });

const missingPeer = () =>
  Object.assign(new Error("selfheal/otel needs the optional peer dependencies ..."), {
    code: "ERR_SELFHEAL_MISSING_PEER",
    missing: ["@opentelemetry/sdk-trace-node"],
  });

const INSTALL = `install it with: npm install ${OTEL_PEERS.join(" ")}`;

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("startCliTelemetry without the OpenTelemetry SDK", () => {
  it("an OTLP endpoint set: a UsageError naming the variable and every package to install", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    const start = startCliTelemetry("demo", undefined, {}, failingWith(missingPeer()));
    await expect(start).rejects.toBeInstanceOf(UsageError);
    await expect(start).rejects.toThrow(
      `OTEL_EXPORTER_OTLP_ENDPOINT is set: exporting needs the OpenTelemetry SDK (optional peers of selfheal), not installed; ${INSTALL}`,
    );
  });

  it("--metrics-port: names the flag", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "");
    vi.stubEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "");
    vi.stubEnv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "");
    await expect(startCliTelemetry("demo", 9464, {}, failingWith(missingPeer()))).rejects.toThrow(
      `--metrics-port needs the OpenTelemetry SDK (optional peers of selfheal), not installed; ${INSTALL}`,
    );
  });

  it("a module-resolution failure of an SDK package (a peer require finds and import does not) is the same setup error", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:4318/v1/metrics");
    const notFound = Object.assign(
      new Error("Cannot find package '@opentelemetry/sdk-metrics' imported from /x/sdk.js"),
      { code: "ERR_MODULE_NOT_FOUND" },
    );
    await expect(startCliTelemetry("demo", undefined, {}, failingWith(notFound))).rejects.toThrow(
      /^OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set: exporting needs the OpenTelemetry SDK .*npm install @opentelemetry\/sdk-trace-node /,
    );
    const cjsNotFound = Object.assign(new Error("Cannot find module '@opentelemetry/resources'"), {
      code: "MODULE_NOT_FOUND",
    });
    await expect(
      startCliTelemetry("demo", undefined, {}, failingWith(cjsNotFound)),
    ).rejects.toBeInstanceOf(UsageError);
  });

  it("other failures pass through unchanged (a bad OTEL_* value, a port in use)", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    const config = Object.assign(new Error("OTEL_EXPORTER_OTLP_PROTOCOL: unknown"), {
      code: "SELFHEAL_CONFIG",
    });
    await expect(startCliTelemetry("demo", undefined, {}, failingWith(config))).rejects.toBe(
      config,
    );
    const otherModule = Object.assign(new Error("Cannot find package 'left-pad'"), {
      code: "ERR_MODULE_NOT_FOUND",
    });
    await expect(startCliTelemetry("demo", undefined, {}, failingWith(otherModule))).rejects.toBe(
      otherModule,
    );
    // An SDK package named by an error that is not a module-resolution one.
    const sdkFailed = Object.assign(new Error("@opentelemetry/sdk-metrics: port in use"), {
      code: "EADDRINUSE",
    });
    await expect(startCliTelemetry("demo", undefined, {}, failingWith(sdkFailed))).rejects.toBe(
      sdkFailed,
    );
    const noMessage = { code: "ERR_MODULE_NOT_FOUND", message: 42 };
    const rejecting: OtelLoader = () =>
      Promise.resolve({ OTEL_PEERS, startTelemetry: () => Promise.reject(noMessage) });
    await expect(startCliTelemetry("demo", undefined, {}, rejecting)).rejects.toBe(noMessage);
  });

  it("neither an endpoint nor a port: the SDK is not even loaded", async () => {
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "");
    vi.stubEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "");
    vi.stubEnv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "");
    const load = vi.fn<OtelLoader>();
    expect(await startCliTelemetry("demo", undefined, {}, load)).toBeUndefined();
    expect(load).not.toHaveBeenCalled();
  });
});

describe("the telemetry flags", () => {
  const dir = tempDir("event-log-flag");
  it.each([
    ["1", 1],
    ["9464", 9464],
    ["65535", 65535],
  ])("--metrics-port %j is port %d; absent is undefined", (value, port) => {
    expect(metricsPortFlag(value)).toBe(port);
    expect(metricsPortFlag(undefined)).toBeUndefined();
  });

  it.each(["0", "65536", "-1", "1.5", "port", ""])("--metrics-port %j: no port", (value) => {
    expect(() => metricsPortFlag(value)).toThrow(UsageError);
    expect(() => metricsPortFlag(value)).toThrow(
      `--metrics-port must be a port number, got "${value}"`,
    );
  });

  it("--event-log: a path it can append to, or the problem; absent is undefined", () => {
    expect(eventLogFlag(join(dir, "e.jsonl"))).toBe(join(dir, "e.jsonl"));
    expect(eventLogFlag(undefined)).toBeUndefined();
    expect(() => eventLogFlag("")).toThrow(new UsageError("--event-log : empty path"));
    expect(() => eventLogFlag(" \t")).toThrow(new UsageError("--event-log  \t: empty path"));
    expect(() => eventLogFlag(dir)).toThrow(
      new UsageError(`--event-log ${dir}: ${dir} is a folder`),
    );
  });
});

/** selfheal/otel whose startTelemetry resolves with `telemetry` and records its options. */
const startingWith = (telemetry: unknown) => {
  const start = vi.fn(() => Promise.resolve(telemetry));
  const load: OtelLoader = () =>
    Promise.resolve({ OTEL_PEERS, startTelemetry: start as unknown as typeof startTelemetry });
  return { start, load };
};

describe("startCliTelemetry's options to selfheal/otel", () => {
  const unset = () => {
    for (const name of [
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
      "OTEL_SERVICE_NAME",
      "OTEL_EXPORTER_OTLP_TIMEOUT",
    ])
      vi.stubEnv(name, "");
  };

  it("a metrics port only: the service name, no OTLP exporter, a 3 s export timeout, its options", async () => {
    unset();
    const { start, load } = startingWith("started");
    expect(await startCliTelemetry("demo-x", 9464, { maxQueueSize: 5 }, load)).toBe("started");
    expect(start).toHaveBeenCalledWith({
      serviceName: "demo-x",
      tracesExporter: "none",
      metricsExporter: "none",
      metricsPort: 9464,
      exportTimeoutMillis: 3_000,
      maxQueueSize: 5,
    });
  });

  it.each([
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
  ])("%s set: OTLP on, the environment's service name and timeout win", async (variable) => {
    unset();
    vi.stubEnv(variable, "http://127.0.0.1:4318");
    vi.stubEnv("OTEL_SERVICE_NAME", "mine");
    vi.stubEnv("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    const { start, load } = startingWith("started");
    await startCliTelemetry("demo-x", undefined, {}, load);
    expect(start).toHaveBeenCalledWith({ metricsPort: undefined });
  });
});

describe("stopCliTelemetry", () => {
  /** A started telemetry whose exports failed this many times. */
  const stopped = (traces: number, metrics: number, last?: string) => {
    const shutdown = vi.fn(() => Promise.resolve());
    const telemetry = {
      shutdown,
      exportErrors: () => ({ traces, metrics, spansLost: 0, last }),
    } as unknown as Awaited<ReturnType<typeof startCliTelemetry>>;
    return { telemetry, shutdown };
  };

  it("flushes; failed exports are said in one line, the run unaffected", async () => {
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      const failing = stopped(2, 1, "traces to http://x: ECONNREFUSED");
      await stopCliTelemetry(failing.telemetry);
      expect(failing.shutdown).toHaveBeenCalledOnce();
      expect(stderr.mock.calls).toEqual([
        [
          "selfheal: 3 telemetry export(s) failed, the run was unaffected; last: traces to http://x: ECONNREFUSED\n",
        ],
      ]);
      stderr.mockClear();
      await stopCliTelemetry(stopped(0, 1).telemetry);
      expect(stderr.mock.calls).toEqual([
        ["selfheal: 1 telemetry export(s) failed, the run was unaffected; last: \n"],
      ]);
      stderr.mockClear();
      const fine = stopped(0, 0);
      await stopCliTelemetry(fine.telemetry);
      await stopCliTelemetry(undefined);
      expect(fine.shutdown).toHaveBeenCalledOnce();
      expect(stderr).not.toHaveBeenCalled();
    } finally {
      stderr.mockRestore();
    }
  });
});
