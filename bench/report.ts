/**
 * `selfheal report` on big event logs: writes logs of realistic recovery events, with the
 * engine's per-minute call rollups (one line per agent and tool a minute, as a fleet of 7 agents
 * of 6 tools writes them) and the watchdog's step rollups between them (streamed to
 * disk in a temp folder, never held in memory; deleted after), runs the BUILT command
 * `node dist/cli/main.js report FILE` on each as a child process, with every section of the review
 * (`--html`, `--suggest-rules`, `--suggest-thresholds`, a period with `--compare-previous`), and
 * measures its wall time
 * and peak RSS (`/usr/bin/time -v` when present, else VmHWM from /proc/PID/status, polled).
 * Target, as issue 28 puts it: the biggest log (1 GB) reviewed at >= 100 MB/s, with its peak RSS
 * within 1.5x the smallest's (100 MB: the memory reference, whose speed is shown too; start-up and
 * the closing work weigh more on it).
 * Beside it, the baseline: the same file read by the same line reader with a bare JSON.parse of
 * each line and nothing else, so the figure holds on a slower or busier machine as a ratio.
 *
 * Each log is reviewed by every supported Node.js found: the one running the bench, and Node 22
 * and 24 where scripts/node-runtime.sh has installed them (V8's JSON.parse and regexps differ
 * by release, and so does the figure).
 *
 * Run: npm run bench:report   (writes bench/results/report.json)
 * Sizes: REPORT_BENCH_MB=100,1000 (the default). Runtimes: REPORT_BENCH_NODES=/path/node,...
 */
