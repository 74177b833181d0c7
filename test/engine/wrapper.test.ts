import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { describe, expect, it } from "vitest";
import {
  CircuitOpenError,
  isCircuitOpenError,
  isHealthCheckFailedError,
  isReadOnlyModeError,
  isRecoveryBudgetExhaustedError,
  isSelfHealClosedError,
  isSelfHealConfigError,
  ToolTimeoutError,
  type CallContext,
  type CallRecord,
  type SelfHealing,
  type SelfHealingOptions,
  type SignalStore,
  type TaskRecord,
  type ToolCallEvent,
} from "../../src/index.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { thrownFault, type VirtualClock } from "../../src/testing/index.js";
import { NO_RECOVERY, virtualInstance } from "../helpers/engine.js";
import { recordingMeters } from "../helpers/otel.js";

const S = 1_000;

/** A user-supplied signal store that keeps what it is told (backed by the in-memory one). */
function recordingStore() {
  const inner = new MemorySignalStore();
  const calls: CallRecord[] = [];
  const tasks: TaskRecord[] = [];
  let closes = 0;
  const store: SignalStore = {
    recordCall(record, now) {
      calls.push(record);
      inner.recordCall(record, now);
    },
    recordTask(record, now) {
      tasks.push(record);
      inner.recordTask(record, now);
    },
    read: (agent, now) => inner.read(agent, now),
    close: () => {
      closes++;
      return Promise.resolve();
    },
  };
  return { store, calls, tasks, closes: () => closes };
}

/** An instance with a recording store, jitter off, and every tool call event kept. */
function setup(options: Partial<SelfHealingOptions> = {}) {
  const recorded = recordingStore();
  const vi = virtualInstance({ store: recorded.store, ...options });
  const events: ToolCallEvent[] = [];
  vi.sh.on("tool-call", (e) => events.push(e));
  return { ...vi, ...recorded, events };
}

/** Recovery options with jitter off and these plans on top of "no recovery". */
const withPlans = (plans: SelfHealingOptions["recovery"] & object = {}) => ({
  ...plans,
  random: () => 0,
  plans: { ...NO_RECOVERY.plans, ...plans.plans },
});

/** A write tool's recorded outcomes: [outcome, failedAttempts] per record. */
const outcomes = (records: readonly CallRecord[]) =>
  records.map((r) => [r.outcome, r.failedAttempts]);

/** Success-rate samples of one tool, past the status cache. */
async function samples(sh: SelfHealing, clock: VirtualClock, tool: string) {
  await clock.advance(5 * S);
  const status = await sh.status();
  return status.tools[tool]?.signals.find((s) => s.signal === "success_rate")?.samples ?? 0;
}

/** A tool that waits for its signal, like a request to a server that never answers. */
function hang(_args: unknown, ctx: CallContext): Promise<never> {
  return new Promise((_resolve, reject) => {
    ctx.signal.addEventListener("abort", () => {
      reject(ctx.signal.reason);
    });
  });
}

describe("after close()", () => {
  it("every entry point refuses with SelfHealClosedError saying what was attempted", async () => {
    const { sh } = virtualInstance();
    const search = sh.tool("search", { readOnly: true }, () => "found");
    await sh.close();
    await sh.close(); // safe twice
    const calls: [string, () => unknown][] = [
      ['tool "search" was called after close()', () => search(undefined)],
      [
        'tool("other") was registered after close()',
        () => sh.tool("other", { readOnly: true }, () => 1),
      ],
      ['task("t1") was started after close()', () => sh.task("t1", () => 1)],
      ["status() was called after close()", () => sh.status()],
    ];
    for (const [message, call] of calls) {
      const error = await Promise.resolve()
        .then(call)
        .catch((e: unknown) => e);
      expect(isSelfHealClosedError(error)).toBe(true);
      expect((error as Error).message).toBe(`selfheal: ${message}`);
    }
  });

  it("close() leaves a store the caller passed open: the caller owns it", async () => {
    const passed = recordingStore();
    const { sh } = virtualInstance({ store: passed.store });
    await sh.close();
    expect(passed.closes()).toBe(0);
  });
});

