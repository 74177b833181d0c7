/**
 * `selfheal watch`, in process: its flags and their limits (every usage error, with its one line),
 * `--once` judging a heartbeat with the limits given, and short supervised runs over a child that
 * exits at once (what it is given, how watch ends). The long runs through the tiers are in the
 * spawn suites, watch.test.ts and watch-tiers.test.ts.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { signalExitCode, watch, whole } from "../../src/cli/watch.js";
import { UsageError } from "../../src/cli/errors.js";
import type { Heartbeat } from "../../src/watchdog/heartbeat.js";
import { startReceiver } from "../helpers/otlp.js";
import { captured, cli, expectUsageOf, tempDir } from "./in-process.js";
import { running } from "./pids.js";

const root = tempDir("watch-flags");
let n = 0;
/** A fresh state dir (not created: watch creates it). */
const stateDir = () => join(root, `s${n++}`);

/** A usage error of watch (see expectUsageOf). */
const expectUsage = (args: string[], message: string | RegExp) =>
  expectUsageOf("watch", args, message);

describe("whole: a whole number from a flag", () => {
  it.each([
    ["0", 0],
    ["42", 42],
    [" 7 ", 7],
    ["1e3", 1000],
    [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
  ])("%j is %d", (value, number) => {
    expect(whole(value, "poll-ms")).toBe(number);
  });

  it("an absent flag is undefined", () => {
    expect(whole(undefined, "poll-ms")).toBeUndefined();
  });

  it.each(["-1", "1.5", "", " ", "soon", "NaN", "Infinity", String(2 ** 53)])(
    "%j: a usage error naming the flag and the value",
    (value) => {
      expect(() => whole(value, "poll-ms")).toThrow(UsageError);
      expect(() => whole(value, "poll-ms")).toThrow(
        `--poll-ms must be a whole number of ms, got "${value}"`,
      );
      expect(() => whole(value, "max-rotations", "a whole number")).toThrow(
        `--max-rotations must be a whole number, got "${value}"`,
      );
    },
  );
});

describe("signalExitCode", () => {
  it("128 + the signal's number; SIGTERM's when there is none", () => {
    expect(signalExitCode("SIGINT")).toBe(130);
    expect(signalExitCode("SIGKILL")).toBe(137);
    expect(signalExitCode("SIGTERM")).toBe(143);
    expect(signalExitCode(null)).toBe(143);
  });
});

describe("selfheal watch (in process): usage errors, before anything runs", () => {
  it("no --state-dir, or an empty one", async () => {
    await expectUsage(["--", "true"], "watch needs --state-dir DIR");
    await expectUsage(["--state-dir", "", "--", "true"], "watch needs --state-dir DIR");
  });

  it("an unknown flag, a flag without its value, an argument before --", async () => {
    const dir = stateDir();
    await expectUsage(
      ["--state-dir", dir, "--stall", "1"],
      /^selfheal: Unknown option '--stall'[^\n]*\n$/,
    );
    await expectUsage(
      ["--state-dir"],
      /^selfheal: Option '--state-dir <value>' argument missing[^\n]*\n$/,
    );
    await expectUsage(
      ["--state-dir", dir, "agent.py"],
      /^selfheal: Unexpected argument 'agent\.py'[^\n]*\n$/,
    );
    expect(existsSync(dir)).toBe(false);
  });

  it.each(["0", "-5", "1.5", "abc", "", String(2 ** 53)])(
    "--token-limit %j: a positive whole number",
    async (value) => {
      await expectUsage(
        ["--state-dir", stateDir(), `--token-limit=${value}`, "--", "true"],
        `--token-limit must be a positive whole number, got "${value}"`,
      );
    },
  );

  it.each(["dead-ms", "stall-ms", "grace-ms"])("--%s: a whole number of ms", async (flag) => {
    for (const value of ["-1", "2.5", "soon", ""])
      await expectUsage(
        ["--state-dir", stateDir(), `--${flag}=${value}`, "--", "true"],
        `--${flag} must be a whole number of ms, got "${value}"`,
      );
  });

  it.each([
    ["tool_call", '--stage-stall-ms must be STAGE=MS, got "tool_call"'],
    ["tool_call:5000", '--stage-stall-ms must be STAGE=MS, got "tool_call:5000"'],
    ["", '--stage-stall-ms must be STAGE=MS, got ""'],
    ...["Tool_call", "tool-call", "1tool", "_tool", "tool call", "x".repeat(41), ""].map(
      (stage) => [
        `${stage}=5000`,
        `--stage-stall-ms: the stage must be snake_case (a-z, 0-9, _; a letter first; up to 40), got "${stage}"`,
      ],
    ),
    ...["0", "-5", "1.5", "soon", "", " ", "Infinity", String(2 ** 53), "5000=1"].map((limit) => [
      `tool_call=${limit}`,
      `--stage-stall-ms: the limit of tool_call must be a positive whole number of ms, got "${limit}"`,
    ]),
  ])("--stage-stall-ms %j: one line, exit 2, nothing started", async (value, message) => {
    const dir = stateDir();
    // A good one before it does not save it.
    await expectUsage(
      [
        "--state-dir",
        dir,
        "--stage-stall-ms",
        "planning=1000",
        `--stage-stall-ms=${value}`,
        "--",
        "true",
      ],
      message,
    );
    expect(existsSync(dir)).toBe(false);
  });

  it("--stage-stall-ms without its value", async () => {
    await expectUsage(
      ["--state-dir", stateDir(), "--stage-stall-ms"],
      /^selfheal: Option '--stage-stall-ms <value>' argument missing[^\n]*\n$/,
    );
  });

  it.each(["a/b", "", ".", "..", "x".repeat(129), "a b"])(
    "--session %j: names files",
    async (session) => {
      await expectUsage(
        ["--state-dir", stateDir(), "--session", session, "--", "true"],
        `--session must be 1-128 letters, digits, '_', '.' or '-' (it names files), got "${session}"`,
      );
    },
  );

  it("no command after --, or no -- at all", async () => {
    await expectUsage(["--state-dir", stateDir()], "watch needs the agent's command after --");
    await expectUsage(
      ["--state-dir", stateDir(), "--"],
      "watch needs the agent's command after --",
    );
  });

  it("a state dir that cannot be made: its error code", async () => {
    const file = join(root, `file${n++}`);
    writeFileSync(file, "");
    await expectUsage(
      ["--state-dir", file, "--", "true"],
      `cannot use --state-dir ${file}: EEXIST`,
    );
    const under = join(file, "state");
    await expectUsage(
      ["--state-dir", under, "--", "true"],
      `cannot use --state-dir ${under}: ENOTDIR`,
    );
  });

  it.each([
    ["prove-ms", "--prove-ms must be a whole number of ms"],
    ["max-restarts", "--max-restarts must be a whole number"],
    ["restart-period-ms", "--restart-period-ms must be a whole number of ms"],
    ["restart-backoff-ms", "--restart-backoff-ms must be a whole number of ms"],
    ["max-rotations", "--max-rotations must be a whole number"],
    ["rotation-period-ms", "--rotation-period-ms must be a whole number of ms"],
    ["rotation-backoff-ms", "--rotation-backoff-ms must be a whole number of ms"],
    ["poll-ms", "--poll-ms must be a whole number of ms"],
  ])("--%s: %s (the agent is not started)", async (flag, message) => {
    // What follows -- is the agent's: never read as watch's flags.
    await expectUsage(
      ["--state-dir", stateDir(), `--${flag}=-1`, "--", "--not-a-watch-flag"],
      `${message}, got "-1"`,
    );
  });

  it.each([
    [
      ["--restart-period-ms", "0"],
      '--restart-period-ms must be a positive whole number of ms, got "0"',
    ],
    [
      ["--rotation-period-ms", "0"],
      '--rotation-period-ms must be a positive whole number of ms, got "0"',
    ],
    [["--poll-ms", "0"], '--poll-ms must be a positive whole number of ms, got "0"'],
    [
      ["--max-restarts", "2", "--max-rotations", "3"],
      "--max-rotations is the older name of --max-restarts: give one of them",
    ],
    [
      ["--restart-backoff-ms", "2", "--rotation-backoff-ms", "3"],
      "--rotation-backoff-ms is the older name of --restart-backoff-ms: give one of them",
    ],
  ])("%j: %s", async (flags, message) => {
    await expectUsage(["--state-dir", stateDir(), ...flags, "--", "true"], message);
  });

  it("--event-log where nothing can be written, --metrics-port that is no port", async () => {
    const dir = stateDir();
    await expectUsage(
      ["--state-dir", dir, "--event-log", "", "--", "true"],
      "--event-log : empty path",
    );
    await expectUsage(
      ["--state-dir", dir, "--metrics-port", "0", "--", "true"],
      '--metrics-port must be a port number, got "0"',
    );
  });
});

/** A beat written 1000 s ago, step 3 in tool_call, 950 tokens in its context, generation 4. */
function oldBeat(dir: string, session = "agent"): void {
  const long = Date.now() - 1_000_000;
  const beat: Heartbeat = {
    v: 1,
    sessionId: session,
    pid: 12345,
    stage: "tool_call",
    stepIdx: 3,
    contextTokens: 950,
    at: long,
    stepAt: long,
    startedAt: long,
    gen: 4,
  };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${session}.heartbeat.json`), JSON.stringify(beat));
}

describe("selfheal watch --once (in process): one verdict with the limits given", () => {
  it("no heartbeat: unreadable, as text or JSON", async () => {
    const dir = stateDir();
    expect(await cli("watch", "--state-dir", dir, "--once")).toEqual({
      exitCode: 0,
      stdout: "agent: unreadable (heartbeat missing: ENOENT)\n",
      stderr: "",
    });
    const json = await cli("watch", "--state-dir", dir, "--once", "--json", "--session", "s-2");
    expect(JSON.parse(json.stdout)).toEqual({
      session: "s-2",
      verdict: "unreadable",
      reason: "heartbeat missing: ENOENT",
    });
  });

  it.each([
    [[], "session_dead", /^no heartbeat for \d+ s \(limit 30 s\)$/],
    [["--dead-ms", "1000"], "session_dead", /^no heartbeat for \d+ s \(limit 1\.0 s\)$/],
    [
      ["--dead-ms", "10000000"],
      "stalled",
      /^step 3 unmoved for \d+ s in stage tool_call \(limit 90 s\)$/,
    ],
    [
      ["--dead-ms", "10000000", "--stall-ms", "500000"],
      "stalled",
      /^step 3 unmoved for \d+ s in stage tool_call \(limit 500 s\)$/,
    ],
    [["--dead-ms", "10000000", "--stall-ms", "10000000"], "healthy", /^step 3 in stage tool_call$/],
    [["--dead-ms", "10000000", "--grace-ms", "10000000"], "healthy", /^step 3 in stage tool_call$/],
    [
      ["--dead-ms", "10000000", "--token-limit", "1000"],
      "context_bloat",
      /^context at 95% of 1000 tokens \(limit 92%\)$/,
    ],
    [
      ["--dead-ms", "10000000", "--token-limit", "1100", "--stall-ms", "10000000"],
      "healthy",
      /^step 3/,
    ],
  ])("%j: %s", async (flags, verdict, reason) => {
    const dir = stateDir();
    oldBeat(dir);
    const out = await cli("watch", "--state-dir", dir, "--once", "--json", ...flags);
    expect(out.exitCode).toBe(0);
    const result = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(result).toEqual({
      session: "agent",
      verdict,
      reason: expect.any(String) as unknown,
      stepIdx: 3,
    });
    expect(result.reason).toMatch(reason);
    const text = await cli("watch", "--state-dir", dir, "--once", ...flags);
    expect(text.stdout).toMatch(new RegExp(`^agent: ${verdict} \\(.+\\)\\n$`));
  });

  it.each([
    // The beat is in tool_call, unmoved for 1000 s.
    [["--stage-stall-ms", "tool_call=500000"], "stalled", /in stage tool_call \(limit 500 s\)$/],
    [["--stage-stall-ms", "tool_call=2000000"], "healthy", /^step 3 in stage tool_call$/],
    [["--stage-stall-ms", "planning=1"], "healthy", /^step 3 in stage tool_call$/],
    [
      [
        "--stall-ms",
        "1",
        "--stage-stall-ms",
        "planning=1",
        "--stage-stall-ms",
        "tool_call=2000000",
      ],
      "healthy",
      /^step 3 in stage tool_call$/,
    ],
    [
      ["--stage-stall-ms", "tool_call=2000000", "--stage-stall-ms", "tool_call=400000"],
      "stalled",
      /in stage tool_call \(limit 400 s\)$/,
    ],
  ])(
    "--stage-stall-ms %j: the stage's own limit (the last given wins): %s",
    async (flags, verdict, reason) => {
      const dir = stateDir();
      oldBeat(dir);
      const out = await cli(
        "watch",
        "--state-dir",
        dir,
        "--once",
        "--json",
        "--dead-ms",
        "10000000",
        "--stall-ms",
        "10000000",
        ...flags,
      );
      expect(out.exitCode).toBe(0);
      const result = JSON.parse(out.stdout) as { verdict: string; reason: string };
      expect(result.verdict).toBe(verdict);
      expect(result.reason).toMatch(reason);
    },
  );

  it("--session names the heartbeat read", async () => {
    const dir = stateDir();
    oldBeat(dir, "night-7");
    const out = await cli("watch", "--state-dir", dir, "--once", "--session", "night-7");
    expect(out.stdout).toMatch(
      /^night-7: session_dead \(no heartbeat for \d+ s \(limit 30 s\)\)\n$/,
    );
  });
});

/** `node -e` code that writes the SELFHEAL_* variables it was given to the file named first. */
const DUMP_ENV =
  'require("node:fs").writeFileSync(process.argv[1], JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("SELFHEAL_")))))';
const node = (code: string, ...args: string[]) => [process.execPath, "-e", code, ...args];
/** The SELFHEAL_* variables of this process (CI's runtime leg sets one): a child inherits them. */
const INHERITED = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => k.startsWith("SELFHEAL_")),
);
/** Polls are never due in these runs: no verdict but those of the process's own end. */
const NO_POLL = ["--poll-ms", "600000"];

/** stderr's lines, pids as P. */
const lines = (stderr: string) =>
  stderr
    .trimEnd()
    .split("\n")
    .map((l) => l.replace(/\(pid \d+\)/, "(pid P)"));

describe("selfheal watch (in process): short runs", () => {
  it("the child gets its state dir, session, next generation and limits; exit 0 when it does", async () => {
    const dir = stateDir();
    oldBeat(dir); // generation 4 ran last
    // A temp file of a writer that has exited: removed at start.
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    const stale = join(dir, `agent.heartbeat.json.${gone}.0123abcd.tmp`);
    writeFileSync(stale, "{");
    const env = join(root, `env${n++}.json`);
    // Stage limits stay with the supervisor: the child is not told them.
    const flags = [
      "--dead-ms",
      "1234",
      "--stall-ms",
      "2345",
      "--stage-stall-ms",
      "tool_call=5000",
      "--grace-ms",
      "3456",
      ...NO_POLL,
    ];
    const out = await cli("watch", "--state-dir", dir, ...flags, "--", ...node(DUMP_ENV, env));
    expect(out).toEqual({
      exitCode: 0,
      stdout: "",
      stderr: expect.stringMatching(
        /^selfheal watch: generation 5 started \(pid \d+\)\n$/,
      ) as unknown,
    });
    expect(JSON.parse(readFileSync(env, "utf8"))).toEqual({
      ...INHERITED,
      SELFHEAL_STATE_DIR: dir,
      SELFHEAL_SESSION_ID: "agent",
      SELFHEAL_WATCH_GENERATION: "5",
      SELFHEAL_WATCH_DEAD_MS: "1234",
      SELFHEAL_WATCH_STALL_MS: "2345",
      SELFHEAL_WATCH_GRACE_MS: "3456",
      SELFHEAL_WATCH_POLL_MS: "600000",
    });
    expect(existsSync(stale)).toBe(false);
  });

  it("without limit flags the child gets the defaults; a new state dir starts at generation 1", async () => {
    const dir = join(stateDir(), "made", "by", "watch");
    const env = join(root, `env${n++}.json`);
    const out = await cli(
      "watch",
      "--state-dir",
      dir,
      "--session",
      "s1",
      "--",
      ...node(DUMP_ENV, env),
    );
    expect(out.exitCode).toBe(0);
    expect(JSON.parse(readFileSync(env, "utf8"))).toEqual({
      ...INHERITED,
      SELFHEAL_STATE_DIR: dir,
      SELFHEAL_SESSION_ID: "s1",
      SELFHEAL_WATCH_GENERATION: "1",
      SELFHEAL_WATCH_DEAD_MS: "30000",
      SELFHEAL_WATCH_STALL_MS: "90000",
      SELFHEAL_WATCH_GRACE_MS: "60000",
      SELFHEAL_WATCH_POLL_MS: "5000",
    });
  });

  it("an agent that fails with no rotation allowed: session_dead, gave up, exit 3; the event log has both", async () => {
    const dir = stateDir();
    const log = join(root, `events${n++}.jsonl`);
    const flags = ["--max-rotations", "0", "--rotation-period-ms", "60000", "--agent", "nightly"];
    const out = await cli(
      "watch",
      "--state-dir",
      dir,
      "--event-log",
      log,
      ...flags,
      ...NO_POLL,
      "--",
      ...node("process.exit(1)"),
    );
    const why = "0 restarts in the last 60 s (limit 0): giving up";
    expect(out.exitCode).toBe(3);
    expect(lines(out.stderr)).toEqual([
      "selfheal watch: generation 1 started (pid P)",
      "selfheal watch: verdict session_dead: the agent exited with code 1",
      `selfheal watch: gave up: ${why}`,
      `selfheal watch: alert: supervision of agent gave up: ${why}`,
    ]);
    const events = readFileSync(log, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as unknown);
    expect(events).toEqual([
      {
        type: "watchdog",
        kind: "limits",
        at: expect.any(Number) as unknown,
        agent: "nightly",
        session: "agent",
        stallMs: 90_000,
        stageStallMs: {},
        graceMs: 60_000,
        deadMs: 30_000,
      },
      expect.objectContaining({
        type: "watchdog",
        agent: "nightly",
        session: "agent",
        kind: "verdict",
        verdict: "session_dead",
        generation: 1,
      }),
      expect.objectContaining({ agent: "nightly", kind: "gave_up", reason: why }),
    ]);
  });

  it("--stage-stall-ms (repeated) and --stall-ms: the event log's limits line says them, once", async () => {
    const log = join(root, `events${n++}.jsonl`);
    const out = await cli(
      "watch",
      "--state-dir",
      stateDir(),
      "--event-log",
      log,
      "--session",
      "s1",
      "--stall-ms",
      "120000",
      "--stage-stall-ms",
      "tool_call=240000",
      "--stage-stall-ms",
      "llm_response=60000",
      "--grace-ms",
      "0",
      ...NO_POLL,
      "--",
      ...node(""),
    );
    expect(out.exitCode).toBe(0);
    const limits = readFileSync(log, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.kind === "limits");
    expect(limits).toEqual([
      {
        type: "watchdog",
        kind: "limits",
        at: expect.any(Number) as unknown,
        agent: "s1",
        session: "s1",
        stallMs: 120_000,
        stageStallMs: { tool_call: 240_000, llm_response: 60_000 },
        graceMs: 0,
        deadMs: 30_000,
      },
    ]);
  });

  it("one rotation allowed, no backoff: the agent is rotated once, then supervision gives up", async () => {
    const dir = stateDir();
    const out = await cli(
      "watch",
      "--state-dir",
      dir,
      "--session",
      "night-1",
      "--max-rotations",
      "1",
      "--rotation-backoff-ms",
      "0",
      "--prove-ms",
      "600000",
      ...NO_POLL,
      "--",
      ...node("process.exit(2)"),
    );
    const why = "1 restarts in the last 600 s (limit 1): giving up";
    expect(out.exitCode).toBe(3);
    expect(lines(out.stderr)).toEqual([
      "selfheal watch: generation 1 started (pid P)",
      "selfheal watch: verdict session_dead: the agent exited with code 2",
      "selfheal watch: tier rotation: the agent exited with code 2",
      "selfheal watch: generation 2 started (pid P)",
      "selfheal watch: alert: night-1 was rotated: the agent exited with code 2",
      "selfheal watch: tier rotation failed",
      "selfheal watch: verdict session_dead: the agent exited with code 2",
      `selfheal watch: gave up: ${why}`,
      `selfheal watch: alert: supervision of night-1 gave up: ${why}`,
    ]);
  });

  it("by default three rotations, then supervision gives up; an agent killed by a signal is said so", async () => {
    const out = await cli(
      "watch",
      "--state-dir",
      stateDir(),
      "--rotation-backoff-ms",
      "0",
      ...NO_POLL,
      "--",
      ...node('process.kill(process.pid, "SIGKILL")'),
    );
    const why = "3 restarts in the last 600 s (limit 3): giving up";
    expect(out.exitCode).toBe(3);
    const said = lines(out.stderr);
    expect(said.filter((l) => l.includes(" started (pid P)"))).toEqual(
      [1, 2, 3, 4].map((g) => `selfheal watch: generation ${g} started (pid P)`),
    );
    expect(said.filter((l) => l.includes("verdict"))).toEqual(
      Array.from(
        { length: 4 },
        () => "selfheal watch: verdict session_dead: the agent exited with signal SIGKILL",
      ),
    );
    expect(said.slice(-2)).toEqual([
      `selfheal watch: gave up: ${why}`,
      `selfheal watch: alert: supervision of agent gave up: ${why}`,
    ]);
  });

  it("an agent that never beats is rotated (ended with SIGTERM), then ended when supervision gives up", async () => {
    const out = await cli(
      "watch",
      "--state-dir",
      stateDir(),
      "--dead-ms",
      "200",
      "--poll-ms",
      "50",
      "--grace-ms",
      "0",
      "--prove-ms",
      "100",
      "--max-rotations",
      "1",
      "--rotation-backoff-ms",
      "0",
      "--",
      ...node("setInterval(() => {}, 1000)"),
    );
    const why = "1 restarts in the last 600 s (limit 1): giving up";
    const missing = "heartbeat missing 3 times in a row (ENOENT)";
    expect(out.exitCode).toBe(3);
    const said = lines(out.stderr);
    // Which verdicts a look sees while a process starts depends on when it looks.
    expect(said.filter((l) => !l.startsWith("selfheal watch: verdict "))).toEqual([
      "selfheal watch: generation 1 started (pid P)",
      `selfheal watch: tier rotation: ${missing}`,
      "selfheal watch: generation 2 started (pid P)",
      `selfheal watch: alert: agent was rotated: ${missing}`,
      "selfheal watch: tier rotation failed",
      `selfheal watch: gave up: ${why}`,
      `selfheal watch: alert: supervision of agent gave up: ${why}`,
    ]);
    expect(said).toContain(`selfheal watch: verdict unreadable: ${missing}`);
    // The process ended to be replaced is no death of the agent's.
    expect(out.stderr).not.toContain("exited with");
    const pids = [...out.stderr.matchAll(/started \(pid (\d+)\)/g)].map(([, pid]) => Number(pid));
    expect(pids).toHaveLength(2);
    const left = pids.filter(running);
    for (const pid of left) process.kill(pid, "SIGKILL"); // ours, should watch have left it
    expect(left).toEqual([]);
  });

  it("its spans and metrics go to the OTLP endpoint, named selfheal-watch-AGENT", async () => {
    const collector = await startReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url);
      const out = await cli(
        "watch",
        "--state-dir",
        stateDir(),
        "--max-rotations",
        "0",
        "--agent",
        "nightly",
        ...NO_POLL,
        "--",
        ...node("process.exit(1)"),
      );
      expect(out.exitCode).toBe(3);
      expect(out.stderr).not.toContain("telemetry export");
      const names = new Set(collector.spans().map((span) => span.resource["service.name"]));
      expect([...names]).toEqual(["selfheal-watch-nightly"]);
    } finally {
      vi.unstubAllEnvs();
      await collector.close();
    }
  });

  it("a command that cannot start: exit 127, saying why", async () => {
    const missing = join(root, "no-such-agent");
    expect(await cli("watch", "--state-dir", stateDir(), ...NO_POLL, "--", missing)).toEqual({
      exitCode: 127,
      stdout: "",
      stderr: `selfheal watch: cannot start ${missing}: spawn ${missing} ENOENT\n`,
    });
  });

  it.each([
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)(
    "%s to watch goes to the agent; watch ends with its code (%d)",
    async (signal, code) => {
      const before = new Set(process.listeners(signal));
      const watching = captured(() =>
        watch([
          "--state-dir",
          stateDir(),
          ...NO_POLL,
          "--",
          ...node("setInterval(() => {}, 1000)"),
        ]),
      );
      // watch's handler, once it is installed (after the state dir's set-up).
      let forward: ((s: NodeJS.Signals) => void) | undefined;
      while (!forward) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        forward = process.listeners(signal).find((l) => !before.has(l));
      }
      const exitCode = process.exitCode;
      try {
        forward(signal);
        const out = await watching;
        expect(out.threw).toBe(false);
        expect(process.exitCode).toBe(code);
        expect(lines(out.stderr)).toEqual(["selfheal watch: generation 1 started (pid P)"]);
      } finally {
        process.exitCode = exitCode;
      }
      expect(process.listeners("SIGINT").filter((l) => !before.has(l))).toEqual([]);
      expect(process.listeners("SIGTERM").filter((l) => !before.has(l))).toEqual([]);
    },
  );

  it.each([
    ["SIGTERM", "process.exit(7)", 7],
    ["SIGINT", 'process.kill(process.pid, "SIGKILL")', 137],
  ] as const)(
    "an agent that handles %s itself: watch ends as the agent did (%s: %d)",
    async (signal, handler, code) => {
      const ready = join(root, `ready${n++}`);
      const before = new Set(process.listeners(signal));
      const agent = `process.on("${signal}", () => ${handler}); require("node:fs").writeFileSync(process.argv[1], ""); setInterval(() => {}, 1000);`;
      const watching = captured(() =>
        watch(["--state-dir", stateDir(), ...NO_POLL, "--", ...node(agent, ready)]),
      );
      // Once watch forwards signals and the agent handles them.
      let forward: ((s: NodeJS.Signals) => void) | undefined;
      while (!forward || !existsSync(ready)) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        forward = process.listeners(signal).find((l) => !before.has(l));
      }
      const exitCode = process.exitCode;
      try {
        forward(signal);
        expect((await watching).threw).toBe(false);
        expect(process.exitCode).toBe(code);
      } finally {
        process.exitCode = exitCode;
      }
    },
  );
});
