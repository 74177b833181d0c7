import { describe, expect, it } from "vitest";
import { runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import type { CallRecord } from "../../src/sim/world.js";

const run = (name: string) => runScenario(SCENARIOS[name] ?? expect.unreachable());

describe("scenarios on virtual time, selfheal with its defaults", () => {
  it("provider-outage: every incident recovered, no page, MTTR under a minute, the primary back after", async () => {
    const r = await run("provider-outage");
    expect(r.incidents).toBeGreaterThan(10);
    expect(r.auto_recovery_rate).toBe(1);
    expect(r.pages).toBe(0);
    expect(r.mttr_seconds).toBeLessThan(60);
    expect(r.user_visible_failures).toBe(0);
    expect(r.calls_per_provider.anthropic).toBeGreaterThan(100); // the secondary carried the outage
    expect(r.timeline.some((e) => e.text === "openai breaker closed")).toBe(true); // and the primary came back
  });

  it("wording-drift: the UNKNOWN share rises and the drift alert fires; wording never opens a breaker", async () => {
    const r = await run("wording-drift");
    expect(r.drift_events).toBeGreaterThanOrEqual(1);
    expect(r.timeline.find((e) => e.kind === "drift")?.text).toContain("Request budget spent");
    // Unknown errors get one retry, then the next provider: no user sees them, nobody is paged.
    expect(r.incidents).toBeGreaterThan(50);
    expect(r.user_visible_failures).toBe(0);
    expect(r.pages).toBe(0);
    // Status-less errors are wording alone: they never touch shared state (no breaker opens).
    expect(r.timeline.filter((e) => e.kind === "circuit")).toEqual([]);
  });

  it("flapping-dependency: the breaker's open period grows to its cap instead of flapping along; nobody is paged", async () => {
    const r = await run("flapping-dependency");
    const opens = r.timeline.filter((e) => e.text === "openai breaker open").map((e) => e.atMs);
    expect(opens.length).toBeGreaterThanOrEqual(1);
    expect(opens.length).toBeLessThan(60); // fewer than the 60 down phases
    const gaps = opens.slice(1).map((at, i) => at - (opens[i] ?? 0));
    expect(Math.max(...gaps)).toBeGreaterThanOrEqual(5 * 60_000); // doubled up to the 5 min cap
    expect(r.pages).toBe(0);
    expect(r.user_visible_failures).toBe(0);
    expect(r.calls_per_provider.anthropic).toBeGreaterThan(r.tasks / 2);
  });

  it("silent-failure: empty answers are caught and retried, none reaches a user", async () => {
    const r = await run("silent-failure");
    expect(r.incidents).toBeGreaterThan(20);
    expect(r.recovered).toBe(r.incidents);
    expect(r.user_visible_failures).toBe(0);
  });

  it("rate-limit-storm: every 429 is absorbed; with Retry-After no retry is sent early, without it some are", async () => {
    const r = await run("rate-limit-storm");
    expect(r.incidents).toBeGreaterThan(20);
    expect(r.auto_recovery_rate).toBe(1);
    expect(r.user_visible_failures).toBe(0);
    // The backoff cannot know when a throttled period without Retry-After ends: it probes early.
    expect(r.wasted_retries).toBeGreaterThan(0);
    // A throttle is not an outage: no breaker opens on the payments API.
    expect(r.timeline.filter((e) => e.kind === "circuit")).toEqual([]);
  });

  it("rate-limit-storm, Retry-After only: no retry is sent before the throttled period ends", async () => {
    const scenario = SCENARIOS["rate-limit-storm"] ?? expect.unreachable();
    const r = await runScenario({
      ...scenario,
      faults: scenario.faults.filter((f) => f.fault.kind === "rate_limit" && f.fault.retryAfter),
    });
    expect(r.incidents).toBeGreaterThan(5);
    expect(r.user_visible_failures).toBe(0);
    expect(r.wasted_retries).toBe(0);
  });

  it("bad-request-storm: context-length 400s fail over without a same-route retry; a revoked key pages once, is never retried", async () => {
    const r = await run("bad-request-storm");
    expect(r.wasted_retries).toBe(0);
    expect(r.calls_per_provider.anthropic).toBeGreaterThan(20); // the long prompts went there
    // Every payment in the 10 min of the revoked key fails (a person must rotate it): 3 agents x 20.
    expect(r.user_visible_failures).toBe(60);
    expect(r.calls_per_provider.payments).toBe(r.tasks); // one request per payment, none retried
    expect(r.pages).toBe(1);
    expect(r.timeline.filter((e) => e.kind === "escalation")).toHaveLength(1);
  });

  it("ghost-write: writes applied behind a client timeout are retried with the key and never charged twice", async () => {
    const r = await run("ghost-write");
    expect(r.incidents).toBeGreaterThan(10); // writes that timed out and were retried
    expect(r.calls_per_provider.payments).toBeGreaterThan(r.tasks);
    expect(r.double_charges).toBe(0);
    expect(r.user_visible_failures).toBe(0);
  });

  it("blip: a 6 s outage of the primary costs no user anything, and traffic is back on it within 30 s", async () => {
    const calls: CallRecord[] = [];
    const r = await runScenario(SCENARIOS.blip ?? expect.unreachable(), {
      onCall: (c) => calls.push(c),
    });
    expect(r.user_visible_failures).toBe(0);
    expect(r.pages).toBe(0);
    const end = 10 * 60_000 + 6_000;
    const after = calls.filter((c) => c.op === "complete" && c.startMs > end + 30_000);
    expect(after.length).toBeGreaterThan(100);
    expect(after.filter((c) => c.attempts.at(-1)?.dependency !== "openai")).toEqual([]);
  });

  it("single-route-500: one 500 on the payments API is retried once; writes go on, no breaker, no read-only", async () => {
    const r = await run("single-route-500");
    expect(r.incidents).toBe(1);
    expect(r.recovered).toBe(1);
    expect(r.user_visible_failures).toBe(0);
    expect(r.pages).toBe(0);
    expect(r.calls_per_provider.payments).toBe(r.tasks + 1);
    expect(r.timeline.filter((e) => e.kind === "circuit")).toEqual([]);
    expect(r.timeline.filter((e) => e.kind === "status" && e.text.includes("critical"))).toEqual(
      [],
    );
  });

  it("is deterministic: the same scenario gives the same figures", async () => {
    expect(await run("provider-outage")).toEqual(await run("provider-outage"));
  });
});
