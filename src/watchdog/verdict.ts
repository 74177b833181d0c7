import type { Verdict } from "../telemetry/conventions.js";
import type { Heartbeat } from "./heartbeat.js";
import { MAX_SKEW_MS, readHeartbeat, type ReadResult, type Unreadable } from "./reader.js";

/** What the watchdog concludes about a run. */
export type { Verdict };

export interface Limits {
  /** No heartbeat for this long: the session is dead, ms (default 30 s). */
  deadMs: number;
  /** `stepIdx` unmoved for this long: stalled, ms (default 90 s)... */
  stallMs: number;
  /** ...or this long in a given stage (a long tool call may be slow, not stuck), ms. */
  stageStallMs: Readonly<Partial<Record<string, number>>>;
  /** The model's context limit in tokens; no bloat verdict without it. */
  tokenLimit: number | undefined;
  /** Share of the token limit above which the context is bloated (default 0.92). */
  bloatShare: number;
  /** After the session starts, no stall verdict for this long, ms (default 60 s). */
  graceMs: number;
}

export const DEFAULT_LIMITS: Limits = {
  deadMs: 30_000,
  stallMs: 90_000,
  stageStallMs: {},
  tokenLimit: undefined,
  bloatShare: 0.92,
  graceMs: 60_000,
};

/** Short limits (tests, tight budgets) keep a decimal: "0.6 s", not "1 s". */
const seconds = (ms: number) =>
  ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;

export interface Evaluation {
  verdict: Verdict;
  /** Why, in a line a person reads. */
  reason: string;
}

/**
 * The verdict on one heartbeat at `now`, pure. Dead beats everything (nothing writes); then a
 * bloated context (the run is alive but cannot go on); then a stall (alive, but its step has
 * not moved for its stage's limit, outside the start-up grace); else healthy, however slowly it
 * goes. `previous`, the last heartbeat seen, tells a new session (a rotation) from the old one.
 * A heartbeat's timestamps are trusted up to {@link MAX_SKEW_MS} ahead of `now` (the reader
 * refuses more); a `startedAt` further ahead gives no start-up grace.
 */
export function evaluate(
  heartbeat: Heartbeat,
  previous: Heartbeat | undefined,
  now: number,
  limits: Limits = DEFAULT_LIMITS,
): Evaluation {
  const silent = now - heartbeat.at;
  if (silent > limits.deadMs)
    return {
      verdict: "session_dead",
      reason: `no heartbeat for ${seconds(silent)} (limit ${seconds(limits.deadMs)})`,
    };
  const { tokenLimit } = limits;
  if (tokenLimit !== undefined && heartbeat.contextTokens !== undefined) {
    const share = heartbeat.contextTokens / tokenLimit;
    if (share > limits.bloatShare)
      return {
        verdict: "context_bloat",
        reason: `context at ${Math.round(share * 100)}% of ${tokenLimit} tokens (limit ${Math.round(limits.bloatShare * 100)}%)`,
      };
  }
  const stallLimit = limits.stageStallMs[heartbeat.stage] ?? limits.stallMs;
  const still = now - heartbeat.stepAt;
  // The grace counts from the session's start; a start later than the skew allowance allows
  // (a forged or broken clock) buys no grace, so it cannot hide a stall.
  const sinceStart = now - heartbeat.startedAt;
  const starting = sinceStart >= -MAX_SKEW_MS && sinceStart < limits.graceMs;
  if (!starting && still > stallLimit)
    return {
      verdict: "stalled",
      reason: `step ${heartbeat.stepIdx} unmoved for ${seconds(still)} in stage ${heartbeat.stage} (limit ${seconds(stallLimit)})`,
    };
  const restarted =
    previous !== undefined &&
    (previous.startedAt !== heartbeat.startedAt || previous.gen !== heartbeat.gen);
  const who = heartbeat.gen === undefined ? "new session" : `generation ${heartbeat.gen}`;
  return {
    verdict: "healthy",
    reason: restarted
      ? `${who} resumed from step ${heartbeat.stepIdx}`
      : `step ${heartbeat.stepIdx} in stage ${heartbeat.stage}`,
  };
}

