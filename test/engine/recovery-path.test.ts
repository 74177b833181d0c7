import { SpanStatusCode, type Attributes } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import {
  isCircuitOpenError,
  isHumanEscalationRequiredError,
  isRecoveryBudgetExhaustedError,
  type CallContext,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealingOptions,
} from "../../src/index.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { thrownFault, type VirtualClock } from "../../src/testing/index.js";
import { recoveryInstance } from "../helpers/engine.js";
import { recordingMeters, recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();

const RECOVERY_ATTEMPT = "selfheal.recovery.attempt";
const RECOVERY_OUTCOME = "selfheal.recovery.outcome";
const RECOVERY_SKIPPED = "selfheal.recovery.skipped";
const CIRCUIT_PROBE = "selfheal.circuit.probe";
const COST_DIFFERENTIAL = "selfheal.recovery.failover_cost_differential_usd";
const ROUTE_DOWN = "the route is down (status page or repeated failures)";

/** An instance on virtual time with recording spans and metrics; recovery uses `random: 0`. */
function setup(recovery: RecoveryOptions = {}, options: Partial<SelfHealingOptions> = {}) {
  otel.reset();
  const meters = recordingMeters();
  const instance = recoveryInstance(otel.provider, recovery, {
    meterProvider: meters.meterProvider,
    ...options,
  });
  return { ...instance, meters };
}

const spansNamed = otel.named;
const recoverySpans = () => spansNamed("agent.recovery");

/**
 * A notifier that keeps what it is sent and answers after `delayMs` of the instance's clock
 * (never, when undefined: it waits for its signal).
 */
function notifier(delayMs?: number) {
  const alerts: Alert[] = [];
  const n: Notifier & { alerts: Alert[]; clock?: VirtualClock } = {
    channel: "memory",
    alerts,
    send: async (alert, signal) => {
      alerts.push(alert);
      if (delayMs === undefined) {
        await new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            reject(signal.reason);
          });
        });
      } else if (delayMs > 0) await n.clock?.sleep(delayMs, signal);
    },
  };
  return n;
}

/** An instance whose SERVICE_DOWN plan is escalate_to_human, alerting through `n`. */
function escalating(n: ReturnType<typeof notifier>) {
  const vi = setup({ notifiers: [n], plans: { SERVICE_DOWN: ["escalate_to_human"] } });
  n.clock = vi.clock;
  return vi;
}

const has = (attributes: Attributes, key: string) => Object.hasOwn(attributes, key);

