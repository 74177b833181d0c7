import { Buckets } from "../telemetry/log-buckets.js";
import type { Heartbeat, Stage } from "./heartbeat.js";

/** The span of one rollup: a minute of the supervisor's clock, ms. */
export const ROLLUP_MS = 60_000;

/** The start of the rollup minute `now` falls in, ms. */
export const minuteOf = (now: number): number => Math.floor(now / ROLLUP_MS) * ROLLUP_MS;

/** The steps of one stage that the supervisor saw complete in one minute. */
export interface StepRollupEntry {
  /** Start of the minute, on the supervisor's clock, ms. */
  at: number;
  stage: Stage;
  /** Steps counted. */
  steps: number;
  /** Their durations, as log buckets (`Buckets.toJSON()`). */
  durationsMs: Record<string, number>;
}

/** Whether two beats were written by one process: same generation, session start and pid. */
const sameProcess = (a: Heartbeat, b: Heartbeat): boolean =>
  a.gen === b.gen && a.startedAt === b.startedAt && a.pid === b.pid;

/**
 * Step durations from the beats a supervisor sees, summed per stage and minute. When a beat's
 * `stepIdx` moved past the previous beat's (the same process's), the time between their `stepAt`
 * is split evenly over the steps moved, and counted under the previous beat's stage: the stage
 * the run showed while the step was unmoved, the one a stall verdict is judged on. A beat of
 * another process (a restart, a rotation) starts over: no duration spans two processes. Pure: the
 * caller says when (`now`) and writes what it returns.
 */
export class StepRollup {
  private previous: Heartbeat | undefined;
  /** The minute the counts below are of; undefined while there are none. */
  private minute: number | undefined;
  /** Per stage, in the order first seen this minute. */
  private stages = new Map<Stage, Buckets>();

  /**
   * The rollups of a minute before `now`'s, taken out; none while the minute is still current (or
   * the clock went back). Call it before `observe` at each look.
   */
  due(now: number): StepRollupEntry[] {
    if (this.minute === undefined || minuteOf(now) <= this.minute) return [];
    return this.drain();
  }

  /** Every rollup held, taken out (supervision stops). */
  drain(): StepRollupEntry[] {
    const at = this.minute;
    const stages = this.stages;
    this.minute = undefined;
    this.stages = new Map();
    if (at === undefined) return [];
    return [...stages].map(([stage, buckets]) => ({
      at,
      stage,
      steps: buckets.total,
      durationsMs: buckets.toJSON(),
    }));
  }

  /** A beat the supervisor judged at `now`. */
  observe(heartbeat: Heartbeat, now: number): void {
    const previous = this.previous;
    this.previous = heartbeat;
    if (!previous || !sameProcess(previous, heartbeat)) return;
    const steps = heartbeat.stepIdx - previous.stepIdx;
    const duration = heartbeat.stepAt - previous.stepAt;
    if (!(Number.isSafeInteger(steps) && steps > 0 && Number.isFinite(duration) && duration >= 0))
      return;
    this.minute ??= minuteOf(now);
    let buckets = this.stages.get(previous.stage);
    if (!buckets) {
      buckets = new Buckets();
      this.stages.set(previous.stage, buckets);
    }
    buckets.add(duration / steps, steps);
  }
}
