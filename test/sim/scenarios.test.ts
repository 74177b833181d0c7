import { describe, expect, it } from "vitest";
import { NO_RECOVERY, runLengthMs, runScenario, type SimResult } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import type { CallRecord } from "../../src/sim/world.js";

const scenario = (name: string) => SCENARIOS[name] ?? expect.unreachable();
const run = (name: string) => runScenario(scenario(name));

describe("scenarios on virtual time, selfheal with its defaults", () => {
  it("provider-outage: every incident recovered, no page, MTTR under a minute, the primary back after", async () => {
    const r = await run("provider-outage");
    expect(r.incidents).toBeGreaterThan(10);
    expect(r.autoRecoveryRate).toBe(1);
    expect(r.pages).toBe(0);
    expect(r.mttrSeconds).toBeLessThan(60);
    expect(r.userVisibleFailures).toBe(0);
    expect(r.callsPerProvider.anthropic).toBeGreaterThan(100); // the secondary carried the outage
    expect(r.timeline.some((e) => e.text === "openai breaker closed")).toBe(true); // and the primary came back
  });

  it("wording-drift: the UNKNOWN share rises and the drift alert fires; wording never opens a breaker", async () => {
    const r = await run("wording-drift");
    expect(r.driftEvents).toBeGreaterThanOrEqual(1);
    expect(r.timeline.find((e) => e.kind === "drift")?.text).toContain("Request budget spent");
    // Unknown errors get one retry, then the next provider: no user sees them, nobody is paged.
    expect(r.incidents).toBeGreaterThan(50);
    expect(r.userVisibleFailures).toBe(0);
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
    expect(r.userVisibleFailures).toBe(0);
    expect(r.callsPerProvider.anthropic).toBeGreaterThan(r.tasks / 2);
  });

  it("silent-failure: empty answers are caught and retried, none reaches a user", async () => {
    const r = await run("silent-failure");
    expect(r.incidents).toBeGreaterThan(20);
    expect(r.recovered).toBe(r.incidents);
    expect(r.userVisibleFailures).toBe(0);
  });

  it("rate-limit-storm: every 429 is absorbed; with Retry-After no retry is sent early, without it some are", async () => {
    const r = await run("rate-limit-storm");
    expect(r.incidents).toBeGreaterThan(20);
    expect(r.autoRecoveryRate).toBe(1);
    expect(r.userVisibleFailures).toBe(0);
    // The backoff cannot know when a throttled period without Retry-After ends: it probes early.
    expect(r.wastedRetries).toBeGreaterThan(0);
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
    expect(r.userVisibleFailures).toBe(0);
    expect(r.wastedRetries).toBe(0);
  });

  it("bad-request-storm: context-length 400s fail over without a same-route retry; a revoked key pages once, is never retried", async () => {
    const r = await run("bad-request-storm");
    expect(r.wastedRetries).toBe(0);
    expect(r.callsPerProvider.anthropic).toBeGreaterThan(20); // the long prompts went there
    // Every payment in the 10 min of the revoked key fails (a person must rotate it): 3 agents x 20.
    expect(r.userVisibleFailures).toBe(60);
    expect(r.callsPerProvider.payments).toBe(r.tasks); // one request per payment, none retried
    expect(r.pages).toBe(1);
    expect(r.timeline.filter((e) => e.kind === "escalation")).toHaveLength(1);
  });

  it("ghost-write: writes applied behind a client timeout are retried with the key and never charged twice", async () => {
    const r = await run("ghost-write");
    expect(r.incidents).toBeGreaterThan(10); // writes that timed out and were retried
    expect(r.callsPerProvider.payments).toBeGreaterThan(r.tasks);
    expect(r.doubleCharges).toBe(0);
    expect(r.userVisibleFailures).toBe(0);
  });

  it("blip: a 6 s outage of the primary costs no user anything, and traffic is back on it within 30 s", async () => {
    const calls: CallRecord[] = [];
    const r = await runScenario(SCENARIOS.blip ?? expect.unreachable(), {
      onCall: (c) => calls.push(c),
    });
    expect(r.userVisibleFailures).toBe(0);
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
    expect(r.userVisibleFailures).toBe(0);
    expect(r.pages).toBe(0);
    expect(r.callsPerProvider.payments).toBe(r.tasks + 1);
    expect(r.timeline.filter((e) => e.kind === "circuit")).toEqual([]);
    expect(r.timeline.filter((e) => e.kind === "status" && e.text.includes("critical"))).toEqual(
      [],
    );
  });

  it("is deterministic: the same scenario gives the same figures", async () => {
    expect(await run("provider-outage")).toEqual(await run("provider-outage"));
  });
});

