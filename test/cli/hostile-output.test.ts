/**
 * A log written by an attacker, read by `selfheal report` as a stranger runs it (the built CLI):
 * agent, tool and stage names and error texts carrying terminal escapes, bidi overrides, shell
 * metacharacters, line breaks, secrets and a megabyte of text. Nothing of it may drive the
 * terminal, run when the Paste line is pasted into a shell, or leak; the JSON stays JSON of the
 * same values. Then the inputs report must refuse at once (a FIFO, a device, a folder), and the
 * flags a newcomer mistypes.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { shellQuote } from "../../src/report/shell-quote.js";
import { callsLines, DAY, MINUTE, spread, stepsLine, WEEK_START } from "../report/rollups.js";
import { line, watchdogLine } from "./event-lines.js";
import { cli, tempDir } from "./in-process.js";

/** Retitles the terminal and clears it. */
const AGENT = "ag\u001b]0;OWNED\u0007\u001b[2J";
/** Reverses what follows (U+202E), then isolates it (U+2066). */
const TOOL = "to\u202eol\u2066x";
const SECRET = `sk-proj-${"Ab3dEf7hKl9nPq2sTv5xZ".repeat(3)}`;
/** Stages a shell would run, quote-breaking, and ones no quoting makes safe to paste. */
const SHELL_STAGES = ["a;touch pwned1;#", "$(touch pwned2)", "`touch pwned3`", "it's | rm -rf x"];
const UNPASTEABLE = ["x\ntouch pwned4", "st\u001b[2Jage"];

/**
 * What must never reach a terminal raw: controls but tab and line feed, DEL, C1, line separators,
 * bidi controls and marks, invisible format characters, Unicode tags. Written here, not imported:
 * the suite checks the contract, not the code's own list.
 */
const UNSAFE =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|\udb40[\udc00-\udc7f]/;

const unsafeIn = (text: string) => UNSAFE.exec(text)?.[0];

const selfheal = (args: string[], options: { cwd?: string; input?: string } = {}) =>
  spawnSync(process.execPath, [join(process.cwd(), "dist/cli/main.js"), ...args], {
    encoding: "utf8",
    timeout: 60_000,
    maxBuffer: 64 * 1024 * 1024,
    ...options,
  });

const dir = tempDir("hostile");
let log: string;

/** UNKNOWN texts to group into a rule, a latency shift to flag, stages to set limits for. */
beforeAll(() => {
  log = join(dir, "hostile.jsonl");
  const shift = WEEK_START + 3.5 * DAY;
  const steady = spread(30, 150, 250);
  const lines = [
    ...[1, 2, 3].map((n) =>
      line({
        agent: AGENT,
        tool: TOOL,
        at: WEEK_START + n * MINUTE,
        pattern: "UNKNOWN",
        outcome: "failed",
        error: `Request budget spent, retry in ${n}s \u001b[31m${SECRET}`,
      }),
    ),
    line({ agent: AGENT, tool: TOOL, at: WEEK_START, error: "x".repeat(1_000_000) }),
    line({
      agent: `${AGENT}\n${SECRET}`,
      tool: `${TOOL}\u2028\u{e0041}`,
      at: WEEK_START + 9 * MINUTE,
    }),
    watchdogLine({ agent: AGENT, kind: "verdict", verdict: "stalled\u001b[2J", reason: SECRET }),
    JSON.stringify({ type: SECRET }),
    watchdogLine({ agent: AGENT, kind: SECRET }),
    ...callsLines(AGENT, TOOL, WEEK_START, WEEK_START + 7 * DAY, (t) => ({
      ok: 30,
      latencies: t < shift ? steady : steady.map((ms) => ms * 2),
    })),
  ];
  for (const stage of [...SHELL_STAGES, ...UNPASTEABLE])
    for (let i = 0; i < 40; i++)
      lines.push(stepsLine(WEEK_START + i * MINUTE, AGENT, stage, spread(5, 1_500, 2_500)));
  writeFileSync(log, `${lines.join("\n")}\n`);
});

