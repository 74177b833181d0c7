/**
 * Finding the server binaries integration suites run (Debian packages that .ci/run installs), and
 * free ports for them on 127.0.0.1. Without a binary a suite is skipped with a visible notice
 * locally, and fails under CI=true (it must not pass by skipping there).
 */
import { accessSync, constants } from "node:fs";
import { createServer } from "node:net";
import { delimiter, join } from "node:path";

/** The path of an executable on PATH (or `override`), if there is one. */
export function which(name: string, override?: string): string | undefined {
  const candidates = override
    ? [override]
    : (process.env.PATH ?? "")
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, name));
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Whether `missing` is empty: else a notice (locally) or an error (under CI=true). */
export function haveAll(suite: string, missing: string[], install: string): boolean {
  if (missing.length === 0) return true;
  const why = `no ${missing.join(" or ")} on PATH (${install})`;
  if (process.env.CI === "true")
    throw new Error(`${suite} must run under CI=true, but there is ${why}`);
  console.warn(`[skipped] ${suite}: ${why}`);
  return false;
}

/** Ports this process handed out: the kernel may give the same ephemeral port to two probes in a row. */
const handedOut = new Set<number>();

/** A port nothing listens on right now, never the same one twice in this process. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const probe = createServer()
        .once("error", reject)
        .listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as { port: number };
          probe.close(() => {
            resolve(port);
          });
        });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}
