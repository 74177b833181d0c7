/**
 * TypeScript files of this repository (test fixtures, examples) as JavaScript that plain `node`
 * runs, for the tests that start them as child processes: a child runs built JS, never tsx, whose
 * start-up alone (compiling every module it loads) took 4.5 s on a busy machine (issue 27).
 *
 * A file is transpiled (types stripped, nothing checked: `npm run typecheck` checks the sources)
 * into node_modules/.cache/selfheal-test/, at the same path as in the repository, so its relative
 * imports of other .ts files (transpiled alongside) hold. Its imports of src/ and of the package
 * by its own name (`selfheal`, `selfheal/redis`) are pointed at dist/, the built package that
 * `npm run build` (and `npm test`'s pretest) writes; other packages resolve from the repository's
 * node_modules/, as the original's do.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import type * as TypeScript from "typescript";

/**
 * The compiler, loaded on the first build: a fixture that imports this file to start copies of
 * itself (test/fixtures/redis-fleet-worker.ts) does not load it in every copy.
 */
let compiler: typeof TypeScript | undefined;
const typescript = (): typeof TypeScript =>
  (compiler ??= createRequire(import.meta.url)("typescript") as typeof TypeScript);

const ROOT = resolve(import.meta.dirname, "../..");
const SRC = join(ROOT, "src") + sep;
const DIST = join(ROOT, "dist");
const OUT = join(ROOT, "node_modules", ".cache", "selfheal-test");

/** This package's subpath exports: `selfheal/redis` -> ./dist/redis/index.js. */
type Exports = Record<string, string | { import?: { default?: string } }>;
let exportsMap: Exports | undefined;

/** The file URL of what `selfheal` or `selfheal/<sub>` imports (ESM), in dist/. */
function ownExport(specifier: string): string {
  exportsMap ??= (
    JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Exports }
  ).exports;
  const key = specifier === "selfheal" ? "." : `.${specifier.slice("selfheal".length)}`;
  const entry = exportsMap[key];
  const target = typeof entry === "string" ? entry : entry?.import?.default;
  if (target === undefined) throw new Error(`built-js: package.json exports no "${specifier}"`);
  return pathToFileURL(join(ROOT, target)).href;
}

/**
 * How long a child started from built JS may run before it is killed (and its test fails):
 * minutes, far past the seconds the examples and fixtures take even on a busy machine. A guard
 * against a hang, not a measure (issue 27). Tests that run such a child get 150 s.
 */
export const CHILD_HANG_MS = 120_000;

/** Files built by this process: each is transpiled once. */
const built = new Map<string, string>();

/**
 * Transpiles `file` (a .ts file in this repository, absolute or relative to its root) and the
 * .ts files it imports relatively; returns the path of its JavaScript, to run with `node`.
 * Throws when dist/ has not been built.
 */
export function builtJs(file: string): string {
  const source = resolve(ROOT, file);
  const done = built.get(source);
  if (done !== undefined) return done;
  if (!existsSync(join(DIST, "index.js")))
    throw new Error("built-js: no dist/index.js: run `npm run build` first (npm test does)");
  const rel = relative(ROOT, source);
  if (rel.startsWith("..") || !rel.endsWith(".ts"))
    throw new Error(`built-js: ${file} is not a .ts file of this repository`);
  const out = join(OUT, rel.replace(/\.ts$/, ".js"));
  built.set(source, out);

  const ts = typescript();
  const { outputText } = ts.transpileModule(readFileSync(source, "utf8"), {
    fileName: source,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const js = outputText.replace(
    /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])([^"'\n]+)\2/g,
    (whole, before: string, quote: string, specifier: string) => {
      const to = rewrite(specifier, source);
      return to === specifier ? whole : `${before}${quote}${to}${quote}`;
    },
  );
  mkdirSync(dirname(out), { recursive: true });
  const scope = join(OUT, "package.json");
  if (!existsSync(scope)) writeAtomically(scope, '{ "type": "module" }\n');
  writeAtomically(out, js);
  return out;
}

/** Where an import of `specifier` in `from` goes in the built copy. */
function rewrite(specifier: string, from: string): string {
  if (specifier === "selfheal" || specifier.startsWith("selfheal/")) return ownExport(specifier);
  if (!specifier.startsWith(".")) return specifier; // node:, and other packages
  const target = resolve(dirname(from), specifier);
  if (target.startsWith(SRC)) return pathToFileURL(join(DIST, relative(SRC, target))).href;
  const source = target.replace(/\.js$/, ".ts");
  if (source !== target && existsSync(source)) {
    builtJs(source); // same relative place in the mirror: the specifier holds
    return specifier;
  }
  return pathToFileURL(target).href; // a file that is not TypeScript: the original
}

/**
 * Writes by renaming a temporary file into place, so two test files (two vitest workers) building
 * the same fixture at once never run a half-written one.
 */
function writeAtomically(path: string, text: string): void {
  if (existsSync(path) && readFileSync(path, "utf8") === text) return;
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, path);
}
