/**
 * The CLI's telemetry start-up when the OpenTelemetry SDK (selfheal's optional peers) cannot be
 * loaded: a UsageError (one line, exit 2) naming what asked for it and the npm command, through
 * the loader seam of startCliTelemetry (the built CLI's test, with the peers made unresolvable,
 * is in demo.test.ts).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { UsageError } from "../../src/cli/errors.js";
import { startCliTelemetry, type OtelLoader } from "../../src/cli/telemetry.js";
import { OTEL_PEERS } from "../../src/otel/index.js";

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
