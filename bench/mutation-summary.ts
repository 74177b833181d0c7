/**
 * Reads Stryker's JSON report (reports/mutation/mutation.json, written by `npm run mutate`) and
 * writes the committed summary, bench/results/mutation.json: mutant counts and score per folder
 * and overall; and bench/results/mutation-survivors.md: every mutant left alive (survived or not
 * covered), by file and line, with its line of code: what the next round of tests should look at.
 *
 * score = (killed + timeout) / (killed + timeout + survived + no coverage), as Stryker counts it;
 * ignored mutants (static ones, with ignoreStatic) and compile/runtime errors are left out of it.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const REPORT = new URL("../reports/mutation/mutation.json", import.meta.url);
const OUT = new URL("results/mutation.json", import.meta.url);
const SURVIVORS = new URL("results/mutation-survivors.md", import.meta.url);
const GROUPS = ["src/recovery", "src/diagnosis", "src/engine", "src/telemetry/redact.ts"];

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
  framework?: { version?: string };
  config?: {
    ignoreStatic?: boolean;
    coverageAnalysis?: string;
    mutator?: { excludedMutations?: string[] };
  };
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

function count(statuses: Status[]): Counts {
  const n = (...wanted: Status[]) => statuses.filter((s) => wanted.includes(s)).length;
  const killed = n("Killed");
  const timeout = n("Timeout");
  const survived = n("Survived");
  const noCoverage = n("NoCoverage");
  const detected = killed + timeout;
  const percent = (part: number, whole: number) =>
    whole === 0 ? null : Math.round((part / whole) * 10_000) / 100;
  return {
    mutants: statuses.length,
    killed,
    survived,
    timeout,
    noCoverage,
    ignored: n("Ignored"),
    errors: n("CompileError", "RuntimeError"),
    score: percent(detected, detected + survived + noCoverage),
    scoreCovered: percent(detected, detected + survived),
  };
}

const report = JSON.parse(readFileSync(REPORT, "utf8")) as Report;
const files = Object.entries(report.files).map(([name, file]) => ({
  name: name.replaceAll("\\", "/"),
  statuses: file.mutants.map((m) => m.status),
}));
const inGroup = (name: string, group: string) => name === group || name.startsWith(`${group}/`);
const statusesOf = (keep: (name: string) => boolean) =>
  files.filter((f) => keep(f.name)).flatMap((f) => f.statuses);

const summary = {
  node: process.version,
  stryker: report.framework?.version,
  coverageAnalysis: report.config?.coverageAnalysis,
  ignoreStatic: report.config?.ignoreStatic ?? false,
  excludedMutations: report.config?.mutator?.excludedMutations ?? [],
  overall: count(statusesOf(() => true)),
  folders: Object.fromEntries(
    GROUPS.map((group) => [group, count(statusesOf((name) => inGroup(name, group)))]),
  ),
  /** Score per file, lowest first: where the tests are thinnest. */
  files: Object.fromEntries(
    files
      .map((f) => [f.name, count(f.statuses).score] as const)
      .sort((a, b) => (a[1] ?? 101) - (b[1] ?? 101) || a[0].localeCompare(b[0])),
  ),
};

mkdirSync(new URL(".", OUT), { recursive: true });
writeFileSync(OUT, JSON.stringify(summary, null, 2) + "\n");
console.log(`mutation score ${summary.overall.score}% (${summary.overall.mutants} mutants)`);
for (const [group, c] of Object.entries(summary.folders)) {
  console.log(
    `  ${group.padEnd(24)} ${String(c.score ?? "-").padStart(6)}%  killed ${c.killed}, survived ${c.survived}, timeout ${c.timeout}, no coverage ${c.noCoverage}`,
  );
}
console.log(`wrote ${OUT.pathname}`);

/** The mutants left alive, by file: the line as it was in the measured tree, and the change. */
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
writeFileSync(
  SURVIVORS,
  [
    "# Mutants left alive (Stryker), by file",
    "",
    "Survived or not covered in the last `npm run mutate`; line numbers are those of the tree it ran on.",
    "Some are equivalent (no observable difference); the rest are what the next tests should kill.",
    ...alive.flatMap((f) => ["", `## ${f.name} (${f.left.length})`, "", ...f.left]),
    "",
  ].join("\n"),
);
console.log(`wrote ${SURVIVORS.pathname}`);
