/**
 * readInto streams a log file one line at a time with a cap on a line's length. The file is read
 * in chunks of 1 MiB, so the lines below are laid out to end, or to break, at chunk boundaries.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ReviewBuilder, type Review } from "../../src/report/analyze.js";
import { MAX_LINE_BYTES, readInto } from "../../src/report/read.js";
import { event } from "./events.js";

const dir = mkdtempSync(join(tmpdir(), "selfheal-read-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let written = 0;
/** The review of files read in order, each given as its content and the label it is read with. */
async function read(...files: { text: string; label?: string }[]): Promise<Review> {
  const builder = new ReviewBuilder();
  for (const { text, label } of files) {
    const file = join(dir, `log-${written++}.jsonl`);
    writeFileSync(file, text);
    await readInto(file, builder, label);
  }
  return builder.review();
}

/** A valid event line of `tool`, padded with spaces (still JSON) to exactly `bytes` bytes. */
const padded = (bytes: number, tool: string) => {
  const line = event({ tool });
  return line + " ".repeat(bytes - Buffer.byteLength(line));
};

const tools = (r: Review) => r.tools.map((t) => t.tool);
const TOO_LONG = "longer than 1048576 bytes";

describe("readInto", () => {
  it("reads each line: CRLF endings, blank lines numbered but skipped, a last line without newline", async () => {
    const r = await read({
      text: `${event({ tool: "one" })}\r\n\n{oops\r\n\r\n${event({ tool: "two" })}`,
    });
    expect(tools(r)).toEqual(["one", "two"]);
    expect(r.malformed).toBe(1);
    expect(r.malformedSamples).toEqual(["line 3: not JSON"]);
  });

  it("an empty file, or one of newlines, adds nothing", async () => {
    const r = await read({ text: "" }, { text: "\n\n\n" });
    expect([r.events, r.malformed]).toEqual([0, 0]);
  });

  it("several files: read in order, each numbered from 1 under its label", async () => {
    const r = await read(
      { text: `{\n${event({ tool: "a1" })}\n`, label: "a.jsonl" },
      { text: `${event({ tool: "b1" })}\n{`, label: "b.jsonl" },
      { text: "[" },
    );
    expect(tools(r)).toEqual(["a1", "b1"]);
    expect(r.malformedSamples).toEqual([
      "a.jsonl line 1: not JSON",
      "b.jsonl line 2: not JSON",
      "line 1: not JSON",
    ]);
  });

  it("a line of exactly the limit is read, though it fills a whole chunk", async () => {
    const r = await read({
      text: `${padded(MAX_LINE_BYTES, "full")}\n${event({ tool: "next" })}\n`,
    });
    expect(tools(r)).toEqual(["full", "next"]);
    expect(r.malformed).toBe(0);
  });

  it("a line one byte over the limit is counted as malformed, and the next line is read", async () => {
    const r = await read({
      text: `${padded(MAX_LINE_BYTES + 1, "big")}\n${event({ tool: "next" })}\n`,
    });
    expect(tools(r)).toEqual(["next"]);
    expect(r.malformedSamples).toEqual([`line 1: ${TOO_LONG}`]);
  });

  it("a line over the limit across three chunks is one malformed line", async () => {
    const r = await read({
      text: `${event({ tool: "before" })}\n${padded(2 * MAX_LINE_BYTES, "big")}\n${event({ tool: "after" })}`,
      label: "x",
    });
    expect(tools(r)).toEqual(["before", "after"]);
    expect(r.malformed).toBe(1);
    expect(r.malformedSamples).toEqual([`x line 2: ${TOO_LONG}`]);
  });

  it("a last line over the limit, without newline, is counted as malformed", async () => {
    const r = await read({
      text: `${event({ tool: "before" })}\n${padded(MAX_LINE_BYTES + 1, "big")}`,
    });
    expect(tools(r)).toEqual(["before"]);
    expect(r.malformedSamples).toEqual([`line 2: ${TOO_LONG}`]);
  });

  it("a line across a chunk boundary is joined before decoding: a character split by it stays whole", async () => {
    const error = "é".repeat(300);
    const second = event({ tool: "spanning", error });
    const firstE = Buffer.from(second).indexOf(Buffer.from("é"));
    // The second line starts where the chunk boundary (byte MAX_LINE_BYTES) falls inside its
    // eleventh é.
    const start = MAX_LINE_BYTES - firstE - 21;
    const text = `${padded(start - 1, "first")}\n${second}\n`;
    expect(Buffer.from(text)[MAX_LINE_BYTES]).toBe(Buffer.from("é")[1]);
    const r = await read({ text });
    expect(tools(r)).toEqual(["first", "spanning"]);
    expect(r.tools[1]?.samples).toEqual([{ text: error, count: 1 }]);
    expect(r.malformed).toBe(0);
  });
});
