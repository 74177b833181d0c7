/**
 * Running `selfheal watch` (the built CLI) over the scenario agents of test/fixtures: the Node one
 * (watch-scenario.ts as built JS on dist/, test/helpers/built-js.ts: never tsx) and its Python twin
 * (watch_scenario.py, on examples/python/selfheal_agent.py), and checking from watch's output and
 * event log that every verdict was on the generation it names.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ExpectStatic } from "vitest";
import { which } from "./binaries.js";
import { builtJs } from "./built-js.js";

export const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
export const PYTHON_SCENARIO = join(import.meta.dirname, "../fixtures/watch_scenario.py");

/**
 * Short limits, with room for a busy machine: the heartbeat is read every 100 ms, a stall is 3 s,
 * death 8 s, each tier has 6 s to show progress. An agent steps every 50 ms and writes a beat and
 * a snapshot each time (fsync'd): at load 18 on 2 cores those writes alone took over 1.5 s now
 * and then, which the earlier 1.5 s stall limit read as a stall (issue 27).
 */
export const FAST = [
  "--poll-ms",
  "100",
  "--stall-ms",
  "3000",
  "--dead-ms",
  "8000",
  "--grace-ms",
  "0",
  "--prove-ms",
  "6000",
];

/** The first line each scenario agent prints, for the limits of FAST. */
export const FAST_LIMITS = "limits dead=8000 stall=3000 grace=0 poll=100";

/** test/fixtures/watch-scenario.ts as JS importing dist/watchdog/index.js; returns its path. */
export const buildNodeScenario = (): string => builtJs("test/fixtures/watch-scenario.ts");

/**
 * The Python 3.9+ interpreter the Python agent runs on (`SELFHEAL_TEST_PYTHON`, else python3 on
 * PATH), resolved to the interpreter itself (not a pyenv shim): its pid is the agent's. Or why
 * there is none.
 */
export function findPython(): { python: string } | { problem: string } {
  const override = process.env.SELFHEAL_TEST_PYTHON;
  const found = which("python3", override);
  if (!found) return { problem: `no ${override ?? "python3"} on PATH (apt-get install python3)` };
  const probe = spawnSync(
    found,
    ["-c", "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])"],
    { encoding: "utf8", timeout: 30_000 },
  );
  const [python = "", version = ""] = probe.stdout.trim().split("\n");
  if (probe.status !== 0 || python === "")
    return { problem: `${found} does not run: ${probe.stderr || String(probe.error)}` };
  const [major = 0, minor = 0] = version.split(".").map(Number);
  if (major < 3 || (major === 3 && minor < 9))
    return { problem: `${found} is Python ${version}; the reference agent needs 3.9+` };
  return { python };
}

/** One line of watch's event log. */
export interface WatchdogEvent {
  type: string;
  kind: "verdict" | "tier" | "tier_result" | "gave_up";
  // Also "steps" and "limits" in the file: log-only lines, left out where the printed events are matched.
  at: number;
  verdict?: string;
  reason?: string;
  generation?: number;
  pid?: number;
  tier?: string;
  outcome?: string;
}

export interface Watched {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The event log, in order. */
  events: WatchdogEvent[];
  stateDir: string;
  /** Date.now() just before watch was spawned: nothing it logs can be dated earlier. */
  spawnedAt: number;
  /** When watch exited, and when it said "gave up" (if it did), ms after it was spawned. */
  exitedAfter: number;
  gaveUpAfter: number | undefined;
}

export interface WatchRun {
  /** The agent's command (what follows `--`). */
  agent: string[];
  /** WATCH_MODE. */
  mode: string;
  stateDir: string;
  /** Watch's --event-log (default `<stateDir>.events.jsonl`). */
  eventLog?: string;
  /** Watch's flags after --state-dir and --event-log (default FAST). */
  flags?: string[];
  /** Called with watch's process once spawned. */
  started?: (child: ChildProcess) => void;
}

/** Runs `selfheal watch` over an agent until it exits. */
export function runWatch(run: WatchRun): Promise<Watched> {
  const { agent, mode, stateDir, flags = FAST, started } = run;
  const eventLog = run.eventLog ?? `${stateDir}.events.jsonl`;
  const spawnedAt = Date.now();
  const start = performance.now();
  let gaveUpAfter: number | undefined;
  return new Promise<Watched>((resolve) => {
    const child = spawn(
      process.execPath,
      [CLI, "watch", "--state-dir", stateDir, "--event-log", eventLog, ...flags, "--", ...agent],
      { env: { ...process.env, WATCH_MODE: mode }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
      if (gaveUpAfter === undefined && stderr.includes("gave up:"))
        gaveUpAfter = performance.now() - start;
    });
    child.once("close", (code) => {
      const events = existsSync(eventLog)
        ? readFileSync(eventLog, "utf8")
            .split("\n")
            .filter((line) => line !== "")
            .map((line) => JSON.parse(line) as WatchdogEvent)
        : [];
      resolve({
        code,
        stdout,
        stderr,
        events,
        stateDir,
        spawnedAt,
        exitedAfter: performance.now() - start,
        gaveUpAfter,
      });
    });
    started?.(child);
  });
}

