import { describe, expect, it } from "vitest";
import {
  isHumanEscalationRequiredError,
  isRecoveryBudgetExhaustedError,
  isSelfHealConfigError,
  type CallContext,
  type CircuitOpenError,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealingOptions,
} from "../../src/index.js";
import type { Alert } from "../../src/notify/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

const S = 1_000;
const providers = [
  { name: "openai", usdPerCall: 0.002, model: "gpt-4o", baseUrl: "https://api.openai.com/v1" },
  { name: "anthropic", usdPerCall: 0.003, model: "claude-sonnet" },
];

function setup(recovery: RecoveryOptions = {}, options: Partial<SelfHealingOptions> = {}) {
  const alerts: Alert[] = [];
  const vi = virtualInstance({
    recovery: {
      random: () => 0,
      providers,
      notifiers: [{ channel: "memory", send: (a) => Promise.resolve(void alerts.push(a)) }],
      ...recovery,
    },
    ...options,
  });
  const circuits: string[] = [];
  vi.sh.on("circuit-change", (e) => circuits.push(`${e.dependency} ${e.state}`));
  return { ...vi, alerts, circuits };
}

function setupWithEvents(recovery: RecoveryOptions = {}) {
  const vi = setup(recovery);
  const events: RecoveryEvent[] = [];
  vi.sh.on("recovery", (e) => events.push(e));
  return { ...vi, events };
}

/** A tool with the two LLM routes that notes the route of every attempt. */
function twoRoutes<R>(sh: ReturnType<typeof setup>["sh"], attempt: (ctx: CallContext) => R) {
  const tried: (string | undefined)[] = [];
  const t = sh.tool(
    "complete",
    { readOnly: true, providers: ["openai", "anthropic"] },
    (_: string, ctx) => {
      tried.push(ctx.provider);
      return attempt(ctx);
    },
  );
  return { t, tried };
}

/** Never answers; fails only when its signal aborts (a provider that accepted and went silent). */
const hang = (ctx: CallContext) =>
  new Promise<never>((_resolve, reject) => {
    ctx.signal.addEventListener("abort", () => {
      reject(ctx.signal.reason);
    });
  });

/** Runs a call on virtual time; answers how it settled and when (ms after the start). */
async function timed<T>(clock: ReturnType<typeof setup>["clock"], call: () => Promise<T>) {
  const start = clock.now();
  let end = start;
  const settled = call().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  const out = await clock.run(
    settled.finally(() => (end = clock.now())),
    { stepMs: 100 },
  );
  return { ...out, ms: end - start };
}

