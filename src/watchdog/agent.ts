import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { systemClock, type Clock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import { heartbeat, writeAtomic, type Beat, type HeartbeatWriter } from "./heartbeat.js";

/** A message from the supervisor, in the run's inbox. */
export interface InboxMessage {
  /** Increasing per session: a message is handled once. */
  seq: number;
  kind: "nudge" | "context_reset";
  at: number;
  /** For a nudge: what to tell the run (e.g. "you stopped before an LLM call; go on"). */
  text?: string;
}

/** The inbox and snapshot files of a session, beside its heartbeat. */
export const inboxFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.inbox.json`);
export const snapshotFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.snapshot.json`);

/** A snapshot that cannot be read back (corrupt, or not one): restoring it would lose state. */
export class SnapshotError extends Error {
  override readonly name = "SnapshotError";
  readonly code = "SELFHEAL_SNAPSHOT";
}

/** Puts a message in a run's inbox (the supervisor's side), atomically. */
export async function sendToInbox(
  stateDir: string,
  sessionId: string,
  message: Omit<InboxMessage, "seq">,
): Promise<InboxMessage> {
  const file = inboxFile(stateDir, sessionId);
  const messages = await readInbox(file);
  const seq = (messages.at(-1)?.seq ?? 0) + 1;
  const sent: InboxMessage = { ...message, seq };
  // The last few are enough: a run handles what it has not seen by seq.
  await writeAtomic(stateDir, file, JSON.stringify({ messages: [...messages.slice(-19), sent] }));
  return sent;
}

async function readInbox(file: string): Promise<InboxMessage[]> {
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as { messages?: unknown };
    if (!Array.isArray(parsed.messages)) return [];
    return parsed.messages.filter(
      (m): m is InboxMessage =>
        typeof m === "object" &&
        m !== null &&
        Number.isSafeInteger((m as InboxMessage).seq) &&
        ((m as InboxMessage).kind === "nudge" || (m as InboxMessage).kind === "context_reset"),
    );
  } catch {
    return []; // no inbox yet, or one being replaced: read again on the next poll
  }
}

export interface SupervisedOptions {
  /** Default: `SELFHEAL_STATE_DIR` (set by `selfheal watch`). */
  stateDir?: string;
  /** Default: `SELFHEAL_SESSION_ID`, else "agent". */
  sessionId?: string;
  /** Heartbeat throttle, ms (default 1000). */
  minIntervalMs?: number;
  /** How often the inbox is read, ms (default 500). */
  pollMs?: number;
  /**
   * While the process lives, the last beat is written again after this long without one, ms
   * (0: never). A run stuck awaiting a call then reads as stalled (its step does not move) rather
   * than dead (its process is gone or frozen). Default: a third of the dead limit that
   * `selfheal watch` passes in `SELFHEAL_WATCH_DEAD_MS`, bounded to 100 ms - 10 s (see
   * `keepAliveFor`); 10 s (a third of the default 30 s) without it. The inbox is read, and the
   * keep-alive checked, every `pollMs`, so a beat is at most `keepAliveMs + pollMs` old.
   */
  keepAliveMs?: number;
  clock?: Clock;
}

/**
 * The environment `selfheal watch` gives its child: where its files are and the limits it is
 * supervised with (whole ms), so the agent can keep its beats inside them.
 */
export const WATCH_ENV = {
  stateDir: "SELFHEAL_STATE_DIR",
  sessionId: "SELFHEAL_SESSION_ID",
  deadMs: "SELFHEAL_WATCH_DEAD_MS",
  stallMs: "SELFHEAL_WATCH_STALL_MS",
  graceMs: "SELFHEAL_WATCH_GRACE_MS",
  pollMs: "SELFHEAL_WATCH_POLL_MS",
} as const;

/** The keep-alive bounds, ms: never more often than this, never less often than that. */
const KEEP_ALIVE_MIN_MS = 100;
const KEEP_ALIVE_MAX_MS = 10_000;

/**
 * The keep-alive interval for a dead limit (ms, as `SELFHEAL_WATCH_DEAD_MS` holds it): a third of
 * it, bounded to 100 ms - 10 s, so two refreshes can be missed before the run reads as dead. A
 * missing or bad value gives 10 s (a third of the default 30 s dead limit).
 */
export function keepAliveFor(deadMs: string | number | undefined): number {
  const dead = typeof deadMs === "string" && deadMs.trim() !== "" ? Number(deadMs) : deadMs;
  if (typeof dead !== "number" || !Number.isFinite(dead) || dead <= 0) return KEEP_ALIVE_MAX_MS;
  return Math.min(KEEP_ALIVE_MAX_MS, Math.max(KEEP_ALIVE_MIN_MS, Math.floor(dead / 3)));
}