describe("argument checks", () => {
  it.each([[""], [42], [undefined]])(
    "task(%j, fn) is refused: the id must be a non-empty string",
    async (id) => {
      const { sh } = virtualInstance();
      let ran = false;
      const error = await sh
        .task(id as string, () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      expect(isSelfHealConfigError(error)).toBe(true);
      expect(error).toMatchObject({ field: "task(id)" });
      expect((error as Error).message).toMatch(/expected a non-empty string/);
      expect(ran).toBe(false);
    },
  );

  it("task(id, notAFunction) is refused naming the task", async () => {
    const { sh } = virtualInstance();
    const error = await sh.task("t1", "run" as never).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error)).toBe(true);
    expect(error).toMatchObject({ field: 'task("t1")' });
    expect((error as Error).message).toMatch(/the last argument must be the task function/);
  });

  it("on(event, notAFunction) is refused naming the event", () => {
    const { sh } = virtualInstance();
    expect(() => sh.on("tool-call", undefined as never)).toThrow(
      /on\("tool-call"\).*expected a listener function/,
    );
  });

  it("a provider listed twice is tried once, with a warning that says so", async () => {
    const { sh, warnings } = virtualInstance({
      recovery: withPlans({ providers: [{ name: "a" }, { name: "b" }] }),
    });
    const t = sh.tool("t", { readOnly: true, providers: ["a", "a", "b"] }, () => "ok");
    await t(undefined);
    expect(warnings).toEqual([
      'selfheal: tool "t" lists a provider more than once (a, a, b); each is used once, in first-listed order',
    ]);
  });
});

describe("tasks", () => {
  it("a task that throws is recorded as failed, in the store and the task counter", async () => {
    const meters = recordingMeters();
    const { sh, tasks } = setup({ meterProvider: meters.meterProvider });
    await sh.task("ok", () => "done");
    const boom = new Error("task failed");
    await expect(sh.task("bad", () => Promise.reject(boom))).rejects.toBe(boom);
    expect(tasks.map((t) => t.outcome)).toEqual(["completed", "failed"]);
    const points = await meters.read();
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=failed}")).toBe(1);
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=completed}")).toBe(1);
    await meters.shutdown();
  });
});

describe("tool-call events", () => {
  it("a failed call's event names the error; a successful one has no error fields", async () => {
    const { sh, events } = setup();
    const ok = sh.tool("ok", { readOnly: true }, () => 1);
    const bad = sh.tool("bad", { readOnly: true }, () => {
      throw new TypeError("broken for ops@example.com");
    });
    await ok(undefined);
    await bad(undefined).catch(() => undefined);
    expect(events).toHaveLength(2);
    const [success, failure] = events;
    expect(Object.keys(success ?? {})).not.toContain("errorType");
    expect(Object.keys(success ?? {})).not.toContain("error");
    expect(failure).toMatchObject({
      tool: "bad",
      outcome: "error",
      failedAttempts: 1,
      errorType: "TypeError",
      error: "broken for [REDACTED_EMAIL]",
    });
  });

  it("an llm tool with no provider counts its answers under provider=unknown", async () => {
    const meters = recordingMeters();
    const { sh } = virtualInstance({ meterProvider: meters.meterProvider });
    await sh.tool("complete", { readOnly: true, kind: "llm" }, () => "hi")(undefined);
    const points = await meters.read();
    expect(
      points.get("selfheal_llm_responses{agent=test-agent,provider=unknown,empty=false}"),
    ).toBe(1);
    await meters.shutdown();
  });
});

