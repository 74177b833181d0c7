/**
 * One run of a tool (src/engine/attempt.ts), seen from outside: what an attempt without a route
 * costs, and that the caller's signal is let go of once the attempt ends, however it ends.
 */
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import type { CallContext, RecoveryEvent } from "../../src/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

describe("an attempt", () => {
  it("without a route costs what it reports, and nothing when it reports nothing", async () => {
    const { sh, clock } = virtualInstance({
      recovery: { plans: { SERVICE_DOWN: ["retry_once"] }, random: () => 0 },
    });
    const events: RecoveryEvent[] = [];
    sh.on("recovery", (e) => events.push(e));
    let calls = 0;
    const paid = sh.tool("paid", { readOnly: true }, (_: undefined, ctx: CallContext) => {
      ctx.reportCost(0.25);
      if (++calls === 1) throw thrownFault("http_503");
      return "ok";
    });
    await clock.run(paid(undefined));
    let free = 0;
    const unpaid = sh.tool("unpaid", { readOnly: true }, () => {
      if (++free === 1) throw thrownFault("http_503");
      return "ok";
    });
    await clock.run(unpaid(undefined));
    // The retry is recovery's spend; the first attempt's cost is not.
    expect(events.map((e) => [e.tool, e.costUsd])).toEqual([
      ["paid", 0.25],
      ["unpaid", 0],
    ]);
  });

  it("lets go of the caller's signal when it ends: an answer, an error, a timeout", async () => {
    const { sh, clock } = virtualInstance();
    const controller = new AbortController();
    const { signal } = controller;
    const ok = sh.tool("ok", { readOnly: true }, () => "fine");
    const broken = sh.tool("broken", { readOnly: true }, () => {
      throw Object.assign(new Error("bad"), { status: 400 });
    });
    const slow = sh.tool("slow", { readOnly: true, timeoutMs: 100 }, () => clock.sleep(1_000));
    await ok(undefined, { signal });
    await expect(broken(undefined, { signal })).rejects.toThrow("bad");
    await expect(clock.run(slow(undefined, { signal }))).rejects.toMatchObject({
      name: "ToolTimeoutError",
    });
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });
});