type Handler = (message: InboxMessage) => void | Promise<void>;

/**
 * The agent's side of supervision: it beats, hears the supervisor's nudges and context resets,
 * and keeps a snapshot of its state that a rotated process restores.
 */
export class Supervised {
  readonly stateDir: string;
  readonly sessionId: string;
  private readonly beats: HeartbeatWriter;
  private readonly clock: Clock;
  private readonly pollMs: number;
  private readonly keepAliveMs: number;
  private readonly handlers = { nudge: new Set<Handler>(), context_reset: new Set<Handler>() };
  private seen = 0;
  private cancelPoll: (() => void) | undefined;
  private closed = false;

  constructor(options: SupervisedOptions = {}) {
    const stateDir = options.stateDir ?? process.env.SELFHEAL_STATE_DIR;
    if (!stateDir)
      throw new SelfHealConfigError(
        "supervised.stateDir",
        "pass stateDir, or run under `selfheal watch` (SELFHEAL_STATE_DIR)",
      );
    this.stateDir = stateDir;
    this.sessionId = options.sessionId ?? process.env.SELFHEAL_SESSION_ID ?? "agent";
    this.clock = options.clock ?? systemClock;
    this.pollMs = options.pollMs ?? 500;
    this.keepAliveMs = options.keepAliveMs ?? keepAliveFor(process.env[WATCH_ENV.deadMs]);
    this.beats = heartbeat({
      stateDir,
      sessionId: this.sessionId,
      clock: this.clock,
      ...(options.minIntervalMs !== undefined && { minIntervalMs: options.minIntervalMs }),
    });
    this.schedule();
  }

  beat(beat: Beat): Promise<void> {
    return this.beats.beat(beat);
  }

  /** One step more (see HeartbeatWriter.advance): pass `run` as the engine's `heartbeat`. */
  advance(beat: Omit<Beat, "stepIdx">): Promise<void> {
    return this.beats.advance(beat);
  }

  /** Calls `handler` for each nudge (once per message); returns a function that stops it. */
  onNudge(handler: Handler): () => void {
    this.handlers.nudge.add(handler);
    return () => this.handlers.nudge.delete(handler);
  }

  /** Calls `handler` when the supervisor asks for a context reset. */
  onContextReset(handler: Handler): () => void {
    this.handlers.context_reset.add(handler);
    return () => this.handlers.context_reset.delete(handler);
  }

  /** Saves the run's state (JSON), atomically: what a rotated process resumes from. */
  async snapshot(state: unknown): Promise<void> {
    const step = this.beats.current?.stepIdx ?? null;
    const text = JSON.stringify({ v: 1, at: this.clock.now(), stepIdx: step, state });
    await writeAtomic(this.stateDir, snapshotFile(this.stateDir, this.sessionId), text);
  }

  /** The last snapshot's state, or undefined when there is none. Throws SnapshotError when corrupt. */
  async restore<T = unknown>(): Promise<T | undefined> {
    let text: string;
    try {
      text = await readFile(snapshotFile(this.stateDir, this.sessionId), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    try {
      const parsed = JSON.parse(text) as { v?: unknown; state?: T };
      if (parsed.v !== 1) throw new SnapshotError("not a selfheal snapshot (version)");
      return parsed.state;
    } catch (error) {
      if (error instanceof SnapshotError) throw error;
      throw new SnapshotError("the snapshot is not valid JSON: restoring it would lose state", {
        cause: error,
      });
    }
  }

  /** Reads the inbox now (also done every `pollMs`). */
  async poll(): Promise<void> {
    const messages = await readInbox(inboxFile(this.stateDir, this.sessionId));
    for (const message of messages) {
      if (message.seq <= this.seen) continue;
      this.seen = message.seq;
      for (const handler of this.handlers[message.kind]) {
        try {
          await handler(message);
        } catch {
          // A handler that throws must not stop the others or the polling.
        }
      }
    }
  }

  /** Writes the waiting beat and stops reading the inbox. */
  async close(): Promise<void> {
    this.closed = true;
    this.cancelPoll?.();
    await this.beats.flush();
  }

  private schedule(): void {
    if (this.closed) return;
    this.cancelPoll = this.clock.setTimer(
      this.pollMs,
      () => {
        const alive = this.keepAliveMs > 0 ? this.beats.refresh(this.keepAliveMs) : undefined;
        void Promise.all([alive, this.poll()])
          .catch(() => undefined) // a failed read or write is tried again on the next poll
          .finally(() => {
            this.schedule();
          });
      },
      { unref: true },
    );
  }
}

/** The agent's side of supervision (see Supervised). */
export function supervised(options?: SupervisedOptions): Supervised {
  return new Supervised(options);
}