describe("the signal store hears only calls that reached the dependency", () => {
  it("a successful call and a failed call are both recorded", async () => {
    const { sh, clock, calls } = setup();
    const ok = sh.tool("ok", { readOnly: true }, () => 1);
    await ok(undefined);
    expect(outcomes(calls)).toEqual([["success", 0]]);
    expect(await samples(sh, clock, "ok")).toBe(1);
  });

  it("a call the caller aborted is not", async () => {
    const { sh, calls, events } = setup();
    const t = sh.tool("t", { readOnly: true }, hang);
    const controller = new AbortController();
    const pending = t(undefined, { signal: controller.signal }).catch((e: unknown) => e);
    const reason = new Error("user pressed stop");
    controller.abort(reason);
    expect(await pending).toBe(reason);
    expect(calls).toEqual([]);
    expect(events.map((e) => e.outcome)).toEqual(["error"]);
  });

  it("a call whose idempotencyKey function throws fails with that error, never runs, and is not recorded", async () => {
    const { sh, calls, events } = setup();
    let ran = 0;
    const boom = new Error("no order id");
    const t = sh.tool(
      "charge",
      {
        readOnly: false,
        idempotencyKey: () => {
          throw boom;
        },
      },
      () => ++ran,
    );
    await expect(t(undefined)).rejects.toBe(boom);
    expect(ran).toBe(0);
    expect(calls).toEqual([]);
    expect(events).toMatchObject([{ outcome: "error", errorType: "Error", error: "no order id" }]);
  });

  it("a replayed write is a success for the caller but no new evidence", async () => {
    const { sh, calls, events } = setup();
    let ran = 0;
    const t = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (a: { order: string }) => a.order },
      () => `charge #${++ran}`,
    );
    await expect(t.detailed({ order: "o1" })).resolves.toEqual({
      value: "charge #1",
      outcome: "success",
      provider: undefined,
      attempts: 1,
      replayed: false,
    });
    await expect(t.detailed({ order: "o1" })).resolves.toEqual({
      value: "charge #1",
      outcome: "success",
      provider: undefined,
      attempts: 0,
      replayed: true,
    });
    expect(ran).toBe(1);
    expect(outcomes(calls)).toEqual([["success", 0]]);
    expect(events.map((e) => [e.outcome, e.failedAttempts])).toEqual([
      ["success", 0],
      ["success", 0],
    ]);
  });

  it("a copy of an in-flight write that fails gets the same error and records nothing", async () => {
    const { sh, clock, calls, events } = setup();
    let ran = 0;
    const boom = new Error("card declined");
    const t = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (a: { order: string }) => a.order },
      async () => {
        ran++;
        await clock.sleep(1 * S);
        throw boom;
      },
    );
    const first = t({ order: "o1" }).catch((e: unknown) => e);
    const copy = t({ order: "o1" }).catch((e: unknown) => e);
    await clock.advance(1 * S);
    expect(await first).toBe(boom);
    expect(await copy).toBe(boom);
    expect(ran).toBe(1);
    expect(outcomes(calls)).toEqual([["error", 1]]);
    expect(events.map((e) => e.outcome)).toEqual(["error", "error"]);
  });

  it("reads with the same key are not shared: each concurrent read runs", async () => {
    const { sh, clock } = setup();
    let ran = 0;
    const t = sh.tool(
      "lookup",
      { readOnly: true, idempotencyKey: (a: { id: string }) => a.id },
      async () => {
        ran++;
        await clock.sleep(1 * S);
        return ran;
      },
    );
    const both = Promise.all([t({ id: "x" }), t({ id: "x" })]);
    await clock.advance(1 * S);
    await both;
    expect(ran).toBe(2);
  });
});

/** A single-route tool whose 503s open its breaker (circuit_break), with a canned answer option. */
function breakable(options: Partial<SelfHealingOptions> = {}, cannedAnswer?: () => string) {
  const vi = setup({
    recovery: withPlans({ plans: { SERVICE_DOWN: ["circuit_break"] } }),
    ...options,
  });
  let up = false;
  const ranAt: number[] = [];
  const t = sh(vi).tool(
    "inventory",
    {
      readOnly: false,
      idempotencyKey: (a: { sku: string }) => a.sku,
      ...(cannedAnswer && { cannedAnswer }),
    },
    () => {
      ranAt.push(vi.clock.now());
      if (!up) throw thrownFault("http_503");
      return "stock";
    },
  );
  return {
    ...vi,
    t,
    ranAt,
    recover: () => {
      up = true;
    },
  };
}
const sh = (vi: { sh: SelfHealing }) => vi.sh;

