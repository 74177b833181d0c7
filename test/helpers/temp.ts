import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/**
 * A function that makes a fresh folder on each call, all under one temporary root removed
 * after the suite.
 */
export function freshDirs(prefix: string): () => string {
  const root = mkdtempSync(join(tmpdir(), `selfheal-${prefix}-`));
  let n = 0;
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });
  return () => {
    const dir = join(root, `d${n++}`);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
}
