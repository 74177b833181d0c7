import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/testing/index.js";
import {
  heartbeat,
  heartbeatFile,
  supervised,
  Supervisor,
  type ReadResult,
  type SupervisorEvent,
  type SupervisorOptions,
} from "../../src/watchdog/index.js";
import { reviewText } from "../../src/report/analyze.js";
import { recordingMeters, recordingProvider, tree } from "../helpers/otel.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-supervisor-"));
let n = 0;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/**
 * A run on virtual time, as the supervisor sees it through its files: `stepping` moves its step
 * on each beat, `beating` keeps its heartbeat going, neither: dead. `restart` and `rotate` are
 * what the supervisor does to it; `onRestart`/`onRotate` say how the run behaves afterwards.
 */
function setup(
  behaviour: { afterRestart?: "steps" | "stuck"; afterRotate?: "steps" | "dead" } = {},
  options: { tokenLimit?: number; supervisor?: Partial<SupervisorOptions> } = {},
) {
  const clock = new VirtualClock();
  const stateDir = join(root, `d${n++}`);
  const sessionId = "night";
  const nudges: string[] = [];
  const resets: string[] = [];
  /** One process of the run, as `selfheal watch` starts it: its generation in beats and inbox. */
  const processOf = (generation: number) => {
    const agent = supervised({ stateDir, sessionId, clock, generation, pollMs: 60 * 60_000 });
    agent.onNudge((m) => {
      nudges.push(m.text ?? "");
    });
    agent.onContextReset((m) => {
      resets.push(`gen${generation}:seq${m.seq}`);
    });
    return {
      agent,
      writer: heartbeat({ stateDir, sessionId, clock, minIntervalMs: 0, generation }),
    };
  };
  const run = {
    ...processOf(1),
    step: 0,
    stepping: true,
    beating: true,
    /** Whether it reads its inbox (a run frozen hard does not). */
    reading: true,
    tokens: 1_000,
  };
  const actions: string[] = [];
  const alerts: string[] = [];
  const events: SupervisorEvent[] = [];
  const sv = new Supervisor({
    stateDir,
    sessionId,
    clock,
    limits: {
      graceMs: 0,
      ...(options.tokenLimit !== undefined && { tokenLimit: options.tokenLimit }),
    },
    intensity: { maxRestarts: 3, periodMs: 10 * 60_000, baseBackoffMs: 1_000, maxBackoffMs: 4_000 },
    control: {
      restart: (generation) => {
        actions.push("restart");
        Object.assign(run, processOf(generation), { reading: true });
        if (behaviour.afterRestart === "steps") run.stepping = true;
        run.tokens = 1_000;
        return Promise.resolve();
      },
      rotate: (generation) => {
        actions.push("rotate");
        // A new process, a new session start, resuming from the last step (its snapshot).
        Object.assign(run, processOf(generation));
        run.beating = behaviour.afterRotate !== "dead";
        run.stepping = behaviour.afterRotate === "steps";
        return Promise.resolve();
      },
    },
    notify: (alert) => {
      alerts.push(alert.title);
    },
    onEvent: (e) => events.push(e),
    ...options.supervisor,
  });
  /** Five seconds of the run (it reads its inbox and beats, while it lives), then one look. */
  const second5 = async () => {
    if (run.beating) {
      if (run.reading) await run.agent.poll();
      if (run.stepping) run.step++;
      await run.writer.beat({ stage: "planning", stepIdx: run.step, contextTokens: run.tokens });
    }
    await sv.tick();
    await clock.advance(5_000);
  };
  const tiers = () => events.flatMap((e) => (e.kind === "tier" ? [e.tier] : []));
  const results = () =>
    events.flatMap((e) => (e.kind === "tier_result" ? [`${e.tier}:${e.outcome}`] : []));
  return { run, sv, nudges, resets, actions, alerts, events, second5, tiers, results, stateDir };
}

