import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  isCircuitOpenError,
  isHealthCheckFailedError,
  isHumanEscalationRequiredError,
  isReadOnlyModeError,
  isRecoveryBudgetExhaustedError,
  type CallContext,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealingOptions,
} from "../../src/index.js";
import type { Notifier, Alert } from "../../src/notify/index.js";
import { FailureInjector, thrownFault } from "../../src/testing/index.js";
import { recordingMeters, recordingProvider, tree } from "../helpers/otel.js";
import { recoveryInstance } from "../helpers/engine.js";

const otel = recordingProvider();

/** A notifier that keeps what it is sent (Slack and friends are tested over real HTTP elsewhere). */
function memoryNotifier(): Notifier & { alerts: Alert[] } {
  const alerts: Alert[] = [];
  return { channel: "memory", alerts, send: (a) => Promise.resolve(void alerts.push(a)) };
}

function setup(recovery: RecoveryOptions = {}, options: Partial<SelfHealingOptions> = {}) {
  otel.reset();
  return recoveryInstance(otel.provider, recovery, options);
}

/** Recovery spans in start order: strategy, attempt, wait, outcome, provider. */
function recoverySpans() {
  return otel.named("agent.recovery").map((s) => ({
    strategy: s.attributes["selfheal.recovery.strategy"],
    outcome: s.attributes["selfheal.recovery.outcome"],
    wait: s.attributes["selfheal.recovery.wait_ms"],
    provider: s.attributes["selfheal.recovery.provider"],
  }));
}

describe("exponential_backoff_with_jitter", () => {
  it("rate limit twice, then success: exactly 3 calls; each retry waits out the route's 5 s cooldown (longer than the quick retry and the 1 s backoff); one span per step", async () => {
    const { sh, clock, events } = setup();
    const injector = new FailureInjector({ clock });
    injector.inject("rate_limit", { first: 2 });
    const sentAt: number[] = [];
    const answer = injector.wrap((q: string) => Promise.resolve(`found ${q}`));
    const t = sh.tool("search", { readOnly: true }, (q: string, ctx: CallContext) => {
      sentAt.push(clock.now());
      return answer(q, ctx);
    });
    const result = clock.run(t.detailed("cats"), { stepMs: 100 });
    await expect(result).resolves.toMatchObject({
      value: "found cats",
      outcome: "recovered",
      attempts: 3,
    });
    expect(injector.calls).toBe(3);
    // A 429 without Retry-After keeps the route cooling down for 5 s (RATE_LIMIT's cooldownMs):
    // no retry goes sooner, however short its own delay.
    expect(sentAt.slice(1).map((at, i) => at - (sentAt[i] ?? 0))).toEqual([5_000, 5_000]);
    expect(recoverySpans()).toEqual([
      { strategy: "retry_once", outcome: "failure", wait: 5_000, provider: undefined },
      // No other route to move to: skipped.
      {
        strategy: "failover_to_secondary",
        outcome: "skipped",
        wait: undefined,
        provider: undefined,
      },
      {
        strategy: "exponential_backoff_with_jitter",
        outcome: "success",
        wait: 5_000,
        provider: undefined,
      },
    ]);
    expect(tree(otel.spans())).toEqual([
      {
        "agent.tool_call": [
          "agent.tool_call.error",
          "agent.diagnosis",
          { "agent.recovery": ["agent.tool_call.error", "agent.diagnosis"] },
          "agent.recovery",
          "agent.recovery",
        ],
      },
    ]);
    const call = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(call?.attributes["selfheal.call.outcome"]).toBe("recovered");
    expect(events).toMatchObject([
      {
        tool: "search",
        pattern: "RATE_LIMIT",
        outcome: "recovered",
        attempts: 2,
        strategy: "exponential_backoff_with_jitter",
      },
    ]);
  });

  it("jitter adds up to 30% to the 1 s, 2 s schedule; Retry-After wins, spread by at most 10%; a Retry-After beyond the cap gives up to the next step", async () => {
    const jittery = setup({ random: () => 1 });
    const inj = new FailureInjector({ clock: jittery.clock });
    inj.inject("http_503", { first: 2 });
    const t = jittery.sh.tool(
      "t",
      { readOnly: true, plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] } },
      inj.wrap(() => Promise.resolve(1)),
    );
    await jittery.clock.run(t(undefined), { stepMs: 100 });
    expect(recoverySpans().map((s) => s.wait)).toEqual([1_300, 2_600]);
    const spread = new FailureInjector({ clock: jittery.clock });
    spread.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 7 });
    const s = jittery.sh.tool(
      "s",
      { readOnly: true, plans: { RATE_LIMIT: ["exponential_backoff_with_jitter"] } },
      spread.wrap(() => Promise.resolve(1)),
    );
    await jittery.clock.run(s(undefined), { stepMs: 100 });
    // Calls told to wait together do not all come back in the same millisecond.
    expect(recoverySpans().at(-1)?.wait).toBeCloseTo(7_700);

    const polite = setup();
    const inj2 = new FailureInjector({ clock: polite.clock });
    inj2.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 7 });
    const u = polite.sh.tool(
      "u",
      { readOnly: true, plans: { RATE_LIMIT: ["exponential_backoff_with_jitter"] } },
      inj2.wrap(() => Promise.resolve(1)),
    );
    await polite.clock.run(u(undefined), { stepMs: 500 });
    // 7 s: longer than the 1 s delay and than RATE_LIMIT's 5 s cooldown.
    expect(recoverySpans()).toEqual([
      {
        strategy: "exponential_backoff_with_jitter",
        outcome: "success",
        wait: 7_000,
        provider: undefined,
      },
    ]);

    const capped = setup();
    const inj3 = new FailureInjector({ clock: capped.clock });
    inj3.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 3_600 });
    const v = capped.sh.tool(
      "v",
      { readOnly: true, plans: { RATE_LIMIT: ["exponential_backoff_with_jitter"] } },
      inj3.wrap(() => Promise.resolve(1)),
    );
    await expect(capped.clock.run(v(undefined))).rejects.toMatchObject({ status: 429 });
    expect(inj3.calls).toBe(1); // did not sit out an hour, did not hammer
  });

  it("a Retry-After of 0 still waits the 100 ms floor before the retry, in the default chain (retry_once) and in the backoff: never a tight loop", async () => {
    const { sh, clock } = setup();
    /** A tool that answers 429 with Retry-After: 0 once, then "ok", noting when it was sent. */
    const throttledOnce = (name: string, recovery: RecoveryOptions["plans"]) => {
      const inj = new FailureInjector({ clock });
      inj.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 0 });
      const answer = inj.wrap(() => Promise.resolve("ok"));
      const sentAt: number[] = [];
      const tool = sh.tool(
        name,
        { readOnly: true, ...(recovery && { plans: recovery }) },
        (args: undefined, ctx: CallContext) => {
          sentAt.push(clock.now());
          return answer(args, ctx);
        },
      );
      return { tool, inj, sentAt };
    };
    for (const [name, plans, strategy] of [
      ["default", undefined, "retry_once"],
      [
        "backoff",
        { RATE_LIMIT: ["exponential_backoff_with_jitter"] },
        "exponential_backoff_with_jitter",
      ],
    ] as const) {
      otel.reset();
      const { tool, inj, sentAt } = throttledOnce(name, plans);
      await expect(clock.run(tool.detailed(undefined), { stepMs: 10 })).resolves.toMatchObject({
        value: "ok",
        outcome: "recovered",
        attempts: 2,
      });
      expect(inj.injected.get("rate_limit")).toBe(1);
      expect(sentAt).toHaveLength(2);
      expect((sentAt[1] ?? 0) - (sentAt[0] ?? 0)).toBeGreaterThanOrEqual(100);
      expect(recoverySpans()).toMatchObject([{ strategy, outcome: "success", wait: 100 }]);
    }
  });

  it("gives up after maxAttempts and passes the last error on", async () => {
    const { sh, clock } = setup({
      backoff: { maxAttempts: 2 },
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const inj = new FailureInjector({ clock });
    inj.inject("http_503", { first: 100 });
    const t = sh.tool(
      "t",
      { readOnly: true },
      inj.wrap(() => Promise.resolve(1)),
    );
    await expect(clock.run(t(undefined), { stepMs: 100 })).rejects.toMatchObject({ status: 503 });
    expect(inj.calls).toBe(3);
  });
});