describe("call deadline: the whole call, recovery included", () => {
  it("two routes that accept and never answer: the call ends by its deadline (60 s with a 20 s timeout)", async () => {
    const { sh, clock } = setup();
    const tried: (string | undefined)[] = [];
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["openai", "anthropic"], timeoutMs: 20 * S },
      (_: string, ctx) => {
        tried.push(ctx.provider);
        return hang(ctx);
      },
    );
    const out = await timed(clock, () => t("hi"));
    expect("error" in out && isHumanEscalationRequiredError(out.error)).toBe(true);
    expect(out.ms).toBeLessThanOrEqual(60 * S);
    expect(tried).toEqual(["openai", "anthropic"]); // failover first, no longer wait on either
  });

  it("one route: the longer-timeout retry is cut to the time left; the call ends at its deadline", async () => {
    const { sh, clock } = setup();
    const timeouts: (number | undefined)[] = [];
    const t = sh.tool("lookup", { readOnly: true, timeoutMs: 20 * S }, (_: string, ctx) => {
      timeouts.push(ctx.timeoutMs);
      return hang(ctx);
    });
    const out = await timed(clock, () => t("x"));
    expect("error" in out).toBe(true);
    expect(timeouts).toEqual([20 * S, 40 * S]); // doubled, and exactly what was left
    expect(out.ms).toBeGreaterThanOrEqual(60 * S);
    expect(out.ms).toBeLessThanOrEqual(60 * S + 100);
  });

  it("without a timeout the deadline bounds the first attempt too; a call's deadlineMs wins", async () => {
    const { sh, clock } = setup();
    const t = sh.tool("lookup", { readOnly: true }, (_: string, ctx) => hang(ctx));
    const whole = await timed(clock, () => t("x"));
    expect(whole.ms).toBeLessThanOrEqual(60 * S + 100);
    const short = await timed(clock, () => t("x", { deadlineMs: 5 * S }));
    expect("error" in short).toBe(true);
    expect(short.ms).toBeLessThanOrEqual(5 * S + 100);
    const tool = sh.tool("slow", { readOnly: true, deadlineMs: 2 * S }, (_: string, ctx) =>
      hang(ctx),
    );
    expect((await timed(clock, () => tool("x"))).ms).toBeLessThanOrEqual(2 * S + 100);
  });

  it("a long timeout stretches the default deadline to 3 x the timeout", async () => {
    const { sh, clock } = setup();
    const t = sh.tool("report", { readOnly: true, timeoutMs: 30 * S }, (_: string, ctx) =>
      hang(ctx),
    );
    const out = await timed(clock, () => t("x"));
    expect(out.ms).toBeGreaterThan(60 * S);
    expect(out.ms).toBeLessThanOrEqual(90 * S + 100);
  });

  it("the caller's signal still aborts at once, mid-recovery, with the caller's reason", async () => {
    const { sh, clock } = setup();
    const t = sh.tool("pay", { readOnly: true }, () => {
      throw thrownFault("rate_limit", { retryAfterSeconds: 30 });
    });
    const controller = new AbortController();
    clock.setTimer(1 * S, () => {
      controller.abort(new Error("user left"));
    });
    const out = await timed(clock, () => t("x", { signal: controller.signal }));
    expect(out).toMatchObject({ error: { message: "user left" } });
    expect(out.ms).toBe(1 * S);
  });
});

describe("check before waiting", () => {
  it("a Retry-After longer than the time left is not slept: the call ends now", async () => {
    const { sh, clock } = setup();
    let calls = 0;
    const t = sh.tool("pay", { readOnly: true, deadlineMs: 5 * S }, () => {
      calls++;
      throw thrownFault("rate_limit", { retryAfterSeconds: 10 });
    });
    const out = await timed(clock, () => t("x"));
    expect("error" in out && isHumanEscalationRequiredError(out.error)).toBe(true);
    expect(out.ms).toBe(0);
    expect(calls).toBe(1);
  });

  it("an attempt the budget cannot pay for is not waited for: the budget stop comes at once", async () => {
    const { sh, clock } = setup({
      budgetUsd: 0.01,
      providers: [{ name: "pricey", usdPerCall: 0.5 }],
    });
    const t = sh.tool("ask", { readOnly: true, providers: ["pricey"] }, () => {
      throw thrownFault("rate_limit", { retryAfterSeconds: 2 });
    });
    const out = await timed(clock, () => t("x"));
    expect("error" in out && isRecoveryBudgetExhaustedError(out.error)).toBe(true);
    expect(out.ms).toBe(0);
  });
});

