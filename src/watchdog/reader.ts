import { readFile } from "node:fs/promises";
import type { Heartbeat } from "./heartbeat.js";

/** Why a heartbeat file could not be used this time. */
export type Unreadable = "missing" | "empty" | "garbage" | "invalid" | "future";

export type ReadResult =
  { ok: true; heartbeat: Heartbeat } | { ok: false; problem: Unreadable; detail: string };

/** A file larger than this is not a heartbeat (and is not read whole). */
const MAX_BYTES = 64 * 1024;

/**
 * Reads and checks a heartbeat file. Never throws: a missing, empty, partial, garbage or
 * future-dated file comes back as a problem (the watcher reads again before saying anything).
 * `maxSkewMs`: how far ahead of `now` a heartbeat's time may be (clocks of two processes).
 */
export async function readHeartbeat(
  file: string,
  now: number,
  maxSkewMs = 5_000,
): Promise<ReadResult> {
  let text: string;
  try {
    const buffer = await readFile(file);
    if (buffer.length > MAX_BYTES) return bad("garbage", `${buffer.length} bytes`);
    text = buffer.toString("utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return bad(code === "ENOENT" ? "missing" : "garbage", code ?? "unreadable");
  }
  if (text.trim() === "") return bad("empty", "no content");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return bad("garbage", "not JSON (partial or foreign)");
  }
  const problem = invalid(value);
  if (problem) return bad("invalid", problem);
  const heartbeat = value as Heartbeat;
  if (heartbeat.at > now + maxSkewMs || heartbeat.stepAt > now + maxSkewMs)
    return bad("future", `written ${Math.round(heartbeat.at - now)} ms in the future`);
  return { ok: true, heartbeat };
}

const bad = (problem: Unreadable, detail: string): ReadResult => ({ ok: false, problem, detail });

/** What is wrong with a parsed heartbeat, if anything. */
function invalid(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not an object";
  const h = value as Record<string, unknown>;
  if (h.v !== 1) return `unknown format version ${JSON.stringify(h.v)}`;
  if (typeof h.sessionId !== "string") return "no sessionId";
  if (typeof h.stage !== "string") return "no stage";
  if (!Number.isSafeInteger(h.stepIdx) || (h.stepIdx as number) < 0) return "bad stepIdx";
  for (const key of ["at", "stepAt", "startedAt", "pid"]) {
    if (typeof h[key] !== "number" || !Number.isFinite(h[key])) return `bad ${key}`;
  }
  if (h.contextTokens !== undefined && (typeof h.contextTokens !== "number" || h.contextTokens < 0))
    return "bad contextTokens";
  return undefined;
}
