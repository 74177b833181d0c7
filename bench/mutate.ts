/**
 * Mutation testing, one folder of src/ at a time: `npm run mutate` (every folder) or
 * `npm run mutate -- src/watchdog src/notify` (those only). A folder of src/ takes from minutes
 * (src/notify) to an hour and more (src/engine) on 2 cores, so a run of every folder is a job of
 * several hours; per folder, its figures can be measured when there is time and kept.
 *
 * For each folder: Stryker (stryker.config.mjs, with STRYKER_MUTATE, STRYKER_REPORT and
 * STRYKER_INCREMENTAL naming the folder), then its entry in the committed summary,
 * bench/results/mutation.json: mutant counts and score, with the commit and date it was measured
 * on (and whether src/ or test/ had uncommitted changes); and its mutants left alive (survived or
 * not covered), by file and line, in bench/results/mutation-survivors/<folder>.md: what the next
 * round of tests should look at.
 *
 * The tests run against a folder's mutants are its own suites (test/<folder>/, or test/*.test.ts
 * for the files directly in src/) and the suites elsewhere that import it directly: the tests
 * written for that code. Suites that only reach it through other code (the property test, engine
 * suites for src/health's window) are left out: run for every mutant they reach, they made a
 * folder of 600 mutants a job of hours. The score is then what the folder's own tests catch, the
 * stricter measure. `--all-tests` runs every suite instead, as the first measures did.
 *
 * score = (killed + timeout) / (killed + timeout + survived + no coverage), as Stryker counts it;
 * ignored mutants (static ones, with ignoreStatic) and compile/runtime errors are left out of it.
 * Target: 80 % on every folder.
 *
 * `npm run mutate -- --stale` runs nothing: it says, for each folder, whether its figure still
 * holds at HEAD (no change since the commit it was measured on to its sources or the suites that
 * test it) or which files changed: what to measure next.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";

const ROOT = new URL("../", import.meta.url);
const SUMMARY = new URL("bench/results/mutation.json", ROOT);
const SURVIVORS = new URL("bench/results/mutation-survivors/", ROOT);
/**
 * Stryker's incremental file per folder (each mutant's result, with the sources and tests it was
 * measured on), committed gzipped: a rerun on another machine or at a later commit tests only the
 * mutants whose code or covering tests changed, so "every folder at HEAD" is minutes after a
 * change, not the half-day of a full run. `reports/` (gitignored) holds the working copy.
 */
const INCREMENTAL = new URL("bench/results/mutation-incremental/", ROOT);
/** Files directly in src/ (the public entry, the clock, the errors) are measured as one group. */
const TOP_LEVEL = "src/*.ts";
const TARGET = 80;
/** Most source lines per Stryker run: a part takes minutes to about an hour on 2 cores. */
const PART_LINES = 800;

type Status =
  | "Killed"
  | "Survived"
  | "Timeout"
  | "NoCoverage"
  | "Ignored"
  | "CompileError"
  | "RuntimeError"
  | "Pending";

interface Mutant {
  status: Status;
  mutatorName: string;
  replacement?: string;
  location: { start: { line: number; column: number } };
}

interface Report {
  files: Record<string, { source: string; mutants: Mutant[] }>;
  testFiles?: Record<string, unknown>;
  framework?: { version?: string };
}

interface Counts {
  mutants: number;
  killed: number;
  survived: number;
  timeout: number;
  noCoverage: number;
  ignored: number;
  errors: number;
  /** Detected / valid, percent (null: no valid mutant). */
  score: number | null;
  /** Detected / covered, percent: the score on the code the tests reach. */
  scoreCovered: number | null;
}

interface FolderResult extends Counts {
  /** The commit measured, and whether src/ or test/ differed from it. */
  commit: string;
  uncommittedChanges: boolean;
  date: string;
  node: string;
  stryker: string | undefined;
  /** The suites run: the folder's own and those importing it, or every suite (`--all-tests`). */
  tests: "own" | "all";
  /** Score per file, lowest first: where the tests are thinnest. */
  files: Record<string, number | null>;
}

interface Summary {
  /** Sum over the folders (which may have been measured on different commits: see each). */
  overall: Counts;
  folders: Record<string, FolderResult>;
}