describe("retry_with_longer_timeout", () => {
  it("doubles the timeout and aborts each slow attempt through its signal", async () => {
    const { sh, clock } = setup({
      plans: { TIMEOUT: [{ strategy: "retry_with_longer_timeout", attempts: 3 }] },
    });
    const seen: { timeoutMs: number | undefined; signal: AbortSignal }[] = [];
    const t = sh.tool(
      "slow",
      { readOnly: true, timeoutMs: 1_000 },
      (_: undefined, ctx: CallContext) => {
        seen.push({ timeoutMs: ctx.timeoutMs, signal: ctx.signal });
        // Answers in 3 s: only the third attempt (4 s) waits long enough.
        return clock.sleep(3_000, ctx.signal).then(() => "late but fine");
      },
    );
    await expect(clock.run(t(undefined), { stepMs: 100 })).resolves.toBe("late but fine");
    expect(seen.map((s) => s.timeoutMs)).toEqual([1_000, 2_000, 4_000]);
    expect(seen.map((s) => s.signal.aborted)).toEqual([true, true, false]);
    expect(clock.pendingTimers).toBe(0); // nothing keeps running in the background
  });
});

describe("retry_with_longer_timeout: how many and when it stops", () => {
  /** A tool that never answers within its timeout; each attempt's timeout kept. */
  function neverInTime(recovery: RecoveryOptions, fail?: (n: number) => Error | undefined) {
    const { sh, clock } = setup(recovery);
    const timeouts: (number | undefined)[] = [];
    const t = sh.tool(
      "slow",
      { readOnly: true, timeoutMs: 1_000, deadlineMs: 600_000 },
      (_: undefined, ctx: CallContext) => {
        timeouts.push(ctx.timeoutMs);
        const error = fail?.(timeouts.length);
        if (error) return Promise.reject(error);
        return clock.sleep(3_600_000, ctx.signal).then(() => "never");
      },
    );
    return { run: () => clock.run(t(undefined), { stepMs: 1_000 }), timeouts };
  }

  it("doubles maxTimeoutDoublings times (3 by default), then gives up", async () => {
    const plans = { TIMEOUT: [{ strategy: "retry_with_longer_timeout" as const }] };
    const byDefault = neverInTime({ plans });
    await expect(byDefault.run()).rejects.toThrow();
    expect(byDefault.timeouts).toEqual([1_000, 2_000, 4_000, 8_000]);
    const two = neverInTime({ plans, maxTimeoutDoublings: 2 });
    await expect(two.run()).rejects.toThrow();
    expect(two.timeouts).toEqual([1_000, 2_000, 4_000]);
  });

  it("a step's own attempts count over maxTimeoutDoublings", async () => {
    const one = neverInTime({
      plans: { TIMEOUT: [{ strategy: "retry_with_longer_timeout", attempts: 1 }] },
      maxTimeoutDoublings: 5,
    });
    await expect(one.run()).rejects.toThrow();
    expect(one.timeouts).toEqual([1_000, 2_000]);
  });

  it("stops at an attempt that failed otherwise than slow: a longer wait is not its cure", async () => {
    const { run, timeouts } = neverInTime(
      { plans: { TIMEOUT: [{ strategy: "retry_with_longer_timeout" }] } },
      (n) => (n === 2 ? new Error("invalid api key (401)") : undefined),
    );
    await expect(run()).rejects.toThrow();
    expect(timeouts).toEqual([1_000, 2_000]);
  });
});

