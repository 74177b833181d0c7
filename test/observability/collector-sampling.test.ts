/**
 * Tail sampling on real Collectors, with the shipped configurations and a sink Collector (file
 * exporter) in place of the trace backend.
 *
 * Long tasks (collector/local.yaml; honeycomb.yaml and grafana.yaml share its policies and waits).
 * A trace is decided SELFHEAL_TRACE_DECISION_WAIT_AFTER_ROOT after its root span arrives, or
 * SELFHEAL_TRACE_DECISION_WAIT after its first span without one. Time is scaled down 30 times
 * (one test second stands for 30 s), the scale at which the Collector's one-second decision ticks
 * can still express the old 30 s decision_wait (1 s):
 *
 *   production                     scaled (this test)
 *   first span (a success)  0 s    0 s
 *   error span             75 s    2.5 s   (after the old 30 s wait had decided the trace)
 *   root span, task ends   90 s    3 s
 *   decision_wait           5 min  10 s    (SELFHEAL_TRACE_DECISION_WAIT, the new default)
 *   old decision_wait      30 s    1 s
 *
 * With the new settings the whole trace is kept, the first span included; with the old shape
 * (decision_wait 30 s, scaled, and no root rule) the trace is decided "not sampled" on its first
 * span and the error, arriving later, is dropped by the non-sampled decision cache. The
 * watchdog's spans are kept too (a verdict other than healthy, a recovery tier), a healthy verdict
 * and a successful call are not (SELFHEAL_TRACE_SAMPLE_PERCENT=0: no baseline).
 *
 * Honeycomb's SampleRate (collector/honeycomb.yaml): with SELFHEAL_TRACE_SAMPLE_PERCENT=25, every
 * span of a trace kept for an error, a diagnosis or the watchdog carries SampleRate 1, every span
 * of a baseline trace SampleRate 4, and no trace arrives twice.
 *
 * Timings (env, ms): SELFHEAL_SAMPLING_SCALE_MS, one scaled unit (default 1000, i.e. 30 s);
 * SELFHEAL_SAMPLING_DELIVERY_MS, how long a kept trace may take to arrive (default 15000).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReceivedSpan } from "../helpers/otlp.js";
import {
  collectorAvailable,
  collectorFile,
  envMs,
  sendSpans,
  spanIdOf,
  startCollector,
  startSink,
  stopAllCollectors,
  traceIdOf,
  waitFor,
  type HandSpan,
  type RunningCollector,
  type Sink,
} from "./otelcol-run.js";

const SUITE = "tail sampling on a real Collector (collector/*.yaml)";
const available = collectorAvailable(SUITE);
/** One scaled second: 30 s of production time. */
const UNIT_MS = envMs("SELFHEAL_SAMPLING_SCALE_MS", 1_000);
const DELIVERY_MS = envMs("SELFHEAL_SAMPLING_DELIVERY_MS", 15_000);
const seconds = (units: number) => `${String(Math.max(1, Math.round((units * UNIT_MS) / 1000)))}s`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let dir = "";
let sink: Sink;

/** Spans of a tool call: its root and children, built from one seed. */
function toolCall(
  seed: string,
  children: Omit<HandSpan, "traceId" | "spanId" | "parentSpanId">[],
  rootStatus: 0 | 2 = 0,
): { traceId: string; root: HandSpan; children: HandSpan[] } {
  const traceId = traceIdOf(seed);
  const rootId = spanIdOf(`${seed}/root`);
  return {
    traceId,
    root: {
      traceId,
      spanId: rootId,
      name: "agent.tool_call",
      status: rootStatus,
      attributes: { "selfheal.agent.name": "sampling-test", "gen_ai.tool.name": "search" },
    },
    children: children.map((c, i) => ({
      traceId,
      spanId: spanIdOf(`${seed}/${String(i)}`),
      parentSpanId: rootId,
      ...c,
    })),
  };
}

/** An instant watchdog verdict span, the root of its own trace (as the Supervisor makes it). */
function verdict(seed: string, state: string): HandSpan {
  return {
    traceId: traceIdOf(seed),
    spanId: spanIdOf(seed),
    name: "agent.watchdog.verdict",
    attributes: { "selfheal.watchdog.verdict": state, "selfheal.watchdog.session_id": seed },
  };
}

