import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { notRegularFile } from "../file-kind.js";
import type { Heartbeat } from "./heartbeat.js";

/**
 * Why a heartbeat file could not be used this time. `not_a_file`: the path is a FIFO, a device,
 * a directory or a socket (never read); `too_large`: over {@link MAX_HEARTBEAT_BYTES} (never
 * read whole); `timeout`: the look did not answer within its time box.
 */
export type Unreadable =
  "missing" | "empty" | "garbage" | "invalid" | "future" | "not_a_file" | "too_large" | "timeout";

export type ReadResult = { ok: true; heartbeat: Heartbeat } | Unread;
/** Why a file could not be used this time, in a line a person reads. */
export interface Unread {
  ok: false;
  problem: Unreadable;
  detail: string;
}

/** A file larger than this is not a heartbeat (and is not read whole), bytes. */
export const MAX_HEARTBEAT_BYTES = 64 * 1024;

/**
 * How far ahead of the reader's clock any timestamp of a heartbeat (`at`, `stepAt`, `startedAt`)
 * may be: the clocks of two processes, or two hosts sharing a volume, ms.
 */
export const MAX_SKEW_MS = 5_000;

/** How long one look at the file may take before it is a `timeout` problem, ms. */
export const READ_TIMEOUT_MS = 2_000;

/** The timestamps a heartbeat carries, each checked against the skew allowance. */
const TIMESTAMPS = ["at", "stepAt", "startedAt"] as const;

/**
 * Reads and checks a heartbeat file. Never throws and never hangs: the file is opened without
 * blocking, anything but a regular file is refused without reading, at most
 * {@link MAX_HEARTBEAT_BYTES} + 1 bytes are read, and the look is time-boxed (`timeoutMs`). A
 * missing, empty, partial, garbage, oversized or future-dated file comes back as a problem (the
 * watcher reads again before saying anything). `maxSkewMs`: how far ahead of `now` any of the
 * heartbeat's timestamps may be.
 */
export async function readHeartbeat(
  file: string,
  now: number,
  maxSkewMs = MAX_SKEW_MS,
  timeoutMs = READ_TIMEOUT_MS,
): Promise<ReadResult> {
  const raw = await readSmallFile(file, timeoutMs);
  if (typeof raw !== "string") return raw;
  if (raw.trim() === "") return bad("empty", "no content");
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return bad("garbage", "not JSON (partial or foreign)");
  }
  const problem = invalid(value);
  if (problem) return bad("invalid", problem);
  const heartbeat = value as Heartbeat;
  for (const key of TIMESTAMPS) {
    const ahead = heartbeat[key] - now;
    if (ahead > maxSkewMs)
      return bad(
        "future",
        `${key} ${Math.round(ahead)} ms in the future (clock skew allowance ${maxSkewMs} ms)`,
      );
  }
  return { ok: true, heartbeat };
}

/**
 * The text of one of a session's files, read the way that cannot hang: a regular file only, at
 * most `maxBytes` (default {@link MAX_HEARTBEAT_BYTES}: heartbeat, inbox, acknowledgement),
 * time-boxed.
 */
export function readSmallFile(
  file: string,
  timeoutMs = READ_TIMEOUT_MS,
  maxBytes = MAX_HEARTBEAT_BYTES,
): Promise<string | Unread> {
  return within(readBounded(file, maxBytes), timeoutMs);
}

/** The file's text, or why not; the handle is always closed. */
async function readBounded(file: string, maxBytes: number): Promise<string | Unread> {
  let handle;
  try {
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return failed(error);
  }
  try {
    const stat = await handle.stat();
    const notRegular = notRegularFile(stat);
    if (notRegular !== undefined) return bad("not_a_file", notRegular);
    if (stat.size > maxBytes) return bad("too_large", `${stat.size} bytes (limit ${maxBytes})`);
    // One byte over its size tells a file that grew since fstat (written in place, not renamed
    // over: a partial read) from one that did not.
    const buffer = Buffer.alloc(stat.size + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > stat.size) return bad("garbage", `grew while read (${stat.size} bytes at first)`);
    return buffer.toString("utf8", 0, length);
  } catch (error) {
    return failed(error);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** The read's answer, or a `timeout` problem once `ms` have passed (the read is abandoned). */
function within(read: Promise<string | Unread>, ms: number): Promise<string | Unread> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Unread>((resolve) => {
    timer = setTimeout(() => {
      resolve(bad("timeout", `no answer within ${ms} ms`));
    }, ms);
    timer.unref();
  });
  return Promise.race([read, late]).finally(() => {
    clearTimeout(timer);
  });
}

function failed(error: unknown): Unread {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return bad("missing", code);
  // A directory on some systems, a Unix socket (ENXIO), a FIFO opened for writing elsewhere.
  if (code === "EISDIR" || code === "ENXIO") return bad("not_a_file", code);
  return bad("garbage", code ?? "unreadable");
}

const bad = (problem: Unreadable, detail: string): Unread => ({ ok: false, problem, detail });

/** What is wrong with a parsed heartbeat, if anything. */
function invalid(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not an object";
  const h = value as Record<string, unknown>;
  if (h.v !== 1) return `unknown format version ${JSON.stringify(h.v)}`;
  if (typeof h.sessionId !== "string") return "no sessionId";
  if (typeof h.stage !== "string") return "no stage";
  if (!Number.isSafeInteger(h.stepIdx) || (h.stepIdx as number) < 0) return "bad stepIdx";
  for (const key of TIMESTAMPS) {
    if (typeof h[key] !== "number" || !Number.isFinite(h[key])) return `bad ${key}`;
  }
  if (!Number.isSafeInteger(h.pid) || (h.pid as number) < 0) return "bad pid";
  const tokens = h.contextTokens;
  // 1e400 parses as Infinity: a context no limit can judge.
  if (
    tokens !== undefined &&
    (typeof tokens !== "number" || !Number.isFinite(tokens) || tokens < 0)
  )
    return "bad contextTokens";
  if (h.lastTool !== undefined && typeof h.lastTool !== "string") return "bad lastTool";
  if (h.gen !== undefined && !(Number.isSafeInteger(h.gen) && (h.gen as number) >= 1))
    return "bad gen";
  return undefined;
}
