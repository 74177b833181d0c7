/**
 * The last step of `npm run build`: makes every command of package.json's `bin` executable.
 *
 * tsc writes `dist/cli/main.js` with the mode of a plain file (0644). `npm install` and `npm ci`
 * set the bit when they link a package's bins, but a rebuild afterwards (`npm run build`, which
 * deletes dist/) writes the file anew without it: `./dist/cli/main.js` and `npx selfheal` from a
 * linked checkout then fail with "permission denied". A bin that is not there after the build
 * fails the build, so a renamed entry point cannot ship a dangling `bin`.
 *
 *   tsx scripts/executable-bins.ts [packageRoot]
 */
import { chmodSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The files package.json's `bin` names (a string, or an object of commands), as absolute paths. */
export function binFiles(root: string): string[] {
  const pkg = JSON.parse(readFileSync(resolve(root, "package.json"), "utf8")) as {
    bin?: string | Record<string, string>;
  };
  const bins = typeof pkg.bin === "string" ? [pkg.bin] : Object.values(pkg.bin ?? {});
  return bins.map((bin) => resolve(root, bin));
}

/** Adds the execute bits (where the read bits are) to every bin of the package at `root`. */
export function makeBinsExecutable(root: string): string[] {
  const files = binFiles(root);
  for (const file of files) {
    let mode: number;
    try {
      mode = statSync(file).mode;
    } catch {
      throw new Error(`package.json names bin ${file}, which the build did not write`);
    }
    // r-- becomes r-x for owner, group and others alike: 0644 -> 0755, 0600 -> 0700.
    chmodSync(file, (mode & 0o7777) | ((mode & 0o444) >> 2));
  }
  return files;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  makeBinsExecutable(resolve(process.argv[2] ?? resolve(import.meta.dirname, "..")));
}