describe("the supervisor's tiers", () => {
  it("a healthy run is left alone", async () => {
    const t = setup();
    for (let i = 0; i < 40; i++) await t.second5();
    expect(t.tiers()).toEqual([]);
    expect(t.events.flatMap((e) => (e.kind === "verdict" ? [e.verdict] : []))).toEqual(["healthy"]);
  });

  it("stalled: a nudge, and the run goes on (Tier 1 recovers it)", async () => {
    const t = setup();
    for (let i = 0; i < 4; i++) await t.second5();
    t.run.stepping = false; // frozen before an LLM call, still beating
    for (let i = 0; i < 20; i++) await t.second5(); // 100 s: past the 90 s stall limit
    expect(t.tiers()).toEqual(["nudge"]);
    await t.run.agent.poll();
    expect(t.nudges[0]).toMatch(/unmoved .* carry on/);
    t.run.stepping = true; // the nudge worked
    await t.second5();
    expect(t.results()).toEqual([]); // progress, but its 15 s proof period is not over
    for (let i = 0; i < 2; i++) await t.second5();
    expect(t.results()).toEqual(["nudge:recovered"]);
    expect(t.actions).toEqual([]);
  });

  it("frozen hard: the nudge fails, a context reset and restart recover it (Tier 2)", async () => {
    const t = setup({ afterRestart: "steps" });
    t.run.stepping = false;
    for (let i = 0; i < 25; i++) await t.second5();
    expect(t.tiers()).toEqual(["nudge", "context_reset"]);
    expect(t.actions).toEqual(["restart"]);
    expect(t.results()).toEqual(["nudge:failed"]); // the restarted run proves itself for 60 s
    for (let i = 0; i < 12; i++) await t.second5();
    expect(t.results()).toEqual(["nudge:failed", "context_reset:recovered"]);
  });

  it("context bloat goes straight to a context reset", async () => {
    const t = setup({ afterRestart: "steps" }, { tokenLimit: 10_000 });
    await t.second5();
    t.run.tokens = 9_500; // 95% of the limit
    for (let i = 0; i < 15; i++) await t.second5();
    expect(t.tiers()).toEqual(["context_reset"]);
    expect(t.results()).toEqual(["context_reset:recovered"]);
  });

  it("dead: rotated to a new process that resumes from its step, and a person is told (Tier 3)", async () => {
    const t = setup({ afterRotate: "steps" });
    for (let i = 0; i < 3; i++) await t.second5();
    const before = t.run.step;
    t.run.beating = false; // the process died
    for (let i = 0; i < 22; i++) await t.second5(); // death, backoff, 60 s of proof
    expect(t.tiers()).toEqual(["rotation"]);
    expect(t.actions).toEqual(["rotate"]);
    expect(t.results()).toEqual(["rotation:recovered"]);
    expect(t.run.step).toBeGreaterThan(before); // it went on from where it was
    expect(t.alerts).toEqual(["night was rotated"]);
  });

  it("a crash loop: rotations back off, stop at the intensity limit, and page once each", async () => {
    const t = setup({ afterRotate: "dead" });
    await t.second5();
    t.run.beating = false;
    for (let i = 0; i < 80; i++) await t.second5();
    expect(t.actions).toEqual(["rotate", "rotate", "rotate"]);
    expect(t.events.some((e) => e.kind === "gave_up")).toBe(true);
    expect(t.sv.givenUp).toBe(true);
    // Three rotations within minutes: one rotation alert, and one that it gave up.
    expect(t.alerts).toEqual(["night was rotated", "supervision of night gave up"]);
  });
});

