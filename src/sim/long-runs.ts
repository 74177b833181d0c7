/**
 * The `long-runs` scenario: a fleet of overnight agent runs under the watchdog's Supervisor, on
 * virtual time. Each run steps, beats and keeps a context; some freeze before an LLM call, freeze
 * hard, die, bloat their context or crash in a loop. The supervisors are the real ones (verdicts,
 * tiers, restart intensity, alert throttle, spans, metrics, event log); only the agents and their
 * files are simulated, in memory, so a night of 40 runs takes a second or two.
 */
import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import type { InboxMessage } from "../watchdog/agent.js";
import type { Heartbeat } from "../watchdog/heartbeat.js";
import type { ReadResult } from "../watchdog/reader.js";
import { Supervisor, type SupervisorEvent } from "../watchdog/supervisor.js";
import { VirtualClock } from "../testing/virtual-clock.js";
import { seededRandom } from "../testing/random.js";
import type { Tier, Verdict } from "../telemetry/conventions.js";

/** What goes wrong with one run, once, at a random time of the night. */
export type RunFault =
  /** Healthy all night. */
  | "none"
  /** Stops stepping before an LLM call, still beating; a nudge gets it going. */
  | "stall"
  /** Stops stepping and ignores nudges; a restart (after a context reset) gets it going. */
  | "hard_stall"
  /** The process dies; a new one resumes from the snapshot. */
  | "die"
  /** The context grows fast past the model's limit; a context reset brings it down. */
  | "bloat"
  /** Dies, and every new process dies again within seconds. */
  | "crash_loop";

export interface LongRunsScenario {
  name: string;
  description: string;
  durationMs: number;
  seed: number;
  /** How many runs of the fleet have each fault. */
  mix: Record<RunFault, number>;
  /** Time between steps of a run, ms. */
  stepMs: number;
  /** The model's context limit, tokens. */
  tokenLimit: number;
}

/**
 * Twelve-hour runs in the kinds of failure the watchdog was asked for (a freeze before an LLM
 * call, a lost session, a bloated context), in a mix chosen for the demo: most run clean, one in
 * five freezes (a quarter of those for good), some die or bloat, one crash-loops.
 */
export const LONG_RUNS: LongRunsScenario = {
  name: "long-runs",
  description:
    "40 overnight agent runs under the watchdog: stalls, hard freezes, deaths, context bloat and a crash loop",
  durationMs: 12 * 3_600_000,
  seed: 7,
  mix: { none: 24, stall: 6, hard_stall: 2, die: 3, bloat: 4, crash_loop: 1 },
  stepMs: 30_000,
  tokenLimit: 200_000,
};

export interface LongRunEntry {
  /** Virtual ms since the start. */
  atMs: number;
  session: string;
  kind: "verdict" | "tier" | "tier_result" | "gave_up" | "page";
  text: string;
}

/** The figures of a night (camelCase, as every JSON selfheal writes: the `--json` output). */
export interface LongRunsResult {
  scenario: string;
  /** Whether the runs were under the watchdog (false: the "without selfheal" night). */
  supervised: boolean;
  virtualMinutes: number;
  runs: number;
  /** Runs that had a fault. */
  faulted: number;
  /** Runs that reached their last step by morning. */
  finished: number;
  /** Steps the runs made by morning (a run's steps past its last are not counted). */
  stepsDone: number;
  /** Steps the night's runs were to make: runs x the steps of a whole run. */
  stepsPlanned: number;
  /** Runs each tier brought back (progress shown within its time). */
  recoveredByTier: Record<Tier, number>;
  /** Tier runs that did not help. */
  failedByTier: Record<Tier, number>;
  /** Runs the supervisor gave up on (restart intensity reached). */
  gaveUp: number;
  /** Alerts that reached a person (throttled per session and kind). */
  pages: number;
  /** Alerts a watchdog that paged on every unhealthy look would have sent. */
  pagesUnthrottled: number;
  /** Verdicts entered, by state. */
  verdicts: Record<Verdict, number>;
  timeline: LongRunEntry[];
}

export interface LongRunsOptions {
  /**
   * Put each run under a Supervisor (default true). False plays the night without the
   * watchdog: the same runs and faults, nobody looking, nothing recovered, nobody paged.
   */
  supervise?: boolean;
  telemetry?: {
    tracerProvider?: TracerProvider | undefined;
    meterProvider?: MeterProvider | undefined;
  };
  /** Append the supervisors' events to this JSONL file (`selfheal report` reads it). */
  eventLog?: string;
  onEntry?: (entry: LongRunEntry) => void;
  /** Called after each virtual minute; may wait to pace the run. */
  onMinute?: (virtualMs: number) => Promise<void> | void;
  /**
   * Virtual time the run starts at, epoch ms (default 2026-01-01 UTC). Spans and events are dated
   * on it: the CLI starts the run so that it ends now, and exported traces land in a backend's
   * recent view.
   */
  startMs?: number;
}

