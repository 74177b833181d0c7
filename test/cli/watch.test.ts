import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const AGENT = join(import.meta.dirname, "../fixtures/watch-agent.ts");
const root = mkdtempSync(join(tmpdir(), "selfheal-watch-"));
let n = 0;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** test/fixtures/watch-agent-built.ts as built JS on dist/ (no tsx at run time). */
const BUILT = join(root, "watch-agent-built.mjs");
beforeAll(() => {
  const source = readFileSync(
    join(import.meta.dirname, "../fixtures/watch-agent-built.ts"),
    "utf8",
  );
  const js = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const dist = pathToFileURL(join(import.meta.dirname, "../../dist/watchdog/index.js")).href;
  writeFileSync(BUILT, js.replace("../../src/watchdog/index.js", dist));
});

/**
 * Short limits, with room for a busy machine (a tsx child can take seconds to start while the
 * Redis chaos and cluster suites run beside this one): a stall is 1.5 s, death 4 s, each tier has
 * 3 s to show progress.
 */
const FAST = [
  "--poll-ms",
  "100",
  "--stall-ms",
  "1500",
  "--dead-ms",
  "4000",
  "--grace-ms",
  "0",
  "--prove-ms",
  "3000",
];

interface Watched {
  code: number | null;
  stdout: string;
  stderr: string;
  /** When watch exited, and when it said "gave up" (if it did), ms since it started. */
  exitedAfter: number;
  gaveUpAfter: number | undefined;
}

