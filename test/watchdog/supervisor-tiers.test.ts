import { afterEach, describe, expect, it, vi } from "vitest";
import { SelfHealConfigError } from "../../src/errors.js";
import { VirtualClock } from "../../src/testing/index.js";
import { recordingMeters } from "../helpers/otel.js";
import { DEAD, POLL, drain, harness } from "../helpers/supervisor.js";
import { Supervisor, type ReadResult } from "../../src/watchdog/index.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a tier's proof: the step must move, and the run stay healthy to the end of its proof period", () => {
  it("a healthy beat at the same step proves nothing; a stalled one past it neither; a healthy one past it does, once its period is over", async () => {
    const h = harness();
    h.beat(5);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:healthy"]);
    h.beat(5, { stale: true });
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:stalled", "tier:nudge"]);
    await h.clock.advance(POLL);
    h.beat(5);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:healthy"]);
    await h.clock.advance(POLL);
    h.beat(6, { stale: true });
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:stalled"]);
    await h.clock.advance(POLL);
    h.beat(6);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:healthy"]);
    await h.clock.advance(15_000 - 3 * POLL - 1);
    h.beat(6);
    await h.sv.tick();
    expect(h.news()).toEqual([]); // 1 ms of its proof period left
    await h.clock.advance(1);
    await h.sv.tick();
    expect(h.news()).toEqual(["nudge:recovered"]);
    await h.clock.advance(POLL);
    h.beat(6, { stale: true });
    await h.sv.tick();
    // A new incident starts over at the first tier.
    expect(h.news()).toEqual(["verdict:stalled", "tier:nudge"]);
  });

  it("verdict events name the generation, and the pid when a beat was read", async () => {
    const h = harness();
    await h.sv.tick();
    h.beat(1);
    await h.sv.tick();
    expect(h.events).toStrictEqual([
      {
        kind: "verdict",
        at: h.t0,
        verdict: "starting",
        reason: expect.stringMatching(/^generation 1 started/) as unknown as string,
        generation: 1,
      },
      {
        kind: "verdict",
        at: h.t0,
        verdict: "healthy",
        reason: "step 1 in stage tool_call",
        generation: 1,
        pid: 42,
      },
    ]);
  });

  it("a nudge that did not help: Tier 2, saying so; the reset carries no text", async () => {
    const h = harness({ acked: true, numbered: true });
    h.beat(5, { stale: true });
    await h.sv.tick();
    expect(h.sent).toHaveLength(1);
    expect(h.sent[0]).toMatchObject({ kind: "nudge", at: h.clock.now(), gen: 1 });
    expect(h.sent[0]?.text).toMatch(/^selfheal: step 5 unmoved .*; carry on with your next step$/);
    await h.clock.advance(15_000 - 1);
    h.beat(5, { stale: true });
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:stalled", "tier:nudge"]);
    await h.clock.advance(1);
    h.beat(5, { stale: true });
    await h.sv.tick();
    expect(h.news()).toEqual(["nudge:failed", "tier:context_reset"]);
    expect(h.events.at(-1)).toEqual({
      kind: "tier",
      at: h.clock.now(),
      tier: "context_reset",
      reason: "nudge did not help",
    });
    expect(h.sent.at(-1)).toStrictEqual({ kind: "context_reset", at: h.clock.now(), gen: 1 });
  });
});

describe("Tier 2 waits for the acknowledgement, or its proving time", () => {
  /** A run at step 5 with a bloated context: Tier 2 at once. */
  const bloated = async (options: { acked?: boolean; numbered?: boolean } = {}) => {
    const h = harness({ ...options, supervisor: { limits: { graceMs: 0, tokenLimit: 100 } } });
    h.beat(5);
    if (h.state.beat) h.state.beat.contextTokens = 99;
    await h.sv.tick();
    return h;
  };

  it("unacknowledged: restarts exactly at the end of its proving time, sending the reset again", async () => {
    const h = await bloated({ acked: true, numbered: true });
    expect(h.news()).toEqual(["verdict:context_bloat", "tier:context_reset"]);
    const start = h.clock.now();
    await h.clock.advance(60_000 - 1);
    await h.sv.tick();
    expect(h.actions).toEqual([]);
    await h.clock.advance(1);
    await h.sv.tick();
    expect(h.actions).toEqual(["restart:2"]);
    expect(h.sent.map((m) => `${m.kind}:${m.gen ?? "-"}`)).toEqual([
      "context_reset:1",
      "context_reset:2",
    ]);
    expect(h.sent.at(-1)?.at).toBe(start + 60_000);
  });

  it("acknowledged: restarts at the next look, without sending it again", async () => {
    const h = await bloated({ acked: true, numbered: true });
    await h.clock.advance(POLL);
    await h.sv.tick();
    expect(h.actions).toEqual([]);
    h.state.ackedSeq = 1;
    await h.clock.advance(POLL);
    await h.sv.tick();
    expect(h.actions).toEqual(["restart:2"]);
    expect(h.sent).toHaveLength(1);
  });

  it("after the restart the new process has the whole proving time", async () => {
    const h = await bloated({ acked: true, numbered: true });
    h.state.ackedSeq = 1;
    await h.sv.tick();
    expect(h.actions).toEqual(["restart:2"]);
    await h.clock.advance(POLL);
    h.beat(5); // generation 2, healthy, step not moved yet
    await h.sv.tick();
    await h.clock.advance(POLL);
    await h.sv.tick();
    expect(h.news()).toEqual(["verdict:context_bloat", "tier:context_reset", "verdict:healthy"]);
    expect(h.actions).toEqual(["restart:2"]);
  });

  it.each([
    ["numbered, but no acknowledgement to read", { acked: false, numbered: true }],
    ["acknowledgements, but an unnumbered send", { acked: true, numbered: false }],
  ])("%s: restarts at once", async (_name, options) => {
    const h = await bloated(options);
    expect(h.actions).toEqual(["restart:2"]);
    expect(h.sent.map((m) => m.kind)).toEqual(["context_reset"]);
  });

  it("a death while a look reads the acknowledgement voids that look: no restart, a rotation", async () => {
    const h = await bloated({ acked: true, numbered: true });
    h.news();
    const gate: { release?: (seq: number) => void } = {};
    h.state.acked = () =>
      new Promise<number>((resolve) => {
        gate.release = resolve;
      });
    const look = h.sv.tick();
    await drain();
    const died = h.sv.processDied("exit code 1");
    await drain();
    gate.release?.(1);
    await look;
    await died;
    expect(h.actions).toEqual([]);
    expect(h.news()).toEqual(["context_reset:failed", "verdict:session_dead", "tier:rotation"]);
  });
});

