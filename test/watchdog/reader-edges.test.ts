import { execFileSync } from "node:child_process";
import {
  closeSync,
  constants,
  mkdirSync,
  openSync,
  mkdtempSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readHeartbeat, readSmallFile } from "../../src/watchdog/reader.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-reader-edges-"));
let n = 0;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});
const freshFile = (text?: string) => {
  const dir = join(root, `d${n++}`);
  mkdirSync(dir);
  const file = join(dir, "s.heartbeat.json");
  if (text !== undefined) writeFileSync(file, text);
  return file;
};

const NOW = 1_000_000;
const good = {
  v: 1,
  sessionId: "s",
  pid: 10,
  stage: "tool_call",
  stepIdx: 3,
  at: NOW,
  stepAt: NOW,
  startedAt: NOW,
};

describe("what a heartbeat file holds, exactly", () => {
  it.each([
    ["empty", "", { problem: "empty", detail: "no content" }],
    ["blank", "  \n", { problem: "empty", detail: "no content" }],
    ["partial", '{"v":1,', { problem: "garbage", detail: "not JSON (partial or foreign)" }],
    ["an array", "[1,2]", { problem: "invalid", detail: "not an object" }],
    ["null", "null", { problem: "invalid", detail: "not an object" }],
    ["a number", "42", { problem: "invalid", detail: "not an object" }],
    ["at a string", JSON.stringify({ ...good, at: "5" }), { problem: "invalid", detail: "bad at" }],
    [
      "stepAt infinite",
      JSON.stringify(good).replace(`"stepAt":${NOW}`, '"stepAt":1e400'),
      { problem: "invalid", detail: "bad stepAt" },
    ],
    [
      "startedAt missing",
      JSON.stringify({ ...good, startedAt: undefined }),
      { problem: "invalid", detail: "bad startedAt" },
    ],
    [
      "pid negative",
      JSON.stringify({ ...good, pid: -1 }),
      { problem: "invalid", detail: "bad pid" },
    ],
    [
      "pid a fraction",
      JSON.stringify({ ...good, pid: 1.5 }),
      { problem: "invalid", detail: "bad pid" },
    ],
    [
      "tokens negative",
      JSON.stringify({ ...good, contextTokens: -5 }),
      { problem: "invalid", detail: "bad contextTokens" },
    ],
    [
      "tokens a string",
      JSON.stringify({ ...good, contextTokens: "5" }),
      { problem: "invalid", detail: "bad contextTokens" },
    ],
    [
      "tokens infinite",
      JSON.stringify({ ...good, contextTokens: 7 }).replace(
        '"contextTokens":7',
        '"contextTokens":1e400',
      ),
      { problem: "invalid", detail: "bad contextTokens" },
    ],
  ])("%s: %j", async (_name, text, expected) => {
    expect(await readHeartbeat(freshFile(text), NOW)).toEqual({ ok: false, ...expected });
  });

  it.each([
    ["pid 0", { ...good, pid: 0 }],
    ["tokens 0", { ...good, contextTokens: 0 }],
    ["every field", { ...good, contextTokens: 10, lastTool: "t", gen: 2 }],
  ])("%s is a heartbeat", async (_name, beat) => {
    expect(await readHeartbeat(freshFile(JSON.stringify(beat)), NOW)).toEqual({
      ok: true,
      heartbeat: beat,
    });
  });
});

describe("what is at the path, exactly", () => {
  it("a directory", async () => {
    const file = freshFile();
    mkdirSync(file);
    expect(await readSmallFile(file)).toEqual({
      ok: false,
      problem: "not_a_file",
      detail: "a directory, not a regular file",
    });
  });

  it("a named pipe", async () => {
    const file = freshFile();
    execFileSync("mkfifo", [file]);
    expect(await readSmallFile(file)).toEqual({
      ok: false,
      problem: "not_a_file",
      detail: "a named pipe, not a regular file",
    });
  });

  it.each([
    ["/dev/null", "a character device, not a regular file"],
    ["/dev/loop0", "a block device, not a regular file"],
  ])("%s", async (path, detail) => {
    expect(await readHeartbeat(path, NOW)).toEqual({ ok: false, problem: "not_a_file", detail });
  });

  it("a Unix socket: not a file (ENXIO)", async () => {
    const file = freshFile();
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(file, resolve));
    try {
      expect(await readHeartbeat(file, NOW)).toEqual({
        ok: false,
        problem: "not_a_file",
        detail: "ENXIO",
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("a path through a file: garbage (ENOTDIR), not missing", async () => {
    const file = freshFile("{}");
    expect(await readHeartbeat(join(file, "x"), NOW)).toEqual({
      ok: false,
      problem: "garbage",
      detail: "ENOTDIR",
    });
  });

  it("a missing file", async () => {
    expect(await readHeartbeat(freshFile(), NOW)).toEqual({
      ok: false,
      problem: "missing",
      detail: "ENOENT",
    });
  });

  it("a file that reads more than its size (it grew): garbage, never a partial read", async () => {
    // /proc files say size 0 and hold text.
    expect(await readSmallFile("/proc/self/status")).toEqual({
      ok: false,
      problem: "garbage",
      detail: "grew while read (0 bytes at first)",
    });
  });

  it("a read that fails after the open: garbage with its code", async () => {
    expect(await readSmallFile("/proc/self/mem")).toEqual({
      ok: false,
      problem: "garbage",
      detail: "EIO",
    });
  });

  it("a file over the limit names its size and the limit", async () => {
    expect(await readSmallFile(freshFile("x".repeat(11)), 2_000, 10)).toEqual({
      ok: false,
      problem: "too_large",
      detail: "11 bytes (limit 10)",
    });
    expect(await readSmallFile(freshFile("x".repeat(10)), 2_000, 10)).toBe("x".repeat(10));
  });
});

describe("a look that does not answer in time", () => {
  it("is a timeout naming its time box", async () => {
    // Every thread of libuv's pool blocked on opening a FIFO nobody writes: the read's open
    // waits behind them.
    const fifo = freshFile();
    execFileSync("mkfifo", [fifo]);
    const blockers: Promise<FileHandle>[] = [];
    for (let i = 0; i < 64; i++) blockers.push(open(fifo, "r"));
    try {
      expect(await readSmallFile(freshFile("{}"), 30)).toEqual({
        ok: false,
        problem: "timeout",
        detail: "no answer within 30 ms",
      });
    } finally {
      // A writer releases the blocked opens (opened here, not in the blocked pool).
      const writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      const readers = await Promise.all(blockers);
      closeSync(writer);
      await Promise.all(readers.map((r) => r.close()));
    }
  });
});
