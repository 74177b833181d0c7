/**
 * What one recovery decides and reports (src/engine/recover.ts), on virtual time: the plan a
 * write without a key may run, how far thin evidence (wording only) may retry, the recovery
 * event's keys of the first error and its provider, the call's failed attempts, and an
 * escalation when the task's budget stops the plan.
 */
import { describe, expect, it } from "vitest";
import {
  isRecoveryBudgetExhaustedError,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealingOptions,
  type ToolCallEvent,
} from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { recordingPager, recoveryInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();

function setup(recovery: RecoveryOptions = {}, options: Partial<SelfHealingOptions> = {}) {
  otel.reset();
  const instance = recoveryInstance(otel.provider, recovery, options);
  const calls: ToolCallEvent[] = [];
  instance.sh.on("tool-call", (e) => calls.push(e));
  return { ...instance, calls };
}

/** A tool body that throws each of `errors` in turn, then answers `value`; counts its runs. */
function failing(errors: Error[], value: unknown = "ok") {
  let runs = 0;
  const body = () => {
    const error = errors[runs++];
    if (error !== undefined) throw error;
    return value;
  };
  return { body, runs: () => runs };
}

const onlyEvent = (events: RecoveryEvent[]): RecoveryEvent => {
  expect(events).toHaveLength(1);
  return events[0] as RecoveryEvent;
};

describe("a write without an idempotency key", () => {
  const WARNING =
    'selfheal: write tool "charge" failed and was not retried or failed over: it has no idempotency key. ' +
    "Add idempotencyKey: (args) => args.orderId (a key unique per logical write) to its options, " +
    "or pass { idempotencyKey } per call, so a retry can never write twice.";

  it("is never sent twice: resending steps are skipped with the reason, and the author is told once", async () => {
    const { sh, clock, events, warnings } = setup({
      providers: [{ name: "p" }, { name: "q" }],
      plans: { SERVICE_DOWN: ["retry_once", "failover_to_secondary"] },
    });
    const tool = failing([thrownFault("http_503"), thrownFault("http_503")]);
    const charge = sh.tool("charge", { readOnly: false, providers: ["p", "q"] }, tool.body);
    await expect(clock.run(charge(undefined))).rejects.toMatchObject({ status: 503 });
    await expect(clock.run(charge(undefined))).rejects.toMatchObject({ status: 503 });
    expect(tool.runs()).toBe(2); // once per call
    expect(warnings.filter((w) => w === WARNING)).toHaveLength(1);
    const reason = "a write without an idempotency key is never sent twice";
    expect(events[0]?.steps).toEqual([
      { strategy: "retry_once", skipped: reason },
      { strategy: "failover_to_secondary", skipped: reason },
    ]);
    expect(events[0]?.attempts).toBe(0);
  });

  it("whose plan resends nothing runs it, without the warning", async () => {
    const { sh, clock, events, warnings } = setup({
      plans: { SERVICE_DOWN: ["circuit_break", "degrade_to_readonly"] },
    });
    const charge = sh.tool("charge", { readOnly: false }, failing([thrownFault("http_503")]).body);
    await expect(clock.run(charge(undefined))).rejects.toMatchObject({ status: 503 });
    expect(warnings.filter((w) => w.includes("no idempotency key"))).toEqual([]);
    expect(onlyEvent(events).steps).toEqual([
      { strategy: "circuit_break" },
      { strategy: "degrade_to_readonly" },
    ]);
  });

  it("with a key is retried like a read", async () => {
    const { sh, clock, events } = setup({ plans: { SERVICE_DOWN: ["retry_once"] } });
    const tool = failing([thrownFault("http_503")], { charged: true });
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (o: { id: string }) => o.id },
      tool.body,
    );
    expect(await clock.run(charge({ id: "o1" }))).toEqual({ charged: true });
    expect(tool.runs()).toBe(2);
    expect(onlyEvent(events)).toMatchObject({ outcome: "recovered", attempts: 1 });
  });
});

