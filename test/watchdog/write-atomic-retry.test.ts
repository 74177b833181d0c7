import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";

/** Renames fail with these codes first, in order, then go through. */
const failures: string[] = [];
let renames = 0;
vi.mock("node:fs/promises", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:fs/promises")>();
  return {
    ...actual,
    rename: async (from: string, to: string) => {
      renames++;
      const code = failures.shift();
      if (code !== undefined) throw Object.assign(new Error(`${code}: rename refused`), { code });
      return actual.rename(from, to);
    },
  };
});

const { writeAtomic } = await import("../../src/watchdog/heartbeat.js");

const root = mkdtempSync(join(tmpdir(), "selfheal-write-atomic-"));
let n = 0;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});
afterEach(() => {
  failures.length = 0;
  renames = 0;
});

describe("writeAtomic retries a rename someone holds the file against", () => {
  it.each([
    ["EBUSY twice", ["EBUSY", "EBUSY"], 3],
    ["EPERM once", ["EPERM"], 2],
    ["EACCES once", ["EACCES"], 2],
  ])("%s, then through: written, %d renames", async (_name, codes, expected) => {
    const dir = join(root, `d${n++}`);
    failures.push(...codes);
    await writeAtomic(dir, join(dir, "f.json"), "text");
    expect(renames).toBe(expected);
    expect(readFileSync(join(dir, "f.json"), "utf8")).toBe("text");
    expect(readdirSync(dir)).toEqual(["f.json"]);
  });

  it.each([
    ["EBUSY three times: gives up after three", ["EBUSY", "EBUSY", "EBUSY", "EBUSY"], "EBUSY", 3],
    ["ENOSPC: not retried", ["ENOSPC"], "ENOSPC", 1],
    ["EBUSY then EXDEV: the second is not retried", ["EBUSY", "EXDEV"], "EXDEV", 2],
  ])("%s; the temporary is removed", async (_name, codes, code, expected) => {
    const dir = join(root, `d${n++}`);
    failures.push(...codes);
    await expect(writeAtomic(dir, join(dir, "f.json"), "text")).rejects.toMatchObject({ code });
    expect(renames).toBe(expected);
    expect(readdirSync(dir)).toEqual([]);
  });
});