function count(statuses: readonly Status[]): Counts {
  const n = (...wanted: Status[]) => statuses.filter((s) => wanted.includes(s)).length;
  return totals({
    mutants: statuses.length,
    killed: n("Killed"),
    survived: n("Survived"),
    timeout: n("Timeout"),
    noCoverage: n("NoCoverage"),
    ignored: n("Ignored"),
    errors: n("CompileError", "RuntimeError"),
  });
}

function totals(c: Omit<Counts, "score" | "scoreCovered">): Counts {
  const detected = c.killed + c.timeout;
  const percent = (part: number, whole: number) =>
    whole === 0 ? null : Math.round((part / whole) * 10_000) / 100;
  return {
    ...c,
    score: percent(detected, detected + c.survived + c.noCoverage),
    scoreCovered: percent(detected, detected + c.survived),
  };
}

/** The groups of src/: each folder, and the files directly in it. */
function groups(): string[] {
  const src = new URL("src/", ROOT);
  const folders = readdirSync(src)
    .filter((name) => statSync(new URL(name, src)).isDirectory())
    .sort()
    .map((name) => `src/${name}`);
  return [...folders, TOP_LEVEL];
}

const slug = (group: string) =>
  group === TOP_LEVEL ? "src-top-level" : group.replace(/[^A-Za-z0-9]+/g, "-");

/** The suites that test `group`: its own, and those that import one of its files directly. */
function testsOf(group: string): string[] {
  const own =
    group === TOP_LEVEL ? "test/*.test.ts" : `test/${group.slice("src/".length)}/**/*.test.ts`;
  const imported =
    group === TOP_LEVEL
      ? /from "(?:\.\.\/)+src\/(?!index\.js)[\w-]+\.js"/ // not the entry: every suite imports it
      : new RegExp(`from "(?:\\.\\./)+${group.replace("/", "\\/")}/`);
  const importers = listFiles(new URL("test/", ROOT), ".test.ts").filter((file) =>
    imported.test(readFileSync(new URL(file, ROOT), "utf8")),
  );
  return [own, ...importers];
}

/** Every file under `dir` whose name ends with `suffix`, as a path from the repository's root. */
function listFiles(dir: URL, suffix: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const url = new URL(entry.name + (entry.isDirectory() ? "/" : ""), dir);
    if (entry.isDirectory()) return listFiles(url, suffix);
    return entry.name.endsWith(suffix) ? [url.pathname.slice(ROOT.pathname.length)] : [];
  });
}

function git(...args: string[]): string {
  return execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
}

/**
 * What changed between `commit` and HEAD in `group`'s sources and in the suites that test it,
 * with lines added and deleted per file (none: the figure measured at `commit` is the figure at
 * HEAD). Suites that only gained lines can only have gained kills: the figure is then a floor.
 */
function changedSince(
  group: string,
  commit: string,
): { file: string; added: number; deleted: number }[] {
  const importers = testsOf(group).slice(1);
  // git pathspecs: `*` in a :(glob) spec stops at a slash, as in the shell.
  const specs =
    group === TOP_LEVEL
      ? [":(glob)src/*.ts", ":(glob)test/*.test.ts"]
      : [group, `test/${group.slice("src/".length)}`];
  return git("diff", "--numstat", commit, "HEAD", "--", ...specs, ...importers)
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [added = "0", deleted = "0", file = ""] = line.split("\t");
      return { file, added: Number(added), deleted: Number(deleted) };
    });
}

/** Whether `group`'s figure at `commit` holds at HEAD, is a floor, or is stale, and why. */
function staleness(group: string, commit: string): string {
  const changed = changedSince(group, commit);
  if (changed.length === 0) return "holds at HEAD";
  const sources = changed.filter((c) => c.file.startsWith("src/"));
  const grown = changed.every((c) => c.file.startsWith("test/") && c.deleted === 0);
  if (grown) return `a floor at HEAD: only tests added since (${changed.length} files)`;
  const names = changed.map((c) => c.file);
  return `stale: ${sources.length} sources and ${changed.length - sources.length} suites changed (${names.slice(0, 3).join(", ")}${names.length > 3 ? ", ..." : ""})`;
}

function readSummary(): Summary {
  if (!existsSync(SUMMARY)) return { overall: count([]), folders: {} };
  const old = JSON.parse(readFileSync(SUMMARY, "utf8")) as Partial<Summary>;
  return { overall: count([]), folders: old.folders ?? {} };
}

