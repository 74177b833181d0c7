import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { SpanStatusCode } from "@opentelemetry/api";
import { describe, expect, it, vi } from "vitest";
import type { Clock } from "../../src/clock.js";
import { CallRollup, type CallRollupLine } from "../../src/engine/call-rollup.js";
import { EngineState } from "../../src/engine/engine-state.js";
import { resolveOptions } from "../../src/engine/options.js";
import type { ThresholdsLine } from "../../src/engine/thresholds-line.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { failedAttempts, type CallRecord } from "../../src/health/store.js";
import {
  DEFAULT_BASELINE_TAU_MS,
  DEFAULT_THRESHOLDS,
  mergeThresholds,
} from "../../src/health/thresholds.js";
import {
  createSelfHealing,
  isCircuitOpenError,
  isHealthCheckFailedError,
  type RecoveryOptions,
  type SelfHealingOptions,
  type ToolCallEvent,
} from "../../src/index.js";
import { JsonlLog } from "../../src/recovery/event-log.js";
import { bucketOf, Buckets } from "../../src/telemetry/log-buckets.js";
import { FailureInjector, VirtualClock } from "../../src/testing/index.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";
import { freshDirs } from "../helpers/temp.js";

const dirs = freshDirs("call-rollup");
/** The virtual clock's start: the first instant of a minute. */
const T0 = new VirtualClock().now();
const MINUTE = 60_000;

/** An instance on virtual time writing its event log to a fresh folder; its `tool-call` events kept. */
function logged(
  options: Partial<SelfHealingOptions> = {},
  recovery: RecoveryOptions = NO_RECOVERY,
) {
  const path = join(dirs(), "events.jsonl");
  const instance = virtualInstance({ ...options, recovery: { ...recovery, eventLog: path } });
  const calls: ToolCallEvent[] = [];
  instance.sh.on("tool-call", (e) => calls.push(e));
  return { ...instance, path, calls };
}

type Line = Record<string, unknown> & { type?: string };