describe("recovery attempts", () => {
  it("are numbered from 2 on the tool's context and the recovery span; a failed one is an error span, only the call's first failure is an incident", async () => {
    const { sh, clock, meters } = setup({
      plans: { SERVICE_DOWN: [{ strategy: "exponential_backoff_with_jitter", attempts: 3 }] },
    });
    const seen: number[] = [];
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, (_: undefined, ctx: CallContext) => {
      seen.push(ctx.attempt);
      if (++calls < 4) throw thrownFault("http_503");
      return "found";
    });
    await expect(clock.run(t.detailed(undefined), { stepMs: 100 })).resolves.toMatchObject({
      value: "found",
      outcome: "recovered",
      attempts: 4,
    });
    expect(seen).toEqual([1, 2, 3, 4]);
    const spans = recoverySpans();
    expect(
      spans.map((s) => [s.attributes[RECOVERY_ATTEMPT], s.attributes[RECOVERY_OUTCOME]]),
    ).toEqual([
      [2, "failure"],
      [3, "failure"],
      [4, "success"],
    ]);
    expect(spans[0]?.status.code).toBe(SpanStatusCode.ERROR);
    expect(spans[0]?.status.message).toMatch(/503 The server is overloaded/);
    expect(spans[2]?.status.code).toBe(SpanStatusCode.UNSET);

    const points = await meters.read();
    const step = (outcome: string) =>
      points.get(
        `selfheal_recoveries{agent=test-agent,tool=search,strategy=exponential_backoff_with_jitter,outcome=${outcome}}`,
      );
    expect([step("failure"), step("success")]).toEqual([2, 1]);
    // Three diagnoses (the first failure and two failed retries), one incident: the call's.
    expect(points.get("selfheal_diagnoses{agent=test-agent,pattern=SERVICE_DOWN}")).toBe(3);
    expect(
      points.get("selfheal_incidents{agent=test-agent,tool=search,pattern=SERVICE_DOWN}"),
    ).toBe(1);
  });

  it("of an LLM that keeps answering empty: the empty answer is returned when nothing better came, and it is one incident", async () => {
    const { sh, clock, meters } = setup({
      plans: {
        EMPTY_LLM_RESPONSE: [{ strategy: "exponential_backoff_with_jitter", attempts: 2 }],
      },
    });
    let calls = 0;
    const t = sh.tool(
      "complete",
      { readOnly: true, kind: "llm", isEmpty: (r: { text: string }) => r.text === "" },
      () => {
        calls++;
        return { text: "" };
      },
    );
    await expect(clock.run(t.detailed(undefined), { stepMs: 100 })).resolves.toEqual({
      value: { text: "" },
      outcome: "success",
      provider: undefined,
      attempts: 3,
      replayed: false,
    });
    expect(calls).toBe(3);
    const points = await meters.read();
    expect(points.get("selfheal_diagnoses{agent=test-agent,pattern=EMPTY_LLM_RESPONSE}")).toBe(3);
    expect(
      points.get("selfheal_incidents{agent=test-agent,tool=complete,pattern=EMPTY_LLM_RESPONSE}"),
    ).toBe(1);
  });

  it("are not made when an isEmpty check throws: the answer counts as an answer", async () => {
    const { sh, events } = setup();
    let calls = 0;
    const t = sh.tool(
      "complete",
      {
        readOnly: true,
        kind: "llm",
        isEmpty: () => {
          throw new Error("bug in isEmpty");
        },
      },
      () => {
        calls++;
        return "hello";
      },
    );
    await expect(t.detailed(undefined)).resolves.toMatchObject({
      value: "hello",
      outcome: "success",
      attempts: 1,
    });
    expect(calls).toBe(1);
    expect(events).toEqual([]);
  });

  it("may start only with at least 100 ms left before the call's deadline: a retry that would not is not waited for", async () => {
    const { sh, clock, events } = setup({ plans: { SERVICE_DOWN: ["retry_once"] } });
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      if (++calls % 2 === 1) throw thrownFault("http_503");
      return "found";
    });
    // The quick retry waits 250 ms: with a 350 ms deadline exactly 100 ms are left for it.
    await expect(clock.run(t(undefined, { deadlineMs: 350 }), { stepMs: 10 })).resolves.toBe(
      "found",
    );
    expect(events.at(-1)).toMatchObject({ outcome: "recovered", attempts: 1, durationMs: 250 });
    // One ms less: no retry, and no waiting for one either.
    const before = clock.now();
    await expect(t(undefined, { deadlineMs: 349 })).rejects.toMatchObject({ status: 503 });
    expect(clock.now()).toBe(before);
    expect(calls).toBe(3);
    expect(events.at(-1)).toMatchObject({ outcome: "failed", attempts: 0, durationMs: 0 });
  });

  it("are not sent to a route another call's 429 cooled down while this call waited to retry", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["retry_once"], RATE_LIMIT: [] } });
    const replies: (Error | string)[] = [thrownFault("http_503"), thrownFault("rate_limit"), "ok"];
    const t = sh.tool("search", { readOnly: true }, () => {
      const reply = replies.shift();
      if (reply instanceof Error) throw reply;
      return reply;
    });
    const first = t(undefined).catch((e: unknown) => e);
    await clock.advance(100); // the first call waits 250 ms for its quick retry
    await expect(t(undefined)).rejects.toMatchObject({ status: 429 }); // the route cools for 5 s
    await clock.advance(1_000);
    await expect(first).resolves.toMatchObject({ status: 503 });
    expect(replies).toEqual(["ok"]); // the retry was never sent
  });

  it("that are a half-open probe say so on their span, get the probe's timeout, and close the breaker by answering", async () => {
    const { sh, clock, circuits } = setup({
      plans: { SERVICE_DOWN: ["circuit_break", "exponential_backoff_with_jitter"] },
      breaker: { probeTimeoutMs: 2_000 },
    });
    const timeouts: (number | undefined)[] = [];
    const t = sh.tool("search", { readOnly: true, timeoutMs: 30_000 }, (_: undefined, ctx) => {
      timeouts.push(ctx.timeoutMs);
      if (timeouts.length === 1) throw thrownFault("http_503");
      return "found";
    });
    await expect(clock.run(t.detailed(undefined), { stepMs: 100 })).resolves.toMatchObject({
      value: "found",
      attempts: 2,
    });
    // The backoff waited out the 5 s open period; its attempt was the probe, cut to 2 s.
    expect(timeouts).toEqual([30_000, 2_000]);
    const probe = recoverySpans().find((s) => s.attributes[RECOVERY_ATTEMPT] === 2);
    expect(probe?.attributes[CIRCUIT_PROBE]).toBe(true);
    expect(circuits).toEqual(["search:open", "search:half_open", "search:closed"]);
  });

  it("after a same-route retry turns non-retryable (401), never go to that route again; failover still answers", async () => {
    const { sh, clock } = setup({
      providers: [{ name: "a" }, { name: "b" }],
      plans: {
        SERVICE_DOWN: [
          { strategy: "exponential_backoff_with_jitter", attempts: 3 },
          "failover_to_secondary",
        ],
      },
    });
    const sent: (string | undefined)[] = [];
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["a", "b"] },
      (_: undefined, ctx) => {
        sent.push(ctx.provider);
        if (ctx.provider === "a") throw thrownFault(sent.length === 1 ? "http_503" : "auth");
        return "from b";
      },
    );
    const started = clock.now();
    let answeredAt = 0;
    await expect(
      clock.run(
        t(undefined).finally(() => (answeredAt = clock.now())),
        { stepMs: 100 },
      ),
    ).resolves.toBe("from b");
    expect(sent).toEqual(["a", "a", "b"]);
    // The backoff stops at the 401: the failover goes out at once, not at the deadline.
    expect(answeredAt - started).toBeLessThan(5_000);
  });
});