describe("the idempotency ledger", () => {
  it("keeps only writes' answers: a read with a key takes no place in it", async () => {
    const { sh } = setup({ recovery: withPlans({ ledger: { maxEntries: 1 } }) });
    let writes = 0;
    const write = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (a: string) => a },
      () => `charge #${++writes}`,
    );
    const read = sh.tool("lookup", { readOnly: true, idempotencyKey: (a: string) => a }, () => "x");
    await write("o1");
    await read("r1");
    await expect(write.detailed("o1")).resolves.toMatchObject({
      value: "charge #1",
      replayed: true,
    });
    expect(writes).toBe(1);
  });
});

describe("every route closed", () => {
  it("a fast failure with CircuitOpenError is not recorded: it reached nothing", async () => {
    const b = breakable();
    await b.t({ sku: "a" }).catch(() => undefined); // opens the breaker for 5 s
    const opened = b.calls.length;
    const error = await b.t({ sku: "b" }, { deadlineMs: 1 * S }).catch((e: unknown) => e);
    expect(isCircuitOpenError(error)).toBe(true);
    expect(b.calls).toHaveLength(opened);
    expect(b.events.at(-1)).toMatchObject({ outcome: "error", errorType: "CircuitOpenError" });
  });

  it("the call waits for the route when the wait (at most recovery.maxProbeWaitMs, 2 s) and 100 ms for the attempt fit in its deadline", async () => {
    const b = breakable();
    await b.t({ sku: "a" }).catch(() => undefined);
    const opened = b.clock.now();
    b.recover();
    await b.clock.advance(3 * S);
    // 2 s until the probe + 100 ms: exactly fits.
    const waited = b.clock.run(b.t({ sku: "b" }, { deadlineMs: 2_100 }), { stepMs: 100 });
    await expect(waited).resolves.toBe("stock");
    expect(b.ranAt.at(-1)).toBe(opened + 5 * S);
  });

  it("one millisecond less and it fails fast, without calling the tool", async () => {
    const b = breakable();
    await b.t({ sku: "a" }).catch(() => undefined);
    b.recover();
    await b.clock.advance(3 * S);
    const runs = b.ranAt.length;
    const error = await b.t({ sku: "b" }, { deadlineMs: 2_099 }).catch((e: unknown) => e);
    expect(isCircuitOpenError(error)).toBe(true);
    expect((error as CircuitOpenError).retryAfterMs).toBe(2 * S);
    expect(b.ranAt).toHaveLength(runs);
  });

  it("a call that arrives shortly before the probe waits only until then, not a whole poll period", async () => {
    const b = breakable();
    await b.t({ sku: "a" }).catch(() => undefined);
    const opened = b.clock.now();
    b.recover();
    await b.clock.advance(4_700);
    const waited = b.clock.run(b.t({ sku: "b" }), { stepMs: 100 });
    await expect(waited).resolves.toBe("stock");
    expect(b.ranAt.at(-1)).toBe(opened + 5 * S);
  });

  it("the canned answer answers instead: recovered, from no provider, after no attempt, not recorded", async () => {
    const b = breakable({}, () => "canned");
    await expect(b.t.detailed({ sku: "a" })).resolves.toEqual({
      value: "canned",
      outcome: "recovered",
      provider: undefined,
      attempts: 1,
      replayed: false,
    });
    // The first call failed on the route, then got the canned answer: that is evidence.
    expect(outcomes(b.calls)).toEqual([["recovered", 1]]);
    await expect(b.t.detailed({ sku: "b" }, { deadlineMs: 1 * S })).resolves.toEqual({
      value: "canned",
      outcome: "recovered",
      provider: undefined,
      attempts: 0,
      replayed: false,
    });
    // The second never reached the dependency: no record.
    expect(outcomes(b.calls)).toEqual([["recovered", 1]]);
    expect(b.events.map((e) => e.outcome)).toEqual(["recovered", "recovered"]);
    // A canned answer is never stored as the write's result: the same key runs the tool later.
    b.recover();
    await b.clock.advance(5 * S);
    await expect(b.t({ sku: "b" })).resolves.toBe("stock");
  });

  it("a canned answer that throws ends the call with its error, unrecorded", async () => {
    const oops = new Error("no canned answer today");
    const b = breakable({}, () => {
      throw oops;
    });
    await expect(b.t({ sku: "a" })).rejects.toBe(oops);
    const recorded = b.calls.length;
    await expect(b.t({ sku: "b" }, { deadlineMs: 1 * S })).rejects.toBe(oops);
    expect(b.calls).toHaveLength(recorded);
    expect(b.events.at(-1)).toMatchObject({ outcome: "error", error: "no canned answer today" });
  });
});

