import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfHealing, isSelfHealConfigError } from "../../src/index.js";
import { JsonlLog } from "../../src/recovery/event-log.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-eventlog-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const quiet = { warn: () => undefined };
const lines = async (path: string) =>
  existsSync(path) ? (await readFile(path, "utf8")).split("\n").filter(Boolean) : [];

describe("JsonlLog rotation", () => {
  it("past maxBytes the file becomes .1, older ones shift, and past keep they are dropped", async () => {
    const path = join(dir, "rot.jsonl");
    // Each line is {"n":N} plus a newline: 8 bytes; two fit in 16.
    const log = new JsonlLog({ path, maxBytes: 16, keep: 2 }, quiet);
    for (let n = 0; n < 8; n++) log.append({ n });
    await log.flush();
    expect(await lines(path)).toEqual(['{"n":6}', '{"n":7}']);
    expect(await lines(`${path}.1`)).toEqual(['{"n":4}', '{"n":5}']);
    expect(await lines(`${path}.2`)).toEqual(['{"n":2}', '{"n":3}']);
    expect(existsSync(`${path}.3`)).toBe(false); // n 0 and 1 were dropped
  });

  it("counts what the file already holds", async () => {
    const path = join(dir, "existing.jsonl");
    await writeFile(path, '{"n":0}\n{"n":1}\n');
    const log = new JsonlLog({ path, maxBytes: 16, keep: 5 }, quiet);
    log.append({ n: 2 });
    await log.flush();
    expect(await lines(`${path}.1`)).toEqual(['{"n":0}', '{"n":1}']);
    expect(await lines(path)).toEqual(['{"n":2}']);
  });

  it("a line larger than maxBytes still goes in, alone in its file", async () => {
    const path = join(dir, "big.jsonl");
    const log = new JsonlLog({ path, maxBytes: 4, keep: 1 }, quiet);
    log.append({ a: 1 });
    log.append({ b: 2 });
    await log.flush();
    expect(await lines(path)).toEqual(['{"b":2}']);
    expect(await lines(`${path}.1`)).toEqual(['{"a":1}']);
  });

  it("a string is a path with the defaults (50 MB, keep 5): no rotation for small logs", async () => {
    const path = join(dir, "plain.jsonl");
    const log = new JsonlLog(path, quiet);
    for (let n = 0; n < 100; n++) log.append({ n });
    await log.flush();
    expect(await lines(path)).toHaveLength(100);
    expect(existsSync(`${path}.1`)).toBe(false);
  });

  it("believes the disk before rotating: a file another writer rotated is not rotated again", async () => {
    const path = join(dir, "two-writers.jsonl");
    const a = new JsonlLog({ path, maxBytes: 16, keep: 5 }, quiet);
    const b = new JsonlLog({ path, maxBytes: 16, keep: 5 }, quiet);
    a.append({ n: 0 });
    a.append({ n: 1 });
    await a.flush(); // a counts 16 bytes
    b.append({ n: 2 }); // b finds 16 on disk: rotates, then writes
    await b.flush();
    a.append({ n: 3 }); // a would pass 16 by its count; the disk holds 8: no rotation
    await a.flush();
    expect(await lines(path)).toEqual(['{"n":2}', '{"n":3}']);
    expect(await lines(`${path}.1`)).toEqual(['{"n":0}', '{"n":1}']);
    expect(existsSync(`${path}.2`)).toBe(false);
  });

  it("keep 0: the full file is dropped, none kept beside it", async () => {
    const path = join(dir, "keep0.jsonl");
    const log = new JsonlLog({ path, maxBytes: 16, keep: 0 }, quiet);
    for (let n = 0; n < 3; n++) log.append({ n });
    await log.flush();
    expect(await lines(path)).toEqual(['{"n":2}']);
    expect(existsSync(`${path}.1`)).toBe(false);
  });

  it("keeps Unicode line breaks escaped: one event, one line, for every JSONL reader", async () => {
    const path = join(dir, "breaks.jsonl");
    const log = new JsonlLog(path, quiet);
    log.append({ error: "a\u2028b\u2029c\u0085d" });
    await log.flush();
    const text = await readFile(path, "utf8");
    expect(text).toBe('{"error":"a\\u2028b\\u2029c\\u0085d"}\n');
    expect((JSON.parse(text) as { error: string }).error).toBe("a\u2028b\u2029c\u0085d");
  });

  it("append never blocks or throws: a write failure is one warning", async () => {
    const warnings: string[] = [];
    const path = join(dir, "gone", "x.jsonl");
    const log = new JsonlLog(path, { warn: (m) => warnings.push(m) });
    const started = performance.now();
    log.append({ n: 1 });
    expect(performance.now() - started).toBeLessThan(50);
    await log.flush();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/could not append to .*ENOENT/);
  });
});

describe("recovery.eventLog option", () => {
  const make = (eventLog: unknown) => () =>
    createSelfHealing({ agent: "a", logger: quiet, recovery: { eventLog } as never });

  it("accepts a path or { path, maxBytes, keep }", async () => {
    await make(join(dir, "ok.jsonl"))().close();
    await make({ path: join(dir, "ok2.jsonl"), maxBytes: 1024, keep: 3 })().close();
  });

  beforeAll(async () => {
    await writeFile(join(dir, "plain-file"), "");
  });

  it.each([
    [
      "a missing folder",
      () => join(dir, "missing", "e.jsonl"),
      /recovery\.eventLog.*does not exist/,
    ],
    ["a folder", () => dir, /recovery\.eventLog.*is a folder/],
    [
      "a path under a file",
      () => join(dir, "plain-file", "e.jsonl"),
      /recovery\.eventLog.*plain-file is not a folder/,
    ],
    ["an empty path", () => "", /recovery\.eventLog.*non-empty string/],
    [
      "maxBytes 0",
      () => ({ path: join(dir, "a.jsonl"), maxBytes: 0 }),
      /recovery\.eventLog\.maxBytes/,
    ],
    ["keep 1.5", () => ({ path: join(dir, "a.jsonl"), keep: 1.5 }), /recovery\.eventLog\.keep/],
    [
      "an unknown key",
      () => ({ path: join(dir, "a.jsonl"), rotate: true }),
      /recovery\.eventLog\.rotate/,
    ],
  ])("%s is a SelfHealConfigError at construction", (_name, value, message) => {
    let thrown: unknown;
    try {
      make(value())();
    } catch (error) {
      thrown = error;
    }
    expect(isSelfHealConfigError(thrown)).toBe(true);
    expect((thrown as Error).message).toMatch(message);
  });

  it.skipIf(process.getuid?.() === 0)("a folder it cannot write to is refused", async () => {
    const locked = join(dir, "locked");
    await mkdir(locked);
    await chmod(locked, 0o500);
    expect(make(join(locked, "e.jsonl"))).toThrow(/recovery\.eventLog.*not writable/);
  });
});