describe("recovery spans", () => {
  it("name the provider only when the attempt has one", async () => {
    const { sh, clock } = setup({
      providers: [{ name: "a" }],
      plans: { SERVICE_DOWN: ["retry_once"] },
    });
    let calls = 0;
    const fail = () => {
      if (++calls % 2 === 1) throw thrownFault("http_503");
      return "ok";
    };
    await clock.run(sh.tool("named", { readOnly: true, providers: ["a"] }, fail)(undefined));
    await clock.run(sh.tool("plain", { readOnly: true }, fail)(undefined));
    expect(recoverySpans().map((s) => s.attributes["selfheal.recovery.provider"])).toEqual([
      "a",
      undefined,
    ]);
  });
});

describe("the caller's abort during a recovery attempt", () => {
  it("ends the call with the caller's reason; the attempt's span says aborted; the recovery failed and its attempt was wasted", async () => {
    const { sh, clock, events } = setup({ plans: { SERVICE_DOWN: ["retry_once"] } });
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, (_: undefined, ctx: CallContext) => {
      if (++calls === 1) throw thrownFault("http_503");
      return new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => {
          reject(ctx.signal.reason);
        });
      });
    });
    const controller = new AbortController();
    const reason = new DOMException("user closed the chat", "AbortError");
    const outcome = t(undefined, { signal: controller.signal }).catch((e: unknown) => e);
    await clock.advance(300); // the retry went out at 250 ms and hangs
    expect(calls).toBe(2);
    controller.abort(reason);
    expect(await outcome).toBe(reason);
    expect(recoverySpans().map((s) => s.attributes[RECOVERY_OUTCOME])).toEqual(["aborted"]);
    expect(events).toMatchObject([{ outcome: "failed", attempts: 1, wastedRetries: 1 }]);
  });
});