describe("how a call's failed attempts are counted", () => {
  it("recovered on the secondary after the primary failed twice: two failed attempts", async () => {
    const { sh, clock, events } = setup({
      recovery: withPlans({
        providers: [{ name: "a" }, { name: "b" }],
        plans: {
          SERVICE_DOWN: ["retry_once", "failover_to_secondary", "exponential_backoff_with_jitter"],
        },
      }),
    });
    const tried: (string | undefined)[] = [];
    const t = sh.tool("t", { readOnly: true, providers: ["a", "b"] }, (_: undefined, ctx) => {
      tried.push(ctx.provider);
      if (ctx.provider === "a" || tried.filter((p) => p === "b").length === 1)
        throw thrownFault("http_503");
      return "ok";
    });
    await expect(clock.run(t.detailed(undefined), { stepMs: 100 })).resolves.toMatchObject({
      value: "ok",
      outcome: "recovered",
      provider: "b",
      attempts: 4,
    });
    expect(tried).toEqual(["a", "a", "b", "b"]);
    // The primary's two failures count in full; the retry the secondary absorbed does not.
    expect(events.map((e) => [e.outcome, e.failedAttempts])).toEqual([["recovered", 2]]);
  });

  it("a call that gives up counts every attempt it made", async () => {
    const { sh, clock, events } = setup({
      recovery: withPlans({ plans: { SERVICE_DOWN: ["retry_once"] } }),
    });
    const fault = thrownFault("http_503");
    const t = sh.tool("t", { readOnly: true }, () => {
      throw fault;
    });
    await expect(clock.run(t(undefined), { stepMs: 100 })).rejects.toBe(fault);
    expect(events.map((e) => [e.outcome, e.failedAttempts])).toEqual([["error", 2]]);
  });

  it("an empty llm answer that a retry could not improve is the answer, its retry the one failure", async () => {
    const { sh, clock, events } = setup({
      recovery: withPlans({ plans: { EMPTY_LLM_RESPONSE: ["retry_once"] } }),
    });
    let calls = 0;
    const t = sh.tool("complete", { readOnly: true, kind: "llm" }, () => {
      calls++;
      return "";
    });
    await expect(clock.run(t.detailed(undefined), { stepMs: 100 })).resolves.toEqual({
      value: "",
      outcome: "success",
      provider: undefined,
      attempts: 2,
      replayed: false,
    });
    expect(calls).toBe(2);
    expect(events).toMatchObject([{ outcome: "success", empty: true, failedAttempts: 1 }]);
  });

  it("an empty llm answer with no recovery: no failed attempt", async () => {
    const { sh, events } = setup();
    await sh.tool("complete", { readOnly: true, kind: "llm" }, () => "")(undefined);
    expect(events).toMatchObject([{ outcome: "success", empty: true, failedAttempts: 0 }]);
  });

  it("an empty answer of a write is never stored for its key: the same key asks again", async () => {
    const { sh } = setup();
    let calls = 0;
    const t = sh.tool(
      "draft",
      { readOnly: false, kind: "llm", idempotencyKey: (a: string) => a },
      () => (++calls === 1 ? "" : "a draft"),
    );
    await expect(t("k")).resolves.toBe("");
    await expect(t("k")).resolves.toBe("a draft");
    await expect(t.detailed("k")).resolves.toMatchObject({ value: "a draft", replayed: true });
  });

  it("out of budget: the error says so, carries the last failure, and counts every failed attempt", async () => {
    const { sh, clock, events } = setup({
      recovery: withPlans({
        budgetUsd: 1,
        providers: [{ name: "p", usdPerCall: 0.4 }],
        plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
      }),
    });
    const faults: Error[] = [];
    const t = sh.tool("t", { readOnly: true, providers: ["p"] }, () => {
      const fault = thrownFault("http_503");
      faults.push(fault);
      throw fault;
    });
    const error = await clock.run(t(undefined), { stepMs: 500 }).catch((e: unknown) => e);
    expect(isRecoveryBudgetExhaustedError(error)).toBe(true);
    expect(faults).toHaveLength(3);
    expect((error as Error).cause).toBe(faults.at(-1));
    expect(events.map((e) => [e.outcome, e.failedAttempts, e.errorType])).toEqual([
      ["error", 3, "RecoveryBudgetExhaustedError"],
    ]);
  });
});

