import { join } from "node:path";
import { wallClock, type Clock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import {
  heartbeat,
  heartbeatFile,
  writeAtomic,
  type Beat,
  type HeartbeatWriter,
} from "./heartbeat.js";
import { readSmallFile } from "./reader.js";

/** A message from the supervisor, in the run's inbox. */
export interface InboxMessage {
  /** Increasing per session, across processes: a message is handled once. */
  seq: number;
  kind: "nudge" | "context_reset";
  at: number;
  /** For a nudge: what to tell the run (e.g. "you stopped before an LLM call; go on"). */
  text?: string;
  /**
   * The generation of the process it is for: an earlier process's message is skipped, a later
   * one's is left for that process. Absent: for whichever process reads it first.
   */
  gen?: number;
}

/**
 * The agent's acknowledgement (`<sessionId>.ack.json`): the highest `seq` it has handled or
 * skipped. A restarted process continues from it, so no message is handled twice; the
 * supervisor reads it to know a context reset was done.
 */
export interface InboxAck {
  v: 1;
  seq: number;
  /** The generation of the process that wrote it. */
  gen?: number;
  at: number;
}

/** The inbox, acknowledgement and snapshot files of a session, beside its heartbeat. */
export const inboxFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.inbox.json`);
export const ackFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.ack.json`);
export const snapshotFile = (stateDir: string, sessionId: string): string =>
  join(stateDir, `${sessionId}.snapshot.json`);

/** The largest snapshot restored, bytes: state past it is a bug, not a run to resume. */
const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
/** How long reading a snapshot may take (it may be large, the disk slow), ms. */
const SNAPSHOT_READ_TIMEOUT_MS = 30_000;

/** How many messages the inbox keeps: a run handles what it has not acknowledged, by seq. */
const INBOX_KEEPS = 20;

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
  const [messages, acked] = await Promise.all([readInbox(file), readAck(stateDir, sessionId)]);
  // Past what the run acknowledged too: a lost inbox must not restart seq under it.
  const seq = Math.max(messages.at(-1)?.seq ?? 0, acked) + 1;
  const sent: InboxMessage = { ...message, seq };
  const kept = [...messages.slice(1 - INBOX_KEEPS), sent];
  await writeAtomic(stateDir, file, JSON.stringify({ v: 1, messages: kept }));
  return sent;
}

/** The JSON in one of a session's small files, or undefined (missing, partial, foreign). */
async function readJson(file: string): Promise<unknown> {
  const text = await readSmallFile(file);
  if (typeof text !== "string") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined; // being replaced, or garbage: read again on the next poll
  }
}

const isMessage = (m: unknown): m is InboxMessage => {
  const { seq, kind, gen, at, text } = (typeof m === "object" && m !== null ? m : {}) as Record<
    keyof InboxMessage,
    unknown
  >;
  return (
    typeof seq === "number" &&
    Number.isSafeInteger(seq) &&
    seq >= 1 &&
    (kind === "nudge" || kind === "context_reset") &&
    typeof at === "number" &&
    Number.isFinite(at) &&
    (text === undefined || typeof text === "string") &&
    (gen === undefined || (typeof gen === "number" && Number.isSafeInteger(gen) && gen >= 1))
  );
};

async function readInbox(file: string): Promise<InboxMessage[]> {
  const parsed = (await readJson(file)) as { v?: unknown; messages?: unknown } | undefined;
  // No `v`: written before it was added, version 1.
  if (parsed?.v !== undefined && parsed.v !== 1) return [];
  if (!Array.isArray(parsed?.messages)) return [];
  return parsed.messages.filter(isMessage).sort((a, b) => a.seq - b.seq);
}

/**
 * The highest generation the session's files name (its heartbeat, acknowledgement and inbox), 0
 * for none: a new supervisor numbers its first process past it, so nothing an earlier run of it
 * left behind is taken for the new process's.
 */