describe("a hostile log through the built CLI", () => {
  let out: ReturnType<typeof selfheal>;
  let html: string;
  let rules: string;
  beforeAll(() => {
    html = join(dir, "review.html");
    rules = join(dir, "rules.json");
    out = selfheal([
      "report",
      log,
      "--suggest-thresholds",
      "--suggest-rules",
      rules,
      "--html",
      html,
    ]);
  }, 60_000);

  it("prints every name and text escaped, on its own line, and no secret", () => {
    expect(out.status).toBe(0);
    expect(out.stderr).toBe("");
    expect(unsafeIn(out.stdout)).toBeUndefined();
    expect(out.stdout).not.toContain(SECRET);
    expect(out.stdout).not.toContain("sk-proj-");
    // Shown, as escapes: the reader sees what the name holds.
    expect(out.stdout).toContain("ag\\x1b]0;OWNED\\x07\\x1b[2J");
    expect(out.stdout).toContain("to\\u202eol\\u2066x");
    // The malformed lines are named, their values redacted.
    expect(out.stdout).toMatch(/type "\[REDACTED_KEY\]" is not one this version reads/);
    // Where the names are printed: the threshold reasons, the rule evidence, the Paste block.
    expect(out.stdout).toMatch(/^ {2}ag\\x1b\]0;OWNED\\x07\\x1b\[2J\/to\\u202eol\\u2066x P95/m);
    expect(out.stdout).toMatch(/; tools to\\u202eol\\u2066x$/m);
    expect(out.stdout).toContain(
      'createSelfHealing({ agent: "ag\\u001b]0;OWNED\\u0007\\u001b[2J", health: {',
    );
    // A megabyte of error text is not printed at length.
    expect(out.stdout.length).toBeLessThan(200_000);
  });

  it("the page: escaped, redacted, under a CSP that lets nothing load or run", () => {
    const page = readFileSync(html, "utf8");
    expect(unsafeIn(page)).toBeUndefined();
    expect(page).not.toContain("sk-proj-");
    expect(page).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'`,
    );
    expect(page).not.toMatch(/<script|<link|<img|<iframe/);
  });

  it("the rule file: JSON of the same names, nothing raw in its text", () => {
    const text = readFileSync(rules, "utf8");
    expect(unsafeIn(text)).toBeUndefined();
    const file = JSON.parse(text) as { rules: { evidence: { tools: string[] } }[] };
    expect(file.rules[0]?.evidence.tools).toEqual([TOOL]);
  });

  /** The Paste block's `selfheal watch ...` line, `selfheal` replaced by a script echoing argv. */
  const pasted = (shell: string) => {
    const watchLine = out.stdout.split("\n").find((l) => l.startsWith("selfheal watch "));
    if (watchLine === undefined) throw new Error(`no watch line in:\n${out.stdout}`);
    const cwd = join(dir, `paste-${shell.replace(/\W/g, "")}`);
    mkdirSync(cwd);
    const echo = join(cwd, "argv.cjs");
    writeFileSync(echo, "process.stdout.write(JSON.stringify(process.argv.slice(2)));\n");
    const command = watchLine.replace(
      /^selfheal /,
      `${shellQuote(process.execPath) ?? ""} ${shellQuote(echo) ?? ""} `,
    );
    const run = spawnSync(shell, ["-c", command], { cwd, encoding: "utf8", timeout: 10_000 });
    return { run, cwd, files: readdirSync(cwd) };
  };

  it.each(["/bin/sh", "/bin/bash"].filter((shell) => existsSync(shell)))(
    "the watch line pasted into %s runs nothing and gives watch exactly the stages",
    (shell) => {
      const { run, files } = pasted(shell);
      expect(run.stderr).toBe("");
      expect(files).toEqual(["argv.cjs"]); // no pwned1, pwned2, pwned3, pwned4, no x removed
      const argv = JSON.parse(run.stdout) as string[];
      // The limits the --json output proposes for the stages a paste can carry.
      const json = JSON.parse(
        selfheal(["report", log, "--suggest-thresholds", "--json"]).stdout,
      ) as { watchdog: Record<string, { stageStallMs: Record<string, number> }> };
      const limits = json.watchdog[AGENT]?.stageStallMs ?? {};
      expect(Object.keys(limits).sort()).toEqual([...SHELL_STAGES, ...UNPASTEABLE].sort());
      const expected = Object.entries(limits)
        .filter(([stage]) => SHELL_STAGES.includes(stage))
        .flatMap(([stage, ms]) => ["--stage-stall-ms", `${stage}=${ms}`]);
      expect(argv).toEqual(["watch", ...expected, "..."]);
    },
  );

  it("a stage no quoting makes safe is left out of the line, and said", () => {
    const said = out.stdout.split("\n").filter((l) => l.startsWith("# stage "));
    expect(said.sort()).toEqual([
      '# stage "st\\u001b[2Jage" left out of the watch line: its name holds a line break or control character, which no shell quoting makes safe to paste',
      '# stage "x\\ntouch pwned4" left out of the watch line: its name holds a line break or control character, which no shell quoting makes safe to paste',
    ]);
  });

  it("--suggest-thresholds --json: one JSON document of the same names, nothing raw", () => {
    const run = selfheal(["report", log, "--suggest-thresholds", "--json"]);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout.trim().split("\n")).toHaveLength(1);
    expect(unsafeIn(run.stdout)).toBeUndefined();
    const json = JSON.parse(run.stdout) as {
      version: number;
      signals: { agent: string; tool: string }[];
      health: Record<string, unknown>;
    };
    expect(json.version).toBe(1);
    expect(json.signals.some((s) => s.agent === AGENT && s.tool === TOOL)).toBe(true);
    expect(Object.keys(json.health)).toEqual([AGENT]);
  });
});

