import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import { wallClock, type Clock } from "../clock.js";
import type { Logger } from "../engine/options.js";
import { JsonlLog, type EventLogOptions } from "../recovery/event-log.js";
import type { Tier } from "../telemetry/conventions.js";
import { AlertThrottle } from "../notify/throttle.js";
import { SelfHealConfigError } from "../errors.js";
import { readAck, sendToInbox, type InboxMessage } from "./agent.js";
import { MAX_SKEW_MS, readHeartbeat, type ReadResult } from "./reader.js";
import { heartbeatFile, type Heartbeat } from "./heartbeat.js";
import {
  intensityOptions,
  RestartIntensity,
  type IntensityOptions,
  type RestartDecision,
} from "./intensity.js";
import { StepRollup, type StepRollupEntry } from "./step-rollup.js";
import { WatchdogTelemetry, type SupervisorEvent } from "./telemetry.js";
import { DEFAULT_LIMITS, HeartbeatWatcher, type Limits, type Verdict } from "./verdict.js";

/** The recovery tiers, in the order they are tried. */
export type { Tier };
const NEXT_TIER: Record<Tier, Tier> = {
  nudge: "context_reset",
  context_reset: "rotation",
  rotation: "rotation",
};
/** Where recovery starts for each verdict: the least disruptive tier that can help. */
const FIRST_TIER: Record<Exclude<Verdict, "healthy" | "starting">, Tier> = {
  stalled: "nudge",
  context_bloat: "context_reset",
  session_dead: "rotation",
  unreadable: "rotation",
};
const TIERS: readonly Tier[] = ["nudge", "context_reset", "rotation"];

/**
 * The tier after `tier` failed on a run now `verdict`: the next one, or the verdict's own first
 * tier when that is further (a run that dies during a nudge's proof is rotated, not reset).
 */
function escalate(tier: Tier, verdict: Verdict): Tier {
  const next = NEXT_TIER[tier];
  if (verdict === "healthy" || verdict === "starting") return next;
  const own = FIRST_TIER[verdict];
  return TIERS.indexOf(own) > TIERS.indexOf(next) ? own : next;
}

/**
 * What the supervisor can do to the run's process (`selfheal watch` does it to its child). Each
 * starts the process as `generation` (one more than the last): its beats must carry it (`gen`,
 * from `SELFHEAL_WATCH_GENERATION`) for the supervisor to judge them as its own.
 */
export interface RunControl {
  /** Tier 2: after the run reset its context (or had its proving time to), restart it in place. */
  restart(generation: number): Promise<void>;
  /** Tier 3: end the run and start a new process, which restores the last snapshot. */
  rotate(generation: number): Promise<void>;
}

export type { SupervisorEvent };

/**
 * Where the supervisor reads a run's heartbeat and sends its messages. The default is the files
 * in `stateDir` that `supervised()` and `heartbeat()` write; the simulator keeps them in memory.
 */
export interface RunChannel {
  read(now: number): Promise<ReadResult>;
  /** Puts a message in the run's inbox; resolves with it (its `seq`) where messages are numbered. */
  send(message: Omit<InboxMessage, "seq">): Promise<unknown>;
  /**
   * The highest seq the run acknowledged. With it (and a numbered send), Tier 2 waits for the run
   * to acknowledge its context reset, or for the tier's proving time, before it restarts the run.
   */
  acked?(): Promise<number>;
}