async function linesOf(path: string): Promise<Line[]> {
  return (await readFile(path, "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
}

const rollups = (lines: Line[]) =>
  lines.filter((l) => l.type === "calls") as unknown as CallRollupLine[];

/** A line's counts, without its latency buckets. */
const counts = ({ latencyMs: _latency, ...rest }: CallRollupLine) => rest;

/** What the signal store would make of these call events, tool by tool (the rule, restated). */
function storeCounts(calls: readonly ToolCallEvent[]) {
  const out = new Map<string, { ok: number; failed: number; llm: number; empty: number }>();
  for (const c of calls) {
    const ok = c.outcome === "success" || c.outcome === "recovered" ? 1 : 0;
    const failed = failedAttempts(c);
    if (ok + failed === 0) continue;
    const t = out.get(c.tool) ?? { ok: 0, failed: 0, llm: 0, empty: 0 };
    t.ok += ok;
    t.failed += failed;
    if (c.empty !== undefined) t.llm += 1;
    if (c.empty === true) t.empty += 1;
    out.set(c.tool, t);
  }
  return out;
}

const line = (tool: string, at: number, n: Partial<CallRollupLine>) => ({
  type: "calls",
  at,
  agent: "test-agent",
  tool,
  ok: 0,
  failed: 0,
  llm: 0,
  empty: 0,
  ...n,
});

describe("call rollup lines", () => {
  it("count per tool what the signal store counts: answers, every failed attempt, LLM answers and empty ones", async () => {
    const { sh, clock, path, calls } = logged({}, { random: () => 0 });
    const search = sh.tool("search", { readOnly: true }, (q: string) => {
      if (q === "bad") throw Object.assign(new Error("400 invalid query"), { status: 400 });
      return `found ${q}`;
    });
    const inj = new FailureInjector({ clock });
    inj.inject("rate_limit", { first: 2 });
    const flaky = sh.tool(
      "flaky",
      { readOnly: true },
      inj.wrap(() => Promise.resolve("ok")),
    );
    const complete = sh.tool("complete", { readOnly: true, kind: "llm" }, (p: string) => p);

    for (const q of ["a", "b", "c"]) await search(q);
    await expect(search("bad")).rejects.toThrow("400"); // not retried: one failed attempt
    await complete("hello");
    // Two 429s, answered by the same route: the retry it absorbed counts once (10 s).
    await clock.run(flaky(undefined), { stepMs: 100 });
    // Empty every time: five retries fail, then the empty answer is the answer (31 s).
    await clock.run(complete(""), { stepMs: 100 });
    await complete("again");
    expect(clock.now() - T0).toBeLessThan(MINUTE);
    await sh.close();

    const lines = rollups(await linesOf(path));
    // Tools in the order first counted; all in the minute the calls ended in.
    expect(lines.map(counts)).toEqual([
      line("search", T0, { ok: 3, failed: 1 }),
      line("complete", T0, { ok: 3, failed: 5, llm: 3, empty: 1 }),
      line("flaky", T0, { ok: 1, failed: 1 }),
    ]);
    // The same numbers as the store's rule applied to each call's record.
    const expected = storeCounts(calls);
    for (const l of lines) {
      const { ok, failed, llm, empty } = l;
      expect(expected.get(l.tool)).toEqual({ ok, failed, llm, empty });
    }
    // Every counted call has its duration in the buckets: 0 ms in bucket 0, 10 s and 31 s above.
    expect(lines.map((l) => l.latencyMs)).toEqual([
      { "0": 4 },
      { "0": 2, "120": 1 }, // 2^(119/8) < 31 000 <= 2^(120/8)
      { "107": 1 }, // 10 000 ms
    ]);
  });

  it("leave out calls that reached no dependency: replayed, failed fast by an open circuit, blocked", async () => {
    const { sh, clock, path, calls } = logged(
      { health: { cacheMs: 0, successRate: { warning: 0.99, critical: 0.99, minSamples: 1 } } },
      {
        ...NO_RECOVERY,
        providers: [{ name: "p" }, { name: "q" }],
        breaker: { minimumAttempts: 1 },
      },
    );
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
      (o: { order: string }) => ({ charged: o.order }),
    );
    const fetch = sh.tool("fetch", { readOnly: true, providers: ["p", "q"] }, () => {
      throw Object.assign(new Error("503 unavailable"), { status: 503 });
    });

    await charge({ order: "a" });
    await charge({ order: "a" }); // replayed from the ledger
    await expect(fetch(undefined)).rejects.toThrow("503"); // opens p's breaker; health critical
    await expect(fetch(undefined)).rejects.toThrow("503"); // on q, which opens too
    await expect(fetch(undefined)).rejects.toSatisfy(isCircuitOpenError); // failed fast
    await expect(charge({ order: "b" })).rejects.toSatisfy(isHealthCheckFailedError); // blocked
    await clock.advance(1_000);
    await sh.close();

    expect(calls.map((c) => `${c.tool}:${c.outcome}`)).toEqual([
      "charge:success",
      "charge:success",
      "fetch:error",
      "fetch:error",
      "fetch:error",
      "charge:blocked",
    ]);
    expect(rollups(await linesOf(path)).map(counts)).toEqual([
      line("charge", T0, { ok: 1 }),
      line("fetch", T0, { failed: 2 }),
    ]);
  });

  it("are one per tool per minute: 59.9 s and 60.0 s go to different lines, a quiet minute writes none", async () => {
    const { sh, clock, path } = logged();
    const a = sh.tool("a", { readOnly: true }, () => "a");
    const b = sh.tool("b", { readOnly: true }, () => "b");

    await b(undefined);
    await clock.advance(59_900);
    await a(undefined);
    await b(undefined);
    // The minute is still open. The log is written in the background: wait for its first line.
    expect(rollups(await vi.waitFor(() => linesOf(path)))).toEqual([]);
    await clock.advance(100);
    await a(undefined); // 60.0 s: a new minute, the last one is written now
    await vi.waitFor(async () => {
      expect(rollups(await linesOf(path)).map(counts)).toEqual([
        line("b", T0, { ok: 2 }),
        line("a", T0, { ok: 1 }),
      ]);
    });
    await clock.advance(2 * MINUTE); // the minute at 120 s has no call
    await b(undefined);
    await b(undefined);
    await sh.close();

    expect(rollups(await linesOf(path)).map(counts)).toEqual([
      line("b", T0, { ok: 2 }),
      line("a", T0, { ok: 1 }),
      line("a", T0 + MINUTE, { ok: 1 }),
      line("b", T0 + 3 * MINUTE, { ok: 2 }),
    ]);
  });

  it("of the open minute are written by close()", async () => {
    const { sh, clock, path } = logged();
    const a = sh.tool("a", { readOnly: true }, () => "a");
    await clock.advance(30_000);
    await a(undefined);
    await sh.close();
    await sh.close(); // twice: still one line
    expect(rollups(await linesOf(path)).map(counts)).toEqual([line("a", T0, { ok: 1 })]);
  });

  it("count what other libraries' spans recorded, under the span's agent", async () => {
    const { sh, path } = logged();
    const health = sh.spanProcessor();
    const span = (agent: string | undefined, code: SpanStatusCode) => ({
      name: "execute_tool web_search",
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "web_search",
        ...(agent !== undefined && { "gen_ai.agent.name": agent }),
      },
      status: { code },
      duration: [0, 5_000_000] as [number, number],
    });
    health.onEnd(span(undefined, SpanStatusCode.UNSET));
    health.onEnd(span("planner", SpanStatusCode.UNSET));
    health.onEnd(span("planner", SpanStatusCode.ERROR));
    await sh.close();
    expect(rollups(await linesOf(path))).toEqual([
      { ...line("web_search", T0, { ok: 1 }), latencyMs: { [bucketOf(5)]: 1 } },
      {
        ...line("web_search", T0, { ok: 1, failed: 1 }),
        agent: "planner",
        latencyMs: { [bucketOf(5)]: 2 },
      },
    ]);
  });

  it("of a call in flight at close() are written as it ends", async () => {
    const { sh, clock, path } = logged();
    let answer!: (v: string) => void;
    const slow = sh.tool(
      "slow",
      { readOnly: true },
      () => new Promise<string>((r) => (answer = r)),
    );
    const fast = sh.tool("fast", { readOnly: true }, () => "ok");
    await fast(undefined);
    const pending = slow(undefined);
    await clock.advance(0);
    await sh.close();
    expect(rollups(await linesOf(path)).map(counts)).toEqual([line("fast", T0, { ok: 1 })]);
    answer("late");
    await pending;
    await vi.waitFor(async () => {
      expect(rollups(await linesOf(path)).map(counts)).toEqual([
        line("fast", T0, { ok: 1 }),
        line("slow", T0, { ok: 1 }),
      ]);
    });
  });

  it("never reopen a written minute when the clock steps back: the call counts in the open one", async () => {
    const virtual = new VirtualClock();
    let offset = 0;
    const clock: Clock = {
      now: () => virtual.now() + offset,
      sleep: (ms, signal) => virtual.sleep(ms, signal),
      setTimer: (ms, callback) => virtual.setTimer(ms, callback),
    };
    const { sh, path } = logged({ clock });
    const a = sh.tool("a", { readOnly: true }, () => "a");
    await virtual.advance(30_000);
    await a(undefined);
    await virtual.advance(31_000);
    await a(undefined); // 61 s: the first minute is written
    offset = -30_000; // back to 31 s
    await a(undefined);
    await sh.close();

    expect(rollups(await linesOf(path)).map(counts)).toEqual([
      line("a", T0, { ok: 1 }),
      line("a", T0 + MINUTE, { ok: 2 }),
    ]);
  });

  it("carry latency buckets whose quantiles read back within 5 %", async () => {
    const { sh, clock, path, calls } = logged();
    const slow = sh.tool("slow", { readOnly: true }, (ms: number) =>
      clock.sleep(ms).then(() => ms),
    );
    // A skewed spread of durations, 21 ms to 2 s, all ending in the first minute.
    const durations = Array.from({ length: 200 }, (_, i) => Math.round(20 + (i + 1) ** 2 / 20));
    const running = durations.map((ms) => slow(ms));
    await clock.advance(Math.max(...durations));
    await Promise.all(running);
    await sh.close();
    expect(calls.map((c) => c.durationMs).sort((x, y) => x - y)).toEqual(
      [...durations].sort((x, y) => x - y),
    );

    const [only, ...others] = rollups(await linesOf(path));
    expect(others).toEqual([]);
    expect(only?.ok).toBe(200);
    const buckets = new Buckets();
    buckets.addEncoded(only?.latencyMs ?? {});
    expect(buckets.total).toBe(200);
    const sorted = [...durations].sort((x, y) => x - y);
    for (const q of [0.5, 0.9, 0.95, 0.99, 1]) {
      const exact = sorted[Math.ceil(q * sorted.length) - 1] ?? Number.NaN;
      const read = buckets.quantile(q) ?? Number.NaN;
      expect(Math.abs(read - exact) / exact, `q=${String(q)}`).toBeLessThanOrEqual(0.05);
    }
  });

  it("are not kept at all without an event log: no rollup object, nothing written", async () => {
    const state = new EngineState(resolveOptions({ agent: "x", clock: new VirtualClock() }));
    expect(state.eventLog).toBeUndefined();
    expect(state.callRollup).toBeUndefined();
    const withLog = new EngineState(
      resolveOptions({
        agent: "x",
        clock: new VirtualClock(),
        recovery: { eventLog: join(dirs(), "events.jsonl") },
      }),
    );
    expect(withLog.callRollup).toBeInstanceOf(CallRollup);

    // Calls and close() touch no rollup and no log.
    const record = vi.spyOn(CallRollup.prototype, "record");
    const flush = vi.spyOn(CallRollup.prototype, "flush");
    const append = vi.spyOn(JsonlLog.prototype, "append");
    try {
      const sh = createSelfHealing({ agent: "x", clock: new VirtualClock() });
      const a = sh.tool("a", { readOnly: true }, () => "a");
      await expect(a(undefined)).resolves.toBe("a");
      await sh.close();
      expect([record, flush, append].map((spy) => spy.mock.calls.length)).toEqual([0, 0, 0]);
    } finally {
      vi.restoreAllMocks();
    }
  });
});