describe("the idempotency-key warning", () => {
  it("a keyless write that fails is warned about once, with how to add a key", async () => {
    const { sh, clock, warnings } = setup({
      recovery: withPlans({ plans: { SERVICE_DOWN: ["retry_once"] } }),
    });
    const t = sh.tool("send", { readOnly: false }, () => {
      throw thrownFault("http_503");
    });
    await clock.run(t(undefined).catch(() => undefined));
    await clock.run(t(undefined).catch(() => undefined));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/write tool "send" failed and was not retried or failed over/);
    expect(warnings[0]).toMatch(
      /or pass \{ idempotencyKey \} per call, so a retry can never write twice\.$/,
    );
  });

  it("a read, or a write with a key, that fails is not warned about", async () => {
    const { sh, clock, warnings } = setup({
      recovery: withPlans({ plans: { SERVICE_DOWN: ["retry_once"] } }),
    });
    const read = sh.tool("read", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    const keyed = sh.tool("write", { readOnly: false, idempotencyKey: () => "k" }, () => {
      throw thrownFault("http_503");
    });
    await clock.run(read(undefined).catch(() => undefined));
    await clock.run(keyed(undefined).catch(() => undefined));
    expect(warnings).toEqual([]);
  });
});

describe("the first attempt's time budget", () => {
  it("without a timeout it is the call's deadline (60 s by default, else deadlineMs)", async () => {
    const { sh } = setup();
    const t = sh.tool("t", { readOnly: true }, (_: undefined, ctx) => ctx.timeoutMs);
    await expect(t(undefined)).resolves.toBe(60 * S);
    await expect(t(undefined, { deadlineMs: 7 * S })).resolves.toBe(7 * S);
  });

  it("a timeout longer than the deadline is cut to it; a shorter one is kept", async () => {
    const { sh } = setup();
    const t = sh.tool(
      "t",
      { readOnly: true, timeoutMs: 10 * S },
      (_: undefined, ctx) => ctx.timeoutMs,
    );
    await expect(t(undefined, { deadlineMs: 5 * S })).resolves.toBe(5 * S);
    await expect(t(undefined, { deadlineMs: 20 * S })).resolves.toBe(10 * S);
  });
});