describe("Tier 3 waits out its backoff", () => {
  it("rotates exactly when the backoff is over, and tells a person", async () => {
    const h = harness();
    h.beat(5);
    await h.sv.tick();
    await h.sv.processDied("exit code 1");
    expect(h.news()).toEqual(["verdict:healthy", "verdict:session_dead", "tier:rotation"]);
    expect(h.events.at(-1)).toMatchObject({ reason: "exit code 1; its last step was 5" });
    expect(h.actions).toEqual([]);
    await h.clock.advance(999);
    await h.sv.tick();
    expect(h.actions).toEqual([]);
    await h.clock.advance(1);
    await h.sv.tick();
    expect(h.actions).toEqual(["rotate:2"]);
    expect(h.sv.currentGeneration).toBe(2);
    await drain();
    expect(h.alerts).toEqual([
      { title: "s was rotated", text: "exit code 1; its last step was 5" },
    ]);
  });

  it.each([
    ["no step seen", [], "died"],
    ["step 0 seen", [0], "died; its last step was 0"],
    ["step 3, then a failed read", [3, undefined], "died; its last step was 3"],
  ])("%s: the rotation's reason is %j", async (_name, steps, reason) => {
    const h = harness();
    for (const step of steps) {
      if (step === undefined) h.state.beat = undefined;
      else h.beat(step);
      await h.sv.tick();
    }
    await h.sv.processDied("died");
    expect(h.events.at(-1)).toEqual({ kind: "tier", at: h.t0, tier: "rotation", reason });
  });

  it("the new process still dead past the dead limit is no new verdict: it was said at the death", async () => {
    const h = harness({
      supervisor: {
        intensity: { maxRestarts: 3, periodMs: 600_000, baseBackoffMs: 0, maxBackoffMs: 0 },
      },
    });
    h.beat(5);
    await h.sv.tick();
    await h.sv.processDied("exit code 1");
    expect(h.actions).toEqual(["rotate:2"]);
    expect(h.news()).toEqual(["verdict:healthy", "verdict:session_dead", "tier:rotation"]);
    await h.clock.advance(DEAD);
    await h.sv.tick();
    expect(h.news()).toEqual([]);
  });

  it("a death while a rotation waits out its backoff changes nothing", async () => {
    const h = harness();
    await h.sv.processDied("first");
    h.news();
    await h.sv.processDied("second");
    expect(h.news()).toEqual([]);
    expect(h.actions).toEqual([]);
  });

  it("alerts past the throttle say how many were held back", async () => {
    const h = harness({
      supervisor: {
        throttleMs: 10_000,
        intensity: { maxRestarts: 10, periodMs: 600_000, baseBackoffMs: 0, maxBackoffMs: 0 },
      },
    });
    await h.sv.processDied("a");
    await h.sv.processDied("b");
    await h.clock.advance(10_000);
    await h.sv.processDied("c");
    await drain();
    expect(h.actions).toEqual(["rotate:2", "rotate:3", "rotate:4"]);
    expect(h.alerts).toEqual([
      { title: "s was rotated", text: "a" },
      { title: "s was rotated", text: "c (1 more since the last alert)" },
    ]);
  });

  it("past the intensity: gives up once, says so, and stops", async () => {
    const h = harness({
      supervisor: {
        intensity: { maxRestarts: 1, periodMs: 600_000, baseBackoffMs: 0, maxBackoffMs: 0 },
      },
    });
    expect(h.sv.givenUp).toBe(false);
    await h.sv.processDied("a");
    expect(h.sv.givenUp).toBe(false);
    await h.sv.processDied("b");
    await drain();
    expect(h.sv.givenUp).toBe(true);
    expect(h.news().at(-1)).toBe("gave_up");
    expect(h.alerts.map((a) => a.title)).toEqual(["s was rotated", "supervision of s gave up"]);
    h.beat(9, { stale: true });
    await h.sv.tick();
    expect(h.news()).toEqual([]);
  });
});