/**
 * The process the supervisor started last: what the watcher judges. Beats written before it (by
 * an earlier process, or an earlier run of the supervisor) say nothing about it.
 */
export interface Launch {
  /** Its generation: its beats carry it in `gen`. */
  generation: number;
  /** When it was started, on the supervisor's clock, ms. */
  at: number;
}

/**
 * Whether a beat is the launched process's: its `gen` when it carries one; else (an agent that
 * does not know its generation) written since the launch.
 */
const isOf = (heartbeat: Heartbeat, launch: Launch): boolean =>
  heartbeat.gen === undefined ? heartbeat.at >= launch.at : heartbeat.gen === launch.generation;

/**
 * Reads a run's heartbeat file and judges it. A file that cannot be used (missing, empty,
 * partial, garbage, future-dated) is read again on the next look: only `unreadableAfter` looks
 * in a row (default 3) make it `unreadable`; until then the last verdict stands. One torn or
 * odd read is never a verdict.
 */
export class HeartbeatWatcher {
  private previous: Heartbeat | undefined;
  private last: Evaluation = { verdict: "healthy", reason: "no heartbeat read yet" };
  private failures = 0;
  /** The generation whose beat was judged last: once it has beaten, it is not `starting`. */
  private judged: number | undefined;
  private readonly read: (now: number) => Promise<ReadResult>;

  /** `source`: the heartbeat file, or a function that reads the heartbeat from elsewhere. */
  constructor(
    source: string | ((now: number) => Promise<ReadResult>),
    private readonly limits: Limits = DEFAULT_LIMITS,
    private readonly unreadableAfter = 3,
  ) {
    this.read = typeof source === "string" ? (now) => readHeartbeat(source, now) : source;
  }

  /**
   * One look at `now`. With `launch`, only that process's beats are judged. Until one of them
   * has been, the verdict is `starting` for the dead limit from its start (a missing or
   * unreadable file is not counted against it), then `session_dead` if the file still holds an
   * earlier process's beat. Once it has beaten, a failed look keeps the last verdict as always
   * (only `unreadableAfter` in a row make it `unreadable`), and an earlier process's beat counts
   * as a failed look. A beat of an earlier process is never judged, nor returned.
   */
  async look(
    now: number,
    launch?: Launch,
  ): Promise<Evaluation & { heartbeat?: Heartbeat; problem?: Unreadable }> {
    let read = await this.read(now);
    const beaten = launch !== undefined && this.judged === launch.generation;
    if (launch && read.ok && !isOf(read.heartbeat, launch)) {
      const gen = read.heartbeat.gen ?? "?";
      if (!beaten && now - launch.at >= this.limits.deadMs) {
        this.last = {
          verdict: "session_dead",
          reason: `generation ${launch.generation} wrote no heartbeat within ${seconds(this.limits.deadMs)} of its start (the file is generation ${gen}'s, step ${read.heartbeat.stepIdx})`,
        };
        return { ...this.last };
      }
      read = { ok: false, problem: "invalid", detail: `a beat of generation ${gen}` };
    }
    if (launch && !read.ok && !beaten) {
      const since = now - launch.at;
      if (since < this.limits.deadMs) {
        this.failures = 0;
        this.last = {
          verdict: "starting",
          reason: `generation ${launch.generation} started ${seconds(Math.max(0, since))} ago; its first heartbeat is due within ${seconds(this.limits.deadMs)}`,
        };
        return { ...this.last, problem: read.problem };
      }
    }
    if (!read.ok) {
      this.failures++;
      if (this.failures >= this.unreadableAfter) {
        this.last = {
          verdict: "unreadable",
          reason: `heartbeat ${read.problem} ${this.failures} times in a row (${read.detail})`,
        };
      }
      return { ...this.last, problem: read.problem };
    }
    this.failures = 0;
    if (launch) this.judged = launch.generation;
    this.last = evaluate(read.heartbeat, this.previous, now, this.limits);
    this.previous = read.heartbeat;
    return { ...this.last, heartbeat: read.heartbeat };
  }
}