/** The agent's stdout lines, pids replaced by `P` (the same for the Node and Python agents). */
export const agentLines = (stdout: string): string[] =>
  stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => line.replace(/ pid=\d+ /, " pid=P "));

/** The pid each generation's agent printed (`agent gen=G pid=P from=K`). */
export function agentPids(stdout: string): Map<number, number> {
  const pids = new Map<number, number>();
  for (const [, gen, pid] of stdout.matchAll(/^agent gen=(\d+) pid=(\d+) from=\d+$/gm))
    pids.set(Number(gen), Number(pid));
  return pids;
}

/** Watch's own stderr lines ("selfheal watch: ..."), without the prefix. */
const watchLines = (stderr: string): string[] =>
  stderr
    .split("\n")
    .filter((line) => line.startsWith("selfheal watch: "))
    .map((line) => line.slice("selfheal watch: ".length));

/** What an event looks like on stderr, up to its reason. */
function eventKey(event: WatchdogEvent): string {
  switch (event.kind) {
    case "verdict":
      return `verdict ${event.verdict ?? "?"}:`;
    case "tier":
      return `tier ${event.tier ?? "?"}:`;
    case "tier_result":
      return `tier ${event.tier ?? "?"} ${event.outcome ?? "?"}`;
    case "gave_up":
      return "gave up:";
  }
}

/** The stderr line's event key, or undefined for a line that is no event ("generation ..."). */
function lineKey(line: string): string | undefined {
  return /^(verdict \w+:|tier \w+:|tier \w+ (?:recovered|failed)$|gave up:)/.exec(line)?.[1];
}

/** The events watch prints on stderr as it logs them. */
const PRINTED_KINDS: readonly string[] = ["verdict", "tier", "tier_result", "gave_up"];

/**
 * That no verdict came from a previous generation. Watch prints each event on stderr as it logs
 * it, and "generation G started (pid P)" as it spawns G, so stderr orders the event log against
 * the starts. Each verdict must name the generation started last before it; one judged from a
 * beat must carry the pid that generation's agent printed; none may be dated before its
 * generation started (watch's spawn for generation 1; for a later one, the latest event logged
 * before it was started); and none may say a generation is `starting` once a verdict was judged
 * from its beat. Events are dated in the order they were logged: a look still reading when the
 * process exited must not log a verdict on the dead process after its `session_dead`. Each
 * generation's pid on stderr is the one its agent printed.
 */
export function expectVerdictsOfTheirGeneration(out: Watched, expect: ExpectStatic): void {
  // The log-only lines (the limits, the steps per minute) are not printed: left out of the match.
  const events = out.events.filter((e) => PRINTED_KINDS.includes(e.kind));
  const pids = agentPids(out.stdout);
  const starts = agentLines(out.stdout).filter((l) => l.startsWith("agent gen="));
  expect(
    new Set(starts.map((l) => /gen=(\d+)/.exec(l)?.[1])).size,
    "one process a generation",
  ).toBe(starts.length);
  let generation: number | undefined;
  let startedAt = out.spawnedAt;
  let latest = out.spawnedAt;
  let next = 0;
  const beaten = new Set<number>();
  for (const line of watchLines(out.stderr)) {
    const started = /^generation (\d+) started \(pid (\d+)\)$/.exec(line);
    if (started) {
      const gen = Number(started[1]);
      expect(gen, line).toBe(generation === undefined ? gen : generation + 1);
      if (pids.has(gen)) expect(Number(started[2]), `${line}: the agent's pid`).toBe(pids.get(gen));
      generation = gen;
      startedAt = latest;
      continue;
    }
    const key = lineKey(line);
    if (key === undefined) continue;
    const event = events[next++];
    const seen = `${line}\n  logged as ${JSON.stringify(event)}\n  watch's stderr:\n${out.stderr}`;
    expect(event && eventKey(event), `stderr and the event log agree: ${seen}`).toBe(key);
    if (!event) continue;
    expect(event.at, `logged out of time order (after ${latest}): ${seen}`).toBeGreaterThanOrEqual(
      latest,
    );
    latest = event.at;
    if (event.kind !== "verdict") continue;
    expect(event.generation, `the verdict names the current generation: ${seen}`).toBe(generation);
    expect(
      event.at,
      `dated before its generation started (${startedAt}): ${seen}`,
    ).toBeGreaterThanOrEqual(startedAt);
    if (event.verdict === "starting")
      expect(beaten.has(generation ?? -1), `starting after a beat was judged: ${seen}`).toBe(false);
    if (event.pid !== undefined) {
      expect(event.pid, `judged from a beat of its generation's agent: ${seen}`).toBe(
        pids.get(event.generation ?? -1),
      );
      beaten.add(event.generation ?? -1);
    }
  }
  expect(next, "every logged event was printed").toBe(events.length);
}

/** The verdicts of the event log, in order (`verdict@generation`). */
export const verdicts = (out: Watched): string[] =>
  out.events
    .filter((e) => e.kind === "verdict")
    .map((e) => `${e.verdict ?? "?"}@${e.generation ?? "?"}`);