function watch(
  mode: string,
  extra: string[] = [],
  started: (child: ChildProcess) => void = () => undefined,
  agent: string[] = ["--import", "tsx", AGENT],
  stateDir = join(root, `s${n++}`),
) {
  const start = performance.now();
  let gaveUpAfter: number | undefined;
  return new Promise<Watched>((resolve) => {
    const child = spawn(
      process.execPath,
      [CLI, "watch", "--state-dir", stateDir, ...FAST, ...extra, "--", process.execPath, ...agent],
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
    child.once("exit", (code) => {
      resolve({ code, stdout, stderr, exitedAfter: performance.now() - start, gaveUpAfter });
    });
    started(child);
  });
}

describe("selfheal watch (built CLI, a real child-process agent)", () => {
  it("a steady agent: healthy throughout, watch ends with its exit code", async () => {
    const out = await watch("steady");
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("finished");
    expect(out.stderr).not.toMatch(/tier /);
  }, 60_000);

  it("frozen before an LLM call: stalled, Tier 1's nudge gets it going", async () => {
    const out = await watch("freeze");
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(/verdict stalled: step 5 unmoved/);
    expect(out.stderr).toMatch(/tier nudge recovered/);
    expect(out.stderr).not.toMatch(/tier context_reset:/);
    expect(out.stdout).toContain("finished");
  }, 60_000);

  it("frozen hard: the nudge fails, Tier 2 restarts it", async () => {
    const out = await watch("hard");
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(/tier nudge failed/);
    expect(out.stderr).toMatch(/tier context_reset: nudge did not help/);
    expect(out.stdout).toContain("finished");
  }, 60_000);

  it("dies: Tier 3 rotates it, and the new process resumes from the handed-over step", async () => {
    const out = await watch("die");
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(/verdict session_dead: the agent exited with code 1/);
    expect(out.stderr).toMatch(/tier rotation/);
    expect(out.stdout).toContain("resumed from 5");
    expect(out.stdout).toContain("finished");
  }, 60_000);

  it("context past the token limit: context_bloat, Tier 2 resets and restarts it; the event log makes a report", async () => {
    const eventLog = join(root, `bloat-${n}.jsonl`);
    const out = await watch("bloat", [
      "--token-limit",
      "10000",
      "--agent",
      "nightly",
      "--event-log",
      eventLog,
    ]);
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(
      /verdict context_bloat: context at \d+% of 10000 tokens \(limit 92%\)/,
    );
    expect(out.stderr).toMatch(/tier context_reset:/);
    expect(out.stderr).toMatch(/tier context_reset recovered/);
    expect(out.stderr).not.toMatch(/tier nudge:|tier rotation:/);
    expect(out.stdout).toMatch(/resumed from \d+/);
    expect(out.stdout).toContain("finished");

    const lines = readFileSync(eventLog, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as object);
    expect(lines).toContainEqual(
      expect.objectContaining({
        type: "watchdog",
        agent: "nightly",
        kind: "tier_result",
        tier: "context_reset",
        outcome: "recovered",
      }),
    );
    const report = execFileSync(process.execPath, [CLI, "report", eventLog], { encoding: "utf8" });
    expect(report).toContain("Watchdog: long runs (1 session)");
    expect(report).toMatch(/^context_reset\s+1\s+1\s+0\s+100\.0%$/m);
    // A log of watchdog lines only: no empty recovery tables.
    expect(report).toMatch(
      /^Recovery review: 0 incidents .*\(the log holds watchdog lines only\)$/m,
    );
    expect(report).not.toContain("Top failure patterns");
  }, 60_000);

  it("a signal to watch goes to the agent, and watch ends with the agent's exit code", async () => {
    const out = await watch("long", [], (child) => {
      setTimeout(() => child.kill("SIGTERM"), 1_500);
    });
    expect(out.stdout).toContain("agent got SIGTERM");
    expect(out.code).toBe(0);
    expect(out.stderr).not.toMatch(/tier /);
  }, 60_000);

  it("a hung agent that ignores SIGTERM: rotations fail, watch gives up, SIGKILLs it and exits 3 within 5 s", async () => {
    const out = await watch("hung", ["--dead-ms", "2000"], undefined, [BUILT]);
    expect(out.stderr).toMatch(/verdict session_dead/);
    expect(out.stderr).toMatch(/gave up: /);
    expect(out.stdout).toContain("hung agent ignores SIGTERM");
    expect(out.code).toBe(3);
    expect(out.gaveUpAfter).toBeDefined();
    const afterGiveUp = out.exitedAfter - (out.gaveUpAfter ?? 0);
    console.log(
      `hung agent: gave up after ${Math.round(out.gaveUpAfter ?? 0)} ms, exit 3 ${Math.round(afterGiveUp)} ms later`,
    );
    expect(afterGiveUp).toBeLessThan(5_000);
  }, 180_000);

  it("SIGTERM passed on to an agent that dies of it: watch exits 143 (128 + 15)", async () => {
    const out = await watch(
      "term",
      [],
      (child) => {
        child.stdout?.once("data", () => {
          setTimeout(() => child.kill("SIGTERM"), 500);
        });
      },
      [BUILT],
    );
    expect(out.code).toBe(143);
    expect(out.stderr).not.toMatch(/tier /);
  }, 60_000);

  it("the child gets its limits; with --dead-ms 3000 an agent waiting 6 s in a slow call keeps alive and is not declared dead", async () => {
    const out = await watch(
      "slow",
      ["--dead-ms", "3000", "--stall-ms", "30000", "--poll-ms", "100"],
      undefined,
      [BUILT],
    );
    expect(out.stdout).toContain("limits dead=3000 stall=30000 grace=0 poll=100");
    expect(out.stdout).toContain("finished");
    expect(out.code).toBe(0);
    expect(out.stderr).not.toMatch(/session_dead|tier /);
  }, 60_000);

  it("stale temp files of the session (writer gone) are removed at start; others are kept", async () => {
    const stateDir = join(root, `tmp${n++}`);
    mkdirSync(stateDir, { recursive: true });
    // A pid that has exited: its writes were cut short.
    const dead = spawnSync(process.execPath, ["-e", ""]).pid;
    const stale = [
      `agent.heartbeat.json.${dead}.0123abcd.tmp`,
      `agent.inbox.json.${dead}.89abcdef.tmp`,
      `agent.snapshot.json.${dead}.00000000.tmp`,
    ];
    const kept = [
      `agent.heartbeat.json.${process.pid}.0123abcd.tmp`, // a live writer's
      `other.heartbeat.json.${dead}.0123abcd.tmp`, // another session's
      "notes.tmp", // not one of ours
    ];
    for (const name of [...stale, ...kept]) writeFileSync(join(stateDir, name), "{");
    const out = await watch("steady", [], undefined, undefined, stateDir);
    expect(out.code).toBe(0);
    for (const name of stale) expect(existsSync(join(stateDir, name)), name).toBe(false);
    for (const name of kept) expect(existsSync(join(stateDir, name)), name).toBe(true);
  }, 60_000);

  it("--once --json prints one verdict; a bad flag exits 2 with one line", async () => {
    const stateDir = join(root, "once");
    const once = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [CLI, "watch", "--state-dir", stateDir, "--once", "--json"],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stdout = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      child.once("exit", (code) => {
        resolve({ code, stdout });
      });
    });
    expect(once.code).toBe(0);
    expect(JSON.parse(once.stdout)).toMatchObject({ session: "agent", verdict: "unreadable" });
    const bad = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [CLI, "watch", "--state-dir", stateDir, "--poll-ms", "soon", "--", "true"],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      child.once("exit", (code) => {
        resolve({ code, stderr });
      });
    });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('selfheal: --poll-ms must be a whole number of ms, got "soon"\n');
  }, 60_000);
});
