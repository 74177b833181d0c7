/**
 * Running the CLI's code inside the test process (where Stryker's mutants are, unlike in the
 * spawned dist/cli/main.js): what a command writes (console.log and the two streams), and
 * `selfheal ARGS` as the bin ends: run(), then exitFor() on what it threw.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { format } from "node:util";
import { afterAll, expect, vi } from "vitest";
import { exitFor, run } from "../../src/cli/run.js";

export interface Captured<T> {
  /** What the call resolved with; undefined when it threw. */
  value: T | undefined;
  /** What it threw (`undefined` when it did not). */
  error: unknown;
  threw: boolean;
  stdout: string;
  stderr: string;
}

/** Runs `fn` with stdout and stderr captured (nothing reaches the test's terminal). */
export async function captured<T>(fn: () => Promise<T>): Promise<Captured<T>> {
  let stdout = "";
  let stderr = "";
  const write = (append: (text: string) => void) => (chunk: string | Uint8Array) => {
    append(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
    return true;
  };
  const spies = [
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      stdout += `${format(...args)}\n`;
    }),
    vi.spyOn(process.stdout, "write").mockImplementation(write((t) => (stdout += t))),
    vi.spyOn(process.stderr, "write").mockImplementation(write((t) => (stderr += t))),
  ];
  try {
    const value = await fn();
    return { value, error: undefined, threw: false, stdout, stderr };
  } catch (error) {
    return { value: undefined, error, threw: true, stdout, stderr };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

export interface CliRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * `selfheal ...argv` as the bin runs it (src/cli/main.ts), in this process: the exit code is what
 * run() resolved with, else what the command set (watch), else 0; a throw goes through exitFor.
 */
export async function cli(...argv: string[]): Promise<CliRun> {
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    const out = await captured(() => run(argv));
    if (out.threw) {
      const { exitCode, text } = exitFor(out.error);
      return { exitCode, stdout: out.stdout, stderr: out.stderr + text };
    }
    const exitCode = out.value ?? process.exitCode ?? 0;
    return { exitCode, stdout: out.stdout, stderr: out.stderr };
  } finally {
    process.exitCode = before;
  }
}

/**
 * A usage error of `selfheal COMMAND ...args`: exit 2, nothing on stdout, and on stderr exactly
 * `selfheal: MESSAGE` (a string) or a text that matches (a RegExp).
 */
export async function expectUsageOf(
  command: string,
  args: string[],
  message: string | RegExp,
): Promise<void> {
  const out = await cli(command, ...args);
  expect(out.exitCode).toBe(2);
  expect(out.stdout).toBe("");
  if (typeof message === "string") expect(out.stderr).toBe(`selfheal: ${message}\n`);
  else expect(out.stderr).toMatch(message);
}

/** A temporary folder for this test file, removed after its tests. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `selfheal-${prefix}-`));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