describe("what recovery spends", () => {
  const price = { name: "p", usdPer1kTokens: 0.002, usdPerCall: 0.01 };

  it.each([
    [
      "a reported cost, over any price",
      (ctx: CallContext) => {
        ctx.reportCost(0.5);
      },
      0.5,
    ],
    [
      "tokens at the per-1k price, input and output alike",
      (ctx: CallContext) => {
        ctx.reportUsage({ inputTokens: 1_500, outputTokens: 500 });
      },
      0.004,
    ],
    [
      "input tokens alone",
      (ctx: CallContext) => {
        ctx.reportUsage({ inputTokens: 3_000 });
      },
      0.006,
    ],
    [
      "output tokens alone",
      (ctx: CallContext) => {
        ctx.reportUsage({ outputTokens: 1_000 });
      },
      0.002,
    ],
    ["nothing reported: the per-call price", () => undefined, 0.01],
  ])("is what each attempt cost: %s", async (_name, report, usd) => {
    const { sh, clock, events, meters } = setup({ providers: [price] });
    let calls = 0;
    const t = sh.tool("complete", { readOnly: true, providers: ["p"] }, (_: undefined, ctx) => {
      if (++calls === 1) throw thrownFault("http_503"); // the first attempt's cost is not recovery's
      report(ctx);
      return "ok";
    });
    await expect(clock.run(t(undefined))).resolves.toBe("ok");
    expect(events[0]?.costUsd).toBeCloseTo(usd, 10);
    const spent = (await meters.read()).get(
      "selfheal_recovery_cost_usd{agent=test-agent,tool=complete}",
    );
    expect(spent).toBeCloseTo(usd, 10);
  });

  it("prices tokens only where the provider has a token price", async () => {
    const { sh, clock, events } = setup({ providers: [{ name: "q", usdPerCall: 0.03 }] });
    let calls = 0;
    const t = sh.tool("complete", { readOnly: true, providers: ["q"] }, (_: undefined, ctx) => {
      if (++calls === 1) throw thrownFault("http_503");
      ctx.reportUsage({ inputTokens: 10_000 });
      return "ok";
    });
    await clock.run(t(undefined));
    expect(events[0]?.costUsd).toBeCloseTo(0.03, 10);
  });

  it.each([
    ["its last attempt cost more than its price", 0.1, 0.6, false],
    ["its price is more than its last attempt cost", 0.6, 0.01, false],
    ["both fit", 0.1, 0.1, true],
  ])(
    "is reserved before each retry at the larger of the route's price and its last cost: %s",
    async (_name, usdPerCall, reported, retried) => {
      const { sh, clock, events } = setup({
        budgetUsd: 0.5,
        providers: [{ name: "p", usdPerCall }],
        plans: { SERVICE_DOWN: ["retry_once"] },
      });
      let calls = 0;
      const t = sh.tool("complete", { readOnly: true, providers: ["p"] }, (_: undefined, ctx) => {
        ctx.reportCost(reported);
        if (++calls === 1) throw thrownFault("http_503");
        return "ok";
      });
      const outcome = await clock.run(t(undefined)).catch((e: unknown) => e);
      expect(calls).toBe(retried ? 2 : 1);
      if (retried) {
        expect(outcome).toBe("ok");
      } else {
        expect(isRecoveryBudgetExhaustedError(outcome) && outcome.spentUsd).toBe(0);
        expect(events[0]).toMatchObject({ outcome: "budget_exhausted", attempts: 0 });
      }
    },
  );

  it("of a failover over the primary's price is on the failover's span and in selfheal_failover_cost_differential_usd; retries on the primary carry none", async () => {
    const { sh, clock, events, meters } = setup({
      providers: [
        { name: "a", usdPerCall: 0.01 },
        { name: "b", usdPerCall: 0.015 },
      ],
    });
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["a", "b"] },
      (_: undefined, ctx) => {
        if (ctx.provider === "a") {
          ctx.reportCost(0.02); // dearer than its price: still no differential on its own route
          throw thrownFault("http_503");
        }
        return "from b";
      },
    );
    await expect(clock.run(t(undefined))).resolves.toBe("from b");
    const [retry, failover] = recoverySpans();
    expect(retry?.attributes["selfheal.recovery.strategy"]).toBe("retry_once");
    expect(has(retry?.attributes ?? {}, COST_DIFFERENTIAL)).toBe(false);
    expect(failover?.attributes[COST_DIFFERENTIAL]).toBeCloseTo(0.005, 10);
    expect(events[0]?.failoverCostDifferentialUsd).toBeCloseTo(0.005, 10);
    expect(
      (await meters.read()).get(
        "selfheal_failover_cost_differential_usd{agent=test-agent,from=a,to=b}",
      ),
    ).toBeCloseTo(0.005, 10);
  });

  it("of a failover at the primary's price is no differential: 0 on the span, no series", async () => {
    const { sh, clock, meters } = setup({
      providers: [
        { name: "a", usdPerCall: 0.01 },
        { name: "b", usdPerCall: 0.01 },
      ],
      plans: { SERVICE_DOWN: ["failover_to_secondary"] },
    });
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["a", "b"] },
      (_: undefined, ctx) => {
        if (ctx.provider === "a") throw thrownFault("http_503");
        return "from b";
      },
    );
    await expect(clock.run(t(undefined))).resolves.toBe("from b");
    expect(recoverySpans().map((s) => s.attributes[COST_DIFFERENTIAL])).toEqual([0]);
    const series = [...(await meters.read()).keys()].filter((k) =>
      k.startsWith("selfheal_failover_cost_differential_usd"),
    );
    expect(series).toEqual([]);
  });
});

