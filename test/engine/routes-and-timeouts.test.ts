import { describe, expect, it } from "vitest";
import { virtualInstance } from "../helpers/engine.js";

/** A 503 from the provider: structured evidence that the route is unwell. */
const unavailable = () => Object.assign(new Error("Service Unavailable"), { status: 503 });

describe("a route shared by tools", () => {
  it("a single-route tool's successes count on a breaker another tool may trip", async () => {
    const { sh } = virtualInstance({
      recovery: {
        providers: [{ name: "p1" }, { name: "p2" }],
        plans: { SERVICE_DOWN: [] },
      },
    });
    const circuits: string[] = [];
    sh.on("circuit-change", (e) => circuits.push(`${e.dependency}:${e.state}`));
    // "search" has a second route, so p1's breaker may trip; "lookup" uses only p1.
    sh.tool("search", { readOnly: true, providers: ["p1", "p2"] }, () => "ok");
    let n = 0;
    const lookup = sh.tool("lookup", { readOnly: true, provider: "p1" }, () => {
      if (n++ % 3 === 0) throw unavailable();
      return "ok";
    });
    // One failure in three: under the breaker's 50% failure rate.
    for (let i = 0; i < 30; i++) await lookup(undefined).catch(() => undefined);
    expect(n).toBe(30);
    expect(circuits).toEqual([]);
  });
});

describe("retry_with_longer_timeout on a tool without a timeout", () => {
  it("doubles recovery.baseTimeoutMs, not the call's deadline", async () => {
    const { sh, clock } = virtualInstance({
      recovery: {
        baseTimeoutMs: 1_000,
        deadlineMs: 100_000,
        plans: { TIMEOUT: [{ strategy: "retry_with_longer_timeout", attempts: 3 }] },
      },
    });
    const seen: (number | undefined)[] = [];
    const slow = sh.tool("slow", { readOnly: true }, (_: undefined, ctx) => {
      seen.push(ctx.timeoutMs);
      // The SDK's own timeout, as a client library raises it.
      throw Object.assign(new Error("request timed out"), { code: "ETIMEDOUT" });
    });
    expect((await sh.diagnose(Object.assign(new Error("x"), { code: "ETIMEDOUT" }))).pattern).toBe(
      "TIMEOUT",
    );
    await clock.run(slow(undefined).catch(() => undefined));
    expect(seen).toEqual([100_000, 2_000, 4_000, 8_000]);
  });
});