describe("failover_to_secondary", () => {
  const providers = [
    { name: "openai", usdPerCall: 0.01 },
    { name: "anthropic", usdPerCall: 0.015 },
  ];

  it("after one quick retry on the primary, moves the call to the secondary; the context says which provider; the result says who answered", async () => {
    const { sh, clock, events } = setup({ providers });
    const used: (string | undefined)[] = [];
    const t = sh.tool(
      "complete",
      { readOnly: true, kind: "llm", providers: ["openai", "anthropic"] },
      (_: undefined, ctx) => {
        used.push(ctx.provider);
        if (ctx.provider === "openai") throw thrownFault("http_503");
        return `answer from ${String(ctx.provider)}`;
      },
    );
    const result = await clock.run(t.detailed(undefined));
    expect(result).toMatchObject({
      value: "answer from anthropic",
      provider: "anthropic",
      outcome: "recovered",
      attempts: 3,
    });
    // A 503 gets one quick retry on the same route (a one-off often passes), then the next route.
    expect(used).toEqual(["openai", "openai", "anthropic"]);
    expect(recoverySpans()).toEqual([
      { strategy: "retry_once", outcome: "failure", wait: 250, provider: "openai" },
      { strategy: "failover_to_secondary", outcome: "success", wait: 0, provider: "anthropic" },
    ]);
    expect(events[0]).toMatchObject({
      outcome: "recovered",
      provider: "anthropic",
      strategy: "failover_to_secondary",
      costUsd: 0.025,
    });
    expect(events[0]?.failoverCostDifferentialUsd).toBeCloseTo(0.005);
  });

  it("traffic returns to the primary once its breaker closes after a successful probe", async () => {
    const { sh, clock } = setup({ providers, breaker: { minimumAttempts: 4, baseOpenMs: 60_000 } });
    let primaryUp = false;
    const used: (string | undefined)[] = [];
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["openai", "anthropic"] },
      (_: undefined, ctx) => {
        used.push(ctx.provider);
        if (ctx.provider === "openai" && !primaryUp) throw thrownFault("http_503");
        return ctx.provider;
      },
    );
    for (let i = 0; i < 4; i++) await clock.run(t(undefined));
    used.length = 0;
    await clock.run(t(undefined)); // breaker open: straight to the secondary
    expect(used).toEqual(["anthropic"]);
    primaryUp = true;
    await clock.advance(60_000);
    used.length = 0;
    await expect(clock.run(t(undefined))).resolves.toBe("openai"); // the probe
    await expect(clock.run(t(undefined))).resolves.toBe("openai");
    expect(used).toEqual(["openai", "openai"]);
  });
});

describe("circuit_break", () => {
  it("opens for 5 s at first, twice as long after a failed probe; a call that finds it open fails fast with retryAfterMs unless the probe is due within 2 s, then it waits and is the probe; one probe at a time; success closes", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["circuit_break"] } });
    let up = false;
    let calls = 0;
    const t = sh.tool("inventory", { readOnly: true }, async () => {
      calls++;
      if (!up) throw thrownFault("http_503");
      await clock.sleep(1_000);
      return "stock";
    });
    await expect(t(undefined)).rejects.toMatchObject({ status: 503 }); // nothing waits: no time passes
    // Open for baseOpenMs (5 s): the next call fails fast, saying when to come back (default deadline).
    const fast = await t(undefined).catch((e: unknown) => e);
    expect(isCircuitOpenError(fast) && fast.retryAfterMs).toBe(5_000);
    expect(calls).toBe(1);
    // After 5 s one call is let through as the probe; it fails: open again, for 10 s.
    await clock.advance(5_000);
    await expect(t(undefined)).rejects.toMatchObject({ status: 503 });
    expect(calls).toBe(2);
    const slower = await t(undefined).catch((e: unknown) => e);
    expect(isCircuitOpenError(slower) && slower.retryAfterMs).toBe(10_000);
    expect(calls).toBe(2);
    up = true;
    // 2 s before the probe is due (recovery.maxProbeWaitMs), a call waits for it and is the probe.
    await clock.advance(8_000);
    const started = clock.now();
    const probe = t.detailed(undefined);
    await clock.advance(2_000);
    expect(calls).toBe(3);
    const others = await Promise.all(
      [t(undefined), t(undefined)].map((p) => p.catch((e: unknown) => e)),
    );
    expect(others.every(isCircuitOpenError)).toBe(true); // one probe at a time: the rest fail fast
    await expect(clock.run(probe)).resolves.toMatchObject({
      value: "stock",
      outcome: "success",
      attempts: 1,
    });
    expect(clock.now() - started).toBe(3_000); // 2 s for the probe's turn, 1 s of the tool's own
    const closedAt = clock.now();
    await expect(clock.run(t(undefined), { stepMs: 100 })).resolves.toBe("stock"); // closed
    expect(clock.now() - closedAt).toBe(1_000); // no wait: just the tool's own second
    expect(calls).toBe(4);
  });

  it("with recovery.maxProbeWaitMs raised, calls arriving while a slow probe is out wait for it (a short deadline still fails fast): the dependency sees one request at a time", async () => {
    const { sh, clock } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"] },
      maxProbeWaitMs: 60_000,
    });
    let up = false;
    let requests = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    let requestsWhenProbeAnswered = 0;
    let mostInFlightDuringProbe = 0;
    const t = sh.tool("inventory", { readOnly: true }, async () => {
      requests++;
      if (!up) throw thrownFault("http_503");
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      await clock.sleep(3_000); // the probe takes 3 s
      inFlight--;
      requestsWhenProbeAnswered ||= requests;
      mostInFlightDuringProbe ||= mostInFlight;
      return "stock";
    });
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    up = true;
    await clock.advance(5_000);
    const probe = t(undefined);
    const waiting: Promise<unknown>[] = [];
    const refused: Promise<unknown>[] = [];
    for (const gap of [1, 10, 500, 2_000]) {
      await clock.advance(gap); // still within the probe's 3 s
      waiting.push(t(undefined).catch((e: unknown) => e));
      refused.push(t(undefined, { deadlineMs: 1_000 }).catch((e: unknown) => e));
    }
    expect(requests).toBe(2); // the first failure and the probe
    await expect(clock.run(probe)).resolves.toBe("stock");
    expect(requestsWhenProbeAnswered).toBe(2); // nothing else reached it while the probe was out
    expect(mostInFlightDuringProbe).toBe(1);
    expect((await clock.run(Promise.all(refused))).every(isCircuitOpenError)).toBe(true);
    // The waiting calls look again every second and go once the probe has closed the breaker.
    await expect(clock.run(Promise.all(waiting))).resolves.toEqual([
      "stock",
      "stock",
      "stock",
      "stock",
    ]);
    expect(requests).toBe(6);
    await expect(clock.run(t(undefined))).resolves.toBe("stock"); // closed again
    expect(requests).toBe(7);
  });

  it("a hung probe is cut by its own timeout and the breaker reopens; the canned answer answers meanwhile", async () => {
    const { sh, clock } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"] },
      breaker: { probeTimeoutMs: 5_000 },
    });
    let mode: "down" | "hang" = "down";
    let calls = 0;
    const t = sh.tool(
      "inventory",
      { readOnly: true, cannedAnswer: () => "cached stock" },
      (_: undefined, ctx: CallContext) => {
        calls++;
        return mode === "down"
          ? Promise.reject(thrownFault("http_503"))
          : new Promise((_r, reject) => {
              ctx.signal.addEventListener("abort", () => {
                reject(ctx.signal.reason);
              });
            });
      },
    );
    const short = { deadlineMs: 1_000 };
    await expect(clock.run(t(undefined))).resolves.toBe("cached stock"); // circuit_break, then the canned answer
    // Open for 5 s: a call that cannot wait gets the canned answer, the tool is not called.
    await expect(t(undefined, short)).resolves.toBe("cached stock");
    expect(calls).toBe(1);
    mode = "hang";
    await clock.advance(5_000);
    const started = clock.now();
    // The probe hangs; its own 5 s timeout ends it, the breaker reopens, the canned answer answers.
    await expect(clock.run(t(undefined), { stepMs: 500 })).resolves.toBe("cached stock");
    expect(clock.now() - started).toBe(5_000);
    expect(calls).toBe(2);
    await expect(t(undefined, short)).resolves.toBe("cached stock");
    expect(calls).toBe(2);
  });
});