import { execFileSync, spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";

const FIRST_AT = Date.UTC(2026, 0, 1);
const SIZES_MB = (process.env.REPORT_BENCH_MB ?? "100,1000").split(",").map(Number);
const TIME = "/usr/bin/time";

/** The Node.js binaries to measure: this one, and the pinned 22 and 24 when installed. */
function runtimes(): string[] {
  if (process.env.REPORT_BENCH_NODES) return process.env.REPORT_BENCH_NODES.split(",");
  const installed = ["22", "24"]
    .map((major) =>
      execFileSync("bash", ["scripts/node-runtime.sh", "--path", major], {
        encoding: "utf8",
      }).trim(),
    )
    .filter((bin) => existsSync(bin));
  return [...new Set([process.execPath, ...installed])];
}

const TOOLS = ["search", "lookup", "complete", "charge", "summarize", "fetch_page"];
const PATTERNS = ["TIMEOUT", "RATE_LIMIT", "SERVICE_DOWN", "UNKNOWN", "BAD_REQUEST", "AUTH"];
const STRATEGIES = ["retry_once", "backoff_retry", "failover_to_secondary", "fallback"];
const OUTCOMES = ["recovered", "recovered", "recovered", "failed", "escalated"];
/** UNKNOWN wordings, each with a part that varies: the rule miner's templates. */
const UNKNOWN_TEXTS = [
  (n: number) => `upstream said: flux capacitor misaligned (code ${n % 50})`,
  (n: number) => `Request budget spent for this minute, retry after ${n % 60}s`,
  (n: number) => `backend shard-${n % 16} is rebalancing, request req_${n.toString(16)}x9 dropped`,
  (n: number) => `model "gpt-${n % 5}" is warming up`,
];
const VERDICTS = ["healthy", "healthy", "stalled", "session_dead", "context_bloat"];
const TIERS = ["nudge", "context_reset", "rotation"];

/** A deterministic stream of plausible events (a small LCG: no Math.random, same every run). */
function* events(): Generator<string> {
  let seed = 42;
  const rand = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
  let at = FIRST_AT;
  let minute = Math.floor(at / 60_000);
  for (let i = 0; ; i++) {
    at += Math.floor(rand() * 5_000);
    // Each minute passed: its call rollups, as the engines write them when the minute ends.
    for (; minute < Math.floor(at / 60_000); minute++) yield* rollups(minute * 60_000, rand);
    if (i % 50 === 49) {
      // The watchdog's lines, in the same log as `selfheal watch --event-log` writes them.
      const kind = pick(["verdict", "tier", "tier_result"] as const);
      yield JSON.stringify({
        type: "watchdog",
        at,
        agent: `agent-${i % 7}`,
        session: `run-${Math.floor(i / 500)}`,
        kind,
        ...(kind === "verdict"
          ? { verdict: pick(VERDICTS), reason: "no step for 300 s" }
          : kind === "tier"
            ? { tier: pick(TIERS), reason: "stalled" }
            : { tier: pick(TIERS), outcome: pick(["recovered", "failed"]) }),
      });
      continue;
    }
    const pattern = pick(PATTERNS);
    const outcome = pick(OUTCOMES);
    const strategy = pick(STRATEGIES);
    yield JSON.stringify({
      at,
      agent: `agent-${i % 7}`,
      tool: pick(TOOLS),
      taskId: `task-${i}`,
      error:
        pattern === "UNKNOWN"
          ? pick(UNKNOWN_TEXTS)(Math.floor(rand() * 1e6))
          : `${pattern.toLowerCase()} from provider after ${Math.floor(rand() * 30_000)} ms`,
      pattern,
      confidence: Math.round(rand() * 100) / 100,
      strategy,
      steps: [
        { strategy: "retry_once" },
        { strategy },
        { strategy: "fallback", skipped: "budget" },
      ],
      attempts: 1 + Math.floor(rand() * 3),
      durationMs: Math.floor(rand() * 60_000),
      outcome,
      costUsd: Math.round(rand() * 1e6) / 1e8,
      wastedRetries: outcome === "recovered" ? 0 : 1,
      failoverCostDifferentialUsd: 0,
      provider: outcome === "recovered" ? "openai" : undefined,
    });
  }
}

/** One minute of rollups: a `calls` line per agent and tool, a `steps` line per agent. */
function* rollups(at: number, rand: () => number): Generator<string> {
  for (let a = 0; a < 7; a++) {
    for (const tool of TOOLS) {
      const latency: Record<string, number> = {};
      // About 30 calls around 2^(b/8) ms, b near 60 (180 ms), a few buckets wide.
      const center = 56 + Math.floor(rand() * 8);
      for (let b = center - 3; b <= center + 3; b++)
        latency[String(b)] = 1 + Math.floor(rand() * 8);
      const failed = rand() < 0.1 ? Math.floor(rand() * 5) : 0;
      yield JSON.stringify({
        type: "calls",
        at,
        agent: `agent-${a}`,
        tool,
        ok: 30 - failed,
        failed,
        llm: tool === "complete" ? 30 : 0,
        empty: tool === "complete" && rand() < 0.05 ? 1 : 0,
        latencyMs: latency,
      });
    }
    yield JSON.stringify({
      type: "watchdog",
      kind: "steps",
      at,
      agent: `agent-${a}`,
      session: `run-${a}`,
      stage: ["tool_call", "llm", "plan"][Math.floor(rand() * 3)],
      steps: 4,
      durationsMs: { [String(100 + Math.floor(rand() * 20))]: 4 },
    });
  }
}

/** Writes about `mb` MB of events to `file`, streamed, honouring back-pressure; its time span. */
async function generate(
  file: string,
  mb: number,
): Promise<{ bytes: number; fromMs: number; toMs: number }> {
  const out = createWriteStream(file);
  const target = mb * 1_000_000;
  let bytes = 0;
  let batch: string[] = [];
  let toMs = 0;
  for (const line of events()) {
    batch.push(line);
    toMs = (JSON.parse(line) as { at: number }).at;
    bytes += line.length + 1;
    if (batch.length === 1000 || bytes >= target) {
      if (!out.write(`${batch.join("\n")}\n`)) await once(out, "drain");
      batch = [];
    }
    if (bytes >= target) break;
  }
  out.end();
  await once(out, "finish");
  return { bytes: (await stat(file)).size, fromMs: FIRST_AT, toMs };
}

interface Run {
  wallSeconds: number;
  peakRssMb: number;
  exitCode: number | null;
  how: string;
}

/** The baseline: the built line reader, each line JSON.parsed, nothing kept. */
const BASELINE = `
import { readInto } from "./dist/report/read.js";
await readInto(process.argv[1], { addLine(line) { if (line) JSON.parse(line); }, reject() {} });
`;

/** Wall time and peak RSS of `node ARGS`: /usr/bin/time -v when present, else polled VmHWM. */
async function timed(node: string, args: string[]): Promise<Run> {
  const useTime = existsSync(TIME);
  const started = performance.now();
  const child = useTime
    ? spawn(TIME, ["-v", node, ...args], { stdio: ["ignore", "ignore", "pipe"] })
    : spawn(node, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  let hwmKb = 0;
  const poll = useTime
    ? undefined
    : setInterval(() => {
        readFile(`/proc/${child.pid}/status`, "utf8").then(
          (s) => (hwmKb = Math.max(hwmKb, Number(/VmHWM:\s+(\d+)/.exec(s)?.[1] ?? 0))),
          () => undefined,
        );
      }, 20);
  const [exitCode] = (await once(child, "close")) as [number | null];
  const wallSeconds = (performance.now() - started) / 1000;
  if (poll) clearInterval(poll);
  if (useTime) hwmKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)?.[1] ?? 0);
  return {
    wallSeconds,
    peakRssMb: Math.round(hwmKb / 102.4) / 10,
    exitCode,
    how: useTime ? "/usr/bin/time -v" : "/proc VmHWM",
  };
}

