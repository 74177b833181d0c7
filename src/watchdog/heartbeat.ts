import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { wallClock, type Clock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";

/** Where a run is in its loop. Extensible: any short name a run wants to report. */
export type Stage = "planning" | "tool_call" | "llm_response" | "post_process" | (string & {});

/** One heartbeat, as written to `<stateDir>/<sessionId>.heartbeat.json`. */
export interface Heartbeat {
  /** Format version. */
  v: 1;
  sessionId: string;
  pid: number;
  stage: Stage;
  /** Steps done so far; never goes down within a session. */
  stepIdx: number;
  /** Tokens in the run's context now (for the bloat verdict), when it knows. */
  contextTokens?: number;
  lastTool?: string;
  /** When it was written, wall-clock ms. */
  at: number;
  /** When `stepIdx` last moved (or the session started), wall-clock ms: what a stall is timed on. */
  stepAt: number;
  /** When the session started, wall-clock ms (for the start-up grace period). */
  startedAt: number;
  /**
   * The generation of the process that wrote it, as `selfheal watch` numbers them
   * (`SELFHEAL_WATCH_GENERATION`): a beat of an earlier process is never judged as this one's.
   */
  gen?: number;
}

/** What a beat reports. */
export interface Beat {
  stage: Stage;
  stepIdx: number;
  contextTokens?: number;
  lastTool?: string;
}

export interface HeartbeatOptions {
  stateDir: string;
  sessionId: string;
  /** At most one write per this many ms (default 1000); a beat in between waits for it. */
  minIntervalMs?: number;
  /** The process's generation, written in each beat (see `Heartbeat.gen`). */
  generation?: number | undefined;
  clock?: Clock;
}

/** A beat that would move `stepIdx` back, or a bad field: the beat is refused, nothing written. */
export class HeartbeatError extends Error {
  override readonly name = "HeartbeatError";
  readonly code = "SELFHEAL_HEARTBEAT";
}

/** The heartbeat file of a session. */
export const heartbeatFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.heartbeat.json`);

/** Session ids become file names: plain characters only. */
const SESSION_ID = /^[A-Za-z0-9_.-]{1,128}$/;
/** Whether `id` can be a session id: 1-128 letters, digits, `_`, `.` or `-` (it names files). */
export const isSessionId = (id: string): boolean =>
  SESSION_ID.test(id) && id !== "." && id !== "..";
/** Stage names: snake_case, a letter first, up to 40 characters (they label lines and limits). */
const STAGE = /^[a-z][a-z0-9_]{0,39}$/;
/** Whether `name` can be a stage: a short snake_case name (`tool_call`). */
export const isStage = (name: string): boolean => STAGE.test(name);
/** Errors a rename can hit while another process holds the file (Windows, some network disks). */
const RETRIED = new Set(["EBUSY", "EPERM", "EACCES"]);
const ATTEMPTS = 3;

/** Writes a session's heartbeats; made by `heartbeat()`. */
export class HeartbeatWriter {
  readonly file: string;
  private readonly minIntervalMs: number;
  private readonly clock: Clock;
  private readonly startedAt: number;
  private last: Heartbeat | undefined;
  private lastStep = Number.NEGATIVE_INFINITY;
  private stepAt: number;
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private pending: Beat | undefined;
  private cancelTimer: (() => void) | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly options: HeartbeatOptions) {
    if (typeof options.stateDir !== "string" || options.stateDir === "")
      throw new SelfHealConfigError("heartbeat.stateDir", "expected a directory path");
    if (typeof options.sessionId !== "string" || !isSessionId(options.sessionId))
      throw new SelfHealConfigError(
        "heartbeat.sessionId",
        "expected 1-128 letters, digits, '_', '.' or '-' (it names a file)",
      );
    const interval = options.minIntervalMs ?? 1_000;
    if (!Number.isFinite(interval) || interval < 0)
      throw new SelfHealConfigError(
        "heartbeat.minIntervalMs",
        `expected a number >= 0, got ${interval}`,
      );
    this.minIntervalMs = interval;
    const gen = options.generation;
    if (gen !== undefined && !(Number.isSafeInteger(gen) && gen >= 1))
      throw new SelfHealConfigError(
        "heartbeat.generation",
        `expected a whole number >= 1, got ${gen}`,
      );
    this.clock = options.clock ?? wallClock;
    this.file = heartbeatFile(options.stateDir, options.sessionId);
    this.startedAt = this.clock.now();
    this.stepAt = this.startedAt;
    // A process killed mid-write left its temporary file behind: remove those of this session.
    void cleanStaleTemps(options.stateDir, options.sessionId).catch(() => undefined);
  }

  /**
   * Reports progress. Throws `HeartbeatError` (and writes nothing) for a `stepIdx` below the last
   * one or a bad field. Written at once, or at the end of the throttle interval (the latest beat
   * wins); `flush()` writes a waiting beat now.
   */
  beat(beat: Beat): Promise<void> {
    check(beat, this.lastStep);
    const now = this.clock.now();
    if (beat.stepIdx > this.lastStep) this.stepAt = now;
    this.lastStep = beat.stepIdx;
    const wait = this.lastWriteAt + this.minIntervalMs - now;
    if (wait <= 0 && !this.cancelTimer) return this.write(beat);
    this.pending = beat;
    this.cancelTimer ??= this.clock.setTimer(Math.max(0, wait), () => {
      this.cancelTimer = undefined;
      void this.flush();
    });
    return this.writing;
  }

  /**
   * One step more: beats with `stepIdx` one past the last (1 for the first). What the engine
   * calls after each tool call when given this writer as its `heartbeat`.
   */
  advance(beat: Omit<Beat, "stepIdx">): Promise<void> {
    return this.beat({ ...beat, stepIdx: Math.max(0, this.lastStep) + 1 });
  }

  /**
   * Writes the last beat again, its step unchanged, when nothing was written for `olderThanMs`:
   * the process is alive, so a run waiting on a hung call reads as stalled, not dead.
   */
  refresh(olderThanMs: number): Promise<void> {
    const last = this.last;
    if (!last || this.pending || this.clock.now() - this.lastWriteAt < olderThanMs)
      return this.writing;
    const { stage, stepIdx, contextTokens, lastTool } = last;
    return this.write({
      stage,
      stepIdx,
      ...(contextTokens !== undefined && { contextTokens }),
      ...(lastTool !== undefined && { lastTool }),
    });
  }

  /**
   * A restored process goes on from `stepIdx` (its snapshot's): `advance()` continues past it and
   * a beat below it is refused. Nothing is written.
   */
  resumeAt(stepIdx: number): void {
    this.lastStep = Math.max(this.lastStep, stepIdx);
  }

  /** Writes the beat waiting for its interval, if any (before an error, before exit). */
  flush(): Promise<void> {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const beat = this.pending;
    this.pending = undefined;
    return beat ? this.write(beat) : this.writing;
  }

  /** The last heartbeat written. */
  get current(): Heartbeat | undefined {
    return this.last;
  }

  private write(beat: Beat): Promise<void> {
    const heartbeat: Heartbeat = {
      v: 1,
      sessionId: this.options.sessionId,
      pid: process.pid,
      stage: beat.stage,
      stepIdx: beat.stepIdx,
      ...(beat.contextTokens !== undefined && { contextTokens: beat.contextTokens }),
      ...(beat.lastTool !== undefined && { lastTool: beat.lastTool }),
      at: this.clock.now(),
      stepAt: this.stepAt,
      startedAt: this.startedAt,
      ...(this.options.generation !== undefined && { gen: this.options.generation }),
    };
    this.lastWriteAt = heartbeat.at;
    // Writes go one after another: a later beat never lands under an earlier one.
    this.writing = this.writing
      .catch(() => undefined)
      .then(() => writeAtomic(this.options.stateDir, this.file, JSON.stringify(heartbeat)))
      .then(() => {
        this.last = heartbeat;
      });
    return this.writing;
  }
}

/** A session's heartbeat writer (see HeartbeatWriter). */
export function heartbeat(options: HeartbeatOptions): HeartbeatWriter {
  return new HeartbeatWriter(options);
}

/** A beat from user code (maybe plain JS): each field checked before anything is written. */
function check(input: unknown, lastStep: number): asserts input is Beat {
  if (typeof input !== "object" || input === null) throw new HeartbeatError("a beat is an object");
  const beat = input as Record<keyof Beat, unknown>;
  if (typeof beat.stage !== "string" || !isStage(beat.stage))
    throw new HeartbeatError(
      `stage must be a short snake_case name, got ${JSON.stringify(beat.stage)}`,
    );
  const step = beat.stepIdx;
  if (typeof step !== "number" || !Number.isSafeInteger(step) || step < 0)
    throw new HeartbeatError(`stepIdx must be an integer >= 0, got ${JSON.stringify(step)}`);
  if (step < lastStep)
    throw new HeartbeatError(
      `stepIdx went back from ${lastStep} to ${step}: it must never decrease`,
    );
  const tokens = beat.contextTokens;
  if (
    tokens !== undefined &&
    (typeof tokens !== "number" || !Number.isFinite(tokens) || tokens < 0)
  )
    throw new HeartbeatError(`contextTokens must be a number >= 0, got ${JSON.stringify(tokens)}`);
  if (beat.lastTool !== undefined && typeof beat.lastTool !== "string")
    throw new HeartbeatError("lastTool must be a string");
}

/**
 * Writes `text` to `file` so a reader sees the old content or the new, never a part: a temporary
 * file beside it, fsync, rename over. A rename refused while someone holds the file is retried.
 */
export async function writeAtomic(dir: string, file: string, text: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const handle = await open(temp, "w");
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  for (let attempt = 1; ; attempt++) {
    try {
      await rename(temp, file);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "";
      if (!RETRIED.has(code) || attempt >= ATTEMPTS) {
        await rm(temp, { force: true });
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 10 * attempt));
    }
  }
}

/** The temporary file `writeAtomic` makes for a session's file: `<file>.<pid>.<8 hex>.tmp`. */
const TEMP = /^(.+)\.json\.(\d+)\.[0-9a-f]{8}\.tmp$/;

/**
 * Removes the temporary files that writers of `sessionId`'s files (heartbeat, inbox, snapshot)
 * left in `stateDir` when killed mid-write: only names `writeAtomic` makes for this session, and
 * only those whose writing process is gone (a live writer's file is left alone). Resolves with the
 * names removed; a missing directory is nothing to clean.
 */
export async function cleanStaleTemps(stateDir: string, sessionId: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(stateDir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const match = TEMP.exec(name);
    if (
      !match?.[1]?.startsWith(`${sessionId}.`) ||
      match[1].slice(sessionId.length + 1).includes(".")
    )
      continue;
    const pid = Number(match[2]);
    if (pid === process.pid || alive(pid)) continue; // a write in flight
    try {
      await rm(join(stateDir, name), { force: true });
      removed.push(name);
    } catch {
      // gone already, or not ours to remove: leave it
    }
  }
  return removed;
}

/** Whether a process with this id runs (EPERM: it does, owned by someone else). */
function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