const spansOf = (traceId: string): ReceivedSpan[] =>
  sink.spans().filter((s) => s.traceId === traceId);

describe.skipIf(!available)(SUITE, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "selfheal-sampling-"));
    sink = await startSink(dir);
  });

  afterAll(async () => {
    await stopAllCollectors();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  /** local.yaml with its backends pointed at the sink, and these variables. */
  const startLocal = (name: string, env: Record<string, string>): Promise<RunningCollector> =>
    startCollector({
      name,
      configs: [collectorFile("local.yaml")],
      env: {
        TEMPO_OTLP_GRPC_ENDPOINT: sink.grpcEndpoint,
        PROMETHEUS_OTLP_ENDPOINT: sink.httpUrl,
        SELFHEAL_TRACE_SAMPLE_PERCENT: "0",
        ...env,
      },
    });

  it("keeps a long task's trace whole when its error comes after the old 30 s wait (time scaled 30x)", async () => {
    const [current, old] = await Promise.all([
      // The shipped waits, scaled: decision_wait 5 min -> 10 s; the root rule as shipped.
      startLocal("new waits", { SELFHEAL_TRACE_DECISION_WAIT: seconds(10) }),
      // The old shape, scaled: decision_wait 30 s -> 1 s, no root rule.
      startLocal("old waits", {
        SELFHEAL_TRACE_DECISION_WAIT: seconds(1),
        SELFHEAL_TRACE_DECISION_WAIT_AFTER_ROOT: "0s",
      }),
    ]);
    const task = (c: RunningCollector) =>
      toolCall(`long-task/${c.name}`, [
        // A first step that succeeds, exported when it ends, at the task's start.
        { name: "agent.tool_call", attributes: { "selfheal.call.outcome": "success" } },
        // A later step fails.
        { name: "agent.tool_call.error", status: 2, attributes: { "error.type": "TimeoutError" } },
      ]);
    const tasks = new Map([current, old].map((c) => [c, task(c)]));
    // What else the new waits keep and drop; a control the old ones keep.
    const stalled = verdict("watchdog/stalled", "stalled");
    const healthy = verdict("watchdog/healthy", "healthy");
    const tier = toolCall("watchdog/tier", []);
    tier.root = {
      ...tier.root,
      name: "agent.watchdog.recovery",
      attributes: { "selfheal.watchdog.tier": "nudge", "selfheal.watchdog.outcome": "recovered" },
    };
    const success = toolCall("success", [{ name: "agent.tool_call" }]);
    const control = toolCall("old/control", [{ name: "agent.tool_call.error", status: 2 }]);

    const t0 = Date.now();
    const at = async (units: number) => sleep(Math.max(0, t0 + units * UNIT_MS - Date.now()));
    for (const [c, t] of tasks) {
      const [first] = t.children;
      if (first) await sendSpans(c.httpUrl, "sampling-test", [first]);
    }
    await sendSpans(current.httpUrl, "sampling-test", [stalled, healthy, tier.root]);
    await sendSpans(current.httpUrl, "sampling-test", [...success.children, success.root]);
    await at(2.5);
    for (const [c, t] of tasks) {
      const error = t.children[1];
      if (error) await sendSpans(c.httpUrl, "sampling-test", [error]);
    }
    await at(3);
    for (const [c, t] of tasks) await sendSpans(c.httpUrl, "sampling-test", [t.root]);
    await sendSpans(old.httpUrl, "sampling-test", [...control.children, control.root]);

    const kept = tasks.get(current);
    const lost = tasks.get(old);
    if (!kept || !lost) throw new Error("no task");
    const arrived = await waitFor(
      () => spansOf(kept.traceId).length === 3 && spansOf(control.traceId).length === 2,
      DELIVERY_MS,
    );
    expect(
      arrived,
      `in ${String(DELIVERY_MS)} ms: ${String(spansOf(kept.traceId).length)} of 3 spans of the ` +
        `long task, ${String(spansOf(control.traceId).length)} of 2 of the control.\n` +
        `new waits:\n${current.log()}`,
    ).toBe(true);
    // Whole: the early success, the late error and the root.
    expect(
      spansOf(kept.traceId)
        .map((s) => s.spanId)
        .sort(),
    ).toEqual([kept.root, ...kept.children].map((s) => s.spanId).sort());
    // The old shape decided on the first span alone and dropped the rest as it came.
    expect(spansOf(lost.traceId)).toEqual([]);
    // The watchdog at work is kept; a healthy verdict and a successful call are not.
    expect(spansOf(stalled.traceId).map((s) => s.name)).toEqual(["agent.watchdog.verdict"]);
    expect(spansOf(tier.traceId).map((s) => s.name)).toEqual(["agent.watchdog.recovery"]);
    expect(spansOf(healthy.traceId)).toEqual([]);
    expect(spansOf(success.traceId)).toEqual([]);
    await Promise.all([current.stop(), old.stop()]);
  }, 180_000);

  it("sets Honeycomb's SampleRate: 1 on traces kept for errors, diagnoses and the watchdog, 100/percent on the baseline", async () => {
    const honeycomb = await startCollector({
      name: "honeycomb.yaml",
      configs: [collectorFile("honeycomb.yaml")],
      env: {
        HONEYCOMB_API_KEY: "hcaik_dummy0000000000000000000000",
        HONEYCOMB_API_ENDPOINT: sink.httpUrl,
        SELFHEAL_TRACE_SAMPLE_PERCENT: "25",
        SELFHEAL_TRACE_DECISION_WAIT: "2s",
        SELFHEAL_TRACE_DECISION_WAIT_AFTER_ROOT: "1s",
      },
    });
    const errors = Array.from({ length: 5 }, (_, i) =>
      toolCall(`hc/error/${String(i)}`, [{ name: "agent.tool_call.error", status: 2 }], 2),
    );
    const diagnosed = Array.from({ length: 3 }, (_, i) =>
      toolCall(`hc/diagnosed/${String(i)}`, [
        { name: "agent.diagnosis", attributes: { "selfheal.diagnosis.pattern": "RATE_LIMIT" } },
        { name: "agent.recovery", attributes: { "selfheal.recovery.outcome": "success" } },
      ]),
    );
    const stalled = verdict("hc/watchdog", "session_dead");
    const healthy = Array.from({ length: 40 }, (_, i) =>
      toolCall(`hc/healthy/${String(i)}`, [{ name: "agent.tool_call" }]),
    );
    const mustKeep = [...errors, ...diagnosed].map((t) => ({
      traceId: t.traceId,
      spans: [t.root, ...t.children],
    }));
    mustKeep.push({ traceId: stalled.traceId, spans: [stalled] });
    const all = [...errors, ...diagnosed, ...healthy].flatMap((t) => [...t.children, t.root]);
    await sendSpans(honeycomb.httpUrl, "sampling-test", [...all, stalled]);

    const mine = new Set([...mustKeep.map((t) => t.traceId), ...healthy.map((t) => t.traceId)]);
    const received = () => sink.spans().filter((s) => mine.has(s.traceId));
    const allKept = () =>
      mustKeep.every((t) => spansOf(t.traceId).length >= t.spans.length) &&
      received().some((s) => s.attributes.SampleRate === 4);
    expect(await waitFor(allKept, DELIVERY_MS), honeycomb.log()).toBe(true);
    // Both samplers decided on the same tick; wait for the exporter's last flush to settle.
    let count = -1;
    while (count !== received().length) {
      count = received().length;
      await sleep(1_500);
    }
    await honeycomb.stop();

    const spans = received();
    // No span twice: each trace was kept by one sampler only.
    const ids = spans.map((s) => s.spanId);
    expect(ids.length).toBe(new Set(ids).size);
    for (const t of mustKeep) {
      const got = spansOf(t.traceId);
      expect(got.map((s) => s.spanId).sort(), t.traceId).toEqual(
        t.spans.map((s) => s.spanId).sort(),
      );
      for (const s of got) expect(s.attributes.SampleRate, `${s.name} of ${t.traceId}`).toBe(1);
    }
    const baseline = healthy.filter((t) => spansOf(t.traceId).length > 0);
    // 25 % of 40 fixed trace ids: some, never all (the probabilistic policy hashes the id).
    expect(baseline.length).toBeGreaterThan(0);
    expect(baseline.length).toBeLessThan(healthy.length);
    for (const t of baseline) {
      const got = spansOf(t.traceId);
      expect(got).toHaveLength(2);
      for (const s of got) expect(s.attributes.SampleRate, `${s.name} of ${t.traceId}`).toBe(4);
    }
  }, 180_000);
});