describe("generations: only the current process is judged", () => {
  const verdicts = (events: SupervisorEvent[]) =>
    events.flatMap((e) => (e.kind === "verdict" ? [`${e.generation}:${e.verdict}`] : []));

  it("after a crash, the dead process's last beat gives no verdict; the new one is starting until it beats, then names the step it resumed from", async () => {
    const t = setup({ afterRotate: "dead" });
    for (let i = 0; i < 4; i++) await t.second5();
    t.run.beating = false;
    await t.sv.processDied("the agent exited with code 1");
    // The new process takes 20 s to start up (within the 30 s first-beat allowance).
    for (let i = 0; i < 4; i++) await t.second5();
    t.run.beating = true;
    t.run.stepping = true;
    for (let i = 0; i < 13; i++) await t.second5();
    expect(verdicts(t.events)).toEqual(["1:healthy", "1:session_dead", "2:starting", "2:healthy"]);
    const resumed = t.events.filter((e) => e.kind === "verdict").at(-1);
    expect(resumed).toMatchObject({ reason: "generation 2 resumed from step 5" });
    expect(t.results()).toEqual(["rotation:recovered"]);
    expect(t.tiers()).toEqual(["rotation"]);
    expect(t.events.find((e) => e.kind === "tier")).toMatchObject({
      reason: "the agent exited with code 1; its last step was 4",
    });
  });

  it("a new process that never beats: starting, then dead once its allowance is over (the old file is not its beat)", async () => {
    const t = setup({ afterRotate: "dead" });
    for (let i = 0; i < 2; i++) await t.second5();
    t.run.beating = false;
    await t.sv.processDied("the agent exited with code 1");
    for (let i = 0; i < 16; i++) await t.second5(); // 80 s: past the allowance and the proof
    expect(verdicts(t.events)).toEqual([
      "1:healthy",
      "1:session_dead",
      "2:starting",
      "2:session_dead",
      "3:starting",
    ]);
    const dead = t.events.filter((e) => e.kind === "verdict").at(-2);
    expect(dead?.reason).toMatch(/^generation 2 wrote no heartbeat within 30 s of its start/);
    expect(t.actions).toEqual(["rotate", "rotate"]);
  });

  it("a crash loop gives no phantom healthy or stalled verdict between its rotations", async () => {
    const t = setup({ afterRotate: "dead" });
    await t.second5();
    t.run.beating = false;
    for (let i = 0; i < 80; i++) await t.second5();
    const seen = verdicts(t.events).map((v) => v.split(":")[1]);
    expect(seen.filter((v) => v === "healthy")).toHaveLength(1); // the first process only
    expect(seen).not.toContain("stalled");
    expect(t.sv.givenUp).toBe(true);
  });

  it("Tier 2 restarts once the run acknowledged its reset, without waiting out the proving time", async () => {
    const t = setup({ afterRestart: "steps" }, { tokenLimit: 10_000 });
    await t.second5();
    t.run.tokens = 9_500;
    await t.second5(); // bloat: the reset is sent to generation 1
    expect(t.actions).toEqual([]);
    await t.second5(); // generation 1 reads and acknowledges it; the look that follows restarts
    expect(t.actions).toEqual(["restart"]);
    for (let i = 0; i < 13; i++) await t.second5();
    expect(t.resets).toEqual(["gen1:seq1"]); // once, by the process it was for
    expect(t.results()).toEqual(["context_reset:recovered"]);
  });

  it("Tier 2 on a run too frozen to read its inbox: restarted after the proving time, and the reset goes to the next process, once", async () => {
    const t = setup({ afterRestart: "steps" }, { tokenLimit: 10_000 });
    await t.second5();
    t.run.tokens = 9_500;
    t.run.reading = false; // frozen hard: beats (a keep-alive), never reads its inbox
    await t.second5();
    for (let i = 0; i < 11; i++) await t.second5(); // 55 s: still within the 60 s proving time
    expect(t.actions).toEqual([]);
    for (let i = 0; i < 2; i++) await t.second5();
    expect(t.actions).toEqual(["restart"]);
    for (let i = 0; i < 13; i++) await t.second5();
    expect(t.resets).toEqual(["gen2:seq2"]);
    expect(t.results()).toEqual(["context_reset:recovered"]);
    // Had the frozen process woken up, the first message would have been its only one.
    const inbox = JSON.parse(readFileSync(join(t.stateDir, "night.inbox.json"), "utf8")) as {
      messages: { seq: number; gen: number }[];
    };
    expect(inbox.messages.map((m) => [m.seq, m.gen])).toEqual([
      [1, 1],
      [2, 2],
    ]);
  });

  it("once the process has beaten, one slow or failed look keeps the last verdict (no phantom starting)", async () => {
    const clock = new VirtualClock();
    const beat = (step: number) => ({
      v: 1 as const,
      sessionId: "s",
      pid: 7,
      stage: "planning",
      stepIdx: step,
      at: clock.now(),
      stepAt: clock.now(),
      startedAt: clock.now(),
      gen: 1,
    });
    const reads: ReadResult[] = [];
    const events: SupervisorEvent[] = [];
    const sv = new Supervisor({
      sessionId: "s",
      clock,
      channel: {
        read: () =>
          Promise.resolve(reads.shift() ?? { ok: false, problem: "missing", detail: "none" }),
        send: () => Promise.resolve(),
      },
      control: { restart: () => Promise.resolve(), rotate: () => Promise.resolve() },
      onEvent: (e) => events.push(e),
    });
    for (let step = 1; step <= 6; step++) {
      reads.push(
        step === 3
          ? { ok: false, problem: "timeout", detail: "no answer" }
          : { ok: true, heartbeat: beat(step) },
      );
      await sv.tick();
      await clock.advance(1_000);
    }
    expect(events.flatMap((e) => (e.kind === "verdict" ? [e.verdict] : []))).toEqual(["healthy"]);
  });

  it("a look at work when the process dies says nothing about it: no verdict after its death, the rotation stands", async () => {
    const clock = new VirtualClock();
    let release: (r: ReadResult) => void = () => undefined;
    const events: SupervisorEvent[] = [];
    const actions: string[] = [];
    const sv = new Supervisor({
      sessionId: "s",
      clock,
      limits: { graceMs: 0, stallMs: 10_000 },
      intensity: { baseBackoffMs: 0, maxBackoffMs: 0 },
      channel: {
        read: () => new Promise<ReadResult>((resolve) => (release = resolve)),
        send: () => Promise.resolve(),
      },
      control: {
        restart: () => Promise.resolve(),
        rotate: () => {
          actions.push("rotate");
          return Promise.resolve();
        },
      },
      onEvent: (e) => events.push(e),
    });
    await clock.advance(60_000);
    const look = sv.tick(); // reading a beat whose step has not moved for a minute
    await new Promise((resolve) => setImmediate(resolve)); // the read has begun
    const died = sv.processDied("the agent exited with code 1");
    release({
      ok: true,
      heartbeat: {
        v: 1,
        sessionId: "s",
        pid: 7,
        stage: "planning",
        stepIdx: 4,
        at: clock.now(),
        stepAt: clock.now() - 60_000,
        startedAt: clock.now() - 60_000,
        gen: 1,
      },
    });
    await look;
    await died;
    expect(events.map((e) => (e.kind === "verdict" ? e.verdict : e.kind))).toEqual([
      "session_dead",
      "tier",
    ]);
    expect(events.find((e) => e.kind === "tier")).toMatchObject({ tier: "rotation" });
    expect(actions).toEqual(["rotate"]);
  });

  it("a bad starting generation is a config error", () => {
    expect(
      () =>
        new Supervisor({
          sessionId: "s",
          stateDir: root,
          generation: 0,
          control: { restart: () => Promise.resolve(), rotate: () => Promise.resolve() },
        }),
    ).toThrow(/Supervisor.generation/);
  });
});

