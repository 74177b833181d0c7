// Waits sized to evidence (issue 27): a call that finds every route open fails fast unless the
// probe is due within recovery.maxProbeWaitMs, and a diagnosis resting on wording alone buys one
// short retry. Every duration here is virtual time, measured from the call to its settling.
import { describe, expect, it } from "vitest";
import {
  isCircuitOpenError,
  isHumanEscalationRequiredError,
  type RecoveryEvent,
  type RecoveryOptions,
} from "../../src/index.js";
import { seededRandom, thrownFault, type VirtualClock } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

const S = 1_000;

/** An instance with the default plans (no notifier), jitter from `random`, and its events. */
function setup(recovery: RecoveryOptions = {}) {
  const vi = virtualInstance({ recovery: { random: () => 0, ...recovery } });
  const events: RecoveryEvent[] = [];
  vi.sh.on("recovery", (e) => events.push(e));
  return { ...vi, events };
}

/** Runs a call on virtual time: how it settled and how long it took (virtual ms). */
async function timed<T>(clock: VirtualClock, call: () => Promise<T>) {
  const start = clock.now();
  let end = start;
  const settled = call().then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error }),
  );
  const out = await clock.run(
    settled.finally(() => (end = clock.now())),
    { stepMs: 50 },
  );
  return { ...out, ms: end - start };
}

/** `count` calls of `call`, `thinkMs` apart (an agent loop): each one's outcome and cost. */
async function loop<T>(
  clock: VirtualClock,
  count: number,
  thinkMs: number,
  call: () => Promise<T>,
) {
  const calls: Awaited<ReturnType<typeof timed<T>>>[] = [];
  for (let i = 0; i < count; i++) {
    calls.push(await timed(clock, call));
    await clock.advance(thinkMs);
  }
  return calls;
}

/** A tool whose only route answers 503 to every request; `sent` counts the requests. */
function deadRoute(sh: ReturnType<typeof setup>["sh"]) {
  const sent: number[] = [];
  const lookup = sh.tool("lookup", { readOnly: true }, (_q: string) => {
    sent.push(1);
    throw thrownFault("http_503");
  });
  return { lookup, sent };
}