describe("degrade_to_readonly", () => {
  it("refuses writes with a typed error until health recovers; reads go on", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["degrade_to_readonly"] } });
    let down = true;
    const read = sh.tool("read", { readOnly: true }, () => {
      if (down) throw thrownFault("http_503");
      return "ok";
    });
    const write = sh.tool("write", { readOnly: false }, () => "written");
    await expect(clock.run(read(undefined))).rejects.toMatchObject({ status: 503 });
    expect(isReadOnlyModeError(await write(undefined).catch((e: unknown) => e))).toBe(true);
    down = false;
    for (let i = 0; i < 20; i++) await read(undefined);
    await clock.advance(5_000);
    await expect(write(undefined)).resolves.toBe("written");
  });
});

describe("escalate_to_human and chains", () => {
  it("the default TIMEOUT chain runs in order (failover first, no longer timeout while another route exists) and ends with a typed escalation error", async () => {
    const notifier = memoryNotifier();
    const { sh, clock, events } = setup({
      notifiers: [notifier],
      providers: [{ name: "a" }, { name: "b" }],
    });
    const t = sh.tool(
      "lookup",
      { readOnly: true, timeoutMs: 100, providers: ["a", "b"] },
      (_: undefined, ctx: CallContext) =>
        new Promise((_r, reject) => {
          ctx.signal.addEventListener("abort", () => {
            reject(ctx.signal.reason);
          });
        }),
    );
    const error = await clock.run(t(undefined), { stepMs: 50 }).catch((e: unknown) => e);
    expect(isHumanEscalationRequiredError(error)).toBe(true);
    expect(error).toMatchObject({
      pattern: "TIMEOUT",
      notified: true,
      cause: { code: "SELFHEAL_TOOL_TIMEOUT" },
    });
    // Another route beats a longer wait: failover first; with two routes the longer timeout is skipped.
    expect(recoverySpans().map((s) => `${String(s.strategy)}:${String(s.outcome)}`)).toEqual([
      "failover_to_secondary:failure",
      "retry_with_longer_timeout:skipped",
      "circuit_break:applied",
      "escalate_to_human:applied",
    ]);
    expect(notifier.alerts).toHaveLength(1);
    expect(notifier.alerts[0]).toMatchObject({ tool: "lookup", kind: "test-agent/lookup/TIMEOUT" });
    expect(events[0]).toMatchObject({
      outcome: "escalated",
      strategy: "escalate_to_human",
      attempts: 1,
      wastedRetries: 1, // escalated: the failover did not help
    });
    expect(events[0]?.steps).toContainEqual({
      strategy: "retry_with_longer_timeout",
      skipped: "another route exists: failover comes first",
    });
  });
});