/** The mutants left alive in `report`, by file, as markdown. */
function survivorsText(group: string, report: Report, commit: string): string {
  const alive = Object.entries(report.files)
    .map(([name, file]) => {
      const lines = file.source.split("\n");
      const left = file.mutants
        .filter((m) => m.status === "Survived" || m.status === "NoCoverage")
        .sort((a, b) => a.location.start.line - b.location.start.line)
        .map((m) => {
          const { line, column } = m.location.start;
          const code = (lines[line - 1] ?? "").trim().slice(0, 120);
          const to = (m.replacement ?? "").replace(/\s+/g, " ").slice(0, 80);
          const kind = m.status === "NoCoverage" ? "no coverage" : "survived";
          return `- ${line}:${column} ${kind}, ${m.mutatorName}: \`${code}\` -> \`${to}\``;
        });
      return { name: name.replaceAll("\\", "/"), left };
    })
    .filter((f) => f.left.length > 0)
    .sort((a, b) => b.left.length - a.left.length || a.name.localeCompare(b.name));
  return [
    `# Mutants left alive in ${group} (Stryker, commit ${commit})`,
    "",
    "Survived or not covered; line numbers are those of that commit. Some are equivalent (no",
    "observable difference); the rest are what the next tests should kill.",
    ...alive.flatMap((f) => ["", `## ${f.name} (${f.left.length})`, "", ...f.left]),
    "",
  ].join("\n");
}

/** The source files of `group`, as paths from the repository's root, in path order. */
function sourcesOf(group: string): string[] {
  if (group === TOP_LEVEL)
    return readdirSync(new URL("src/", ROOT))
      .filter((f) => f.endsWith(".ts"))
      .sort()
      .map((f) => `src/${f}`);
  return listFiles(new URL(`${group}/`, ROOT), ".ts").sort();
}

/**
 * `files` cut, in order, into parts of at most PART_LINES lines (a bigger file is a part of its
 * own). Stryker writes its results only when a run ends: run part by part, a long folder stopped
 * midway keeps the parts it finished.
 */
function partsOf(files: string[]): string[][] {
  const parts: string[][] = [];
  let lines = 0;
  for (const file of files) {
    const size = readFileSync(new URL(file, ROOT), "utf8").split("\n").length;
    const last = parts.at(-1);
    if (last && lines + size <= PART_LINES) {
      last.push(file);
      lines += size;
    } else {
      parts.push([file]);
      lines = size;
    }
  }
  return parts;
}

const readReport = (file: URL): Report => JSON.parse(readFileSync(file, "utf8")) as Report;

/**
 * Runs Stryker over `group`, part by part, each part's results merged into the folder's
 * incremental file (reports/, and its committed copy) as soon as the part ends: a rerun, here or
 * on another machine, tests only the mutants whose code or covering tests changed since. Returns
 * the folder's report (its current files only), or null when Stryker failed.
 */
function run(group: string): Report | null {
  const name = slug(group);
  const incremental = new URL(`reports/stryker-incremental-${name}.json`, ROOT);
  const part = new URL(`reports/stryker-incremental-${name}-part.json`, ROOT);
  const committed = new URL(`${name}.json.gz`, INCREMENTAL);
  mkdirSync(new URL("reports/mutation/", ROOT), { recursive: true });
  mkdirSync(INCREMENTAL, { recursive: true });
  if (!existsSync(incremental) && existsSync(committed))
    writeFileSync(incremental, gunzipSync(readFileSync(committed)));
  const sources = sourcesOf(group);
  const parts = partsOf(sources);
  for (const [i, files] of parts.entries()) {
    console.log(`--- ${group} part ${i + 1}/${parts.length}: ${files.join(" ")}`);
    // Stryker reads its incremental file and writes this part's results over it: a copy.
    if (existsSync(incremental)) writeFileSync(part, readFileSync(incremental));
    const stryker = spawnSync("npx", ["stryker", "run"], {
      cwd: ROOT,
      stdio: "inherit",
      env: {
        ...process.env,
        STRYKER_MUTATE: files.join(","),
        STRYKER_REPORT: `reports/mutation/${name}-part.json`,
        STRYKER_INCREMENTAL: part.pathname,
        ...(allTests ? {} : { STRYKER_TESTS: testsOf(group).join(",") }),
      },
    });
    if (stryker.status !== 0) return null;
    const done = readReport(part);
    const merged = existsSync(incremental) ? readReport(incremental) : done;
    writeFileSync(
      incremental,
      JSON.stringify({
        ...done,
        files: { ...merged.files, ...done.files },
        testFiles: { ...merged.testFiles, ...done.testFiles },
      }),
    );
    writeFileSync(committed, gzipSync(readFileSync(incremental), { level: 9 }));
  }
  const all = readReport(incremental);
  const report = {
    ...all,
    files: Object.fromEntries(sources.flatMap((f) => (all.files[f] ? [[f, all.files[f]]] : []))),
  };
  writeFileSync(new URL(`reports/mutation/${name}.json`, ROOT), JSON.stringify(report));
  return report;
}