/** How often a run beats and the supervisors look, ms. */
const BEAT_MS = 5_000;
/** Steps of a whole night's run. */
const stepsOf = (s: LongRunsScenario) => Math.floor((s.durationMs * 0.9) / s.stepMs);
/** A crash-looping process lives this long, ms. */
const CRASH_AFTER_MS = 20_000;

/** One simulated agent run: its process, its step and context, and its one fault. */
class SimRun {
  step = 0;
  stepAt: number;
  startedAt: number;
  /** When the last beat was written; undefined before the first. */
  beatAt: number | undefined;
  alive = true;
  frozen: "soft" | "hard" | undefined;
  tokens = 2_000;
  faulted = false;
  private struck = false;
  /** Its context grows fast (a loop of long tool outputs) until a reset summarises it. */
  private bloating = false;
  /** It had a verdict other than healthy: its next healthy one is news. */
  troubled = false;
  private diedAt: number | undefined;
  /** The generation of its process now (the supervisor numbers them). */
  private gen = 1;

  constructor(
    readonly session: string,
    readonly fault: RunFault,
    readonly faultAt: number,
    private readonly scenario: LongRunsScenario,
    now: number,
  ) {
    this.stepAt = now;
    this.startedAt = now;
  }

  get done(): boolean {
    return this.step >= stepsOf(this.scenario);
  }

  /** Five seconds of the run's life. */
  advance(now: number): void {
    if (!this.alive || this.done) return;
    if (!this.struck && now >= this.faultAt) {
      this.struck = true;
      this.strike(now);
    }
    if (this.fault === "crash_loop" && this.faulted && now - this.startedAt >= CRASH_AFTER_MS) {
      this.die(now);
      return;
    }
    // Past the model's context limit every LLM call fails: the run loops without a step.
    const overLimit = this.tokens > this.scenario.tokenLimit;
    if (this.frozen === undefined && !overLimit && now - this.stepAt >= this.scenario.stepMs) {
      this.step++;
      this.stepAt = now;
      this.tokens += this.bloating ? 6_000 : 50;
    }
    this.beatAt = now;
  }

  private strike(now: number): void {
    this.faulted = this.fault !== "none";
    if (this.fault === "stall") this.frozen = "soft";
    if (this.fault === "hard_stall") this.frozen = "hard";
    if (this.fault === "bloat") this.bloating = true;
    if (this.fault === "die" || this.fault === "crash_loop") this.die(now);
  }

  private die(now: number): void {
    this.alive = false;
    this.diedAt = now;
  }

  read(now: number): Promise<ReadResult> {
    if (this.beatAt === undefined)
      return Promise.resolve({ ok: false, problem: "missing", detail: "no beat yet" });
    const heartbeat: Heartbeat = {
      v: 1,
      sessionId: this.session,
      stage: this.frozen ? "llm_response" : "tool_call",
      stepIdx: this.step,
      at: Math.min(this.beatAt, this.diedAt ?? now),
      stepAt: this.stepAt,
      startedAt: this.startedAt,
      pid: 0,
      contextTokens: this.tokens,
      gen: this.gen,
    };
    return Promise.resolve({ ok: true, heartbeat });
  }

  /** The agent reads its inbox: a nudge frees a soft freeze; a reset empties the context. */
  receive(message: Omit<InboxMessage, "seq">): Promise<void> {
    if (message.kind === "nudge" && this.frozen === "soft") this.frozen = undefined;
    if (message.kind === "context_reset") {
      this.tokens = 2_000;
      this.bloating = false;
    }
    return Promise.resolve();
  }

  /** A new process: it restores the snapshot (its step) and starts beating anew. */
  relaunch(now: number, rotation: boolean, generation: number): Promise<void> {
    this.gen = generation;
    if (!rotation && this.frozen === "hard") this.frozen = undefined;
    // The fault of a died run was its process; a crash loop's is in every process.
    this.alive = true;
    this.diedAt = undefined;
    this.beatAt = undefined;
    this.startedAt = now;
    this.stepAt = now;
    return Promise.resolve();
  }
}

const ZERO_TIERS = (): Record<Tier, number> => ({ nudge: 0, context_reset: 0, rotation: 0 });