describe("the quick retry's view of a route", () => {
  it.each([
    ["the tool's name", "search", undefined],
    ["its provider's name", "openai", ["openai"]],
  ] as const)(
    "a status page (found by %s) that reports an incident makes a timeout SERVICE_DOWN and the route down: no quick retry",
    async (_name, page, providers) => {
      const fetch = () =>
        Promise.resolve(
          new Response(JSON.stringify({ status: { indicator: "major" } }), {
            headers: { "content-type": "application/json" },
          }),
        );
      const { sh, clock, events } = setup(
        { providers: [{ name: "openai" }], plans: { SERVICE_DOWN: ["retry_once"] } },
        { diagnosis: { statusPages: { [page]: "https://status.example.com" }, fetch } },
      );
      let calls = 0;
      const t = sh.tool("search", { readOnly: true, ...(providers && { providers }) }, () => {
        calls++;
        throw thrownFault("timeout");
      });
      await expect(clock.run(t(undefined))).rejects.toMatchObject({ code: "ETIMEDOUT" });
      expect(calls).toBe(1);
      expect(events[0]).toMatchObject({ pattern: "SERVICE_DOWN", outcome: "failed" });
      expect(events[0]?.steps).toEqual([{ strategy: "retry_once", skipped: ROUTE_DOWN }]);
      const diagnosis = spansNamed("agent.diagnosis")[0];
      expect(diagnosis?.attributes["selfheal.diagnosis.pattern"]).toBe("SERVICE_DOWN");
      expect(diagnosis?.attributes["selfheal.diagnosis.status_page"]).toBe("degraded");
    },
  );

  it("a route whose breaker is open (its probe just failed) is down: no quick retry", async () => {
    const { sh, clock, events, circuits } = setup({
      plans: { SERVICE_DOWN: ["retry_once", "circuit_break"] },
    });
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      calls++;
      throw thrownFault("http_503");
    });
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    expect(calls).toBe(2); // the failure and its quick retry; then the breaker opened for 5 s
    await clock.advance(5_000);
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 }); // the probe
    expect(calls).toBe(3);
    expect(circuits).toEqual(["search:open", "search:half_open", "search:open"]);
    expect(events[1]?.steps).toEqual([
      { strategy: "retry_once", skipped: ROUTE_DOWN },
      { strategy: "circuit_break" },
    ]);
  });

  it("a route with two failures in its breaker's window is down; one failure is not", async () => {
    const { sh, clock, events } = setup({ plans: { SERVICE_DOWN: ["retry_once"], TIMEOUT: [] } });
    const faults = ["timeout", "http_503"] as const;
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      throw thrownFault(faults[calls++] ?? "http_503");
    });
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ code: "ETIMEDOUT" }); // 1 failure
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 }); // 2 failures
    expect(calls).toBe(2);
    expect(events[1]?.steps).toEqual([{ strategy: "retry_once", skipped: ROUTE_DOWN }]);

    const fresh = setup({ plans: { SERVICE_DOWN: ["retry_once"] } });
    let once = 0;
    const u = fresh.sh.tool("search", { readOnly: true }, () => {
      if (++once === 1) throw thrownFault("http_503");
      return "found";
    });
    await expect(fresh.clock.run(u(undefined))).resolves.toBe("found");
  });
});