/** Runs Stryker over `group`; returns its folder entry (null: Stryker failed). */
function measure(group: string, commit: string, dirty: boolean): FolderResult | null {
  const name = slug(group);
  const data = run(group);
  if (data === null) return null;
  mkdirSync(SURVIVORS, { recursive: true });
  writeFileSync(new URL(`${name}.md`, SURVIVORS), survivorsText(group, data, commit));
  const files = Object.entries(data.files).map(([file, f]) => ({
    file: file.replaceAll("\\", "/"),
    statuses: f.mutants.map((m) => m.status),
  }));
  return {
    ...count(files.flatMap((f) => f.statuses)),
    commit,
    uncommittedChanges: dirty,
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    stryker: data.framework?.version,
    tests: allTests ? "all" : "own",
    files: Object.fromEntries(
      files
        .map((f) => [f.file, count(f.statuses).score] as const)
        .sort((a, b) => (a[1] ?? 101) - (b[1] ?? 101) || a[0].localeCompare(b[0])),
    ),
  };
}

function write(summary: Summary): void {
  const folders = Object.values(summary.folders);
  const sum = (key: keyof Omit<Counts, "score" | "scoreCovered">) =>
    folders.reduce((total, f) => total + f[key], 0);
  summary.overall = totals({
    mutants: sum("mutants"),
    killed: sum("killed"),
    survived: sum("survived"),
    timeout: sum("timeout"),
    noCoverage: sum("noCoverage"),
    ignored: sum("ignored"),
    errors: sum("errors"),
  });
  const sorted = Object.fromEntries(
    Object.entries(summary.folders).sort(([a], [b]) => a.localeCompare(b)),
  );
  writeFileSync(SUMMARY, JSON.stringify({ ...summary, folders: sorted }, null, 2) + "\n");
}

const known = groups();
const allTests = process.argv.includes("--all-tests");
if (process.argv.includes("--stale")) {
  const { folders } = readSummary();
  for (const group of known) {
    const measured = folders[group];
    const state = measured
      ? `${measured.score ?? "-"}% at ${measured.commit}, ${staleness(group, measured.commit)}`
      : "not measured";
    console.log(`${group.padEnd(14)} ${state}`);
  }
  process.exit(0);
}
const asked = process.argv
  .slice(2)
  .filter((a) => a !== "--all-tests")
  .map((a) => a.replace(/\/+$/, ""));
const unknown = asked.filter((a) => !known.includes(a));
if (unknown.length > 0) {
  console.error(`mutate: not a group of src/: ${unknown.join(", ")} (groups: ${known.join(", ")})`);
  process.exit(2);
}
const commit = git("rev-parse", "--short", "HEAD");
const dirty = git("status", "--porcelain", "--", "src", "test") !== "";
const summary = readSummary();
let failed = false;
for (const group of asked.length > 0 ? asked : known) {
  console.log(
    `\n=== mutate ${group} (commit ${commit}${dirty ? ", with uncommitted changes" : ""})`,
  );
  const result = measure(group, commit, dirty);
  if (result === null) {
    console.error(`mutate: Stryker failed on ${group}`);
    failed = true;
    continue;
  }
  summary.folders[group] = result;
  write(summary); // after each folder: a long run stopped midway keeps what it measured
}
console.log("\nfolder                 score   killed survived timeout no-coverage  commit");
for (const [group, c] of Object.entries(summary.folders).sort(([a], [b]) => a.localeCompare(b))) {
  const flag = c.score !== null && c.score < TARGET ? `  below ${TARGET}%` : "";
  console.log(
    `${group.padEnd(20)} ${String(c.score ?? "-").padStart(7)}% ${String(c.killed).padStart(8)} ${String(c.survived).padStart(8)} ${String(c.timeout).padStart(7)} ${String(c.noCoverage).padStart(11)}  ${c.commit}${flag}`,
  );
}
console.log(`wrote ${SUMMARY.pathname}`);
process.exit(failed ? 1 : 0);