describe("writes: idempotency", () => {
  it("a write without a key is never sent twice: only the steps that send nothing run, and the log says how to add a key", async () => {
    const { sh, clock, warnings, events } = setup();
    let calls = 0;
    const fault = thrownFault("http_503");
    const charge = sh.tool("charge", { readOnly: false }, () => {
      calls++;
      throw fault;
    });
    const error = await clock.run(charge(undefined)).catch((e: unknown) => e);
    expect(calls).toBe(1);
    expect(isHumanEscalationRequiredError(error) && error.cause).toBe(fault); // the original error, kept
    expect(warnings.join("\n")).toMatch(/no idempotency key.*idempotencyKey: \(args\) =>/s);
    expect(events[0]?.steps).toEqual([
      { strategy: "retry_once", skipped: "a write without an idempotency key is never sent twice" },
      {
        strategy: "failover_to_secondary",
        skipped: "a write without an idempotency key is never sent twice",
      },
      { strategy: "circuit_break" },
      { strategy: "degrade_to_readonly" },
      { strategy: "escalate_to_human" },
    ]);
  });

  it("two concurrent calls with one key send the write once and share its answer", async () => {
    const { sh, clock } = setup();
    let calls = 0;
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (o: string) => o },
      async (o: string) => {
        calls++;
        await clock.sleep(1_000);
        return `receipt ${o}`;
      },
    );
    const both = clock.run(Promise.all([charge.detailed("o1"), charge.detailed("o1")]));
    const [a, b] = await both;
    expect(calls).toBe(1);
    expect(a).toMatchObject({ value: "receipt o1", replayed: false });
    expect(b).toMatchObject({ value: "receipt o1", replayed: true });
  });

  it("a fallback answer is never stored as the write's result", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["circuit_break"] } });
    let up = false;
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (o: string) => o, cannedAnswer: () => "queued" },
      (o: string) => {
        if (!up) throw thrownFault("http_503");
        return `receipt ${o}`;
      },
    );
    await expect(clock.run(charge.detailed("o1"))).resolves.toMatchObject({
      value: "queued",
      attempts: 1,
    });
    up = true;
    await clock.advance(15 * 60_000);
    await expect(clock.run(charge.detailed("o1"))).resolves.toMatchObject({
      value: "receipt o1",
      replayed: false,
    });
  });

  it("with a key, every attempt carries the same key; a repeated key replays the stored result", async () => {
    const { sh, clock } = setup();
    const keys: (string | undefined)[] = [];
    const inj = new FailureInjector({ clock });
    inj.inject("rate_limit", { first: 1 });
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (a: { order: string }) => `charge-${a.order}` },
      inj.wrap((a: { order: string }, ctx: CallContext) => {
        keys.push(ctx.idempotencyKey);
        return Promise.resolve(`receipt ${a.order}`);
      }),
    );
    await expect(clock.run(charge({ order: "42" }), { stepMs: 100 })).resolves.toBe("receipt 42");
    expect(keys).toEqual(["charge-42"]);
    expect(inj.calls).toBe(2);
    const again = await charge.detailed({ order: "42" });
    expect(again).toMatchObject({ value: "receipt 42", replayed: true, attempts: 0 });
    expect(inj.calls).toBe(2);
  });
});

describe("writes: the idempotency ledger", () => {
  /** A write tool that counts how often it really ran. */
  function writeTool(sh: ReturnType<typeof setup>["sh"], name: string) {
    const ran: string[] = [];
    const tool = sh.tool(
      name,
      { readOnly: false, idempotencyKey: (order: string) => order },
      (order: string) => {
        ran.push(order);
        return `${name} ${order} #${ran.length}`;
      },
    );
    return { tool, ran };
  }

  it("keeps a result for its ttl (24 h by default): after it, the same key calls the tool again", async () => {
    const short = setup({ ledger: { ttlMs: 60_000 } });
    const a = writeTool(short.sh, "charge");
    await expect(a.tool("o1")).resolves.toBe("charge o1 #1");
    await short.clock.advance(59_999);
    await expect(a.tool.detailed("o1")).resolves.toMatchObject({
      value: "charge o1 #1",
      replayed: true,
    });
    await short.clock.advance(1);
    await expect(a.tool.detailed("o1")).resolves.toMatchObject({
      value: "charge o1 #2",
      replayed: false,
    });
    expect(a.ran).toEqual(["o1", "o1"]);

    const byDefault = setup();
    const b = writeTool(byDefault.sh, "charge");
    await b.tool("o1");
    await byDefault.clock.advance(24 * 3_600_000 - 1);
    await expect(b.tool.detailed("o1")).resolves.toMatchObject({ replayed: true });
    await byDefault.clock.advance(1);
    await expect(b.tool.detailed("o1")).resolves.toMatchObject({
      value: "charge o1 #2",
      replayed: false,
    });
  });

  it("keeps at most maxEntries results: the oldest key is evicted and runs again, the newest are kept", async () => {
    const { sh } = setup({ ledger: { maxEntries: 2 } });
    const { tool, ran } = writeTool(sh, "charge");
    for (const order of ["o1", "o2", "o3"]) await tool(order);
    await expect(tool.detailed("o3")).resolves.toMatchObject({
      value: "charge o3 #3",
      replayed: true,
    });
    await expect(tool.detailed("o2")).resolves.toMatchObject({
      value: "charge o2 #2",
      replayed: true,
    });
    await expect(tool.detailed("o1")).resolves.toMatchObject({
      value: "charge o1 #4",
      replayed: false,
    });
    expect(ran).toEqual(["o1", "o2", "o3", "o1"]);
  });

  it("keeps 10,000 results by default", async () => {
    const { sh } = setup();
    const { tool, ran } = writeTool(sh, "charge");
    for (let i = 0; i <= 10_000; i++) await tool(`o${i}`);
    await expect(tool.detailed("o10000")).resolves.toMatchObject({ replayed: true });
    await expect(tool.detailed("o1")).resolves.toMatchObject({ replayed: true });
    await expect(tool.detailed("o0")).resolves.toMatchObject({ replayed: false });
    expect(ran).toHaveLength(10_002);
  });

  it("keys results by tool: a charge and a refund with the same key each run and keep their own", async () => {
    const { sh, clock } = setup();
    const charge = writeTool(sh, "charge");
    const refund = writeTool(sh, "refund");
    await expect(charge.tool("o1")).resolves.toBe("charge o1 #1");
    await expect(refund.tool.detailed("o1")).resolves.toMatchObject({
      value: "refund o1 #1",
      replayed: false,
    });
    await expect(charge.tool.detailed("o1")).resolves.toMatchObject({
      value: "charge o1 #1",
      replayed: true,
    });
    await expect(refund.tool.detailed("o1")).resolves.toMatchObject({
      value: "refund o1 #1",
      replayed: true,
    });
    // In flight too: a slow charge does not answer a refund of the same key.
    const slow = sh.tool(
      "slow_charge",
      { readOnly: false, idempotencyKey: (o: string) => o },
      async (o: string) => {
        await clock.sleep(1_000);
        return `slow ${o}`;
      },
    );
    const [slowCharge, refundO2] = await clock.run(
      Promise.all([slow.detailed("o2"), refund.tool.detailed("o2")]),
    );
    expect(slowCharge).toMatchObject({ value: "slow o2", replayed: false });
    expect(refundO2).toMatchObject({ value: "refund o2 #2", replayed: false });
    expect(charge.ran).toEqual(["o1"]);
    expect(refund.ran).toEqual(["o1", "o2"]);
  });
});