describe("the recovery event", () => {
  it("names the last step that ran, lists skipped steps with their reason (and only those with one), and times the recovery from the first error", async () => {
    const { sh, clock, events, meters } = setup({
      plans: { SERVICE_DOWN: ["retry_once", "failover_to_secondary"] },
    });
    const t = sh.tool("search", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    await expect(clock.run(t(undefined), { stepMs: 10 })).rejects.toMatchObject({ status: 503 });
    expect(events).toHaveLength(1);
    const event = events[0] as RecoveryEvent;
    expect(event).toMatchObject({ outcome: "failed", strategy: "retry_once", attempts: 1 });
    expect(event.durationMs).toBe(250);
    expect(event.steps).toStrictEqual([
      { strategy: "retry_once" },
      { strategy: "failover_to_secondary", skipped: "the tool has no secondary provider" },
    ]);
    const skipped = recoverySpans().find((s) => s.attributes[RECOVERY_OUTCOME] === "skipped");
    expect(skipped?.attributes[RECOVERY_SKIPPED]).toBe("the tool has no secondary provider");
    expect(
      (await meters.read()).get(
        "selfheal_recoveries{agent=test-agent,tool=search,strategy=failover_to_secondary,outcome=skipped}",
      ),
    ).toBe(1);
  });

  it("counts a step that sends nothing as applied, in its span and selfheal_recoveries", async () => {
    const { sh, clock, meters } = setup({ plans: { SERVICE_DOWN: ["circuit_break"] } });
    const t = sh.tool("search", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    expect(recoverySpans().map((s) => s.attributes[RECOVERY_OUTCOME])).toEqual(["applied"]);
    expect(
      (await meters.read()).get(
        "selfheal_recoveries{agent=test-agent,tool=search,strategy=circuit_break,outcome=applied}",
      ),
    ).toBe(1);
  });
});

describe("escalation", () => {
  it("alerts with the agent, the tool and the pattern, and leaves no timer behind", async () => {
    const memory = notifier(0);
    const { sh, clock } = escalating(memory);
    const t = sh.tool("lookup", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    const error = await clock.run(t(undefined)).catch((e: unknown) => e);
    expect(isHumanEscalationRequiredError(error) && error.notified).toBe(true);
    expect(memory.alerts).toMatchObject([
      {
        kind: "test-agent/lookup/SERVICE_DOWN",
        title: "test-agent: lookup is failing (SERVICE_DOWN)",
        agent: "test-agent",
        tool: "lookup",
      },
    ]);
    expect(memory.alerts[0]?.text).toMatch(
      /Recovery of "lookup" ran out of options after 0 attempts/,
    );
    expect(clock.pendingTimers).toBe(0);
  });

  it("waits for a slow notifier within the call's deadline", async () => {
    const { sh, clock } = escalating(notifier(1_000));
    const t = sh.tool("lookup", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    const started = clock.now();
    const error = await clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
    expect(isHumanEscalationRequiredError(error) && error.notified).toBe(true);
    expect(clock.now() - started).toBe(1_000);
  });

  it("does not hold the call past its deadline for a notifier that hangs: the error says nobody was notified", async () => {
    const hung = notifier();
    const { sh, clock } = escalating(hung);
    const t = sh.tool("lookup", { readOnly: true, deadlineMs: 2_000 }, () => {
      throw thrownFault("http_503");
    });
    const started = clock.now();
    const error = await clock.run(t(undefined), { stepMs: 100 }).catch((e: unknown) => e);
    expect(isHumanEscalationRequiredError(error) && error.notified).toBe(false);
    expect(clock.now() - started).toBe(2_000);
    expect(hung.alerts).toHaveLength(1);
  });
});

describe("breaker verdicts of an attempt", () => {
  it("a probe answered with 429 closes the breaker (the route is up) and the route cools for the throttle", async () => {
    const { sh, clock, circuits } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"], RATE_LIMIT: [] },
    });
    const faults = ["http_503", "rate_limit"] as const;
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      throw thrownFault(faults[calls++] ?? "rate_limit");
    });
    await expect(t(undefined)).rejects.toMatchObject({ status: 503 });
    await clock.advance(5_000);
    await expect(t(undefined)).rejects.toMatchObject({ status: 429 }); // the probe
    expect(circuits).toEqual(["search:open", "search:half_open", "search:closed"]);
    const cooling = await t(undefined, { deadlineMs: 1_000 }).catch((e: unknown) => e);
    expect(isCircuitOpenError(cooling) && cooling.retryAfterMs).toBe(5_000);
    expect(calls).toBe(2);
  });

  it("a probe that fails with an error nobody recognises reopens the breaker: it learnt nothing", async () => {
    const { sh, clock, circuits } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"] },
      unknown: "none",
    });
    let calls = 0;
    const t = sh.tool("search", { readOnly: true }, () => {
      throw calls++ === 0 ? thrownFault("http_503") : new Error("something odd");
    });
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    await clock.advance(5_000);
    await expect(clock.run(t(undefined))).rejects.toThrow("something odd");
    expect(circuits).toEqual(["search:open", "search:half_open", "search:open"]);
  });

  it("outside a probe, throttling and unrecognised errors count neither for nor against the route's failure rate", async () => {
    const { sh, clock, circuits } = setup({
      providers: [{ name: "a" }, { name: "b" }],
      breaker: { minimumAttempts: 2, failureRate: 1 },
      plans: { SERVICE_DOWN: [], RATE_LIMIT: [] },
      unknown: "none",
    });
    const replies: Error[] = [
      thrownFault("http_503"),
      new Error("something odd"),
      thrownFault("rate_limit"),
      thrownFault("http_503"),
    ];
    const t = sh.tool("complete", { readOnly: true, providers: ["a", "b"] }, () => {
      throw replies.shift() ?? new Error("no more replies");
    });
    for (let i = 0; i < 3; i++) await t(undefined).catch(() => undefined);
    expect(circuits).toEqual([]); // one failure counted, nothing else
    await clock.advance(5_000); // the 429's cooldown
    await expect(t(undefined)).rejects.toMatchObject({ status: 503 });
    expect(circuits).toEqual(["a:open"]); // two failures of two attempts
  });
});