describe("report reads regular files only, and - for standard input (built CLI)", () => {
  it.each([
    ["a FIFO with no writer", () => fifo(), "a named pipe, not a regular file"],
    ["/dev/zero", () => "/dev/zero", "a character device, not a regular file"],
    ["a folder", () => dir, "a directory, not a regular file"],
  ])("%s: exit 2 and one line naming it, at once", (_, path, why) => {
    const target = path();
    // A FIFO opened would block, /dev/zero read would never end: the spawn's timeout would fail it.
    const run = selfheal(["report", target]);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(`selfheal: cannot read ${target}: ${why}\n`);
  });

  it("a FIFO among several files, or as --html's input set, is refused before any is read", () => {
    const run = selfheal(["report", log, fifo(), "--html", join(dir, "x.html")]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^selfheal: cannot read .*: a named pipe, not a regular file\n$/);
    expect(existsSync(join(dir, "x.html"))).toBe(false);
  });

  it("- reads the log piped in", () => {
    const run = selfheal(["report", "-"], { input: readFileSync(log, "utf8") });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^Recovery review: \d+ incidents/);
    expect(unsafeIn(run.stdout)).toBeUndefined();
  });

  it("- from a device, or twice: exit 2 and one line", () => {
    const zero = spawnSync(
      "/bin/sh",
      ["-c", `exec ${shellQuote(process.execPath) ?? ""} dist/cli/main.js report - < /dev/zero`],
      { encoding: "utf8", timeout: 30_000 },
    );
    expect(zero.status).toBe(2);
    expect(zero.stderr).toBe("selfheal: cannot read - (standard input): a character device\n");
    const twice = selfheal(["report", "-", "-"], { input: "" });
    expect(twice.status).toBe(2);
    expect(twice.stderr).toBe("selfheal: - (standard input) can be read once only\n");
  });
});

let fifos = 0;
/** A new FIFO nobody writes to. */
function fifo(): string {
  const path = join(dir, `pipe-${fifos++}`);
  const made = spawnSync("mkfifo", [path]);
  if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr.toString()}`);
  return path;
}

describe("malformed lines echo no secret (in process)", () => {
  it.each([
    ["a type", JSON.stringify({ type: SECRET })],
    ["a watchdog kind", watchdogLine({ kind: SECRET })],
    ["an escape-laden type", JSON.stringify({ type: `\u001b]0;x\u0007${SECRET}` })],
  ])("%s: named, redacted, in the text and the page", async (_, bad) => {
    const file = join(dir, `malformed-${fifos++}.jsonl`);
    const page = join(dir, `malformed-${fifos++}.html`);
    writeFileSync(file, `${line()}\n${bad}\n`);
    const run = await cli("report", file, "--html", page);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toMatch(/line 2: .*\[REDACTED_KEY\]/);
    for (const text of [run.stdout, readFileSync(page, "utf8")]) {
      expect(text).not.toContain("sk-proj-");
      expect(unsafeIn(text)).toBeUndefined();
    }
  });

  it("a log of nothing but such lines: the one line of exit 2 is redacted too", async () => {
    const file = join(dir, "only-malformed.jsonl");
    writeFileSync(file, `${JSON.stringify({ type: SECRET })}\n`);
    const run = await cli("report", file);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain('type "[REDACTED_KEY]" is not one this version reads');
    expect(run.stderr).not.toContain("sk-proj-");
  });
});

describe("flags a newcomer mistypes (in process)", () => {
  it.each([
    [["demo", "--scenarios", "x"], "Unknown option '--scenarios': did you mean --scenario?"],
    [["demo", "--sped", "2"], "Unknown option '--sped': did you mean --speed?"],
    [
      ["report", "a.jsonl", "--suggest-treshold"],
      "Unknown option '--suggest-treshold': did you mean --suggest-thresholds?",
    ],
    [["report", "a.jsonl", "--josn"], "Unknown option '--josn': did you mean --json?"],
    [["status", "--redsi", "x"], "Unknown option '--redsi': did you mean --redis?"],
    [["watch", "--state-dri", "d"], "Unknown option '--state-dri': did you mean --state-dir?"],
    [
      ["watch", "--stall-ms=5", "--pol-ms", "5"],
      "Unknown option '--pol-ms': did you mean --poll-ms?",
    ],
  ])("%j: one line with the flag it means", async (argv, message) => {
    const run = await cli(...argv);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toBe(`selfheal: ${message}\n`);
  });

  it("a flag like none: no guess", async () => {
    const run = await cli("demo", "--frobnicate");
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toBe("selfheal: Unknown option '--frobnicate'\n");
  });

  it("watch with the command but no --: says where it goes", async () => {
    const run = await cli("watch", "--state-dir", "d", "node", "-e", "1");
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toBe(
      "selfheal: Unexpected argument 'node': the agent's command goes after --: selfheal watch [options] -- node -e 1\n",
    );
  });

  it("--json without --suggest-thresholds: one line", async () => {
    const run = await cli("report", log, "--json");
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toBe(
      "selfheal: --json goes with --suggest-thresholds (the review itself is text, or a page with --html)\n",
    );
  });
});