/** Plays the night: every run and its supervisor, a look every five seconds. */
// Long on purpose: the fleet's set-up, the night's loop and the figures, in the order they happen.
export async function runLongRuns(
  scenario: LongRunsScenario = LONG_RUNS,
  options: LongRunsOptions = {},
): Promise<LongRunsResult> {
  const supervised = options.supervise ?? true;
  const clock = new VirtualClock(options.startMs);
  const t0 = clock.now();
  const random = seededRandom(scenario.seed);
  const timeline: LongRunEntry[] = [];
  const note = (entry: LongRunEntry) => {
    timeline.push(entry);
    options.onEntry?.(entry);
  };
  const result = {
    recovered: ZERO_TIERS(),
    failed: ZERO_TIERS(),
    gaveUp: 0,
    pages: 0,
    unthrottled: 0,
    verdicts: {
      healthy: 0,
      starting: 0,
      stalled: 0,
      session_dead: 0,
      context_bloat: 0,
      unreadable: 0,
    },
  };
  const faults = (Object.entries(scenario.mix) as [RunFault, number][]).flatMap(([fault, n]) =>
    Array.from({ length: n }, () => fault),
  );
  const fleet = faults.map((fault, i) => {
    const session = `night-${String(i + 1).padStart(2, "0")}`;
    // Faults strike between the first and the ninth twelfth of the night (hours 1 to 9).
    const faultAt = t0 + (scenario.durationMs * (1 + 8 * random())) / 12;
    const run = new SimRun(session, fault, faultAt, scenario, t0);
    const onEvent = (e: SupervisorEvent) => {
      const atMs = e.at - t0;
      switch (e.kind) {
        case "verdict":
          result.verdicts[e.verdict]++;
          if (e.verdict !== "healthy" || run.troubled)
            note({ atMs, session, kind: "verdict", text: `${e.verdict}: ${e.reason}` });
          run.troubled = e.verdict !== "healthy";
          return;
        case "tier":
          note({ atMs, session, kind: "tier", text: `${e.tier}: ${e.reason}` });
          return;
        case "tier_result":
          (e.outcome === "recovered" ? result.recovered : result.failed)[e.tier]++;
          note({ atMs, session, kind: "tier_result", text: `${e.tier} ${e.outcome}` });
          return;
        case "gave_up":
          result.gaveUp++;
          note({ atMs, session, kind: "gave_up", text: e.reason });
          return;
      }
    };
    if (!supervised) return { run, supervisor: undefined };
    const supervisor = new Supervisor({
      sessionId: session,
      agent: `sim-${scenario.name}`,
      clock,
      limits: { tokenLimit: scenario.tokenLimit },
      channel: { read: (now) => run.read(now), send: (m) => run.receive(m) },
      control: {
        restart: (generation) => run.relaunch(clock.now(), false, generation),
        rotate: (generation) => run.relaunch(clock.now(), true, generation),
      },
      notify: (alert) => {
        result.pages++;
        note({ atMs: clock.now() - t0, session, kind: "page", text: alert.title });
      },
      onEvent,
      tracerProvider: options.telemetry?.tracerProvider,
      meterProvider: options.telemetry?.meterProvider,
      ...(options.eventLog !== undefined && { eventLog: options.eventLog }),
    });
    return { run, supervisor };
  });

  for (let elapsed = BEAT_MS; elapsed <= scenario.durationMs; elapsed += BEAT_MS) {
    await clock.advance(BEAT_MS);
    const now = clock.now();
    for (const { run, supervisor } of fleet) {
      run.advance(now);
      if (!supervisor || supervisor.givenUp || run.done) continue;
      await supervisor.tick();
      // What a watchdog without tiers or throttle would page: every look at a run gone wrong.
      if (!run.alive || run.frozen !== undefined || run.tokens > 0.92 * scenario.tokenLimit)
        result.unthrottled++;
    }
    if (elapsed % 60_000 === 0) await options.onMinute?.(elapsed);
  }
  for (const { supervisor } of fleet) {
    supervisor?.stop();
    await supervisor?.flush();
  }
  return {
    scenario: scenario.name,
    supervised,
    virtualMinutes: Math.round(scenario.durationMs / 60_000),
    runs: fleet.length,
    faulted: fleet.filter(({ run }) => run.faulted).length,
    finished: fleet.filter(({ run }) => run.done).length,
    stepsDone: fleet.reduce((n, { run }) => n + Math.min(run.step, stepsOf(scenario)), 0),
    stepsPlanned: fleet.length * stepsOf(scenario),
    recoveredByTier: result.recovered,
    failedByTier: result.failed,
    gaveUp: result.gaveUp,
    pages: result.pages,
    pagesUnthrottled: result.unthrottled,
    verdicts: result.verdicts,
    timeline,
  };
}
