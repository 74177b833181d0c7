import { diag, DiagLogLevel } from "@opentelemetry/api";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { exportFailureReason, ExportGuard } from "../../src/otel/guard.js";
import { startTelemetry, type Telemetry, type TelemetryOptions } from "../../src/otel/index.js";
import { closedPort, startHangingReceiver, startReceiver } from "../helpers/otlp.js";

// Whatever the SDK says through its diag logger, at every level: the tests count it.
const diagLines: string[] = [];
const keep = (level: string) => (message: string) => diagLines.push(`${level} ${message}`);
diag.setLogger(
  {
    error: keep("error"),
    warn: keep("warn"),
    info: keep("info"),
    debug: () => undefined,
    verbose: () => undefined,
  },
  DiagLogLevel.ALL,
);

let hanging: Awaited<ReturnType<typeof startHangingReceiver>>;
let failing: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  hanging = await startHangingReceiver();
  failing = await startReceiver((_req, res) => {
    res.writeHead(400, { "content-type": "text/plain" }).end("bad request");
  });
});
afterAll(async () => {
  await Promise.all([hanging.close(), failing.close()]);
});

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
process.on("unhandledRejection", onUnhandled);
afterAll(() => {
  process.off("unhandledRejection", onUnhandled);
});

const started: Telemetry[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((t) => t.shutdown()));
  diagLines.length = 0;
});

/** Telemetry with fast exports and a logger that keeps its lines. */
async function start(endpoint: string, options: TelemetryOptions = {}) {
  const lines: string[] = [];
  const telemetry = await startTelemetry({
    endpoint,
    protocol: "http/json",
    exportTimeoutMillis: 150,
    scheduledDelayMillis: 10,
    maxExportBatchSize: 8,
    metricsIntervalMillis: 100,
    shutdownTimeoutMillis: 1_000,
    logger: { warn: (line) => lines.push(line) },
    ...options,
  });
  started.push(telemetry);
  return { telemetry, lines };
}

/**
 * Calls through selfheal, with real time, until `stop` holds; every call must succeed. The limit
 * only ends a run that would never get there; it is half the 60 s window of the log line.
 */