export interface SupervisorOptions {
  /** Where the run's files are (heartbeat, inbox); required unless `channel` is given. */
  stateDir?: string;
  sessionId: string;
  /** Instead of the files in `stateDir`. */
  channel?: RunChannel;
  control: RunControl;
  /**
   * The generation of the process running when supervision starts (default 1); each restart and
   * rotation starts the next one.
   */
  generation?: number;
  limits?: Partial<Limits>;
  /** How often the heartbeat is read, ms (default 5000). */
  pollMs?: number;
  /**
   * Each tier's proof period, ms (defaults 15 s, 60 s, 60 s; Tier 2 and 3 count it from the new
   * process's start): the run must show progress (`stepIdx` moves) and stay healthy until it
   * ends for the tier to be recovered. Tier 2 and 3's lasts at least until a stall on the step
   * that showed progress would be seen (its stall limit after it, past the start-up grace, plus
   * one poll), however short this is.
   */
  proveMs?: Partial<Record<Tier, number>>;
  /**
   * Bounds every restart, context resets' and rotations' together (default: 3 in any 10 min,
   * rotations backing off from 1 s, doubling): the restart past it gives up, as does the one
   * past `maxRestarts` in a row that did not hold (no tier recovered since), however slow.
   */
  intensity?: Partial<IntensityOptions>;
  /** Tells a person (a rotation, giving up); throttled per session and kind. */
  notify?: (alert: { title: string; text: string }) => unknown;
  /** One alert of a kind per session per period, ms (default 10 min). */
  throttleMs?: number;
  onEvent?: (event: SupervisorEvent) => void;
  clock?: Clock;
  /** `agent` label of the watchdog metrics and the agent attribute (ATTR_AGENT_NAME) of its spans (default `agent`). */
  agent?: string;
  /** Spans of verdicts and tiers; default the global provider. */
  tracerProvider?: TracerProvider | undefined;
  /** The watchdog verdicts and recoveries counters; default the global provider. */
  meterProvider?: MeterProvider | undefined;
  /**
   * JSONL file each event is appended to (the format `selfheal report` reads), with the limits in
   * effect (once, when supervision starts) and, per stage and minute, the durations of the steps
   * seen complete (written when a look falls in a later minute, and by `stop()`).
   */
  eventLog?: string | EventLogOptions;
  /** Where a failing event log is reported (default console.warn). */
  logger?: Logger;
}

/** The run's files in `stateDir`, as `supervised()` writes and reads them. */
function fileChannel(stateDir: string | undefined, sessionId: string): RunChannel {
  if (stateDir === undefined)
    throw new SelfHealConfigError("Supervisor.stateDir", "required unless a channel is given");
  const file = heartbeatFile(stateDir, sessionId);
  return {
    read: (now) => readHeartbeat(file, now),
    send: (message) => sendToInbox(stateDir, sessionId, message),
    acked: () => readAck(stateDir, sessionId),
  };
}

const PROVE_MS: Record<Tier, number> = { nudge: 15_000, context_reset: 60_000, rotation: 60_000 };

/** The tier at work: the step it started from, and when its proof period ends. */
interface Pending {
  tier: Tier;
  fromStep: number;
  until: number;
  reason: string;
  /** The run has shown progress (a healthy look past `fromStep`): it must stay healthy. */
  progressed?: boolean;
  /** The step that showed progress. */
  progressStep?: number;
  /** Tier 2 or 3's new process has been seen: `fromStep` counts from where it resumed. */
  resumed?: boolean;
  /** A rotation waiting out its backoff. */
  rotateAt?: number;
  /** Tier 2 waiting for the run to acknowledge its context reset (this seq) to restart it. */
  ackSeq?: number;
}

/**
 * Watches one run and recovers it in tiers, each given a proof period: Tier 1 nudges it through
 * its inbox; Tier 2 has it reset its context, then restarts it; Tier 3 rotates it to a new process
 * that resumes from its snapshot (a person is told). A tier is recovered when the run shows
 * progress and stays healthy to the end of its proof period; a run that falls back within it (a
 * stall, a death, a bloat) fails the tier and goes to the next. Every restart (Tier 2's and Tier
 * 3's) counts against one restart intensity; past it the supervisor gives up, says so once, and
 * stops.
 */
