import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SpanStatusCode } from "@opentelemetry/api";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { afterAll, describe, expect, it } from "vitest";
import { JsonlLog } from "../../src/recovery/event-log.js";
import {
  ATTR_WATCHDOG_GENERATION,
  ATTR_WATCHDOG_OUTCOME,
  ATTR_WATCHDOG_REASON,
  SPAN_WATCHDOG_RECOVERY,
  SPAN_WATCHDOG_VERDICT,
} from "../../src/telemetry/conventions.js";
import { WatchdogTelemetry, type SupervisorEvent } from "../../src/watchdog/index.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-wd-telemetry-"));
let n = 0;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

class Reader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function setup() {
  const traces = recordingProvider();
  const meters = recordingMeters();
  const path = join(root, `events${n++}.jsonl`);
  const warnings: string[] = [];
  const eventLog = new JsonlLog(path, {
    warn: (m) => {
      warnings.push(m);
    },
  });
  const telemetry = new WatchdogTelemetry({
    agent: "nightly",
    sessionId: "s1",
    tracerProvider: traces.provider,
    meterProvider: meters.meterProvider,
    eventLog,
  });
  const lines = async () => {
    await eventLog.flush();
    return readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  return { traces, meters, telemetry, lines, warnings };
}

const recoveries = (tier: string, outcome: string) =>
  `selfheal_watchdog_recoveries{agent=nightly,tier=${tier},outcome=${outcome}}`;

describe("the watchdog's instruments", () => {
  it("both counters say what they count", async () => {
    const reader = new Reader();
    const provider = new MeterProvider({ readers: [reader] });
    new WatchdogTelemetry({ agent: "a", sessionId: "s", meterProvider: provider });
    const { resourceMetrics } = await reader.collect();
    const descriptions = Object.fromEntries(
      resourceMetrics.scopeMetrics
        .flatMap((s) => s.metrics)
        .map((m) => [m.descriptor.name, m.descriptor.description]),
    );
    expect(descriptions).toEqual({
      selfheal_watchdog_verdicts:
        "Verdicts on long runs' heartbeats, counted when a run's verdict changes.",
      selfheal_watchdog_recoveries: "Watchdog tiers run, by outcome (recovered, failed, gave_up).",
    });
    await provider.shutdown();
  });

  it("a verdict span carries the generation when the event names one, and only then", () => {
    const { traces, telemetry } = setup();
    telemetry.record({
      kind: "verdict",
      at: 1_000,
      verdict: "healthy",
      reason: "ok",
      generation: 3,
    });
    telemetry.record({ kind: "verdict", at: 2_000, verdict: "stalled", reason: "stuck" });
    const [first, second] = traces.named(SPAN_WATCHDOG_VERDICT);
    expect(first?.attributes[ATTR_WATCHDOG_GENERATION]).toBe(3);
    expect(second?.attributes).not.toHaveProperty(ATTR_WATCHDOG_GENERATION);
    expect(second?.attributes[ATTR_WATCHDOG_REASON]).toBe("stuck");
  });

  // The SDK reads a bare number up to performance.now() as time since the process started and a
  // larger one as epoch ms, so a number's meaning would hang on the worker's uptime: 1 ms is below
  // it in any worker, the epoch time above it. Both must date the span exactly as the event.
  it("spans are dated by the events' times, whatever the process's uptime", () => {
    const { traces, telemetry } = setup();
    const epoch = Date.UTC(2030, 0, 1, 12, 0, 0, 250);
    telemetry.record({ kind: "verdict", at: 1, verdict: "healthy", reason: "ok" });
    telemetry.record({ kind: "tier", at: epoch, tier: "nudge", reason: "stalled" });
    telemetry.record({ kind: "tier_result", at: epoch + 1_500, tier: "nudge", outcome: "failed" });
    const [verdict] = traces.named(SPAN_WATCHDOG_VERDICT);
    const [tier] = traces.named(SPAN_WATCHDOG_RECOVERY);
    expect([verdict?.startTime, verdict?.endTime]).toEqual([
      [0, 1e6],
      [0, 1e6],
    ]);
    const seconds = Math.floor(epoch / 1000);
    expect([tier?.startTime, tier?.endTime]).toEqual([
      [seconds, 250e6],
      [seconds + 1, 750e6],
    ]);
  });

  it.each([
    ["recovered", SpanStatusCode.UNSET],
    ["failed", SpanStatusCode.ERROR],
  ] as const)("a tier %s: span status %d, its outcome counted", async (outcome, status) => {
    const { traces, meters, telemetry } = setup();
    telemetry.record({ kind: "tier", at: 1_000, tier: "nudge", reason: "stalled" });
    telemetry.record({ kind: "tier_result", at: 2_000, tier: "nudge", outcome });
    const [span] = traces.named(SPAN_WATCHDOG_RECOVERY);
    expect(span?.status.code).toBe(status);
    expect(span?.attributes[ATTR_WATCHDOG_OUTCOME]).toBe(outcome);
    const points = await meters.read();
    expect(points.get(recoveries("nudge", outcome))).toBe(1);
    expect(points.get(recoveries("nudge", outcome === "failed" ? "recovered" : "failed"))).toBe(0);
  });

  it("giving up ends the rotation's span as an error", async () => {
    const { traces, meters, telemetry } = setup();
    telemetry.record({ kind: "tier", at: 1_000, tier: "rotation", reason: "dead" });
    telemetry.record({ kind: "gave_up", at: 2_000, reason: "too many" });
    const [span] = traces.named(SPAN_WATCHDOG_RECOVERY);
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes[ATTR_WATCHDOG_OUTCOME]).toBe("gave_up");
    expect((await meters.read()).get(recoveries("rotation", "gave_up"))).toBe(1);
  });

  it("a tier started over one still open ends that one as failed", async () => {
    const { traces, meters, telemetry } = setup();
    telemetry.record({ kind: "tier", at: 1_000, tier: "nudge", reason: "stalled" });
    telemetry.record({ kind: "tier", at: 3_000, tier: "rotation", reason: "crashed" });
    const spans = traces.named(SPAN_WATCHDOG_RECOVERY);
    expect(spans).toHaveLength(1);
    expect(spans[0]?.attributes[ATTR_WATCHDOG_OUTCOME]).toBe("failed");
    expect(spans[0]?.status.code).toBe(SpanStatusCode.ERROR);
    const points = await meters.read();
    expect(points.get(recoveries("nudge", "failed"))).toBe(1);
    expect(points.get(recoveries("rotation", "failed"))).toBe(0);
  });
});

describe("the event log", () => {
  it("reasons are cut to 512 characters; events without one get none", async () => {
    const { telemetry, lines } = setup();
    const long = "x".repeat(600);
    const events: SupervisorEvent[] = [
      { kind: "verdict", at: 1, verdict: "stalled", reason: long, generation: 2 },
      { kind: "tier", at: 2, tier: "nudge", reason: long },
      { kind: "tier_result", at: 3, tier: "nudge", outcome: "failed" },
    ];
    for (const event of events) telemetry.record(event);
    const logged = await lines();
    expect(logged.map((l) => (typeof l.reason === "string" ? l.reason.length : "none"))).toEqual([
      512,
      512,
      "none",
    ]);
    expect(logged[2]).toStrictEqual({
      type: "watchdog",
      agent: "nightly",
      session: "s1",
      kind: "tier_result",
      at: 3,
      tier: "nudge",
      outcome: "failed",
    });
    expect(logged[0]).toMatchObject({ type: "watchdog", kind: "verdict", generation: 2 });
  });
});