describe("status()", () => {
  it("a tool is at least warning only while every one of its routes is open", async () => {
    const { sh, clock } = setup({
      recovery: withPlans({
        providers: [{ name: "a" }, { name: "b" }],
        plans: { SERVICE_DOWN: ["circuit_break"] },
      }),
    });
    const t = sh.tool("t", { readOnly: true, providers: ["a", "b"] }, () => {
      throw thrownFault("http_503");
    });
    await t(undefined).catch(() => undefined); // a fails: its circuit opens
    await clock.advance(1);
    expect(await sh.status()).toMatchObject({
      status: "healthy",
      circuits: { a: "open" },
      tools: { t: { status: "healthy", circuits: { a: "open", b: "closed" } } },
    });
    await t(undefined).catch(() => undefined); // routed to b, which fails too
    await clock.advance(1);
    expect((await sh.status()).tools.t).toMatchObject({
      status: "warning",
      circuits: { a: "open", b: "open" },
    });
  });

  it("per-tool thresholds apply to that tool only, never to the agent (even for a tool named undefined)", async () => {
    const { sh, clock } = setup({
      health: {
        tools: { undefined: { successRate: { warning: 0.99, critical: 0.98, minSamples: 1 } } },
      },
    });
    let n = 0;
    const t = sh.tool("undefined", { readOnly: true }, () => {
      if (n++ === 0) throw new Error("once");
      return "ok";
    });
    await t(undefined).catch(() => undefined);
    await t(undefined);
    await clock.advance(5 * S);
    const status = await sh.status();
    expect(status.tools.undefined?.status).toBe("critical");
    expect(status.status).toBe("healthy"); // 2 calls: too few for the agent's default minSamples
  });

  it("keeps the last status, with a warning, when the store cannot be read", async () => {
    const recorded = recordingStore();
    let broken = false;
    const store: SignalStore = {
      ...recorded.store,
      read: (agent, now) => {
        if (broken) throw new Error("redis at 10.0.0.7 refused: token sk-abcdefghijklmnopqrstuvwx");
        return recorded.store.read(agent, now);
      },
    };
    const { sh, clock, warnings } = virtualInstance({ store });
    expect((await sh.status()).status).toBe("healthy");
    broken = true;
    await clock.advance(5 * S);
    expect(await sh.status()).toMatchObject({ status: "healthy", stale: true });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^selfheal: signal store read failed, keeping last status: /);
    expect(warnings[0]).not.toContain("sk-abcdefghijklmnopqrstuvwx");
  });
});