describe("stopped", () => {
  it("a look after stop() reads nothing; a death after it does nothing", async () => {
    const h = harness();
    h.sv.stop();
    await h.sv.tick();
    await h.sv.processDied("gone");
    expect(h.state.reads).toBe(0);
    expect(h.events).toEqual([]);
    expect(h.actions).toEqual([]);
  });

  it("start() after stop() sets no timer", () => {
    const h = harness();
    h.sv.stop();
    h.sv.start();
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe("the poll loop", () => {
  it("a look still at work (a send that never answers): later timers skip, never overlap", async () => {
    const h = harness();
    h.beat(5, { stale: true });
    h.state.send = () => new Promise(() => undefined);
    h.sv.start();
    for (let i = 0; i < 5; i++) await h.clock.advance(POLL);
    expect(h.state.reads).toBe(1);
    expect(h.sent).toHaveLength(1);
    h.sv.stop();
  });

  it.each([
    ["a logger", true],
    ["console.warn by default", false],
  ])("a look that fails is reported to %s, and the loop goes on", async (_name, withLogger) => {
    const warned: string[] = [];
    const spy = vi.spyOn(console, "warn").mockImplementation((m: string) => {
      warned.push(`console:${m}`);
    });
    const h = harness({
      supervisor: withLogger
        ? {
            logger: {
              warn: (m: string) => {
                warned.push(`logger:${m}`);
              },
            },
          }
        : {},
    });
    h.beat(5, { stale: true });
    h.state.send = () => Promise.reject(new Error("inbox down"));
    h.sv.start();
    await h.clock.advance(POLL);
    await drain();
    const line = "selfheal watchdog: a look failed: Error: inbox down";
    expect(warned).toEqual([withLogger ? `logger:${line}` : `console:${line}`]);
    await h.clock.advance(POLL);
    expect(h.state.reads).toBe(2);
    h.sv.stop();
    spy.mockRestore();
  });

  it("each read is bounded by one poll, on an unref timer cancelled when the read answers", async () => {
    const virtual = new VirtualClock();
    const timers: unknown[] = [];
    const clock = {
      now: () => virtual.now(),
      sleep: (ms: number) => virtual.sleep(ms),
      setTimer: (ms: number, callback: () => void, opts?: { unref?: boolean }) => {
        timers.push({ ms, ...opts });
        return virtual.setTimer(ms, callback);
      },
    };
    const h = harness({ supervisor: { clock } });
    await h.sv.tick();
    expect(timers).toEqual([{ ms: POLL, unref: true }]);
    expect(virtual.pendingTimers).toBe(0);
  });

  it.each([
    [
      "a read that never answers",
      () => new Promise<ReadResult>(() => undefined),
      "heartbeat timeout 3 times in a row (no answer within 1000 ms)",
    ],
    [
      "a read that throws",
      () => Promise.reject(new Error("disk gone")),
      "heartbeat garbage 3 times in a row (Error: disk gone)",
    ],
  ])("%s is a problem for that look", async (_name, read, reason) => {
    const h = harness();
    h.beat(1);
    await h.sv.tick();
    h.state.read = read;
    for (let i = 0; i < 3; i++) {
      const look = h.sv.tick();
      await h.clock.advance(POLL);
      await look;
    }
    expect(h.events.find((e) => e.kind === "verdict" && e.verdict === "unreadable")).toMatchObject({
      reason,
    });
  });
});

describe("options", () => {
  const control = { restart: () => Promise.resolve(), rotate: () => Promise.resolve() };

  it("no agent name: its metrics are labelled `agent`", async () => {
    const meters = recordingMeters();
    const channel = {
      read: () => new Promise<ReadResult>(() => undefined),
      send: () => Promise.resolve(),
    };
    new Supervisor({ sessionId: "s", channel, control, meterProvider: meters.meterProvider });
    const labels = [...(await meters.read()).keys()];
    expect(labels).toContain("selfheal_watchdog_verdicts{agent=agent,state=healthy}");
    await meters.shutdown();
  });

  it("no event log: flush() resolves at once", async () => {
    const h = harness();
    await expect(h.sv.flush()).resolves.toBeUndefined();
  });

  it("neither a state dir nor a channel: a config error", () => {
    expect(() => new Supervisor({ sessionId: "s", control })).toThrow(SelfHealConfigError);
    expect(() => new Supervisor({ sessionId: "s", control })).toThrow(
      /Supervisor\.stateDir.*required unless a channel is given/,
    );
  });

  it.each([0, 1.5, -1])("generation %d: a config error naming it", (generation) => {
    expect(
      () => new Supervisor({ sessionId: "s", stateDir: "/tmp/x", control, generation }),
    ).toThrow(`expected a whole number >= 1, got ${generation}`);
  });
});