export async function lastGeneration(stateDir: string, sessionId: string): Promise<number> {
  const [beat, ack, inbox] = await Promise.all([
    readJson(heartbeatFile(stateDir, sessionId)),
    readJson(ackFile(stateDir, sessionId)),
    readInbox(inboxFile(stateDir, sessionId)),
  ]);
  const gens = [beat, ack, ...inbox].map((v) => (v as { gen?: unknown } | undefined)?.gen);
  return Math.max(0, ...gens.filter((g): g is number => Number.isSafeInteger(g)));
}

/** The highest seq the session's agent acknowledged (0: none, or no readable acknowledgement). */
export async function readAck(stateDir: string, sessionId: string): Promise<number> {
  const parsed = (await readJson(ackFile(stateDir, sessionId))) as
    { v?: unknown; seq?: unknown } | undefined;
  if (parsed?.v !== 1) return 0; // none, or a version this reader does not know
  const seq = parsed.seq;
  return typeof seq === "number" && Number.isSafeInteger(seq) && seq > 0 ? seq : 0;
}

export interface SupervisedOptions {
  /** Default: `SELFHEAL_STATE_DIR` (set by `selfheal watch`). */
  stateDir?: string | undefined;
  /** Default: `SELFHEAL_SESSION_ID`, else "agent". */
  sessionId?: string | undefined;
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
  /**
   * This process's generation, carried by its beats and matched against the inbox's messages.
   * Default: `SELFHEAL_WATCH_GENERATION` (set by `selfheal watch`), else none.
   */
  generation?: number;
  clock?: Clock;
}

/**
 * The environment `selfheal watch` gives its child: where its files are and the limits it is
 * supervised with (whole ms), so the agent can keep its beats inside them.
 */