describe("CallRollup", () => {
  const record = (n: Partial<CallRecord> = {}): CallRecord => ({
    agent: "x",
    tool: "t",
    outcome: "success",
    durationMs: 5,
    ...n,
  });

  it("appends nothing until the minute is flushed, and a flushed minute is empty", () => {
    const appended: object[] = [];
    const rollup = new CallRollup({ append: (l) => appended.push(l) });
    rollup.flush(); // nothing counted yet
    rollup.record(record(), T0);
    rollup.record(record({ outcome: "blocked", failedAttempts: 0 }), T0 + 2 * MINUTE); // no signal
    rollup.record(record({ outcome: "error" }), T0 + MINUTE - 1); // failedAttempts defaults to 1
    expect(appended).toEqual([]);
    rollup.flush();
    expect(appended).toEqual([
      { ...line("t", T0, { ok: 1, failed: 1 }), agent: "x", latencyMs: { "19": 2 } },
    ]);
    rollup.flush();
    expect(appended).toHaveLength(1);
  });
});

describe("the thresholds line", () => {
  it("is written once, first, with the agent's thresholds and each overridden tool's merged ones", async () => {
    const { sh, clock, path } = logged({
      health: {
        successRate: { warning: 0.9 },
        baselineTauMs: 120_000,
        windows: { callWindowMs: 300_000 },
        tools: {
          search: { latency: { baselineMs: 800 } },
          pay: { successRate: { critical: 0.6, minSamples: 3 } },
        },
      },
    });
    const search = sh.tool("search", { readOnly: true }, () => "r");
    await clock.advance(5_000);
    await search(undefined);
    await sh.close();

    const lines = await linesOf(path);
    expect(lines.filter((l) => l.type === "thresholds")).toHaveLength(1);
    const agent = mergeThresholds(DEFAULT_THRESHOLDS, { successRate: { warning: 0.9 } });
    const first: ThresholdsLine = {
      type: "thresholds",
      at: T0,
      agent: "test-agent",
      thresholds: agent,
      tools: {
        search: mergeThresholds(agent, { latency: { baselineMs: 800 } }),
        pay: mergeThresholds(agent, { successRate: { critical: 0.6, minSamples: 3 } }),
      },
      callWindowMs: 300_000,
      baselineTauMs: 120_000,
    };
    expect(lines[0]).toEqual(first);
    expect(first.tools.pay?.successRate).toEqual({ warning: 0.9, critical: 0.6, minSamples: 3 });
    expect(lines.map((l) => l.type)).toEqual(["thresholds", "calls"]);
  });

  it("takes the call window from a store passed in, and the defaults when nothing is set", async () => {
    const path = join(dirs(), "events.jsonl");
    const clock = new VirtualClock(T0 + 1_234);
    const sh = createSelfHealing({
      agent: "y",
      clock,
      store: new MemorySignalStore({ callWindowMs: 120_000 }),
      recovery: { eventLog: path },
    });
    await sh.close();
    expect(await linesOf(path)).toEqual([
      {
        type: "thresholds",
        at: T0 + 1_234,
        agent: "y",
        thresholds: DEFAULT_THRESHOLDS,
        tools: {},
        callWindowMs: 120_000,
        baselineTauMs: DEFAULT_BASELINE_TAU_MS,
      },
    ]);
  });
});
