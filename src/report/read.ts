import { createReadStream } from "node:fs";
/** Where read lines go: a review, or the reviews of two periods. */
export interface LineSink {
  addLine(line: string, where: string): void;
  /** A line that could not be read (too long). */
  reject(where: string, problem: string): void;
}

/**
 * Longest line read, bytes: an event is well under 10 KB; a longer line (a binary file, a
 * runaway write) is counted as malformed and skipped without being held in memory.
 */
export const MAX_LINE_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

/**
 * Streams a JSONL file into `builder`, one line at a time (a read stream and a line splitter,
 * as node:readline, but with a cap on a line's length): memory stays at one chunk and one line
 * whatever the file's size. `label` prefixes the line numbers when several files are read.
 */
export async function readInto(
  file: string,
  builder: LineSink,
  label: string | undefined,
): Promise<void> {
  const where = (n: number) => (label === undefined ? `line ${n}` : `${label} line ${n}`);
  let lineNo = 0;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let tooLong = false;
  const endLine = (last: Buffer) => {
    lineNo++;
    if (tooLong) builder.reject(where(lineNo), `longer than ${MAX_LINE_BYTES} bytes`);
    else {
      const bytes = parts.length ? Buffer.concat([...parts, last]) : last;
      builder.addLine(bytes.toString("utf8"), where(lineNo));
    }
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
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    const buf = chunk as Buffer;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl !== -1; nl = buf.indexOf(NEWLINE, start)) {
      const piece = buf.subarray(start, nl);
      if (tooLong || partBytes + piece.length > MAX_LINE_BYTES) {
        tooLong = true;
        endLine(Buffer.alloc(0));
      } else endLine(piece);
      start = nl + 1;
    }
    if (start < buf.length) keep(buf.subarray(start));
  }
  if (partBytes > 0 || tooLong) endLine(Buffer.alloc(0));
}