describe("the call's mode", () => {
  it("is read-only, for the tool's context and the task, exactly while writes are refused", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["degrade_to_readonly"] } });
    let down = false;
    const flaky = sh.tool("flaky", { readOnly: true }, () => {
      if (down) throw thrownFault("http_503");
      return "ok";
    });
    const look = sh.tool("look", { readOnly: true }, (_: undefined, ctx: CallContext) => ctx.mode);
    const write = sh.tool("write", { readOnly: false }, () => "written");
    const observe = (id: string) =>
      sh.task(id, async (task) => ({
        task: task.mode,
        ctx: await look(undefined),
        refused: await write(undefined).then(
          () => false,
          (e: unknown) => isReadOnlyModeError(e) || isHealthCheckFailedError(e),
        ),
      }));
    const normal = { task: "normal", ctx: "normal", refused: false };
    const readOnly = { task: "read-only", ctx: "read-only", refused: true };

    await expect(observe("before")).resolves.toEqual(normal);
    down = true;
    await expect(clock.run(flaky(undefined))).rejects.toMatchObject({ status: 503 });
    await expect(observe("degraded")).resolves.toEqual(readOnly); // recovery degraded the agent
    down = false;
    for (let i = 0; i < 20; i++) await flaky(undefined);
    await clock.advance(5_000);
    await expect(observe("recovered")).resolves.toEqual(normal);

    // Critical health (task completion below 0.7) refuses writes too, and says so in the mode.
    for (let i = 0; i < 10; i++) {
      await sh
        .task(`failing-${i}`, () => Promise.reject(new Error("task failed")))
        .catch(() => undefined);
    }
    await clock.advance(5_000);
    expect((await sh.status()).status).toBe("critical");
    await expect(observe("critical")).resolves.toEqual(readOnly);
  });
});

describe("the caller's abort", () => {
  it("is passed on as is: not diagnosed as a timeout, not recovered, no breaker verdict, nothing spent", async () => {
    const { sh, clock, events } = setup({
      providers: [
        { name: "a", usdPerCall: 0.01 },
        { name: "b", usdPerCall: 0.01 },
      ],
    });
    const t = sh.tool(
      "t",
      { readOnly: true, providers: ["a", "b"] },
      (_: undefined, ctx: CallContext) =>
        new Promise((_r, reject) => {
          ctx.signal.addEventListener("abort", () => {
            reject(ctx.signal.reason);
          });
        }),
    );
    const controller = new AbortController();
    const reason = new DOMException("user closed the chat", "AbortError");
    const outcome = t(undefined, { signal: controller.signal }).catch((e: unknown) => e);
    await clock.advance(20);
    controller.abort(reason);
    expect(await outcome).toBe(reason);
    expect(events).toEqual([]);
    expect(recoverySpans()).toEqual([]);
  });

  it("during a backoff wait ends the call with the caller's reason and a recovery event", async () => {
    const { sh, clock, events } = setup();
    const t = sh.tool("t", { readOnly: true }, () => Promise.reject(thrownFault("rate_limit")));
    const controller = new AbortController();
    const outcome = t(undefined, { signal: controller.signal }).catch((e: unknown) => e);
    await clock.advance(100);
    controller.abort(new Error("stop"));
    expect(await outcome).toMatchObject({ message: "stop" });
    expect(events).toMatchObject([{ outcome: "failed", pattern: "RATE_LIMIT" }]);
    const call = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(call?.attributes["selfheal.call.outcome"]).toBe("error");
  });
});