describe("which route, and when", () => {
  it("a one-off 500 gets one quick retry on the same route, not a failover", async () => {
    const { sh, clock } = setup();
    const { t, tried } = twoRoutes(sh, (ctx) => {
      if (tried.length === 1) throw thrownFault("http_500");
      return `from ${ctx.provider ?? "?"}`;
    });
    const out = await timed(clock, () => t.detailed("hi"));
    expect(out).toMatchObject({ value: { value: "from openai", provider: "openai", attempts: 2 } });
    expect(out.ms).toBeGreaterThanOrEqual(250);
    expect(out.ms).toBeLessThanOrEqual(500);
    expect(tried).toEqual(["openai", "openai"]);
  });

  it("repeated 5xx on a route: no quick retry, straight to the next route", async () => {
    const { sh, clock } = setup();
    const { t, tried } = twoRoutes(sh, (ctx) => {
      if (ctx.provider === "openai") throw thrownFault("http_503");
      return "ok";
    });
    await timed(clock, () => t("first")); // openai, openai (quick retry), anthropic
    tried.length = 0;
    await timed(clock, () => t("second"));
    expect(tried).toEqual(["openai", "anthropic"]);
  });

  it("a 429 with Retry-After routes other calls around the route for that long, opens no breaker", async () => {
    const { sh, clock, circuits } = setup();
    const { t, tried } = twoRoutes(sh, (ctx) => {
      if (tried.length === 1) throw thrownFault("rate_limit", { retryAfterSeconds: 3 });
      return ctx.provider;
    });
    expect(await timed(clock, () => t("a"))).toMatchObject({ value: "anthropic", ms: 0 });
    expect(tried).toEqual(["openai", "anthropic"]); // a 3 s wait loses to another route
    expect(await timed(clock, () => t("b"))).toMatchObject({ value: "anthropic" });
    await clock.advance(3 * S);
    expect(await timed(clock, () => t("c"))).toMatchObject({ value: "openai" });
    expect(circuits).toEqual([]);
  });

  it("a rule's cooldownMs keeps calls off the route when the error has no Retry-After", async () => {
    const { sh, clock } = setup(
      {},
      {
        diagnosis: {
          rules: (defaults) => [
            {
              name: "enhance-your-calm",
              pattern: "RATE_LIMIT",
              confidence: 0.9,
              match: { status: [420] },
              cooldownMs: 10 * S,
            },
            ...defaults,
          ],
        },
      },
    );
    let first = true;
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["openai", "anthropic"] },
      (_: string, ctx) => {
        if (first && ctx.provider === "openai") {
          first = false;
          throw Object.assign(new Error("calm down"), { status: 420 });
        }
        return ctx.provider;
      },
    );
    await timed(clock, () => t("a"));
    await clock.advance(9 * S);
    expect(await timed(clock, () => t("b"))).toMatchObject({ value: "anthropic" });
    await clock.advance(1 * S);
    expect(await timed(clock, () => t("c"))).toMatchObject({ value: "openai" });
  });

  it("every route closed: a call fails fast with retryAfterMs unless the probe is due within recovery.maxProbeWaitMs (2 s) and its deadline; then it waits for it", async () => {
    const { sh, clock } = setup({ plans: { SERVICE_DOWN: ["circuit_break"] } });
    let up = false;
    const t = sh.tool("inventory", { readOnly: true }, () => {
      if (!up) throw thrownFault("http_503");
      return "stock";
    });
    await t("x").catch(() => undefined); // opens the breaker for 5 s (no time passes)
    const openedAt = clock.now();
    up = true;
    const fast = await timed(clock, () => t("x"));
    expect(fast.ms).toBe(0); // 5 s to the probe: no wait, it says when to come back
    expect((fast as { error: CircuitOpenError }).error.retryAfterMs).toBe(5 * S);
    await clock.advance(3_500 - (clock.now() - openedAt));
    const waited = await timed(clock, () => t("x")); // the probe is 1.5 s away: worth the wait
    expect(waited).toMatchObject({ value: "stock" });
    expect(waited.ms).toBe(1_500);
    // Raised, the bound lets a call wait out the whole open period (within its deadline).
    const { sh: sh2, clock: clock2 } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"] },
      maxProbeWaitMs: 10 * S,
    });
    let up2 = false;
    const v = sh2.tool("inventory", { readOnly: true }, () => {
      if (!up2) throw thrownFault("http_503");
      return "stock";
    });
    await v("x").catch(() => undefined);
    up2 = true;
    expect(await timed(clock2, () => v("x"))).toMatchObject({ value: "stock", ms: 5 * S });
    // A deadline too short for the wait fails fast, whatever the bound.
    const { sh: sh3, clock: clock3 } = setup({
      plans: { SERVICE_DOWN: ["circuit_break"] },
      maxProbeWaitMs: 10 * S,
    });
    const u = sh3.tool("inventory", { readOnly: true, deadlineMs: 1 * S }, () => {
      throw thrownFault("http_503");
    });
    await u("x").catch(() => undefined);
    const short = await timed(clock3, () => u("x"));
    expect(short.ms).toBe(0);
    expect((short as { error: CircuitOpenError }).error.retryAfterMs).toBe(5 * S);
  });
});