describe("an unreadable heartbeat", () => {
  it("leads to rotation, not a nudge or a context reset", async () => {
    const t = setup({ afterRotate: "steps" });
    for (let i = 0; i < 8; i++) await t.second5(); // 40 s: past the new process's first-beat allowance
    t.run.beating = false;
    writeFileSync(heartbeatFile(t.stateDir, "night"), '{"v":1,"sess'); // garbage, every look
    for (let i = 0; i < 4; i++) await t.second5(); // three bad looks, then the rotation's backoff
    expect(t.events).toContainEqual(expect.objectContaining({ verdict: "unreadable" }));
    expect(t.tiers()).toEqual(["rotation"]);
    expect(t.actions).toEqual(["rotate"]);
    expect(t.nudges).toEqual([]);
  });
});

describe("the supervisor's telemetry: spans, metrics, event log", () => {
  it("a stall recovered by a nudge: a verdict span per change, a tier span, counts by state and outcome", async () => {
    const otel = recordingProvider();
    const meters = recordingMeters();
    const eventLog = join(root, `events-${n++}.jsonl`);
    const t = setup(
      {},
      {
        supervisor: {
          agent: "nightly",
          tracerProvider: otel.provider,
          meterProvider: meters.meterProvider,
          eventLog,
        },
      },
    );
    for (let i = 0; i < 4; i++) await t.second5();
    t.run.stepping = false;
    for (let i = 0; i < 20; i++) await t.second5();
    t.run.stepping = true;
    for (let i = 0; i < 3; i++) await t.second5(); // progress, then healthy to the proof's end
    expect(t.results()).toEqual(["nudge:recovered"]);

    expect(tree(otel.spans())).toEqual([
      "agent.watchdog.verdict",
      "agent.watchdog.verdict",
      "agent.watchdog.recovery",
      "agent.watchdog.verdict",
    ]);
    const verdicts = otel.named("agent.watchdog.verdict").map((s) => s.attributes);
    expect(verdicts.map((a) => a["selfheal.watchdog.verdict"])).toEqual([
      "healthy",
      "stalled",
      "healthy",
    ]);
    expect(verdicts[1]).toMatchObject({
      "selfheal.agent.name": "nightly",
      "selfheal.watchdog.session_id": "night",
    });
    const [tier] = otel.named("agent.watchdog.recovery");
    expect(tier?.attributes).toMatchObject({
      "selfheal.watchdog.tier": "nudge",
      "selfheal.watchdog.outcome": "recovered",
    });
    // The span lasts from the nudge to the end of its proof period, on the supervisor's clock.
    expect(tier?.duration).toEqual([15, 0]);

    const points = await meters.read();
    expect(points.get("selfheal_watchdog_verdicts{agent=nightly,state=stalled}")).toBe(1);
    expect(points.get("selfheal_watchdog_verdicts{agent=nightly,state=healthy}")).toBe(2);
    expect(points.get("selfheal_watchdog_verdicts{agent=nightly,state=session_dead}")).toBe(0);
    expect(
      points.get("selfheal_watchdog_recoveries{agent=nightly,tier=nudge,outcome=recovered}"),
    ).toBe(1);
    expect(
      points.get("selfheal_watchdog_recoveries{agent=nightly,tier=rotation,outcome=gave_up}"),
    ).toBe(0);

    await t.sv.flush();
    const review = reviewText(readFileSync(eventLog, "utf8"));
    expect(review.malformed).toBe(0);
    expect(review.watchdog.tiers).toEqual([
      { tier: "nudge", runs: 1, recovered: 1, failed: 0, successRate: 1 },
    ]);
    expect(review.watchdog.verdicts).toEqual([
      { verdict: "healthy", count: 2 },
      { verdict: "stalled", count: 1 },
    ]);
  });

  it("a crash loop counts each failed rotation and the refusal to rotate again", async () => {
    const meters = recordingMeters();
    const t = setup(
      { afterRotate: "dead" },
      { supervisor: { agent: "loop", meterProvider: meters.meterProvider } },
    );
    await t.second5();
    t.run.beating = false;
    for (let i = 0; i < 80; i++) await t.second5();
    const points = await meters.read();
    expect(
      points.get("selfheal_watchdog_recoveries{agent=loop,tier=rotation,outcome=failed}"),
    ).toBe(3);
    expect(
      points.get("selfheal_watchdog_recoveries{agent=loop,tier=rotation,outcome=gave_up}"),
    ).toBe(1);
  });

  it("a process that dies while a tier proves itself fails that tier before the rotation", async () => {
    const t = setup({ afterRotate: "steps" });
    for (let i = 0; i < 4; i++) await t.second5();
    t.run.stepping = false;
    for (let i = 0; i < 20; i++) await t.second5();
    expect(t.tiers()).toEqual(["nudge"]);
    await t.sv.processDied("exited with code 1");
    expect(t.results()).toEqual(["nudge:failed"]);
    expect(t.tiers()).toEqual(["nudge", "rotation"]);
  });
});