export const WATCH_ENV = {
  stateDir: "SELFHEAL_STATE_DIR",
  sessionId: "SELFHEAL_SESSION_ID",
  generation: "SELFHEAL_WATCH_GENERATION",
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

/** A generation from the environment: a whole number >= 1, else none. */
function generationFrom(value: string | undefined): number | undefined {
  const gen = value === undefined || value.trim() === "" ? NaN : Number(value);
  return Number.isSafeInteger(gen) && gen >= 1 ? gen : undefined;
}

/**
 * The agent's side of supervision: it beats, hears the supervisor's nudges and context resets,
 * and keeps a snapshot of its state that a rotated process restores.
 */
export class Supervised {
  readonly stateDir: string;
  readonly sessionId: string;
  /** This process's generation (see SupervisedOptions.generation). */
  readonly generation: number | undefined;
  private readonly beats: HeartbeatWriter;
  private readonly clock: Clock;
  private readonly pollMs: number;
  private readonly keepAliveMs: number;
  private readonly handlers = { nudge: new Set<Handler>(), context_reset: new Set<Handler>() };
  /** The highest seq handled or skipped; read from the acknowledgement on the first poll. */
  private acked: number | undefined;
  /** Polls one after another: a message is never handled by two at once. */
  private polling: Promise<void> = Promise.resolve();
  private cancelPoll: (() => void) | undefined;
  private started = false;
  private closed = false;

  constructor(options: SupervisedOptions = {}) {
    const stateDir = options.stateDir ?? process.env[WATCH_ENV.stateDir];
    if (!stateDir)
      throw new SelfHealConfigError(
        "supervised.stateDir",
        "pass stateDir, or run under `selfheal watch` (SELFHEAL_STATE_DIR)",
      );
    this.stateDir = stateDir;
    this.sessionId = options.sessionId ?? process.env[WATCH_ENV.sessionId] ?? "agent";
    this.generation = options.generation ?? generationFrom(process.env[WATCH_ENV.generation]);
    this.clock = options.clock ?? wallClock;
    this.pollMs = options.pollMs ?? 500;
    this.keepAliveMs = options.keepAliveMs ?? keepAliveFor(process.env[WATCH_ENV.deadMs]);
    this.beats = heartbeat({
      stateDir,
      sessionId: this.sessionId,
      clock: this.clock,
      generation: this.generation,
      ...(options.minIntervalMs !== undefined && { minIntervalMs: options.minIntervalMs }),
    });
  }

  /** Reports progress (see HeartbeatWriter.beat); the first beat starts reading the inbox. */
  beat(beat: Beat): Promise<void> {
    const written = this.beats.beat(beat);
    this.begin();
    return written;
  }

  /** One step more (see HeartbeatWriter.advance): pass `run` as the engine's `heartbeat`. */
  advance(beat: Omit<Beat, "stepIdx">): Promise<void> {
    const written = this.beats.advance(beat);
    this.begin();
    return written;
  }

  /**
   * The first beat: the run is at work, its handlers registered (after `restore()`, say). The
   * inbox is read now, then every `pollMs`, with the keep-alive.
   */
  private begin(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.poll().catch(() => undefined);
    this.schedule();
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

  /**
   * The last snapshot's state, or undefined when there is none. Throws SnapshotError when it
   * cannot be used (corrupt, not a snapshot, no state, not a regular file, over 64 MiB): a silent
   * fresh start would lose the run's work. The snapshot's `stepIdx` becomes this process's step:
   * `advance()` goes on from it, and a beat below it is refused.
   */
  async restore<T = unknown>(): Promise<T | undefined> {
    const text = await readSmallFile(
      snapshotFile(this.stateDir, this.sessionId),
      SNAPSHOT_READ_TIMEOUT_MS,
      MAX_SNAPSHOT_BYTES,
    );
    if (typeof text !== "string") {
      if (text.problem === "missing") return undefined;
      throw new SnapshotError(`the snapshot cannot be read: ${text.problem} (${text.detail})`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new SnapshotError("the snapshot is not valid JSON: restoring it would lose state", {
        cause: error,
      });
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new SnapshotError("the snapshot is not a JSON object");
    const snapshot = parsed as { v?: unknown; state?: T; stepIdx?: unknown };
    if (snapshot.v !== 1) throw new SnapshotError("not a selfheal snapshot (version)");
    if (!("state" in snapshot)) throw new SnapshotError("the snapshot holds no state");
    const step = snapshot.stepIdx;
    if (typeof step === "number" && Number.isSafeInteger(step) && step >= 0)
      this.beats.resumeAt(step);
    return snapshot.state;
  }

  /**
   * Reads the inbox now (also done at the first beat, then every `pollMs`: register handlers
   * before the first beat). Messages are taken in seq order past the
   * acknowledged one: each for this generation (or for any) is handled, then acknowledged; one
   * for an earlier generation is skipped; one for a later generation stops the read (it is that
   * process's to take).
   */
  poll(): Promise<void> {
    this.polling = this.polling.catch(() => undefined).then(() => this.read());
    return this.polling;
  }

  private async read(): Promise<void> {
    // A restarted process continues from what its predecessors acknowledged.
    this.acked ??= await readAck(this.stateDir, this.sessionId);
    for (const message of await readInbox(inboxFile(this.stateDir, this.sessionId))) {
      if (message.seq <= this.acked) continue;
      const { gen } = message;
      if (gen !== undefined && this.generation !== undefined && gen > this.generation) return;
      const mine = gen === undefined || this.generation === undefined || gen === this.generation;
      if (mine) {
        for (const handler of this.handlers[message.kind]) {
          try {
            await handler(message);
          } catch {
            // A handler that throws must not stop the others or the polling.
          }
        }
      }
      // Acknowledged one at a time: a crash between two messages replays neither done one.
      await this.acknowledge(message.seq);
    }
  }

  private async acknowledge(seq: number): Promise<void> {
    this.acked = seq;
    const ack: InboxAck = {
      v: 1,
      seq,
      ...(this.generation !== undefined && { gen: this.generation }),
      at: this.clock.now(),
    };
    await writeAtomic(this.stateDir, ackFile(this.stateDir, this.sessionId), JSON.stringify(ack));
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
