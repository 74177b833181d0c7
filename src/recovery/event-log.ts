import { accessSync, constants, statSync } from "node:fs";
import { appendFile, rename, stat, unlink } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { describeThrown, redact } from "../telemetry/redact.js";

/** `recovery.eventLog` as an object: where, and when to rotate. */
export interface EventLogOptions {
  /** The JSONL file. */
  path: string;
  /** Size past which the file is renamed to `path.1` and a new one started (default 50 MB). */
  maxBytes?: number;
  /** Rotated files kept: `path.1` (newest) to `path.<keep>` (default 5); older ones are dropped. */
  keep?: number;
}

export type ResolvedEventLog = Required<EventLogOptions>;

export const DEFAULT_EVENT_LOG_MAX_BYTES = 50 * 1024 * 1024;
export const DEFAULT_EVENT_LOG_KEEP = 5;

/**
 * Why events could not be appended to `path`, or undefined when they can: its folder must exist
 * and be writable, and the file, when it exists, must be a writable file. Synchronous: it runs
 * once, when the options are read.
 */
export function eventLogProblem(path: string): string | undefined {
  const folder = dirname(resolve(path));
  try {
    if (!statSync(folder).isDirectory()) return `${folder} is not a folder`;
    accessSync(folder, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return `folder ${folder} does not exist`;
    return `folder ${folder} is not writable (${code ?? describeThrown(error)})`;
  }
  try {
    if (statSync(path).isDirectory()) return `${path} is a folder`;
    accessSync(path, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT") return `${path} is not writable (${code ?? describeThrown(error)})`;
  }
  return undefined;
}

/**
 * Characters some JSONL readers take for line breaks (Python's `splitlines`, editors) that
 * JSON.stringify leaves raw inside strings; escaped, each event stays one line for every reader.
 */
const UNICODE_BREAKS = /[\u0085\u2028\u2029]/g;
const escapeBreak = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

const code = (error: unknown) => (error as NodeJS.ErrnoException).code;

/**
 * Appends events to a JSONL file, in order, off the call path: a slow or failing disk delays
 * nothing and loses nothing but the lines it could not write (each failure is logged). When the
 * file would pass `maxBytes` it is renamed to `path.1` (`path.1` to `path.2`, and so on; the
 * one past `keep` is dropped) and a new file started. One process should own a log file: the
 * size is tracked in memory (and checked on disk before rotating).
 */
export class JsonlLog {
  private tail: Promise<void> = Promise.resolve();
  private readonly options: ResolvedEventLog;
  /** Bytes in the current file, as far as this process knows; undefined until first read. */
  private size: number | undefined;

  constructor(
    options: string | EventLogOptions,
    private readonly logger: { warn(message: string): void },
  ) {
    const o = typeof options === "string" ? { path: options } : options;
    this.options = {
      path: o.path,
      maxBytes: o.maxBytes ?? DEFAULT_EVENT_LOG_MAX_BYTES,
      keep: o.keep ?? DEFAULT_EVENT_LOG_KEEP,
    };
  }

  append(event: object): void {
    const line = `${JSON.stringify(event).replace(UNICODE_BREAKS, escapeBreak)}\n`;
    this.tail = this.tail.then(() =>
      this.write(line).catch((error: unknown) => {
        this.logger.warn(
          `selfheal: could not append to ${this.options.path}: ${redact(describeThrown(error))}`,
        );
      }),
    );
  }

  private async fileSize(): Promise<number> {
    try {
      return (await stat(this.options.path)).size;
    } catch (error) {
      if (code(error) === "ENOENT") return 0;
      throw error;
    }
  }

  private async write(line: string): Promise<void> {
    const bytes = Buffer.byteLength(line);
    this.size ??= await this.fileSize();
    if (this.size > 0 && this.size + bytes > this.options.maxBytes) {
      // Another writer may have rotated it already: believe the disk.
      this.size = await this.fileSize();
      if (this.size > 0 && this.size + bytes > this.options.maxBytes) await this.rotate();
    }
    await appendFile(this.options.path, line);
    this.size += bytes;
  }

  private async rotate(): Promise<void> {
    const { path, keep } = this.options;
    const ignoreMissing = (error: unknown) => {
      if (code(error) !== "ENOENT") throw error;
    };
    // Renaming .keep-1 onto .keep drops the oldest.
    for (let i = keep - 1; i >= 1; i--)
      await rename(`${path}.${i}`, `${path}.${i + 1}`).catch(ignoreMissing);
    if (keep >= 1) await rename(path, `${path}.1`).catch(ignoreMissing);
    else await unlink(path).catch(ignoreMissing);
    this.size = 0;
  }

  /** Resolves once every appended line is written (or has failed). */
  flush(): Promise<void> {
    return this.tail;
  }
}