describe("UNKNOWN errors", () => {
  const unknown = () => new Error("flux capacitor misaligned");

  it("a read gets one retry by default, then the next provider", async () => {
    const { sh, clock } = setup();
    const { t, tried } = twoRoutes(sh, (ctx) => {
      if (ctx.provider === "openai") throw unknown();
      return "ok";
    });
    expect(await timed(clock, () => t("x"))).toMatchObject({ value: "ok" });
    expect(tried).toEqual(["openai", "openai", "anthropic"]);
    expect(sh.unknownSamples("complete").length).toBeGreaterThan(0); // still counted for drift
  });

  it('`unknown: "none"` passes the error on; a keyless write is never retried', async () => {
    const { sh, clock } = setup({ unknown: "none" });
    let calls = 0;
    const t = sh.tool("lookup", { readOnly: true }, () => {
      calls++;
      throw unknown();
    });
    expect(await timed(clock, () => t("x"))).toMatchObject({
      error: { message: "flux capacitor misaligned" },
    });
    expect(calls).toBe(1);
    const { sh: sh2, clock: clock2 } = setup();
    let writes = 0;
    const w = sh2.tool("write", { readOnly: false }, () => {
      writes++;
      throw unknown();
    });
    await timed(clock2, () => w("x"));
    expect(writes).toBe(1);
  });
});