export class Supervisor {
  private readonly watcher: HeartbeatWatcher;
  private readonly channel: RunChannel;
  private readonly clock: Clock;
  private readonly intensity: RestartIntensity;
  private readonly maxRestarts: number;
  /** Restarts since a tier last recovered the run: past `maxRestarts`, a restart gives up. */
  private unheld = 0;
  private readonly throttle: AlertThrottle;
  private readonly prove: Record<Tier, number>;
  private lastVerdict: Verdict | undefined;
  private lastStep = -1;
  private pending: Pending | undefined;
  private cancelTimer: (() => void) | undefined;
  private stopped = false;
  /** The run's process now: its generation, and when it was started. */
  private generation: number;
  private launchedAt: number;
  private gaveUp = false;
  private readonly telemetry: WatchdogTelemetry;
  private readonly eventLog: JsonlLog | undefined;
  private readonly limits: Limits;
  /** Step durations per stage and minute; only with an event log (nothing else reads them). */
  private readonly steps: StepRollup | undefined;
  /** Whether the limits line was written: supervision has started. */
  private begun = false;
  private readonly logger: Logger;
  /** A look (and what follows from it) is at work: the next timer skips rather than overlap. */
  private busy = false;
  /** The look at work, which `processDied` waits for. */
  private inFlight: Promise<void> = Promise.resolve();
  /**
   * One more at each process's start and end: a look that began before it says nothing about the
   * process now (its read may be of a process that has since died).
   */
  private epoch = 0;

  constructor(private readonly options: SupervisorOptions) {
    this.clock = options.clock ?? wallClock;
    const logger = options.logger ?? {
      warn: (m: string) => {
        console.warn(m);
      },
    };
    this.eventLog =
      options.eventLog === undefined ? undefined : new JsonlLog(options.eventLog, logger);
    this.telemetry = new WatchdogTelemetry({
      agent: options.agent ?? "agent",
      sessionId: options.sessionId,
      tracerProvider: options.tracerProvider,
      meterProvider: options.meterProvider,
      eventLog: this.eventLog,
    });
    this.channel = options.channel ?? fileChannel(options.stateDir, options.sessionId);
    this.logger = logger;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.watcher = new HeartbeatWatcher((now) => this.readWithinPoll(now), this.limits);
    this.steps = this.eventLog && new StepRollup();
    const intensity = intensityOptions(options.intensity, "Supervisor.intensity");
    this.intensity = new RestartIntensity(intensity);
    this.maxRestarts = intensity.maxRestarts;
    this.throttle = new AlertThrottle(options.throttleMs ?? 10 * 60_000);
    this.prove = { ...PROVE_MS, ...options.proveMs };
    for (const tier of TIERS)
      if (!(Number.isFinite(this.prove[tier]) && this.prove[tier] >= 0))
        throw new SelfHealConfigError(
          `Supervisor.proveMs.${tier}`,
          `expected a number of ms >= 0, got ${this.prove[tier]}`,
        );
    const pollMs = this.pollMs();
    if (!(Number.isFinite(pollMs) && pollMs > 0))
      throw new SelfHealConfigError(
        "Supervisor.pollMs",
        `expected a positive number of ms, got ${pollMs}`,
      );
    this.launchedAt = this.clock.now();
    const generation = options.generation ?? 1;
    if (!(Number.isSafeInteger(generation) && generation >= 1))
      throw new SelfHealConfigError(
        "Supervisor.generation",
        `expected a whole number >= 1, got ${generation}`,
      );
    this.generation = generation;
  }

  /** The generation of the run's process now (1, then one more per restart or rotation). */
  get currentGeneration(): number {
    return this.generation;
  }

  /** Whether it gave up (the restart intensity was reached). */
  get givenUp(): boolean {
    return this.gaveUp;
  }

  /**
   * Polls every `pollMs` until stop() or giving up. The next look is scheduled before this one
   * starts, whatever it throws or however long it takes: a look whose read has not answered
   * within the poll is abandoned (a `timeout` problem), and a timer that finds the previous look
   * still at work (a slow restart) skips rather than run two at once.
   */
  start(): void {
    this.begin(this.clock.now());
    const pollMs = this.pollMs();
    const schedule = () => {
      if (this.stopped) return;
      this.cancelTimer = this.clock.setTimer(pollMs, () => {
        schedule();
        if (this.busy) return;
        this.busy = true;
        this.tick()
          .catch((error: unknown) => {
            this.logger.warn(`selfheal watchdog: a look failed: ${String(error)}`);
          })
          .finally(() => {
            this.busy = false;
          });
      });
    };
    schedule();
  }

  private pollMs(): number {
    return this.options.pollMs ?? 5_000;
  }

