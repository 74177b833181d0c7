import { describe, expect, it } from "vitest";
import type { StatusChangeEvent } from "../../src/index.js";
import { virtualInstance } from "../helpers/engine.js";

describe("status over 1,000 virtual-time calls with a changing failure mix", () => {
  it("goes healthy -> warning -> critical -> healthy exactly where the success rate crosses 0.8 and 0.5", async () => {
    // A 2 min window with a 20 s recent part, so 1,000 calls at 4 per virtual second span it twice.
    const { sh, clock } = virtualInstance({
      health: { windows: { callWindowMs: 120_000, recentWindowMs: 20_000 } },
    });
    const changes: StatusChangeEvent[] = [];
    sh.on("status-change", (e) => {
      if (e.tool === undefined) changes.push(e);
    });
    // Failure share per phase of 250 calls (62.5 s): 0 %, 50 %, 90 %, 0 %.
    const failEvery = [0, 0.5, 0.9, 0];
    let n = 0;
    const flaky = sh.tool("flaky", { readOnly: true }, () => {
      const share = failEvery[Math.floor(n / 250)] ?? 0;
      const failed = n % 10 < share * 10;
      n++;
      if (failed) throw new Error("upstream 503");
      return "ok";
    });
    const seen: string[] = [];
    for (let i = 0; i < 1_000; i++) {
      await flaky(undefined).catch(() => undefined);
      const status = (await sh.status()).status;
      if (seen.at(-1) !== status) seen.push(status);
      await clock.advance(250);
    }

    expect(seen).toEqual(["healthy", "warning", "critical", "healthy"]);
    expect(changes.map((c) => `${c.from}->${c.to}`)).toEqual([
      "healthy->warning",
      "warning->critical",
      "critical->healthy",
    ]);
    const rateAt = (c: StatusChangeEvent) =>
      c.signals.find((s) => s.signal === "success_rate")?.value ?? NaN;
    const [warning, critical, healthy] = changes as [
      StatusChangeEvent,
      StatusChangeEvent,
      StatusChangeEvent,
    ];
    expect(rateAt(warning)).toBeLessThan(0.8);
    expect(rateAt(warning)).toBeGreaterThanOrEqual(0.5);
    expect(rateAt(critical)).toBeLessThan(0.5);
    // Recovery is decided by the recent 20 s alone: the whole window is still degraded.
    const recovered = healthy.signals.find((s) => s.signal === "success_rate");
    expect(recovered?.recent).toBeGreaterThanOrEqual(0.8);
    expect(rateAt(healthy)).toBeLessThan(0.8);
    // Each change happens in its phase (calls 250-499, 500-749, 750-999 = seconds 62.5, 125, 187.5 on).
    const t0 = Date.UTC(2026, 0, 1);
    expect((warning.at - t0) / 1000).toBeGreaterThan(62.5);
    expect((warning.at - t0) / 1000).toBeLessThan(125);
    expect((critical.at - t0) / 1000).toBeGreaterThan(125);
    expect((critical.at - t0) / 1000).toBeLessThan(187.5);
    expect((healthy.at - t0) / 1000).toBeGreaterThan(187.5);
    expect((healthy.at - t0) / 1000).toBeLessThan(250);
  });
});