/**
 * Runs the built CLI on `file` with every section. The period is the log's second half, compared
 * with its first.
 */
function measure(node: string, file: string, fromMs: number, toMs: number): Promise<Run> {
  const middle = Math.floor((fromMs + toMs) / 2);
  return timed(node, [
    "dist/cli/main.js",
    "report",
    file,
    "--since",
    new Date(middle).toISOString(),
    "--until",
    new Date(toMs + 1).toISOString(),
    "--compare-previous",
    "--html",
    `${file}.html`,
    "--suggest-rules",
    `${file}.rules.json`,
    "--suggest-thresholds",
  ]);
}

const nodes = runtimes().map((bin) => ({
  bin,
  version: execFileSync(bin, ["--version"], { encoding: "utf8" }).trim(),
}));
const dir = await mkdtemp(join(tmpdir(), "selfheal-bench-report-"));
const results: Row[] = [];

interface Row {
  node: string;
  sizeMb: number;
  generateSeconds: number;
  wallSeconds: number;
  mbPerSecond: number;
  parseOnlyMbPerSecond: number;
  timeOverParseOnly: number;
  peakRssMb: number;
  exitCode: number | null;
  measuredWith: string;
}

try {
  for (const mb of SIZES_MB) {
    const file = join(dir, `events-${mb}mb.jsonl`);
    const genStart = performance.now();
    const { bytes, fromMs, toMs } = await generate(file, mb);
    const genSeconds = (performance.now() - genStart) / 1000;
    for (const node of nodes) {
      const run = await measure(node.bin, file, fromMs, toMs);
      const baseline = await timed(node.bin, ["--input-type=module", "-e", BASELINE, file]);
      const row: Row = {
        node: node.version,
        sizeMb: Math.round(bytes / 1e5) / 10,
        generateSeconds: Math.round(genSeconds * 10) / 10,
        wallSeconds: Math.round(run.wallSeconds * 100) / 100,
        mbPerSecond: Math.round(bytes / 1e6 / run.wallSeconds),
        parseOnlyMbPerSecond: Math.round(bytes / 1e6 / baseline.wallSeconds),
        // The review's time over the bare parse's: the cost of all it works out, on any machine.
        timeOverParseOnly: Math.round((run.wallSeconds / baseline.wallSeconds) * 100) / 100,
        peakRssMb: run.peakRssMb,
        exitCode: run.exitCode,
        measuredWith: run.how,
      };
      results.push(row);
      console.log(JSON.stringify(row));
    }
    await rm(file);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}

/** Per runtime: memory from the smallest log to the biggest, and the biggest log's speed. */
const verdicts = nodes.map(({ version }) => {
  const rows = results.filter((r) => r.node === version);
  const first = rows[0] as Row;
  const last = rows.at(-1) as Row;
  const memoryRatio = Math.round((last.peakRssMb / first.peakRssMb) * 100) / 100;
  return {
    node: version,
    memoryRatio,
    flatMemory: memoryRatio <= 1.5,
    biggestMb: last.sizeMb,
    mbPerSecond: last.mbPerSecond,
    fastEnough: last.mbPerSecond >= 100,
    smallestMbPerSecond: first.mbPerSecond,
  };
});
const summary = {
  date: new Date().toISOString(),
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model,
  targets: { memoryRatio: 1.5, mbPerSecondAtBiggest: 100 },
  runs: results,
  verdicts,
};
await writeFile("bench/results/report.json", `${JSON.stringify(summary, null, 2)}\n`);
for (const v of verdicts)
  console.log(
    `${v.node}: peak RSS x${v.memoryRatio} from the smallest log to the biggest (target <= 1.5); ${v.mbPerSecond} MB/s on ${v.biggestMb} MB (target >= 100; ${v.smallestMbPerSecond} MB/s on the smallest)`,
  );