describe("recovery budget", () => {
  it("stops before spend would pass the task's budget, escalates, and throws a typed error", async () => {
    const notifier = memoryNotifier();
    const { sh, clock, events } = setup({
      notifiers: [notifier],
      budgetUsd: 1,
      providers: [{ name: "p", usdPerCall: 0.4 }],
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const t = sh.tool("t", { readOnly: true, providers: ["p"] }, () =>
      Promise.reject(thrownFault("http_503")),
    );
    const error = await clock
      .run(
        sh.task("task-1", () => t(undefined)),
        { stepMs: 500 },
      )
      .catch((e: unknown) => e);
    expect(isRecoveryBudgetExhaustedError(error)).toBe(true);
    expect(error).toMatchObject({ spentUsd: 0.8, budgetUsd: 1 });
    expect(events[0]).toMatchObject({
      outcome: "budget_exhausted",
      attempts: 2,
      costUsd: 0.8,
      wastedRetries: 2,
    });
    expect(notifier.alerts).toHaveLength(1);
  });

  it("holds when a task's calls recover concurrently", async () => {
    const { sh, clock, events } = setup({
      budgetUsd: 0.01,
      providers: [{ name: "p", usdPerCall: 0.01 }],
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const t = sh.tool("t", { readOnly: true, providers: ["p"] }, () =>
      Promise.reject(thrownFault("http_503")),
    );
    await clock.run(
      sh.task("busy", () =>
        Promise.all(Array.from({ length: 5 }, () => t(undefined).catch(() => undefined))),
      ),
      { stepMs: 500 },
    );
    expect(events.reduce((sum, e) => sum + e.costUsd, 0)).toBeLessThanOrEqual(0.01);
  });

  it("is shared by every call of a task", async () => {
    const { sh, clock } = setup({
      budgetUsd: 0.5,
      providers: [{ name: "p", usdPerCall: 0.2 }],
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const t = sh.tool("t", { readOnly: true, providers: ["p"] }, () =>
      Promise.reject(thrownFault("http_503")),
    );
    const outcomes = await clock.run(
      sh.task("shared", async () => [
        await t(undefined).catch((e: unknown) => e),
        await t(undefined).catch((e: unknown) => e),
      ]),
      { stepMs: 500 },
    );
    expect(outcomes.map((e) => isRecoveryBudgetExhaustedError(e))).toEqual([true, true]);
    expect(outcomes[1]).toMatchObject({ spentUsd: 0.4 }); // the second call found the budget spent
  });
});

describe("non-retryable patterns are never retried on the same route", () => {
  it.each([
    ["auth", "AUTH"],
    ["http_400", "BAD_REQUEST"],
    ["context_length", "CONTEXT_LENGTH"],
    ["content_policy", "CONTENT_POLICY"],
  ] as const)(
    "%s (%s): even a plan that asks for retries sends it once per provider",
    async (kind, pattern) => {
      const { sh, clock } = setup({
        providers: [{ name: "a" }, { name: "b" }],
        plans: {
          [pattern]: [
            "exponential_backoff_with_jitter",
            "retry_with_longer_timeout",
            "failover_to_secondary",
          ],
        },
      });
      const perProvider = new Map<string | undefined, number>();
      const fault =
        kind === "http_400"
          ? Object.assign(new Error("400 invalid temperature"), { status: 400 })
          : thrownFault(kind);
      const t = sh.tool(
        "t",
        { readOnly: true, providers: ["a", "b"] },
        (_: undefined, ctx: CallContext) => {
          perProvider.set(ctx.provider, (perProvider.get(ctx.provider) ?? 0) + 1);
          throw fault;
        },
      );
      await expect(clock.run(t(undefined), { stepMs: 100 })).rejects.toBe(fault);
      expect([...perProvider.values()].every((n) => n === 1)).toBe(true);
      expect(perProvider.get("a")).toBe(1);
    },
  );
});

describe("recovery events", () => {
  it("go to listeners and to a JSONL file, redacted", async () => {
    const path = join(tmpdir(), `selfheal-events-${process.pid}-${Date.now()}.jsonl`);
    const { sh, clock } = setup({ eventLog: path });
    const inj = new FailureInjector({ clock });
    inj.inject(
      "rate_limit",
      { first: 1 },
      { message: "slow down, key sk-proj-abcdefghijklmnopqrstuvwx" },
    );
    const t = sh.tool(
      "t",
      { readOnly: true },
      inj.wrap(() => Promise.resolve(1)),
    );
    await clock.run(t(undefined), { stepMs: 100 });
    await sh.close();
    const lines = (await readFile(path, "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as RecoveryEvent & { type?: string })
      .filter((e) => e.type === undefined); // recovery events, not the calls and settings lines
    await rm(path);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      tool: "t",
      pattern: "RATE_LIMIT",
      confidence: 0.95,
      strategy: "retry_once", // the default RATE_LIMIT chain's quick retry
      attempts: 1,
      outcome: "recovered",
      costUsd: 0,
      wastedRetries: 0,
    });
    expect(lines[0]?.error).toContain("[REDACTED_KEY]");
    expect(lines[0]?.durationMs).toBeGreaterThanOrEqual(5_000); // the 429's 5 s cooldown
  });
});

describe("wasted retries", () => {
  it("count every recovery attempt of a call left without a real answer, in the event and in selfheal_wasted_retries", async () => {
    const meters = recordingMeters();
    const { sh, clock, events } = setup({}, { meterProvider: meters.meterProvider });
    const wasted = async (tool: string) =>
      (await meters.read()).get(`selfheal_wasted_retries{agent=test-agent,tool=${tool}}`);

    // Recovered by an actual attempt: nothing wasted.
    const inj = new FailureInjector({ clock });
    inj.inject("rate_limit", { first: 2 });
    const flaky = sh.tool(
      "flaky",
      { readOnly: true },
      inj.wrap(() => Promise.resolve("ok")),
    );
    expect(await wasted("flaky")).toBe(0);
    await expect(clock.run(flaky(undefined), { stepMs: 100 })).resolves.toBe("ok");
    expect(events.at(-1)).toMatchObject({ outcome: "recovered", attempts: 2, wastedRetries: 0 });
    expect(await wasted("flaky")).toBe(0);

    // Recovery fails after 3 attempts: all 3 wasted.
    const down = sh.tool(
      "down",
      {
        readOnly: true,
        plans: { SERVICE_DOWN: [{ strategy: "exponential_backoff_with_jitter", attempts: 3 }] },
      },
      () => Promise.reject(thrownFault("http_503")),
    );
    await expect(clock.run(down(undefined), { stepMs: 100 })).rejects.toMatchObject({
      status: 503,
    });
    expect(events.at(-1)).toMatchObject({
      tool: "down",
      outcome: "failed",
      attempts: 3,
      wastedRetries: 3,
    });
    expect(await wasted("down")).toBe(3);

    // Only the fallback answered after 2 attempts: both wasted, though the call "recovered".
    const cached = sh.tool(
      "cached",
      {
        readOnly: true,
        cannedAnswer: () => "cached",
        plans: {
          SERVICE_DOWN: [
            { strategy: "exponential_backoff_with_jitter", attempts: 2 },
            "circuit_break",
          ],
        },
      },
      () => Promise.reject(thrownFault("http_503")),
    );
    await expect(clock.run(cached.detailed(undefined), { stepMs: 100 })).resolves.toMatchObject({
      value: "cached",
      outcome: "recovered",
    });
    expect(events.at(-1)).toMatchObject({
      tool: "cached",
      outcome: "recovered",
      attempts: 2,
      wastedRetries: 2,
    });
    expect(await wasted("cached")).toBe(2);
    expect(await wasted("down")).toBe(3); // per tool: the other series did not move
    await meters.shutdown();
  });
});

describe("warm-up probes", () => {
  it("run every interval on the injected clock, feed the provider's breaker, and stop on close()", async () => {
    let warmups = 0;
    const { sh, clock } = setup({
      warmupIntervalMs: 15 * 60_000,
      providers: [
        {
          name: "backup",
          warmup: () => {
            warmups++;
            return Promise.resolve();
          },
        },
      ],
    });
    const seen: boolean[] = [];
    const circuits: string[] = [];
    sh.on("warmup", (e) => seen.push(e.ok));
    sh.on("circuit-change", (e) => circuits.push(`${e.dependency}:${e.state}`));
    await clock.advance(45 * 60_000);
    expect(warmups).toBe(3);
    expect(seen).toEqual([true, true, true]);
    expect(circuits).toEqual([]); // healthy warm-ups leave the breaker closed
    await sh.close();
    await clock.advance(60 * 60_000);
    expect(warmups).toBe(3);
    expect(clock.pendingTimers).toBe(0);
  });

  it("that fail open the breaker of a provider a two-route tool uses: while it is open, failover skips the dead secondary", async () => {
    const meters = recordingMeters();
    let warmups = 0;
    const { sh, clock } = setup(
      {
        warmupIntervalMs: 30_000,
        plans: { SERVICE_DOWN: ["failover_to_secondary"] },
        providers: [
          { name: "primary" },
          {
            name: "backup",
            warmup: () => {
              warmups++;
              return Promise.reject(new Error("backup is down"));
            },
          },
        ],
      },
      { meterProvider: meters.meterProvider },
    );
    const circuits: { dependency: string; state: string; at: number }[] = [];
    sh.on("circuit-change", (e) => circuits.push(e));
    const start = clock.now();
    const used: (string | undefined)[] = [];
    const fault = thrownFault("http_503");
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["primary", "backup"] },
      (_: undefined, ctx: CallContext) => {
        used.push(ctx.provider);
        if (ctx.provider === "primary") throw fault;
        return "from backup";
      },
    );
    // "complete" has two routes: the backup's breaker may trip on its own.
    await clock.advance(150_000);
    expect(warmups).toBe(5);
    // The fifth failed warm-up (5 of 5 in the window) opened the backup's breaker, for 5 s.
    expect(circuits).toEqual([
      { agent: "test-agent", dependency: "backup", state: "open", at: start + 150_000 },
    ]);
    expect(
      (await meters.read()).get("selfheal_circuit_state{agent=test-agent,dependency=backup}"),
    ).toBe(2);
    await expect(clock.run(t(undefined))).rejects.toBe(fault);
    expect(used).toEqual(["primary"]); // the dead secondary was never sent the call
    await sh.close();
    await meters.shutdown();
  });
});

describe("retry_once", () => {
  /** A tool that answers the first call with `fault`, then "ok" (or "from <provider>"). */
  function onceFailing(
    sh: ReturnType<typeof setup>["sh"],
    fault: Error,
    providers?: string[],
  ): { tool: (args: undefined) => Promise<unknown>; sent: (string | undefined)[] } {
    const sent: (string | undefined)[] = [];
    const tool = sh.tool(
      "t",
      { readOnly: true, ...(providers && { providers }) },
      (_: undefined, ctx: CallContext) => {
        sent.push(ctx.provider);
        if (sent.length === 1) throw fault;
        return ctx.provider === undefined ? "ok" : `from ${ctx.provider}`;
      },
    );
    return { tool, sent };
  }

  it("waits 250 ms plus up to 100% jitter", async () => {
    const { sh, clock } = setup({ random: () => 0.5, plans: { SERVICE_DOWN: ["retry_once"] } });
    const { tool } = onceFailing(sh, thrownFault("http_503"));
    await expect(clock.run(tool(undefined), { stepMs: 10 })).resolves.toBe("ok");
    expect(recoverySpans()).toEqual([
      { strategy: "retry_once", outcome: "success", wait: 375, provider: undefined },
    ]);
  });

  it.each([
    [2, [{ strategy: "retry_once" }], "ok"],
    [3, [{ strategy: "retry_once", skipped: "Retry-After beyond the cap" }], undefined],
  ])(
    "with a Retry-After of %i s (cap 2 s) retries after it, or gives up beyond the cap",
    async (seconds, steps, value) => {
      const { sh, clock, events } = setup({
        backoff: { maxRetryAfterMs: 2_000 },
        plans: { RATE_LIMIT: ["retry_once"] },
      });
      const { tool, sent } = onceFailing(
        sh,
        thrownFault("rate_limit", { retryAfterSeconds: seconds }),
      );
      const outcome = await clock.run(tool(undefined), { stepMs: 100 }).catch((e: unknown) => e);
      if (value === undefined) expect(outcome).toMatchObject({ status: 429 });
      else expect(outcome).toBe(value);
      expect(sent).toHaveLength(value === undefined ? 1 : 2);
      expect(events[0]?.steps).toEqual(steps);
      if (value !== undefined) expect(recoverySpans()[0]?.wait).toBe(2_000);
    },
  );

  it.each([
    ["a Retry-After of 1 s", { retryAfterSeconds: 1 }, ["a", "a"], undefined],
    [
      "a Retry-After of 2 s",
      { retryAfterSeconds: 2 },
      ["a", "b"],
      "another route beats a longer wait",
    ],
    ["the 429's 5 s cooldown", {}, ["a", "b"], "another route beats a longer wait"],
  ])(
    "with another route, waits at most 1 s, else gives way to failover: %s",
    async (_name, fault, sent, skipped) => {
      const { sh, clock, events } = setup({
        providers: [{ name: "a" }, { name: "b" }],
        plans: { RATE_LIMIT: ["retry_once", "failover_to_secondary"] },
      });
      const t = onceFailing(sh, thrownFault("rate_limit", fault), ["a", "b"]);
      await clock.run(t.tool(undefined), { stepMs: 100 });
      expect(t.sent).toEqual(sent);
      expect(events[0]?.steps[0]).toEqual(
        skipped === undefined ? { strategy: "retry_once" } : { strategy: "retry_once", skipped },
      );
    },
  );

  it("a tool with one named provider and no other route waits out a long cooldown for its retry", async () => {
    const { sh, clock } = setup({
      providers: [{ name: "a" }],
      plans: { RATE_LIMIT: ["retry_once"] },
    });
    const t = onceFailing(sh, thrownFault("rate_limit"), ["a"]);
    await expect(clock.run(t.tool(undefined), { stepMs: 100 })).resolves.toBe("from a");
    expect(t.sent).toEqual(["a", "a"]);
    expect(recoverySpans()[0]).toMatchObject({ strategy: "retry_once", wait: 5_000 });
  });
});