  /**
   * The channel's read, bounded by one poll on the supervisor's clock: a read that throws or has
   * not answered by then is a problem for this look (the read itself is abandoned).
   */
  private readWithinPoll(now: number): Promise<ReadResult> {
    const pollMs = this.pollMs();
    let cancel: (() => void) | undefined;
    const late = new Promise<ReadResult>((resolve) => {
      cancel = this.clock.setTimer(
        pollMs,
        () => {
          resolve({ ok: false, problem: "timeout", detail: `no answer within ${pollMs} ms` });
        },
        { unref: true },
      );
    });
    const read = Promise.resolve()
      .then(() => this.channel.read(now))
      .catch((error: unknown): ReadResult => ({
        ok: false,
        problem: "garbage",
        detail: String(error),
      }));
    return Promise.race([read, late]).finally(() => cancel?.());
  }

  /** Stops looking; the step durations not yet written are written (see `flush()`). */
  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    this.writeSteps(this.steps?.drain());
  }

  /** Supervision starts (at `start()` or the first look): the limits in effect go to the log. */
  private begin(now: number): void {
    if (this.begun) return;
    this.begun = true;
    const { stallMs, graceMs, deadMs } = this.limits;
    const stageStallMs: Record<string, number> = {};
    for (const [stage, ms] of Object.entries(this.limits.stageStallMs))
      if (ms !== undefined) stageStallMs[stage] = ms;
    this.telemetry.recordLimits({ at: now, stallMs, stageStallMs, graceMs, deadMs });
  }

  private writeSteps(entries: StepRollupEntry[] | undefined): void {
    for (const entry of entries ?? []) this.telemetry.recordSteps(entry);
  }

  /** Resolves once every event is in the event log. */
  flush(): Promise<void> {
    return this.eventLog?.flush() ?? Promise.resolve();
  }

  /**
   * One look at the heartbeat, and what follows from it. Only the current process's beats are
   * judged: between a tier's decision and the next process's start (a rotation's backoff, Tier 2
   * waiting for its acknowledgement) nothing is, and a new process is `starting` until its first
   * beat or the dead limit.
   */
  tick(): Promise<void> {
    const look = this.look();
    this.inFlight = look.catch(() => undefined);
    return look;
  }

  private async look(): Promise<void> {
    if (this.stopped) return;
    const now = this.clock.now();
    this.begin(now);
    this.writeSteps(this.steps?.due(now));
    const epoch = this.epoch;
    const pending = this.pending;
    if (pending?.rotateAt !== undefined) {
      if (now >= pending.rotateAt) await this.rotate(pending.reason, now);
      return;
    }
    if (pending?.ackSeq !== undefined) {
      const acknowledged = (await this.acked()) >= pending.ackSeq;
      if (this.voided(epoch)) return;
      if (acknowledged || now >= pending.until) await this.restart(pending, acknowledged, now);
      return;
    }
    const seen = await this.watcher.look(now, { generation: this.generation, at: this.launchedAt });
    // The process ended (or another started) while the file was read: this look is void.
    if (this.voided(epoch)) return;
    if (seen.heartbeat) this.steps?.observe(seen.heartbeat, now);
    if (seen.verdict !== this.lastVerdict) {
      this.lastVerdict = seen.verdict;
      this.emit({
        kind: "verdict",
        at: now,
        verdict: seen.verdict,
        reason: seen.reason,
        generation: this.generation,
        ...(seen.heartbeat && { pid: seen.heartbeat.pid }),
      });
    }
    if (seen.verdict === "starting") return;
    const step = seen.heartbeat?.stepIdx;
    // A restarted process shows progress by moving past the step it resumed from: its previous
    // process may have moved once more after it was last seen (during a rotation's backoff).
    if (pending && pending.tier !== "nudge" && !pending.resumed && step !== undefined) {
      pending.resumed = true;
      pending.fromStep = Math.max(pending.fromStep, step);
    }
    const moved = step !== undefined && step > (pending?.fromStep ?? this.lastStep);
    if (step !== undefined) this.lastStep = Math.max(this.lastStep, step);
    if (pending) {
      const healthy = seen.verdict === "healthy";
      if (moved && healthy && pending.progressed !== true) {
        pending.progressed = true;
        pending.progressStep = step;
      }
      // A restarted run still at the one step that showed progress is proved until a stall on it
      // would be seen: else a run that moves one step after each restart and stalls again would
      // count every restart recovered, and its loop would never end.
      const until =
        pending.tier !== "nudge" && seen.heartbeat && step === pending.progressStep
          ? Math.max(pending.until, this.stallSeenBy(seen.heartbeat, now))
          : pending.until;
      // Progress, then a fall back within the proof period: the tier did not hold.
      const relapsed = pending.progressed === true && !healthy;
      if (!relapsed && now < until) return; // still proving
      const recovered = !relapsed && pending.progressed === true;
      this.emit({
        kind: "tier_result",
        at: now,
        tier: pending.tier,
        outcome: recovered ? "recovered" : "failed",
      });
      this.pending = undefined;
      if (recovered) {
        this.unheld = 0;
        return;
      }
      const why = relapsed
        ? `${pending.tier} did not hold: ${seen.reason}`
        : `${pending.tier} did not help`;
      await this.run(escalate(pending.tier, seen.verdict), why, now);
      return;
    }
    if (seen.verdict !== "healthy") await this.run(FIRST_TIER[seen.verdict], seen.reason, now);
  }

  /**
   * When a stall on `heartbeat`'s step is seen at the latest: its stage's stall limit after the
   * step, not before the start-up grace ends, plus one poll. A timestamp is trusted up to the
   * reader's skew ahead of `now`, as the verdict trusts it.
   */
  private stallSeenBy(heartbeat: Heartbeat, now: number): number {
    const { stallMs, stageStallMs, graceMs } = this.limits;
    const trusted = (at: number) => Math.min(at, now + MAX_SKEW_MS);
    const seenAt = Math.max(
      trusted(heartbeat.stepAt) + (stageStallMs[heartbeat.stage] ?? stallMs),
      trusted(heartbeat.startedAt) + graceMs,
    );
    return seenAt + this.pollMs();
  }

  /** Whether a look that began at `epoch` is void: a process started or ended since, or stopped. */
  private voided(epoch: number): boolean {
    return this.epoch !== epoch || this.stopped;
  }

  /**
   * The run's process ended on its own with a failure: dead now, without waiting for its
   * heartbeat to go stale. Rotated (within the restart intensity).
   */
  async processDied(reason: string): Promise<void> {
    this.epoch++; // a look at work now says nothing more
    await this.inFlight;
    if (this.stopped || this.pending?.rotateAt !== undefined) return;
    const now = this.clock.now();
    // A tier still at work has failed: its run is gone.
    if (this.pending) {
      this.emit({ kind: "tier_result", at: now, tier: this.pending.tier, outcome: "failed" });
      this.pending = undefined;
    }
    this.lastVerdict = "session_dead";
    this.emit({
      kind: "verdict",
      at: now,
      verdict: "session_dead",
      reason,
      generation: this.generation,
    });
    await this.run("rotation", reason, now);
  }

  /**
   * The run's process ended on its own with success (exit 0): the run is over. A tier at work is
   * recovered (the run got to its end), and supervision stops.
   */
  async processFinished(): Promise<void> {
    this.epoch++; // a look at work now says nothing more
    await this.inFlight;
    if (this.stopped) return;
    if (this.pending) {
      const { tier } = this.pending;
      this.pending = undefined;
      this.emit({ kind: "tier_result", at: this.clock.now(), tier, outcome: "recovered" });
    }
    this.stop();
  }

  private async run(tier: Tier, reason: string, now: number): Promise<void> {
    const { sessionId } = this.options;
    // Tiers 2 and 3 start a new process: both count against the one restart intensity, and only
    // a rotation (a crash loop's answer) waits a backoff. Restarts in a row that did not hold give
    // up too, however long each took (the intensity's period alone lets a slow loop go on).
    const decision = tier === "nudge" ? undefined : this.mayRestart(tier, now);
    if (decision?.restart === false) {
      this.gaveUp = true;
      this.pending = undefined;
      // Stopped first, so the step durations held go to the log before the verdict: a run's
      // last line is its gave_up, whatever minute the looks fell in.
      this.stop();
      this.emit({ kind: "gave_up", at: now, reason: decision.reason, tier });
      this.alert("gave_up", `supervision of ${sessionId} gave up`, decision.reason, now);
      return;
    }
    if (tier === "rotation") {
      const waitMs = decision?.waitMs ?? 0;
      const resumes = this.lastStep >= 0 ? `; its last step was ${this.lastStep}` : "";
      const why = `${reason}${resumes}`;
      this.emit({ kind: "tier", at: now, tier, reason: why });
      // After its backoff, on a later look: a look never waits.
      const rotateAt = now + waitMs;
      this.pending = { tier, fromStep: this.lastStep, until: rotateAt, rotateAt, reason: why };
      if (waitMs <= 0) await this.rotate(why, now);
      return;
    }
    this.emit({ kind: "tier", at: now, tier, reason });
    const text = tier === "nudge" ? `selfheal: ${reason}; carry on with your next step` : undefined;
    const sent = await this.channel.send({
      kind: tier,
      at: now,
      gen: this.generation,
      ...(text && { text }),
    });
    this.pending = { tier, fromStep: this.lastStep, until: now + this.prove[tier], reason };
    if (tier !== "context_reset") return;
    // Tier 2 restarts the run once it acknowledged the reset, or its proving time is over.
    const seq = (sent as Partial<InboxMessage> | undefined)?.seq;
    if (seq !== undefined && this.channel.acked) this.pending.ackSeq = seq;
    else await this.restart(this.pending, true, now);
  }

  /**
   * Whether Tier 2 or 3 may restart the run at `now` (recorded if so), or must give up: the
   * period's limit first (its reason says more), then the restarts in a row.
   */
  private mayRestart(tier: Tier, now: number): RestartDecision {
    const full = this.intensity.refusal(now);
    if (full !== undefined) return { restart: false, reason: full };
    if (this.unheld >= this.maxRestarts)
      return {
        restart: false,
        reason: `${this.unheld} restarts in a row did not hold (limit ${this.maxRestarts}): giving up`,
      };
    const decision = this.intensity.next(now, tier === "rotation");
    if (decision.restart) this.unheld++;
    return decision;
  }

  /** The highest seq the run acknowledged (a failed read: none yet). */
  private async acked(): Promise<number> {
    try {
      return (await this.channel.acked?.()) ?? 0;
    } catch {
      return 0;
    }
  }

  /**
   * Tier 2's restart. A reset the run did not acknowledge (frozen) is sent again, for the next
   * process: it is done once, by the process it reaches, never replayed by both.
   */
  private async restart(pending: Pending, acknowledged: boolean, now: number): Promise<void> {
    if (!acknowledged)
      await this.channel.send({ kind: "context_reset", at: now, gen: this.generation + 1 });
    await this.launch("restart");
    this.pending = {
      tier: "context_reset",
      fromStep: pending.fromStep,
      until: this.launchedAt + this.prove.context_reset,
      reason: pending.reason,
    };
  }

  /** Tier 3 itself, once its backoff is over. */
  private async rotate(reason: string, now: number): Promise<void> {
    await this.launch("rotate");
    this.alert("rotation", `${this.options.sessionId} was rotated`, reason, now);
    this.pending = {
      tier: "rotation",
      fromStep: this.lastStep,
      until: this.launchedAt + this.prove.rotation,
      reason,
    };
  }

  /** Starts the next generation of the run's process. */
  private async launch(how: "restart" | "rotate"): Promise<void> {
    this.generation++;
    this.epoch++;
    await this.options.control[how](this.generation);
    this.launchedAt = this.clock.now();
  }

  /** Tells a person, at most once per kind and period for this session. */
  private alert(kind: string, title: string, text: string, now: number): void {
    const { send, suppressed } = this.throttle.admit(`${this.options.sessionId}/${kind}`, now);
    if (!send) return;
    const more = suppressed > 0 ? ` (${suppressed} more since the last alert)` : "";
    void Promise.resolve()
      .then(() => this.options.notify?.({ title, text: text + more }))
      .catch(() => undefined); // a failing notifier never stops supervision
  }

  private emit(event: SupervisorEvent): void {
    this.telemetry.record(event);
    try {
      this.options.onEvent?.(event);
    } catch {
      // A listener that throws must not stop supervision.
    }
  }
}