describe("thin evidence (a diagnosis from wording alone)", () => {
  /** Wording a rule knows, with no status, code or SDK class behind it. */
  const worded = () => new Error("Service Unavailable: the upstream is down, try again later");

  it("pays for one retry on the failed route, however many the plan asks", async () => {
    const { sh, clock, events } = setup({
      plans: { SERVICE_DOWN: ["retry_once", "exponential_backoff_with_jitter"] },
    });
    const tool = failing(Array.from({ length: 10 }, worded));
    const t = sh.tool("search", { readOnly: true }, tool.body);
    await expect(clock.run(t(undefined))).rejects.toThrow(/Service Unavailable/);
    expect(tool.runs()).toBe(2);
    expect(onlyEvent(events)).toMatchObject({ outcome: "failed", attempts: 1 });
  });

  it("a structured 503 retries as often as the plan says", async () => {
    const { sh, clock, events } = setup({
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const tool = failing(Array.from({ length: 10 }, () => thrownFault("http_503")));
    const t = sh.tool("search", { readOnly: true }, tool.body);
    await expect(clock.run(t(undefined))).rejects.toMatchObject({ status: 503 });
    expect(tool.runs()).toBe(6);
    expect(onlyEvent(events)).toMatchObject({ outcome: "failed", attempts: 5 });
  });
});

describe("the recovery event and the call record", () => {
  it("carry the first error's status and code; a recovered call counts its failed attempts", async () => {
    const { sh, clock, events, calls } = setup({
      plans: { SERVICE_DOWN: ["exponential_backoff_with_jitter"] },
    });
    const first = Object.assign(new Error("upstream down"), { status: 503, code: "upstream_down" });
    const tool = failing([first, thrownFault("http_503")], "answer");
    const t = sh.tool("search", { readOnly: true }, tool.body);
    expect(await clock.run(t(undefined))).toBe("answer");
    const event = onlyEvent(events);
    expect(event).toMatchObject({ outcome: "recovered", status: 503, code: "upstream_down" });
    expect(event.attempts).toBe(2);
    expect(event.wastedRetries).toBe(0);
    // Health evidence: retries the answering route absorbed count once (throttling is not an
    // outage); failures on other routes count in full (below).
    expect(calls.map((c) => [c.outcome, c.failedAttempts])).toEqual([["recovered", 1]]);
  });

  it("leave status and code out when the first error had none; a code is cut to 64 characters", async () => {
    const { sh, clock, events } = setup({ plans: { UNKNOWN: ["retry_once"] } });
    const t = sh.tool("search", { readOnly: true }, failing([new Error("?"), new Error("?")]).body);
    await expect(clock.run(t(undefined))).rejects.toThrow("?");
    const event = onlyEvent(events);
    expect(Object.hasOwn(event, "status")).toBe(false);
    expect(Object.hasOwn(event, "code")).toBe(false);

    const long = setup({ plans: { SERVICE_DOWN: [] } });
    // Codes are read up to 128 characters, lower-cased; the event keeps 64.
    const coded = Object.assign(new Error("down"), { status: 503, code: `E${"X".repeat(99)}` });
    const u = long.sh.tool("search", { readOnly: true }, failing([coded]).body);
    await expect(long.clock.run(u(undefined))).rejects.toMatchObject({ status: 503 });
    expect(onlyEvent(long.events).code).toBe(`e${"x".repeat(62)}…`);
  });

  it("name the provider that answered, and none when nothing did", async () => {
    const routes = [{ name: "p" }, { name: "q" }];
    const { sh, clock, events, calls } = setup({
      providers: routes,
      plans: { SERVICE_DOWN: ["retry_once", "failover_to_secondary"] },
    });
    let route: string | undefined;
    const t = sh.tool("search", { readOnly: true, providers: ["p", "q"] }, (_: undefined, ctx) => {
      route = ctx.provider;
      if (route === "p") throw thrownFault("http_503");
      return `from ${String(route)}`;
    });
    expect(await clock.run(t(undefined))).toBe("from q");
    expect(onlyEvent(events)).toMatchObject({ outcome: "recovered", provider: "q" });
    // p failed twice (the call, then the retry): both count against health, q's answer does not.
    expect(calls.map((c) => [c.outcome, c.failedAttempts])).toEqual([["recovered", 2]]);

    const down = setup({ providers: routes, plans: { SERVICE_DOWN: ["failover_to_secondary"] } });
    const u = down.sh.tool("search", { readOnly: true, providers: ["p", "q"] }, () => {
      throw thrownFault("http_503");
    });
    await expect(down.clock.run(u(undefined))).rejects.toMatchObject({ status: 503 });
    const failed = onlyEvent(down.events);
    expect(failed).toMatchObject({ outcome: "failed", attempts: 1, wastedRetries: 1 });
    expect(failed.provider).toBeUndefined();
  });
});

describe("a task's budget that stops the plan", () => {
  it("escalates to a human: the notifier is sent the tool and pattern", async () => {
    const pages: string[] = [];
    const { sh, clock, events } = setup({
      notifiers: [recordingPager(pages)],
      // The retry is reserved at the route's price first: more than the budget.
      budgetUsd: 0.5,
      providers: [{ name: "p", usdPerCall: 0.6 }],
      plans: { SERVICE_DOWN: ["retry_once"] },
    });
    const t = sh.tool("search", { readOnly: true, providers: ["p"] }, () => {
      throw thrownFault("http_503");
    });
    const out = await clock.run(t(undefined).catch((error: unknown) => error));
    expect(isRecoveryBudgetExhaustedError(out)).toBe(true);
    expect(onlyEvent(events).outcome).toBe("budget_exhausted");
    expect(pages).toEqual(["test-agent: search is failing (SERVICE_DOWN)"]);
  });
});
