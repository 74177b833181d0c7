/**
 * Per-call overhead as a user meets it: the packed package installed in a scratch project, each
 * candidate in its own fresh process (bench/overhead/candidate.mjs), CALLS awaited calls after a
 * warm-up, the median of ROUNDS processes per candidate, candidates interleaved round by round
 * (a burst of machine noise hits them alike). Ratios are taken within this one run.
 *
 *   P1: selfheal / a hand-written active span, recording SDK with AsyncLocalStorage context
 *       (what `NodeTracerProvider.register()` gives)             target <= 1.2
 *   P2: selfheal / cockatiel retry+breaker, no SDK               target <= 1.0
 *   and the ns selfheal adds to a bare call with no SDK.
 *
 * Run: npm run bench:overhead [-- --rounds 5 --calls 200000]   (writes bench/results/overhead.json)
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { report } from "./harness.js";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    calls: { type: "string", default: "200000" },
  },
});
const ROUNDS = Number(values.rounds);
const CALLS = Number(values.calls);
const root = fileURLToPath(new URL("..", import.meta.url));

/** A scratch project with the packed tarball and the peers the candidates import. */
function scratchProject(): string {
  const dir = mkdtempSync(join(tmpdir(), "selfheal-overhead-"));
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
      cwd: root,
      encoding: "utf8",
    }),
  ) as { filename: string }[];
  const modules = join(dir, "node_modules");
  mkdirSync(modules);
  execFileSync("tar", ["-xzf", join(dir, packed[0]?.filename ?? ""), "-C", dir]);
  renameSync(join(dir, "package"), join(modules, "selfheal"));
  // The package's dependencies (as npm would install them) and what the candidates import.
  const { dependencies = {} } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
  };
  const imported = ["@opentelemetry/sdk-trace-node", "@opentelemetry/sdk-trace-base", "cockatiel"];
  // A scope is linked whole.
  const linked = new Set(
    [...Object.keys(dependencies), ...imported].map((n) => n.split("/")[0] ?? n),
  );
  for (const name of linked) symlinkSync(join(root, "node_modules", name), join(modules, name));
  copyFileSync(join(root, "bench/overhead/candidate.mjs"), join(dir, "candidate.mjs"));
  return dir;
}

const CANDIDATES = [
  { name: "bare call, no SDK", setup: "none", kind: "bare" },
  { name: "cockatiel retry+breaker, no SDK", setup: "none", kind: "cockatiel" },
  { name: "selfheal, no SDK", setup: "none", kind: "selfheal" },
  { name: "bare span, SDK + AsyncLocalStorage", setup: "als", kind: "span" },
  { name: "selfheal, SDK + AsyncLocalStorage", setup: "als", kind: "selfheal" },
  { name: "bare span, SDK, no context manager", setup: "nocm", kind: "span" },
  { name: "selfheal, SDK, no context manager", setup: "nocm", kind: "selfheal" },
] as const;
type Name = (typeof CANDIDATES)[number]["name"];

const dir = scratchProject();
const samples = new Map<Name, number[]>();
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate the order so no candidate always runs first (or right after the heaviest).
    const order = CANDIDATES.map((_, i) => CANDIDATES[(i + round) % CANDIDATES.length] ?? _);
    for (const c of order) {
      const out = spawnSync(process.execPath, ["candidate.mjs", c.setup, c.kind, String(CALLS)], {
        cwd: dir,
        encoding: "utf8",
      });
      if (out.status !== 0) throw new Error(`${c.name}: exit ${out.status}\n${out.stderr}`);
      const { ns } = JSON.parse(out.stdout) as { ns: number };
      samples.set(c.name, [...(samples.get(c.name) ?? []), ns]);
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const ns = Object.fromEntries(CANDIDATES.map((c) => [c.name, median(samples.get(c.name) ?? [])]));
const at = (name: Name) => ns[name] ?? NaN;
const ratio = (a: Name, b: Name) => +(at(a) / at(b)).toFixed(2);
const rows = CANDIDATES.map((c) => ({
  candidate: c.name,
  "ns/call (median)": Math.round(at(c.name)),
  "min..max": `${Math.round(Math.min(...(samples.get(c.name) ?? [])))}..${Math.round(Math.max(...(samples.get(c.name) ?? [])))}`,
}));
report(
  "overhead",
  rows,
  {
    "P1 selfheal / bare span, SDK + AsyncLocalStorage (target <= 1.2)": ratio(
      "selfheal, SDK + AsyncLocalStorage",
      "bare span, SDK + AsyncLocalStorage",
    ),
    "selfheal / bare span, SDK, no context manager (target <= 1.2)": ratio(
      "selfheal, SDK, no context manager",
      "bare span, SDK, no context manager",
    ),
    "P2 selfheal / cockatiel, no SDK (target <= 1.0)": ratio(
      "selfheal, no SDK",
      "cockatiel retry+breaker, no SDK",
    ),
    "selfheal, no SDK: ns added to a bare call": Math.round(
      at("selfheal, no SDK") - at("bare call, no SDK"),
    ),
  },
  { rounds: ROUNDS, calls: CALLS, samplesNs: Object.fromEntries(samples) },
);
