import { afterEach, describe, expect, it, vi } from "vitest";

type Index = typeof import("../../src/otel/index.js");

afterEach(() => {
  vi.doUnmock("../../src/otel/sdk.js");
  vi.doUnmock("node:module");
  vi.resetModules();
});

/**
 * A fresh `selfheal/otel` entry whose SDK module fails to load with `loadError`, and where the
 * peers in `missing` cannot be resolved (as if not installed).
 */
async function entryWithout(missing: string[], loadError: Error): Promise<Index> {
  vi.resetModules();
  vi.doMock("../../src/otel/sdk.js", () => {
    throw loadError;
  });
  vi.doMock("node:module", async (importOriginal) => {
    const real = await importOriginal<typeof import("node:module")>();
    return {
      createRequire: (from: string | URL) => {
        const require = real.createRequire(from);
        const resolve = (name: string) => {
          if (missing.includes(name)) throw new Error(`Cannot find module '${name}'`);
          return require.resolve(name);
        };
        return Object.assign((id: string) => require(id) as unknown, require, { resolve });
      },
    };
  });
  return import("../../src/otel/index.js");
}

/** What a call rejects with. */
const rejection = (call: () => Promise<unknown>) =>
  call().then(
    () => {
      throw new Error("expected a rejection");
    },
    (error: unknown) => error as Error & { code?: string; missing?: string[]; cause?: unknown },
  );

const calls = {
  startTelemetry: (entry: Index) => entry.startTelemetry({}),
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the alias is tested too
  startOtel: (entry: Index) => entry.startOtel({ serviceName: "old" }),
};

describe.each(Object.entries(calls))("%s when the SDK cannot be loaded", (_name, call) => {
  it("peers not installed: ERR_SELFHEAL_MISSING_PEER naming each, with the install command", async () => {
    const loadError = new Error("Cannot find package '@opentelemetry/sdk-metrics'");
    const missing = ["@opentelemetry/sdk-metrics", "@opentelemetry/exporter-prometheus"];
    const entry = await entryWithout(missing, loadError);
    const error = await rejection(() => call(entry));
    expect(error.code).toBe("ERR_SELFHEAL_MISSING_PEER");
    expect(error.missing).toEqual(missing);
    expect(error.message).toBe(
      `selfheal/otel needs the optional peer dependencies ${missing.join(", ")}, not installed. ` +
        `Install them with: npm i ${entry.OTEL_PEERS.join(" ")}`,
    );
    expect(error.cause).toMatchObject({ cause: loadError });

    // Called again (the peers still missing), it tries again and says the same.
    const again = await rejection(() => call(entry));
    expect(again.code).toBe("ERR_SELFHEAL_MISSING_PEER");
  });

  it("every peer installed: the load error itself, not a missing-peer error", async () => {
    const loadError = new Error("SyntaxError in the SDK");
    const entry = await entryWithout([], loadError);
    const error = await rejection(() => call(entry));
    expect(error.code).toBeUndefined();
    expect(error.missing).toBeUndefined();
    // Rethrown as it came (vitest wraps the failed load, keeping it as the cause).
    expect(error.cause).toBe(loadError);
  });
});

it("OTEL_PEERS lists every SDK package the entry needs", async () => {
  const { OTEL_PEERS } = await import("../../src/otel/index.js");
  expect(OTEL_PEERS).toContain("@opentelemetry/sdk-trace-node");
  expect(OTEL_PEERS).toContain("@opentelemetry/exporter-prometheus");
});