describe("evidence tiers: wording alone never acts beyond the call", () => {
  it("user text that reads like an outage never opens a breaker, makes the agent read-only or pages", async () => {
    const { sh, clock, circuits, alerts } = setup();
    // A lookup that fails on some users' queries, quoting them; most queries succeed.
    const t = sh.tool("search", { readOnly: true }, (q: string) => {
      if (q.startsWith("service")) throw new Error(`no result for "${q}": bad gateway`);
      return "found";
    });
    for (let i = 0; i < 40; i++) {
      await timed(clock, () => t(i % 4 === 0 ? `service unavailable ${i}` : `cats ${i}`));
    }
    expect((await sh.diagnose(new Error("service unavailable"))).evidence).toBe("wording");
    expect(circuits).toEqual([]);
    expect(alerts).toEqual([]);
    expect((await sh.status()).readOnly).toBe(false);
  });

  it('"the overloaded backpack": one product name in an error switches nothing off', async () => {
    const { sh, clock, circuits, alerts } = setup();
    const statuses: string[] = [];
    sh.on("status-change", (e) => statuses.push(`${e.tool ?? "agent"} ${e.to}`));
    const lookup = sh.tool("lookup_product", { readOnly: true }, (name: string) => {
      throw new Error(`Unknown product: "${name}"`);
    });
    const before = await sh.status();
    const out = await timed(clock, () => lookup("the overloaded backpack"));
    expect(out).toMatchObject({ error: { message: 'Unknown product: "the overloaded backpack"' } });
    expect(circuits).toEqual([]); // no breaker
    expect(alerts).toEqual([]); // no page
    const after = await sh.status();
    expect(after.readOnly).toBe(false); // no read-only mode
    expect(after.circuits).toEqual({});
    expect(after.status).toBe(before.status); // status unchanged
    expect(statuses).toEqual([]);
  });

  it("the same outage with a status code does: the breaker opens and a person is paged", async () => {
    const { sh, clock, circuits, alerts } = setup();
    const t = sh.tool("search", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    await timed(clock, () => t("x"));
    expect(circuits).toContain("search open");
    expect(alerts).toHaveLength(1);
  });
});

describe("a refused request says the route is up", () => {
  it("circuit_break after a 4xx or a 429 opens nothing: the step is skipped", async () => {
    const { sh, clock, circuits, events } = setupWithEvents({
      plans: { CONTENT_POLICY: ["circuit_break"], RATE_LIMIT: ["circuit_break"] },
    });
    const t = sh.tool("complete", { readOnly: true }, (kind: "content_policy" | "rate_limit") => {
      throw thrownFault(kind);
    });
    await timed(clock, () => t("content_policy"));
    await timed(clock, () => t("rate_limit"));
    expect(circuits).toEqual([]);
    expect(events.map((e) => e.steps)).toEqual([
      [{ strategy: "circuit_break", skipped: "CONTENT_POLICY says the route is up" }],
      [{ strategy: "circuit_break", skipped: "RATE_LIMIT says the route is up" }],
    ]);
  });
});

describe("status tells the truth", () => {
  it("never healthy while writes are refused; open circuits per tool and for the agent", async () => {
    const { sh, clock } = setup({
      plans: { SERVICE_DOWN: ["circuit_break", "degrade_to_readonly"] },
    });
    const t = sh.tool("inventory", { readOnly: true }, () => {
      throw thrownFault("http_503");
    });
    expect(await sh.status()).toMatchObject({ status: "healthy", readOnly: false, circuits: {} });
    await timed(clock, () => t("x"));
    const status = await sh.status();
    expect(status).toMatchObject({
      status: "warning",
      readOnly: true,
      circuits: { inventory: "open" },
      tools: { inventory: { status: "warning", circuits: { inventory: "open" } } },
    });
  });
});

describe("providers declared once", () => {
  it("the tool gets the provider's settings on the context; a provider listed twice is one route", async () => {
    const { sh, clock, warnings } = setup();
    const seen: unknown[] = [];
    const t = sh.tool(
      "complete",
      { readOnly: true, providers: ["openai", "openai", "anthropic"] },
      (_: string, ctx) => {
        seen.push(ctx.providerConfig?.model);
        if (ctx.provider === "openai") throw thrownFault("http_503");
        return ctx.providerConfig?.baseUrl ?? "no url";
      },
    );
    expect(await timed(clock, () => t("x"))).toMatchObject({ value: "no url" });
    expect(seen).toEqual(["gpt-4o", "gpt-4o", "claude-sonnet"]); // quick retry, then failover once
    expect(warnings.some((w) => w.includes("lists a provider more than once"))).toBe(true);
  });

  it("old and bad options get errors that say what to do", () => {
    const { sh } = setup();
    const bad = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return isSelfHealConfigError(e) ? e.message : `not a config error: ${String(e)}`;
      }
      return "no error";
    };
    expect(
      bad(() => sh.tool("t", { readOnly: true, fallback: () => 1 } as never, () => 1)),
    ).toMatch(/renamed to cannedAnswer/);
    expect(bad(() => setup({ breaker: { openMs: 1 } as never }))).toMatch(/baseOpenMs/);
    expect(bad(() => setup({ unknown: "sometimes" as never }))).toMatch(/retry-once/);
    expect(bad(() => setup({ deadlineMs: -1 }))).toMatch(/recovery.deadlineMs/);
  });

  it("a bad per-call deadlineMs is refused with the field named", async () => {
    const { sh } = setup();
    const t = sh.tool("t", { readOnly: true }, () => 1);
    await expect(t("x", { deadlineMs: 0 })).rejects.toMatchObject({
      field: "t(args, options).deadlineMs",
    });
  });
});
