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
    sh.on("circuit-change", (e) => {
      if (e.dependency === "openai") breaker.push({ state: e.state, minute: (e.at - t0) / MIN });
    });

    const answeredBy: { minute: number; provider: string | undefined }[] = [];
    const complete = sh.tool(
      "complete",
      { readOnly: true, kind: "llm", providers: ["openai", "anthropic"], timeoutMs: 10_000 },
      async (question: string, ctx: CallContext) => {
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
    const refunds: string[] = [];
    const refund = sh.tool(
      "issue_refund",
      { readOnly: false, idempotencyKey: (order: string) => `refund-${order}` },
      (order: string) => {
        refunds.push(order);
        return `refunded ${order}`;
      },
    );

    let failedAnswers = 0;
    const blockedWhile: HealthStatus[] = [];
    let statusNow: HealthStatus = "healthy";
    sh.on("status-change", (e) => {
      if (e.tool === undefined) statusNow = e.to;
    });
    const statuses = new Set<HealthStatus>();
    for (let n = 0; clock.now() - t0 < 60 * MIN; n++) {
      const elapsed = clock.now() - t0;
      pageDegraded = elapsed >= PAGE_DEGRADED.from && elapsed < PAGE_DEGRADED.to;
      const task = sh.task(`ticket-${n}`, async () => {
        const result = await complete.detailed(`ticket ${n}`);
        answeredBy.push({ minute: elapsed / MIN, provider: result.provider });
        try {
          await refund(`order-${n}`);
        } catch (e) {
          if (!isHealthCheckFailedError(e)) throw e;
          blockedWhile.push(statusNow);
        }
      });
      await clock.run(
        task.catch(() => failedAnswers++),
        { stepMs: 1_000 },
      );
      statuses.add(statusNow);
      await clock.advance(10_000);
    }

    // The agent kept answering, all hour long.
    expect(failedAnswers).toBe(0);
    // The secondary carried the outage; the primary is back at the end.
    const during = answeredBy.filter((a) => a.minute > 5 && a.minute < 45);
    expect(during.filter((a) => a.provider === "anthropic").length / during.length).toBeGreaterThan(
      0.9,
    );
    const after = answeredBy.filter((a) => a.minute > 52);
    expect(after.length).toBeGreaterThan(20);
    expect(after.every((a) => a.provider === "openai")).toBe(true);
    // Writes are refused only while the agent is critical. Here failover and the breaker kept it
    // answering so well that it never went critical: no refund was refused, none was doubled.
    expect(blockedWhile.every((s) => s === "critical")).toBe(true);
    expect([...statuses].filter((s) => s === "critical")).toEqual([]);
    expect(blockedWhile).toEqual([]);
    expect(refunds.length).toBe(answeredBy.length);
    expect(new Set(refunds).size).toBe(refunds.length);
    // The breaker opened early, half-opened lazily, and the last probe closed it after the outage.
    expect(breaker[0]).toMatchObject({ state: "open" });
    expect(breaker[0]?.minute).toBeLessThan(5);
    const last = breaker.slice(-2);
    expect(last.map((b) => b.state)).toEqual(["half_open", "closed"]);
    expect(last[0]?.minute).toBeGreaterThan(47);
    // One probe per half-open period: every half_open is followed by open or closed.
    breaker.forEach((b, i) => {
      if (b.state === "half_open") expect(["open", "closed"]).toContain(breaker[i + 1]?.state);
    });
    // And nobody was paged.
    expect(alerts).toEqual([]);
    await sh.close();
  });
});
