import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, it } from "vitest";
import {
  CLI,
  FAST,
  FAST_LIMITS,
  agentLines,
  buildNodeScenario,
  expectVerdictsOfTheirGeneration,
  runWatch,
} from "../helpers/watch.js";

// The tiers over the Node and Python scenario agents are in watch-tiers.test.ts.
const root = mkdtempSync(join(tmpdir(), "selfheal-watch-"));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});
/** test/fixtures/watch-scenario.ts as built JS on dist/ (no tsx at run time). */
const AGENT = [process.execPath, buildNodeScenario()];
let n = 0;

describe.concurrent("selfheal watch (built CLI, the Node scenario agent as its child)", () => {
  it("context past the token limit: context_bloat, Tier 2 resets and restarts it; the event log makes a report", async ({
    expect,
  }) => {
    const eventLog = join(root, `bloat-${n}.jsonl`);
    const out = await runWatch({
      agent: AGENT,
      mode: "bloat",
      stateDir: join(root, `s${n++}`),
      eventLog,
      flags: [...FAST, "--token-limit", "10000", "--agent", "nightly"],
    });
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(
      /verdict context_bloat: context at \d+% of 10000 tokens \(limit 92%\)/,
    );
    expect(out.stderr).toMatch(/tier context_reset:/);
    expect(out.stderr).toMatch(/tier context_reset recovered/);
    expect(out.stderr).not.toMatch(/tier nudge:|tier rotation:/);
    const lines = agentLines(out.stdout);
    expect(lines.slice(0, 3)).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      "context_reset gen=1 seq=1",
    ]);
    expect(lines[4]).toMatch(/^agent gen=2 pid=P from=(9|1\d)$/);
    expect(lines.at(-1)).toBe("finished");
    expectVerdictsOfTheirGeneration(out, expect);

    expect(out.events).toContainEqual(
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
  }, 120_000);

  it("the child gets its limits; with --dead-ms 6000 an agent waiting 15 s in a slow call keeps alive and is not declared dead", async ({
    expect,
  }) => {
    const out = await runWatch({
      agent: AGENT,
      mode: "slow",
      stateDir: join(root, `s${n++}`),
      flags: [...FAST, "--dead-ms", "6000", "--stall-ms", "30000", "--poll-ms", "100"],
    });
    expect(agentLines(out.stdout), out.stderr).toEqual([
      "limits dead=6000 stall=30000 grace=0 poll=100",
      "agent gen=1 pid=P from=0",
      "finished",
    ]);
    expect(out.code).toBe(0);
    expect(out.stderr).not.toMatch(/session_dead|tier /);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  it("stale temp files of the session (writer gone) are removed at start; others are kept", async ({
    expect,
  }) => {
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
    const out = await runWatch({ agent: AGENT, mode: "steady", stateDir });
    expect(out.code).toBe(0);
    for (const name of stale) expect(existsSync(join(stateDir, name)), name).toBe(false);
    for (const name of kept) expect(existsSync(join(stateDir, name)), name).toBe(true);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  it("--once --json prints one verdict; a bad flag exits 2 with one line", async ({ expect }) => {
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
  }, 120_000);
});
