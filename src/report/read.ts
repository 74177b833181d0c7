import { constants, createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { notRegularFile } from "../file-kind.js";
/**
 * Names a line in a complaint (`line 7`); a function when the name is built only if needed (the
 * reader's lines are mostly fine: a string per line would be garbage per line).
 */
export type Where = string | (() => string);

/** The name `where` gives. */
export const lineName = (where: Where): string => (typeof where === "string" ? where : where());

/** Where read lines go: a review, or the reviews of two periods. */
export interface LineSink {
  addLine(line: string, where: Where): void;
  /** A line that could not be read (too long). */
  reject(where: Where, problem: string): void;
}

/**
 * Longest line read, bytes: an event is well under 10 KB; a longer line (a binary file, a
 * runaway write) is counted as malformed and skipped without being held in memory.
 */
export const MAX_LINE_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

/** The name that reads standard input (`selfheal report -`). */
export const STDIN = "-";

/**
 * The stream of `file`'s bytes: standard input for STDIN, else a regular file only. The file is
 * opened without blocking (O_NONBLOCK: a FIFO with no writer opens at once instead of waiting for
 * one, and is then refused) and checked on its handle, so a path swapped after an earlier look
 * cannot slip a device or a pipe in.
 */
async function openLog(file: string) {
  const highWaterMark = 1024 * 1024;
  // fd 0 stays open: it is the process's, not this reader's.
  if (file === STDIN) return createReadStream("", { fd: 0, autoClose: false, highWaterMark });
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const problem = notRegularFile(await handle.stat());
    if (problem !== undefined) throw new Error(problem);
  } catch (error) {
    await handle.close();
    throw error;
  }
  return createReadStream("", { fd: handle, highWaterMark });
}

/**
 * Streams a JSONL file (or standard input, STDIN) into `builder`, one line at a time (a read stream and a line splitter,
 * as node:readline, but with a cap on a line's length): memory stays at one chunk and one line
 * whatever the file's size. `label` prefixes the line numbers when several files are read.
 */
export async function readInto(
  file: string,
  builder: LineSink,
  label: string | undefined,
): Promise<void> {
  let lineNo = 0;
  // Read when a line is rejected, during its addLine: the line being read.
  const where = () => (label === undefined ? `line ${lineNo}` : `${label} line ${lineNo}`);
  let parts: Buffer[] = [];
  let partBytes = 0;
  // Set by the closures below (the annotation keeps TypeScript from narrowing it to false).
  let tooLong = false as boolean;
  /** Ends the line whose last bytes are `buf[start, end)` (after any kept in `parts`). */
  const endLine = (buf: Buffer, start: number, end: number) => {
    lineNo++;
    if (tooLong || partBytes + end - start > MAX_LINE_BYTES)
      builder.reject(where, `longer than ${MAX_LINE_BYTES} bytes`);
    else if (parts.length === 0)
      // Decoded straight from the chunk: no Buffer object per line.
      builder.addLine(buf.toString("utf8", start, end), where);
    else
      builder.addLine(Buffer.concat([...parts, buf.subarray(start, end)]).toString("utf8"), where);
    parts = [];
    partBytes = 0;
    tooLong = false;
  };
  const keep = (piece: Buffer) => {
    if (tooLong) return;
    if (partBytes + piece.length > MAX_LINE_BYTES) {
      tooLong = true;
      parts = [];
      partBytes = 0;
      return;
    }
    // A copy: the stream's chunk is not held for the sake of a short tail.
    parts.push(Buffer.from(piece));
    partBytes += piece.length;
  };
  for await (const chunk of await openLog(file)) {
    const buf = chunk as Buffer;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl !== -1; nl = buf.indexOf(NEWLINE, start)) {
      endLine(buf, start, nl);
      start = nl + 1;
    }
    if (start < buf.length) keep(buf.subarray(start));
  }
  if (partBytes > 0 || tooLong) endLine(Buffer.alloc(0), 0, 0);
}
