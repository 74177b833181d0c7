import { describe, expect, it } from "vitest";
import {
  isRecoveryBudgetExhaustedError,
  type CallContext,
  type ProviderConfig,
  type RecoveryEvent,
} from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

/**
 * A one-provider read tool whose first attempt fails with a 503 and whose retry (retry_once)
 * runs `onRetry` and answers: the retry's cost is the recovery event's `costUsd`.
 */
function retriedOnce(provider: ProviderConfig, onRetry: (ctx: CallContext) => void) {
  const { sh, clock } = virtualInstance({
    recovery: {
      random: () => 0,
      providers: [provider],
      plans: { SERVICE_DOWN: ["retry_once"] },
    },
  });
  const events: RecoveryEvent[] = [];
  sh.on("recovery", (e) => events.push(e));
  const tool = sh.tool(
    "complete",
    { readOnly: true, providers: [provider.name] },
    (_: undefined, ctx: CallContext) => {
      if (ctx.attempt === 1) throw thrownFault("http_503");
      onRetry(ctx);
      return "answer";
    },
  );
  return {
    sh,
    /** The recovery's cost, after the call recovered. */
    cost: async () => {
      await expect(clock.run(tool.detailed(undefined))).resolves.toMatchObject({
        value: "answer",
        outcome: "recovered",
        attempts: 2,
      });
      expect(events).toHaveLength(1);
      return events[0]?.costUsd;
    },
  };
}

describe("the call context a tool receives", () => {
  it("says which attempt, provider, key, call id, task, mode and time budget it serves", async () => {
    const { sh, clock } = virtualInstance({
      recovery: {
        random: () => 0,
        providers: [{ name: "openai", model: "gpt-4o", baseUrl: "https://api.openai.com/v1" }],
        plans: { SERVICE_DOWN: ["retry_once"] },
      },
    });
    const seen: Omit<CallContext, "signal" | "reportCost" | "reportUsage" | "reportModel">[] = [];
    const write = sh.tool(
      "charge",
      {
        readOnly: false,
        providers: ["openai"],
        timeoutMs: 2_000,
        idempotencyKey: (a: { order: string }) => `charge-${a.order}`,
      },
      (_a, ctx) => {
        const { attempt, provider, providerConfig, mode, idempotencyKey, toolCallId } = ctx;
        seen.push({
          attempt,
          provider,
          providerConfig,
          mode,
          idempotencyKey,
          toolCallId,
          taskId: ctx.taskId,
          timeoutMs: ctx.timeoutMs,
        });
        if (attempt === 1) throw thrownFault("http_503");
        return "charged";
      },
    );
    const done = sh.task("checkout-7", () => write({ order: "42" }, { toolCallId: "call_9" }));
    await expect(clock.run(done)).resolves.toBe("charged");
    const config = { name: "openai", model: "gpt-4o", baseUrl: "https://api.openai.com/v1" };
    const common = {
      provider: "openai",
      providerConfig: config,
      mode: "normal",
      idempotencyKey: "charge-42",
      toolCallId: "call_9",
      taskId: "checkout-7",
      timeoutMs: 2_000,
    };
    expect(seen).toEqual([
      { attempt: 1, ...common },
      { attempt: 2, ...common },
    ]);
  });

  it("outside a task, without provider or key, those fields are undefined", async () => {
    const { sh } = virtualInstance();
    let ctx: CallContext | undefined;
    const read = sh.tool("lookup", { readOnly: true }, (_: undefined, c) => {
      ctx = c;
      return 1;
    });
    await read(undefined);
    expect(ctx).toMatchObject({
      attempt: 1,
      mode: "normal",
      provider: undefined,
      providerConfig: undefined,
      idempotencyKey: undefined,
      toolCallId: undefined,
      taskId: undefined,
    });
    expect(ctx?.signal.aborted).toBe(false);
  });
});

describe("reportCost", () => {
  it("adds up every report of an attempt: that sum is the attempt's cost", async () => {
    const run = retriedOnce({ name: "p", usdPerCall: 0.1 }, (ctx) => {
      ctx.reportCost(0.25);
      ctx.reportCost(0.5);
    });
    expect(await run.cost()).toBeCloseTo(0.75, 10);
  });

  it("a reported cost of zero makes a free attempt, not an unpriced one", async () => {
    const run = retriedOnce({ name: "p", usdPerCall: 0.1 }, (ctx) => {
      ctx.reportCost(0);
    });
    expect(await run.cost()).toBe(0);
  });

  it.each([
    ["negative", -1],
    ["NaN", Number.NaN],
    ["infinite", Number.POSITIVE_INFINITY],
  ])("ignores a %s cost: the provider's price applies", async (_name, usd) => {
    const run = retriedOnce({ name: "p", usdPerCall: 0.1 }, (ctx) => {
      ctx.reportCost(usd);
    });
    expect(await run.cost()).toBe(0.1);
  });

  it("ignores a bad report among good ones", async () => {
    const run = retriedOnce({ name: "p", usdPerCall: 0.1 }, (ctx) => {
      ctx.reportCost(0.5);
      ctx.reportCost(-0.25);
      ctx.reportCost(0.25);
    });
    expect(await run.cost()).toBeCloseTo(0.75, 10);
  });

  it("a first attempt reported to cost more than the task's budget is not retried", async () => {
    const { sh, clock } = virtualInstance({
      recovery: {
        random: () => 0,
        budgetUsd: 1,
        providers: [{ name: "p" }],
        plans: { SERVICE_DOWN: ["retry_once"] },
      },
    });
    let calls = 0;
    const t = sh.tool("t", { readOnly: true, providers: ["p"] }, (_: undefined, ctx) => {
      calls++;
      ctx.reportCost(2);
      throw thrownFault("http_503");
    });
    const error = await clock.run(t(undefined)).catch((e: unknown) => e);
    expect(isRecoveryBudgetExhaustedError(error)).toBe(true);
    expect(calls).toBe(1);
  });
});

describe("reportUsage", () => {
  it("adds up the tokens of every report, priced with the provider's usdPer1kTokens", async () => {
    const run = retriedOnce({ name: "p", usdPer1kTokens: 0.01, usdPerCall: 0.9 }, (ctx) => {
      ctx.reportUsage({ inputTokens: 1_000 });
      ctx.reportUsage({ outputTokens: 500 });
      ctx.reportUsage({ inputTokens: 500, outputTokens: 1_000 });
    });
    // 1,500 input + 1,500 output tokens at $0.01 per 1,000.
    expect(await run.cost()).toBeCloseTo(0.03, 10);
  });

  it("a single report with one kind of tokens counts those alone", async () => {
    const run = retriedOnce({ name: "p", usdPer1kTokens: 0.02 }, (ctx) => {
      ctx.reportUsage({ outputTokens: 2_000 });
    });
    expect(await run.cost()).toBeCloseTo(0.04, 10);
  });

  it("without a report the attempt costs the provider's per-call price", async () => {
    const run = retriedOnce({ name: "p", usdPer1kTokens: 0.02, usdPerCall: 0.3 }, () => {
      // reports nothing
    });
    expect(await run.cost()).toBe(0.3);
  });
});
