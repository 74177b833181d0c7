import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSelfHealing,
  isHealthCheckFailedError,
  type BreakerState,
  type CallContext,
  type HealthStatus,
} from "../../src/index.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { seededRandom, VirtualClock } from "../../src/testing/index.js";
import { startServer } from "../helpers/http-server.js";

const MIN = 60_000;
const OUTAGE_END = 47 * MIN;
/** The provider's status page admits the incident late, and clears it late. */
const PAGE_DEGRADED = { from: 12 * MIN, to: 50 * MIN };

let pageDegraded = false;
let page: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  page = await startServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: { indicator: pageDegraded ? "major" : "none" } }));
  });
});
afterAll(async () => {
  await page.close();
});

describe("the incident: primary LLM provider at 60% timeouts for 47 minutes", () => {
  it("keeps answering through the secondary, refuses no write it need not, probes once back to the primary, pages no one", async () => {
    const clock = new VirtualClock();
    const t0 = clock.now();
    const random = seededRandom(2026);
    const alerts: Alert[] = [];
    const pager: Notifier = { channel: "pager", send: (a) => Promise.resolve(void alerts.push(a)) };
    const sh = createSelfHealing({
      agent: "support-bot",
      clock,
      logger: { warn: () => undefined },
      diagnosis: { statusPages: { openai: page.url } },
      recovery: {
        random,
        notifiers: [pager],
        providers: [
          { name: "openai", usdPerCall: 0.002 },
          { name: "anthropic", usdPerCall: 0.003 },
        ],
      },
    });
    const breaker: { state: BreakerState; minute: number }[] = [];
    /** Each half-open period of the primary: requests it got, and calls answered meanwhile. */
    const halfOpen: { openai: number; others: number }[] = [];
    const burst: Promise<unknown>[] = [];
    sh.on("circuit-change", (e) => {
      if (e.dependency !== "openai") return;
      const was = breaker.at(-1)?.state;
      breaker.push({ state: e.state, minute: (e.at - t0) / MIN });
      if (e.state !== "half_open" || was === "half_open") return; // a second probe: same period
      halfOpen.push({ openai: 0, others: 0 });
      // A burst of tickets arrives while the probe is out (it takes 500 ms at the least).
      for (const ms of [100, 200, 300]) {
        clock.setTimer(ms, () => burst.push(complete("burst ticket").catch((e: unknown) => e)));
      }
    });

    const answeredBy: { minute: number; provider: string | undefined }[] = [];
    const complete = sh.tool(
      "complete",
      { readOnly: true, kind: "llm", providers: ["openai", "anthropic"], timeoutMs: 10_000 },
      async (question: string, ctx: CallContext) => {
        if (breaker.at(-1)?.state === "half_open") {
          const period = halfOpen.at(-1);
          if (period && ctx.provider === "openai") period.openai++;
          else if (period) period.others++;
        }
        const outage = ctx.provider === "openai" && clock.now() - t0 < OUTAGE_END;
        if (outage && random() < 0.6) {
          await new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              reject(ctx.signal.reason);
            });
          });
        }
        await clock.sleep(outage ? 3_000 : ctx.provider === "openai" ? 500 : 800, ctx.signal);
        return `answer to ${question}`;
      },
    );
    /**
     * The payments API, as Stripe behaves: a request whose idempotency key it has seen gets the
     * first answer and moves no money. It counts the refunds it made per order, and for every
     * 7th order it makes the refund but the response is lost (the client times out and retries).
     */
    const payments = {
      requests: 0,
      lost: 0,
      refundsByOrder: new Map<string, number>(),
      byKey: new Map<string, string>(),
    };
    const refund = sh.tool(
      "issue_refund",
      { readOnly: false, idempotencyKey: (order: string) => `refund-${order}`, timeoutMs: 5_000 },
      async (order: string, ctx: CallContext) => {
        payments.requests++;
        const known =
          ctx.idempotencyKey === undefined ? undefined : payments.byKey.get(ctx.idempotencyKey);
        if (known !== undefined) return known;
        const refunds = (payments.refundsByOrder.get(order) ?? 0) + 1;
        payments.refundsByOrder.set(order, refunds);
        const receipt = `refunded ${order}`;
        if (ctx.idempotencyKey !== undefined) payments.byKey.set(ctx.idempotencyKey, receipt);
        if (refunds === 1 && payments.refundsByOrder.size % 7 === 0) {
          payments.lost++;
          await new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              reject(ctx.signal.reason);
            });
          });
        }
        return receipt;
      },
    );

    let failedAnswers = 0;
    const refused: unknown[] = [];
    const agentStatuses: HealthStatus[] = [];
    sh.on("status-change", (e) => {
      if (e.tool === undefined) agentStatuses.push(e.to);
    });
    const orders = new Set<string>();
    let replayed = 0;
    for (let n = 0; clock.now() - t0 < 60 * MIN; n++) {
      const elapsed = clock.now() - t0;
      pageDegraded = elapsed >= PAGE_DEGRADED.from && elapsed < PAGE_DEGRADED.to;
      // Every 10th ticket is a customer asking again for the previous ticket's refund.
      const order = n % 10 === 9 ? `order-${n - 1}` : `order-${n}`;
      const task = sh.task(`ticket-${n}`, async () => {
        const result = await complete.detailed(`ticket ${n}`);
        answeredBy.push({ minute: elapsed / MIN, provider: result.provider });
        try {
          if ((await refund.detailed(order)).replayed) replayed++;
          orders.add(order);
        } catch (e) {
          if (!isHealthCheckFailedError(e)) throw e;
          refused.push(e);
        }
      });
      await clock.run(
        task.catch(() => failedAnswers++),
        { stepMs: 1_000 },
      );
      await clock.advance(10_000);
    }
    const burstOutcomes = await clock.run(Promise.all(burst));

    // The agent kept answering, all hour long.
    expect(failedAnswers).toBe(0);
    // One probe per half-open period: the tickets that arrived while a probe was out were answered
    // by the secondary, none sent to the primary as a further probe.
    expect(halfOpen.length).toBeGreaterThanOrEqual(2);
    expect(halfOpen.filter((p) => p.openai !== 1)).toEqual([]);
    expect(halfOpen.filter((p) => p.others < 3)).toEqual([]);
    expect(burstOutcomes.filter((o) => o !== "answer to burst ticket")).toEqual([]);
    // The secondary carried the outage (each probe that closed the breaker let a few calls try
    // the sick primary before it tripped again, for longer each time); the primary is back at the end.
    const during = answeredBy.filter((a) => a.minute > 5 && a.minute < 45);
    expect(during.filter((a) => a.provider === "anthropic").length / during.length).toBeGreaterThan(
      0.8,
    );
    const opens = breaker.filter((b) => b.state === "open").map((b) => b.minute);
    const gaps = opens.slice(1).map((m, i) => m - (opens[i] ?? 0));
    expect(Math.max(...gaps)).toBeGreaterThan(4); // grown from 5 s towards the 5 min cap
    const after = answeredBy.filter((a) => a.minute > 52);
    expect(after.length).toBeGreaterThan(20);
    expect(after.every((a) => a.provider === "openai")).toBe(true);
    // Writes are refused only while the agent is critical. Here failover and the breaker kept it
    // answering so well that it never went critical (in any transition): no refund was refused.
    expect(agentStatuses.filter((s) => s === "critical")).toEqual([]);
    expect(refused).toEqual([]);
    // None was doubled, though refunds were sent again: each lost response was retried with the
    // same key (the API answered from its key), each repeated ticket replayed from the ledger.
    expect(payments.lost).toBeGreaterThan(10);
    expect(payments.requests).toBe(orders.size + payments.lost);
    expect(replayed).toBe(answeredBy.length - orders.size);
    expect(replayed).toBeGreaterThan(10);
    expect([...payments.refundsByOrder.keys()].sort()).toEqual([...orders].sort());
    expect([...payments.refundsByOrder.values()].filter((n) => n !== 1)).toEqual([]);
    // The breaker opened early, half-opened lazily, and the last probe closed it after the outage.
    expect(breaker[0]).toMatchObject({ state: "open" });
    expect(breaker[0]?.minute).toBeLessThan(5);
    const last = breaker.slice(-2);
    expect(last.map((b) => b.state)).toEqual(["half_open", "closed"]);
    expect(last[0]?.minute).toBeGreaterThan(40); // a probe can pass on a 40%-healthy primary
    // One probe per half-open period: every half_open is followed by open or closed.
    breaker.forEach((b, i) => {
      if (b.state === "half_open") expect(["open", "closed"]).toContain(breaker[i + 1]?.state);
    });
    // And nobody was paged.
    expect(alerts).toEqual([]);
    await sh.close();
  });
});