describe("the same scenarios without selfheal (the demo's second column)", () => {
  it("provider-outage: 170 user-visible failures and 5 pages without selfheal, where selfheal has 0 and 0", async () => {
    const without = await runScenario(scenario("provider-outage"), { policy: NO_RECOVERY });
    expect(without).toMatchObject({
      policy: "no recovery",
      userVisibleFailures: 170,
      pages: 5,
      recovered: 0,
      autoRecoveryRate: 0,
      mttrSeconds: null,
      recoveryCostUsd: 0,
    });
    // One request per call, to the primary: nothing retried, nothing failed over.
    expect(Object.keys(without.callsPerProvider).sort()).toEqual(["openai", "payments"]);
  });

  it.each(Object.keys(SCENARIOS))(
    "%s: without selfheal users see failures, and never fewer than with it",
    async (name) => {
      const withSelfheal = await run(name);
      const without = await runScenario(scenario(name), { policy: NO_RECOVERY });
      expect(without.userVisibleFailures).toBeGreaterThan(0);
      expect(without.userVisibleFailures).toBeGreaterThanOrEqual(withSelfheal.userVisibleFailures);
      expect(without.pages).toBeGreaterThan(0);
      expect(without.recovered).toBe(0);
      expect(without.tasks).toBe(withSelfheal.tasks);
    },
  );
});

/** Incidents the timeline tells: one per kind told alone, or the count of its closing line. */
function toldIncidents(r: SimResult): number {
  const titles = r.timeline.filter((e) => e.kind === "incident").map((e) => e.text);
  let n = 0;
  for (const title of titles) {
    const closing = r.timeline.find(
      (e) => (e.kind === "recovered" || e.kind === "failed") && e.text.startsWith(`${title} on `),
    );
    n += closing ? Number(/ on (\d+) calls from /.exec(closing.text)?.[1]) : 1;
  }
  return n;
}

describe("incidents and recoveries in the timeline", () => {
  it.each(Object.keys(SCENARIOS))(
    "%s: each incident's kind is told when it starts, with how its first call ended; the timeline's counts add up to the figures",
    async (name) => {
      const r = await run(name);
      const incident = r.timeline.find((e) => e.kind === "incident");
      expect(incident?.text).toMatch(/^(complete|charge): /);
      expect(r.timeline.some((e) => e.kind === "recovered" || e.kind === "failed")).toBe(true);
      expect(toldIncidents(r)).toBe(r.incidents);
      // In time order, as the demo prints it live.
      const times = r.timeline.map((e) => e.atMs);
      expect(times).toEqual([...times].sort((a, b) => a - b));
    },
  );

  it("blip: the 6 s outage's one incident, and its call answered by the secondary", async () => {
    const r = await run("blip");
    const told = r.timeline.filter((e) => ["incident", "recovered", "failed"].includes(e.kind));
    expect(told.map((e) => [e.kind, e.text.replace(/\d+\.\d s/, "N s")])).toEqual([
      ["incident", "complete: openai failed (5xx)"],
      [
        "recovered",
        expect.stringMatching(
          /^complete answered by anthropic N s after the failure \(\d requests\)$/,
        ),
      ],
    ]);
    expect(told[0]?.atMs).toBeGreaterThanOrEqual(10 * 60_000);
    expect(told[1]?.atMs).toBeLessThan(10 * 60_000 + 30_000);
  });

  it("single-route-500: the one 500, and the write answered on the same route by its retry", async () => {
    const r = await run("single-route-500");
    const told = r.timeline.filter((e) => ["incident", "recovered", "failed"].includes(e.kind));
    expect(told.map((e) => e.text)).toEqual([
      "charge: payments failed (5xx)",
      expect.stringMatching(
        /^charge answered by payments \d+\.\d s after the failure \(2 requests\)$/,
      ),
    ]);
  });

  it("bad-request-storm: the revoked key's calls are told as failed for users, with their count", async () => {
    const r = await run("bad-request-storm");
    expect(r.timeline.find((e) => e.kind === "failed" && e.text.includes(" on "))?.text).toBe(
      "charge: payments refused the key (401) on 60 calls from 40:00 to 49:50: 0 answered, 60 failed for users",
    );
  });

  it("the last onMinute is the run's end: the demo's progress line ends at its length", async () => {
    const s = scenario("single-route-500");
    const minutes: number[] = [];
    await runScenario(s, { onMinute: (ms) => void minutes.push(ms) });
    expect(minutes.at(-1)).toBe(runLengthMs(s));
    expect(runLengthMs(s)).toBe(70 * 60_000);
  });
});