async function callUntil(stop: () => boolean, timeoutMs = 30_000) {
  const sh = createSelfHealing({ agent: "down-test" });
  const tool = sh.tool("lookup", { readOnly: true }, (n: number) => Promise.resolve(n * 2));
  let calls = 0;
  const until = Date.now() + timeoutMs;
  while (!stop()) {
    if (Date.now() > until) throw new Error("timed out");
    await expect(tool(calls)).resolves.toBe(calls * 2);
    calls++;
    if (calls % 20 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await sh.close();
  return calls;
}

describe("a collector that is down or slow costs the agent nothing", () => {
  it("down (closed port): calls succeed, failures are counted per signal and logged once per window", async () => {
    const port = await closedPort();
    // Timeouts far past what a refused connection takes on a busy machine (a metric export's is
    // its interval's, less 100 ms): the failures are the refusals, never a timeout (issue 27). A
    // queue that holds the spans of those seconds of calls: none is dropped for want of room.
    const { telemetry, lines } = await start(`http://127.0.0.1:${port}`, {
      exportTimeoutMillis: 10_000,
      metricsIntervalMillis: 1_000,
      maxQueueSize: 100_000,
    });
    const calls = await callUntil(() => {
      const e = telemetry.exportErrors();
      return e.traces >= 3 && e.metrics >= 2;
    });
    expect(calls).toBeGreaterThan(0);
    const errors = telemetry.exportErrors();
    expect(errors.spansLost).toBeGreaterThanOrEqual(errors.traces);
    expect(errors.last).toMatch(
      new RegExp(
        `^(traces|metrics) to http://127\\.0\\.0\\.1:${port}/v1/(traces|metrics): .*ECONNREFUSED`,
      ),
    );
    // Many failures, one line: the first, within the 60 s window.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^selfheal\/otel: telemetry export failing, the agent is unaffected and the data is dropped: 1 failed export\(s\) since the last report .*ECONNREFUSED.*at most one such line per 60 s\)$/,
    );
    // The SDK's error handler never heard of it: nothing at error or warn level.
    expect(diagLines.filter((l) => !l.startsWith("info"))).toEqual([]);
    await telemetry.shutdown();
    expect(unhandled).toEqual([]);
  });

  it("hanging (accepts, never answers): calls succeed, each export gives up at its deadline, shutdown is bounded", async () => {
    const { telemetry, lines } = await start(hanging.url);
    const before = performance.now();
    await callUntil(
      () => telemetry.exportErrors().traces >= 2 && telemetry.exportErrors().metrics >= 1,
    );
    // At their 150 ms deadline: two trace exports cut at the exporter's default (10 s) would
    // take 20 s. The pass mark is far from both (issue 27).
    expect(performance.now() - before).toBeLessThan(10_000);
    expect(telemetry.exportErrors().last).toMatch(/timed out/i);
    expect(lines).toHaveLength(1);
    expect(hanging.hits).toBeGreaterThan(0);
    await telemetry.shutdown();

    // An export that would hang for a minute is in flight, spans are buffered, the receiver
    // still hangs: shutdown gives up after its 1 s bound, far under the export's minute.
    const slow = await start(hanging.url, { exportTimeoutMillis: 60_000 });
    const sh = createSelfHealing({ agent: "late" });
    const hits = hanging.hits;
    await callUntil(() => hanging.hits > hits);
    await sh.tool("t", { readOnly: true }, () => 1)(undefined);
    const t0 = performance.now();
    await slow.telemetry.shutdown();
    expect(performance.now() - t0).toBeLessThan(30_000);
    expect(diagLines.filter((l) => l.startsWith("error"))).toEqual([]);
    expect(unhandled).toEqual([]);
  });

  it("a receiver that refuses the data (HTTP 400): counted with its status", async () => {
    // A 10 s export timeout: the refusal comes at once, well within it on a busy machine too.
    const { telemetry } = await start(failing.url, {
      metricsExporter: "none",
      exportTimeoutMillis: 10_000,
    });
    await callUntil(() => telemetry.exportErrors().traces >= 1);
    expect(telemetry.exportErrors().last).toMatch(/^traces to .*: HTTP 400 Bad Request/);
  });

  it("a full queue drops spans instead of growing or blocking", async () => {
    const { telemetry } = await start(hanging.url, {
      maxQueueSize: 16,
      maxExportBatchSize: 8,
      exportTimeoutMillis: 60_000,
      metricsExporter: "none",
    });
    const sh = createSelfHealing({ agent: "flood" });
    const tool = sh.tool("t", { readOnly: true }, () => 1);
    const t0 = performance.now();
    for (let i = 0; i < 2_000; i++) await tool(undefined);
    // 2 000 calls while the first export hangs (its 60 s deadline not reached): none waited for
    // it (they took far less than that deadline, a busy machine included), and the queue stayed
    // at 16 spans, the rest dropped.
    expect(performance.now() - t0).toBeLessThan(30_000);
    expect(telemetry.exportErrors().traces).toBe(0);
    await sh.close();
    expect(unhandled).toEqual([]);
  });
});

describe("ExportGuard: one log line per window", () => {
  it("counts every failure, logs the first of each window with the count since the last line", () => {
    let now = 0;
    const lines: string[] = [];
    const guard = new ExportGuard({ warn: (l) => lines.push(l) }, 60_000, () => now);
    guard.failed(
      "traces",
      "http://c/v1/traces",
      Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
      10,
    );
    for (let i = 0; i < 5; i++) {
      now += 10_000;
      guard.failed("metrics", "http://c/v1/metrics", new Error("Request timed out"));
    }
    expect(lines).toHaveLength(1);
    now = 60_000;
    guard.failed("traces", "http://c/v1/traces", new Error("socket hang up"), 4);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(
      "selfheal/otel: telemetry export failing, the agent is unaffected and the data is dropped: 6 failed export(s) since the last report (in all: traces 2, metrics 5, 14 spans); last: traces to http://c/v1/traces: socket hang up (at most one such line per 60 s)",
    );
    expect(guard.snapshot()).toEqual({
      traces: 2,
      metrics: 5,
      spansLost: 14,
      last: "traces to http://c/v1/traces: socket hang up",
    });
  });

  it("a logger that throws never reaches the exporter", () => {
    const guard = new ExportGuard(
      {
        warn: () => {
          throw new Error("logger down");
        },
      },
      0,
    );
    expect(() => {
      guard.failed("traces", "x", new Error("e"), 1);
    }).not.toThrow();
    expect(guard.snapshot().traces).toBe(1);
  });

  it("reasons: errno and HTTP status first, secrets redacted, one line", () => {
    expect(
      exportFailureReason(Object.assign(new Error("Service Unavailable"), { code: 503 })),
    ).toBe("HTTP 503 Service Unavailable");
    expect(
      exportFailureReason(Object.assign(new AggregateError([], ""), { code: "ECONNREFUSED" })),
    ).toBe("ECONNREFUSED AggregateError");
    expect(exportFailureReason(new Error("bad key sk-proj-abcdefghijklmnopqrstuvwx\nnext"))).toBe(
      "bad key [REDACTED_KEY]\\nnext",
    );
    expect(exportFailureReason(undefined)).toBe("export failed");
  });
});
