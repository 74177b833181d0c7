/**
 * `selfheal watch` (the built CLI) through every tier, over a real agent process in Node
 * (selfheal/watchdog's supervised()) and in Python (examples/python/selfheal_agent.py): the two
 * scenario agents print the same lines, so each case runs both. In every case the event log shows
 * no verdict on an earlier generation (test/helpers/watch.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import {
  FAST,
  FAST_LIMITS,
  PYTHON_SCENARIO,
  agentLines,
  buildNodeScenario,
  expectVerdictsOfTheirGeneration,
  findPython,
  runWatch,
  verdicts,
  type WatchRun,
} from "../helpers/watch.js";
import { running } from "./pids.js";

const root = mkdtempSync(join(tmpdir(), "selfheal-watch-tiers-"));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});
const nodeScenario = buildNodeScenario();
const found = findPython();
const ci = process.env.CI === "true";
if ("problem" in found && !ci)
  console.warn(`[skipped] selfheal watch with the Python reference agent: ${found.problem}`);

const AGENTS = [
  { name: "node", agent: [process.execPath, nodeScenario], problem: undefined },
  "python" in found
    ? { name: "python", agent: [found.python, PYTHON_SCENARIO], problem: undefined }
    : { name: "python", agent: [], problem: found.problem },
];

let n = 0;
const scenario = (agent: string[], mode: string, more: Partial<WatchRun> = {}) =>
  runWatch({ agent, mode, stateDir: join(root, `${mode}-${n++}`), ...more });

describe.concurrent.each(AGENTS)("selfheal watch over the $name scenario agent", (row) => {
  // Without Python, the Python row is skipped with a notice; under CI=true it fails, saying why.
  const test = row.problem === undefined || ci ? it : it.skip;
  beforeAll(() => {
    if (row.problem !== undefined)
      throw new Error(`the Python agent must run under CI=true: ${row.problem}`);
  });
  const { agent } = row;

  test("steady: healthy throughout, and watch ends with its exit code 0", async ({ expect }) => {
    const out = await scenario(agent, "steady");
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      "finished",
    ]);
    expect(out.code).toBe(0);
    expect(out.stderr).not.toMatch(/tier /);
    expect(verdicts(out)).toContain("healthy@1");
    expect(verdicts(out).filter((v) => v !== "starting@1" && v !== "healthy@1")).toEqual([]);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("stall: stopped before an LLM call (keep-alive beats only); Tier 1's nudge gets it going", async ({
    expect,
  }) => {
    const out = await scenario(agent, "stall");
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      "nudged gen=1 seq=1",
      "finished",
    ]);
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(
      /verdict stalled: step 5 unmoved for [\d.]+ s in stage llm_response/,
    );
    expect(out.stderr).toMatch(/tier nudge recovered/);
    expect(out.stderr).not.toMatch(/tier context_reset|tier rotation|session_dead/);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("hard: the nudge fails; Tier 2's reset is handled once, by generation 1, and generation 2 finishes", async ({
    expect,
  }) => {
    const out = await scenario(agent, "hard");
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      "nudged gen=1 seq=1",
      "context_reset gen=1 seq=2",
      FAST_LIMITS,
      "agent gen=2 pid=P from=5",
      "finished",
    ]);
    expect(out.stdout.match(/^context_reset /gm)).toHaveLength(1);
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(/tier nudge failed/);
    expect(out.stderr).toMatch(/tier context_reset: nudge did not help/);
    expect(out.stderr).toMatch(/verdict healthy: generation 2 resumed from step \d+/);
    expect(out.stderr).toMatch(/tier context_reset recovered/);
    expect(out.stderr).not.toMatch(/tier rotation|session_dead/);
    // Acknowledged by generation 1, so never re-sent for generation 2.
    const inbox = JSON.parse(readFileSync(join(out.stateDir, "agent.inbox.json"), "utf8")) as {
      messages: { seq: number; kind: string; gen?: number }[];
    };
    expect(inbox.messages.map((m) => [m.seq, m.kind, m.gen])).toEqual([
      [1, "nudge", 1],
      [2, "context_reset", 1],
    ]);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("die: exits 1 at step 5; Tier 3 rotates it, and generation 2 restores step 5 and finishes", async ({
    expect,
  }) => {
    const out = await scenario(agent, "die", {
      flags: [...FAST, "--rotation-backoff-ms", "200"],
    });
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      FAST_LIMITS,
      "agent gen=2 pid=P from=5",
      "finished",
    ]);
    expect(out.code).toBe(0);
    expect(out.stderr).toMatch(/verdict session_dead: the agent exited with code 1/);
    // The last step the supervisor saw: the agent may exit before its step-5 beat is read.
    expect(out.stderr).toMatch(/tier rotation: the agent exited with code 1; its last step was \d/);
    expect(out.stderr).toMatch(/verdict healthy: generation 2 resumed from step \d+/);
    expect(out.stderr).toMatch(/tier rotation recovered/);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("crashloop: every generation exits 1; past --max-rotations watch gives up with exit 3", async ({
    expect,
  }) => {
    const out = await scenario(agent, "crashloop", {
      flags: [...FAST, "--max-rotations", "2", "--rotation-backoff-ms", "50"],
    });
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      FAST_LIMITS,
      "agent gen=2 pid=P from=2",
      FAST_LIMITS,
      "agent gen=3 pid=P from=4",
    ]);
    expect(out.code).toBe(3);
    expect(out.stderr.match(/verdict session_dead: the agent exited with code 1/g)).toHaveLength(3);
    expect(out.stderr).toMatch(/gave up: 2 restarts in the last 600 s \(limit 2\): giving up/);
    expect(out.stderr).not.toMatch(/generation 4 started/);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("creep: one step past its snapshot after every restart, then a stall; resets and rotations count together, and watch gives up with exit 3", async ({
    expect,
  }) => {
    const out = await scenario(agent, "creep", {
      flags: [...FAST, "--max-restarts", "2", "--restart-backoff-ms", "100"],
    });
    expect(agentLines(out.stdout), out.stderr).toEqual([
      FAST_LIMITS,
      "agent gen=1 pid=P from=0",
      "nudged gen=1 seq=1",
      "context_reset gen=1 seq=2",
      FAST_LIMITS,
      "agent gen=2 pid=P from=1",
      FAST_LIMITS,
      "agent gen=3 pid=P from=2",
    ]);
    expect(out.code).toBe(3);
    // The reset's restart and one rotation are the 2 restarts allowed; the next is refused.
    const outcomes = out.events.flatMap((e) =>
      e.kind === "tier_result" ? [`${e.tier ?? "?"} ${e.outcome ?? "?"}`] : [],
    );
    expect(outcomes).toEqual(["nudge failed", "context_reset failed", "rotation failed"]);
    expect(out.events.filter((e) => e.kind === "tier").map((e) => e.tier)).toEqual([
      "nudge",
      "context_reset",
      "rotation",
    ]);
    expect(out.events.at(-1)).toMatchObject({
      kind: "gave_up",
      tier: "rotation",
      reason: "2 restarts in the last 600 s (limit 2): giving up",
    });
    // Once moved past its snapshot, a stall again within the proving time: the tier did not hold.
    expect(out.stderr).toMatch(/tier rotation: context_reset did not (hold: step 2 unmoved|help)/);
    expect(out.stderr).not.toMatch(/recovered|generation 4 started/);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("hung, ignoring SIGTERM: dead, rotated, no progress; watch gives up, SIGKILLs it, exits 3 with no agent left", async ({
    expect,
  }) => {
    // A stall limit past the dead one: its silence reads as dead (Tier 3), not stalled (Tier 1).
    const out = await scenario(agent, "hung", {
      flags: [
        ...FAST,
        "--stall-ms",
        "60000",
        "--max-rotations",
        "1",
        "--rotation-backoff-ms",
        "100",
      ],
    });
    const limits = "limits dead=8000 stall=60000 grace=0 poll=100";
    // Generation 2 normally prints the same three lines; on a very busy machine it may not have
    // started (or installed its SIGTERM handler) within its 8 s, and is found dead without them.
    const lines = agentLines(out.stdout);
    expect(lines.slice(0, 3), out.stderr).toEqual([
      limits,
      "agent gen=1 pid=P from=0",
      "ignored SIGTERM",
    ]);
    for (const line of lines.slice(3))
      expect([limits, "agent gen=2 pid=P from=0", "ignored SIGTERM"], out.stderr).toContain(line);
    expect(out.stderr).toMatch(/generation 2 started/);
    expect(out.code).toBe(3);
    // Generation 2 beats once too: it shows no progress within the rotation's proving time.
    expect(out.stderr).toMatch(/verdict session_dead: no heartbeat for/);
    expect(out.stderr).toMatch(/tier rotation failed\n/);
    expect(out.stderr).not.toMatch(/tier nudge|tier context_reset/);
    expect(out.stderr).toMatch(/gave up: 1 restarts in the last 600 s \(limit 1\)/);
    expect(out.gaveUpAfter).toBeDefined();
    const afterGiveUp = out.exitedAfter - (out.gaveUpAfter ?? 0);
    console.log(
      `hung ${row.name} agent: gave up after ${Math.round(out.gaveUpAfter ?? 0)} ms, exit 3 ${Math.round(afterGiveUp)} ms later`,
    );
    // The agent ignores SIGTERM and would run forever: watch ended only because it SIGKILLed it
    // (2 s after the SIGTERM), and no generation is left running. How soon is logged, not judged
    // (issue 27): the test's timeout is what a watch that never ended would meet.
    const started = out.stderr.matchAll(/generation \d+ started \(pid (\d+)\)/g);
    const pids = [...started].map((m) => Number(m[1]));
    expect(pids.length).toBeGreaterThanOrEqual(2);
    for (const pid of pids) expect(running(pid), `generation pid ${pid} still runs`).toBe(false);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);

  test("term: SIGTERM to watch goes to the agent, whose default action ends it: watch exits 143", async ({
    expect,
  }) => {
    const out = await scenario(agent, "term", {
      started: (child) => {
        let stdout = "";
        child.stdout?.on("data", (chunk: Buffer) => {
          const first = !stdout.includes("agent gen=");
          stdout += chunk.toString();
          if (first && stdout.includes("agent gen=")) setTimeout(() => child.kill("SIGTERM"), 500);
        });
      },
    });
    expect(agentLines(out.stdout), out.stderr).toEqual([FAST_LIMITS, "agent gen=1 pid=P from=0"]);
    expect(out.code).toBe(143);
    expect(out.stderr).not.toMatch(/tier |session_dead/);
    expectVerdictsOfTheirGeneration(out, expect);
  }, 120_000);
});