describe("write refusals", () => {
  it("while the agent is critical a write is refused with the status in the error", async () => {
    const { sh, clock } = setup({ health: { successRate: { minSamples: 4 } } });
    const failing = sh.tool("lookup", { readOnly: true }, () => {
      throw new Error("down");
    });
    for (let i = 0; i < 4; i++) await failing(undefined).catch(() => undefined);
    await clock.advance(5 * S);
    const error = await sh
      .tool(
        "send",
        { readOnly: false },
        () => 1,
      )(undefined)
      .catch((e: unknown) => e);
    expect(isHealthCheckFailedError(error)).toBe(true);
    expect(error).toMatchObject({ tool: "send", status: "critical" });
    expect((error as Error).message).toMatch(/the agent's health is critical/);
  });

  describe("after recovery made the agent read-only", () => {
    /**
     * 12 good reads (a success rate, but too few calls for a latency reading), then one 503 that
     * degrades the agent.
     */
    async function degraded(store?: SignalStore) {
      const vi = setup({
        recovery: withPlans({ plans: { SERVICE_DOWN: ["degrade_to_readonly"] } }),
        ...(store && { store }),
      });
      let failing = false;
      const read = vi.sh.tool("read", { readOnly: true }, () => {
        if (failing) throw thrownFault("http_503");
        return "ok";
      });
      const write = vi.sh.tool("write", { readOnly: false }, () => "written");
      for (let i = 0; i < 12; i++) await read(undefined);
      failing = true;
      await read(undefined).catch(() => undefined);
      failing = false;
      return {
        ...vi,
        read,
        write,
        fail: () => {
          failing = true;
        },
      };
    }

    it("writes are refused at once, even by a healthy report made in the same instant", async () => {
      const d = await degraded();
      const error = await d.write(undefined).catch((e: unknown) => e);
      expect(isReadOnlyModeError(error)).toBe(true);
      expect((await d.sh.status()).readOnly).toBe(true);
    });

    it("a later report that is not healthy keeps writes refused", async () => {
      const d = await degraded();
      d.fail();
      for (let i = 0; i < 3; i++) await d.read(undefined).catch(() => undefined);
      await d.clock.advance(5 * S);
      // 12 of 16 calls succeeded: warning, not critical, so only read-only mode refuses writes.
      const status = await d.sh.status();
      expect(status).toMatchObject({ status: "warning", readOnly: true });
      const error = await d.write(undefined).catch((e: unknown) => e);
      expect(isReadOnlyModeError(error)).toBe(true);
    });

    it("a report from a store that cannot be read (no signals) keeps writes refused", async () => {
      const recorded = recordingStore();
      let broken = false;
      const d = await degraded({
        ...recorded.store,
        read: (agent, now) => {
          if (broken) throw new Error("store down");
          return recorded.store.read(agent, now);
        },
      });
      broken = true;
      await d.clock.advance(5 * S);
      const error = await d.write(undefined).catch((e: unknown) => e);
      expect(isReadOnlyModeError(error)).toBe(true);
    });

    it("a later healthy report lifts read-only mode", async () => {
      const d = await degraded();
      await d.clock.advance(5 * S);
      await expect(d.write(undefined)).resolves.toBe("written");
      expect((await d.sh.status()).readOnly).toBe(false);
    });
  });
});

describe("diagnose()", () => {
  it("reads the status page of the named tool with the configured fetch", async () => {
    const fetched: string[] = [];
    const fetch = ((url: URL) => {
      fetched.push(String(url));
      return Promise.resolve(
        new Response(JSON.stringify({ status: { indicator: "major" } }), { status: 200 }),
      );
    }) as typeof globalThis.fetch;
    const { sh } = virtualInstance({
      diagnosis: { fetch, statusPages: { complete: "https://status.example.com" } },
    });
    const timeout = new ToolTimeoutError("complete", 30 * S);
    await expect(sh.diagnose(timeout, { tool: "complete" })).resolves.toMatchObject({
      pattern: "SERVICE_DOWN",
      statusPage: "degraded",
    });
    expect(fetched).toEqual(["https://status.example.com/api/v2/status.json"]);
    // Without a tool (or for another tool) no page is read.
    await expect(sh.diagnose(timeout)).resolves.toMatchObject({ pattern: "TIMEOUT" });
    expect(fetched).toHaveLength(1);
  });
});

describe("metrics of the instance", () => {
  it("count an escalation by channel", async () => {
    const meters = recordingMeters();
    const alerts: Alert[] = [];
    const notifier: Notifier = {
      channel: "memory",
      send: (a) => Promise.resolve(void alerts.push(a)),
    };
    const { sh, clock } = setup({
      meterProvider: meters.meterProvider,
      recovery: withPlans({
        notifiers: [notifier],
        plans: { SERVICE_DOWN: ["escalate_to_human"] },
      }),
    });
    const t = sh.tool("t", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    await clock.run(t(undefined).catch(() => undefined));
    expect(alerts).toHaveLength(1);
    const points = await meters.read();
    expect(
      points.get("selfheal_escalations{agent=test-agent,channel=memory,suppressed=false}"),
    ).toBe(1);
    await meters.shutdown();
  });

  it("can be collected before any status was computed, without errors", async () => {
    const reader = new CollectingReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    virtualInstance({ meterProvider });
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const names = resourceMetrics.scopeMetrics.flatMap((m) =>
      m.metrics.map((x) => x.descriptor.name),
    );
    expect(names).toContain("selfheal_tasks");
    const health = resourceMetrics.scopeMetrics
      .flatMap((m) => m.metrics)
      .find((m) => m.descriptor.name === "selfheal_health_status");
    expect(health?.dataPoints ?? []).toEqual([]);
    await meterProvider.shutdown();
  });
});

/** A metric reader that exports nowhere, so a test sees collection errors too. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}