describe("a call that finds every route open fails fast unless the probe is due within recovery.maxProbeWaitMs", () => {
  it("a dead single-route dependency costs each of 10 successive callers at most 2 s (it was 0.5, 5, 10, 20, 40 s)", async () => {
    const { sh, clock } = setup();
    const { lookup, sent } = deadRoute(sh);
    const calls = await loop(clock, 10, 1 * S, () => lookup("q"));
    const costs = calls.map((c) => c.ms);
    expect(Math.max(...costs)).toBeLessThanOrEqual(2 * S);
    // The first call found out (a quick retry after 250 ms, then the breaker opened for 5 s); the
    // caller that came 1.9 s before the probe was due waited for it and was the probe (it failed:
    // open for 10 s); every other call failed at once, told when to come back.
    expect(costs).toEqual([250, 0, 0, 1_900, 0, 0, 0, 0, 0, 0]);
    for (const [i, call] of calls.entries()) {
      if (costs[i] === 0) {
        expect(isCircuitOpenError(call.error)).toBe(true);
        expect((call.error as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(2 * S);
      } else {
        expect(isHumanEscalationRequiredError(call.error)).toBe(true); // a request went out
      }
    }
    expect(sent).toHaveLength(3); // the first call and its retry, one probe: never a stampede
  });

  it("back to back, with jitter: no call waits longer than the bound, the open period keeps growing", async () => {
    const { sh, clock } = setup({ random: seededRandom(27) });
    const { lookup, sent } = deadRoute(sh);
    const calls = await loop(clock, 40, 250, () => lookup("q"));
    const costs = calls.map((c) => c.ms);
    expect(Math.max(...costs)).toBeLessThanOrEqual(2 * S);
    expect(costs.filter((ms) => ms === 0).length).toBeGreaterThan(30); // most fail at once
    // 40 calls over ~20 s of a dead route: the first with its retry, then one probe per open
    // period (5 s, then 10 s): it is left alone between them.
    expect(sent.length).toBeLessThanOrEqual(4);
  });

  it("the bound is recovery.maxProbeWaitMs: 0 never waits, a larger one waits for the probe", async () => {
    const never = setup({ maxProbeWaitMs: 0 });
    const dead = deadRoute(never.sh);
    await timed(never.clock, () => dead.lookup("q")); // opens the breaker for 5 s
    await never.clock.advance(4_900);
    const close = await timed(never.clock, () => dead.lookup("q")); // the probe is 100 ms away
    expect(close.ms).toBe(0);
    expect(isCircuitOpenError(close.error)).toBe(true);
    expect((close.error as { retryAfterMs: number }).retryAfterMs).toBe(100);

    const patient = setup({ maxProbeWaitMs: 10 * S });
    let up = false;
    const t = patient.sh.tool("lookup", { readOnly: true }, () => {
      if (!up) throw thrownFault("http_503");
      return "found";
    });
    await timed(patient.clock, () => t(undefined)); // opens it for 5 s
    up = true;
    const waited = await timed(patient.clock, () => t(undefined));
    expect(waited).toMatchObject({ value: "found" });
    expect(waited.ms).toBe(5 * S); // the whole open period: it opened as the first call ended
  });
});

describe("throttling is not an outage", () => {
  it("a route cooling down after a 429 (Retry-After: 10) is waited for within the deadline: no probe to wait for, the call is answered", async () => {
    const { sh, clock } = setup();
    let throttled = true;
    const sentAt: number[] = [];
    const t = sh.tool("search", { readOnly: true }, (_q: string) => {
      sentAt.push(clock.now());
      if (throttled) {
        throttled = false;
        throw thrownFault("rate_limit", { retryAfterSeconds: 10 });
      }
      return "found";
    });
    const first = t("a");
    first.catch(() => undefined);
    await clock.advance(1 * S);
    const second = await timed(clock, () => t("b")); // the route cools down for 9 s more
    expect(second).toMatchObject({ value: "found", ms: 9 * S });
    await expect(clock.run(first)).resolves.toBe("found");
    expect(sentAt.map((at) => at - (sentAt[0] ?? 0))).toEqual([0, 10 * S, 10 * S]); // none early
  });
});

describe("wording-only evidence buys one short retry", () => {
  /**
   * A lookup whose error echoes the user's own text: no status, no code, no SDK class. The
   * default rules read "rate limit exceeded" in it (RATE_LIMIT, from wording alone).
   */
  const echo = () => new Error('no document titled "rate limit exceeded"');

  it("a single-route tool whose error echoes 'rate limit exceeded' fails within 2 s after one retry of at most 1 s (it was 31-39 s of backoff)", async () => {
    const { sh, clock, events } = setup({ random: seededRandom(1) });
    const diagnoses: { pattern: string; evidence: string }[] = [];
    sh.on("diagnosis", (d) => diagnoses.push({ pattern: d.pattern, evidence: d.evidence }));
    const sentAt: number[] = [];
    const search = sh.tool("search", { readOnly: true }, (_q: string) => {
      sentAt.push(clock.now());
      throw echo();
    });
    const out = await timed(clock, () => search("rate limit exceeded"));
    expect(out.error).toBeInstanceOf(Error);
    expect((out.error as Error).message).toContain("rate limit exceeded"); // the tool's own error
    expect(out.ms).toBeLessThanOrEqual(2 * S);
    expect(diagnoses[0]).toEqual({ pattern: "RATE_LIMIT", evidence: "wording" });
    expect(sentAt).toHaveLength(2); // the call and one retry
    expect((sentAt[1] ?? 0) - (sentAt[0] ?? 0)).toBeLessThanOrEqual(1 * S);
    expect(events[0]?.steps).toEqual([
      { strategy: "retry_once" },
      { strategy: "failover_to_secondary", skipped: "the tool has no secondary provider" },
      {
        strategy: "exponential_backoff_with_jitter",
        skipped: "without a status, code or error class, a call gets one short retry, already made",
      },
      { strategy: "escalate_to_human", skipped: "wording alone never acts beyond the call" },
    ]);
  });

  it("ten such calls in a row each fail within 2 s, and nothing is switched off: no breaker, no cooldown", async () => {
    const { sh, clock } = setup({ random: seededRandom(2) });
    const circuits: string[] = [];
    sh.on("circuit-change", (e) => circuits.push(e.state));
    let sent = 0;
    const search = sh.tool("search", { readOnly: true }, (_q: string) => {
      sent++;
      throw echo();
    });
    const calls = await loop(clock, 10, 0, () => search("rate limit exceeded"));
    expect(Math.max(...calls.map((c) => c.ms))).toBeLessThanOrEqual(2 * S);
    expect(sent).toBe(20);
    expect(circuits).toEqual([]);
  });

  it("with a second route: one retry, then failover, still within 2 s", async () => {
    const { sh, clock } = setup({ providers: [{ name: "a" }, { name: "b" }] });
    const tried: (string | undefined)[] = [];
    const search = sh.tool(
      "search",
      { readOnly: true, providers: ["a", "b"] },
      (_q: string, ctx) => {
        tried.push(ctx.provider);
        throw echo();
      },
    );
    const out = await timed(clock, () => search("q"));
    expect(out.ms).toBeLessThanOrEqual(2 * S);
    expect(tried).toEqual(["a", "a", "b"]); // another route is not a retry: it still runs
  });

  it("a plan that starts with backoff (wording-only JSON_PARSE_ERROR) gets one retry after 1 s, not five", async () => {
    const { sh, clock } = setup({ random: () => 0.99 }); // the most jitter: 1.3 s, cut to 1 s
    const sentAt: number[] = [];
    const parse = sh.tool("parse", { readOnly: true }, () => {
      sentAt.push(clock.now());
      throw new Error("the model returned malformed JSON");
    });
    const out = await timed(clock, () => parse(undefined));
    expect(sentAt.map((t) => t - (sentAt[0] ?? 0))).toEqual([0, 1 * S]);
    expect(out.ms).toBe(1 * S);
  });

  it("a server's longer wait is never cut for wording alone: the retry is skipped, the call fails at once", async () => {
    const { sh, clock, events } = setup();
    let sent = 0;
    const t = sh.tool("lookup", { readOnly: true }, () => {
      sent++;
      // Text and a Retry-After header, but nothing structured for a rule to match on.
      throw Object.assign(new Error("rate limit exceeded"), { headers: { "retry-after": "30" } });
    });
    const out = await timed(clock, () => t(undefined));
    expect(out.ms).toBe(0);
    expect(sent).toBe(1);
    expect(events[0]?.steps[0]).toEqual({
      strategy: "retry_once",
      skipped: "without a status, code or error class, a retry waits at most 1000 ms",
    });
  });

  it("structured evidence keeps its schedule: a 429 without Retry-After is retried with backoff", async () => {
    const { sh, clock } = setup();
    let sent = 0;
    const t = sh.tool("lookup", { readOnly: true }, () => {
      sent++;
      if (sent <= 3) throw thrownFault("rate_limit");
      return "ok";
    });
    const out = await timed(clock, () => t(undefined));
    expect(out.value).toBe("ok");
    expect(sent).toBe(4); // more than thin evidence's one retry
  });
});
