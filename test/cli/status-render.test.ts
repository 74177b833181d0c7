/**
 * `selfheal status`, in process: the `--redis` URL's checks and what may be shown of it, the
 * secrets kept out of every message, names from Redis on one line, the human rendering of a
 * FleetStatus, and the command's flags, errors and output around readFleet (replaced here: the
 * spawn suite, status.test.ts, reads a real redis-server).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CommandFailedError, UsageError } from "../../src/cli/errors.js";
import {
  checkRedisUrl,
  formatValue,
  hideUrls,
  note,
  renderStatus,
  shownName,
  status,
  withoutSecrets,
} from "../../src/cli/status.js";
import type { ScopeHealth, SignalReading } from "../../src/health/evaluator.js";
import { readFleet, type FleetStatus } from "../../src/redis/fleet.js";
import { captured, cli, expectUsageOf } from "./in-process.js";

vi.mock("../../src/redis/fleet.js", () => ({ readFleet: vi.fn() }));

afterEach(() => {
  vi.mocked(readFleet).mockReset();
});

const MALFORMED =
  '--redis: malformed URL (not shown: it may hold a password); expected redis://[user:password@]host:port[/db], with "@", "/", ":", "%", "#" and "?" in a password written %40, %2F, %3A, %25, %23 and %3F';
const DB = "--redis: the database must be a number (redis://host:6379/0)";

/** What checkRedisUrl throws for `url` (its message), or undefined when it takes it. */
function refusal(url: string): string | undefined {
  try {
    checkRedisUrl(url);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
}

describe("checkRedisUrl", () => {
  it.each([
    "not a url",
    "127.0.0.1:6379",
    "user:password@host",
    "redis://h:1/0#frag",
    "redis://:pw#x@h:1",
    "redis://h:1/x@y",
    "redis://h:1/?a@b",
    "redis://:%zz@h:1",
    "redis://%zz:pw@h:1",
  ])("%j: malformed, not shown", (url) => {
    expect(refusal(url)).toBe(MALFORMED);
  });

  it.each([
    ["http://127.0.0.1:6379", "http://"],
    ["HTTP://127.0.0.1:6379", "http://"],
    ["unix://tmp/redis.sock", "unix://"],
  ])("%j: the scheme is named", (url, scheme) => {
    expect(refusal(url)).toBe(
      `--redis must be a redis:// or rediss:// URL, got the scheme "${scheme}"`,
    );
  });

  it.each(["redis://h:1/x", "redis://h:1/1x", "redis://h:1/x1", "redis://h:1/1/2"])(
    "%j: the database must be a number",
    (url) => {
      expect(refusal(url)).toBe(DB);
    },
  );

  it.each([
    ["redis://h", "redis://h:6379"],
    ["redis://h:7000", "redis://h:7000"],
    ["redis://h:7000/", "redis://h:7000"],
    ["rediss://h:7000/3", "rediss://h:7000/3"],
    ["redis://user:pw@h:1/0?x=1", "redis://h:1/0"],
    ["redis://", "redis://localhost:6379"],
    ["redis:///2", "redis://localhost:6379/2"],
  ])("%j is shown as %j", (url, shown) => {
    expect(checkRedisUrl(url)).toMatchObject({ url, shown });
  });

  it.each([
    ["redis://h:6379", []],
    ["redis://user@h:6379", []],
    ["redis://:pw@h:6379/0", ["pw"]],
    ["redis://user:p%40ss@h", ["p%40ss", "p@ss"]],
    ["redis://user:p@ss@h:1", ["p@ss", "p%40ss"]],
    ["redis://u:a:b@h", ["a:b", "a%3Ab"]],
    ["redis://:p%2Fw@h/0?db=1", ["p%2Fw", "p/w"]],
    ["redis://:a%20b@h", ["a%20b", "a b"]],
  ])("%j: the password in each form it may appear in", (url, secrets) => {
    expect(checkRedisUrl(url).secrets).toEqual(secrets);
  });
});

describe("withoutSecrets and hideUrls", () => {
  it("every form of the password, every time it appears", () => {
    expect(withoutSecrets("pw in pw@h, p%40w", ["pw", "p%40w"])).toBe(
      "[REDACTED] in [REDACTED]@h, [REDACTED]",
    );
    expect(withoutSecrets("nothing secret", [])).toBe("nothing secret");
  });

  it("an argument that is a URL or holds an @ is hidden from parseArgs's message; others stay", () => {
    const argv = ["status", "redis://:pw@h", "user@host", "extra"];
    expect(hideUrls("Unexpected 'redis://:pw@h' 'user@host' 'extra' 'redis://:pw@h'", argv)).toBe(
      "Unexpected '[a URL, not shown]' '[a URL, not shown]' 'extra' '[a URL, not shown]'",
    );
  });
});

describe("shownName: a name from Redis as one line", () => {
  const emoji = "\uD83D\uDE00";
  it.each([
    ["plain", "billing", "billing"],
    ["empty", "", ""],
    ["a newline and an escape", "evil\nsupport\u001b[2J", "evil\\nsupport\\x1b[2J"],
    ["a lone high surrogate", "\uD800lone", "\uFFFDlone"],
    ["a lone low surrogate", "t\uDC00", "t\uFFFD"],
    ["a surrogate pair", `a${emoji}b`, `a${emoji}b`],
    ["80 characters", "n".repeat(80), "n".repeat(80)],
    ["81 characters", "n".repeat(81), `${"n".repeat(79)}… (81 chars)`],
    ["80 emoji (160 UTF-16 units)", emoji.repeat(80), emoji.repeat(80)],
    ["81 emoji", emoji.repeat(81), `${emoji.repeat(79)}… (162 chars)`],
    ["50 newlines (100 once escaped)", "\n".repeat(50), `${"\\n".repeat(39)}\\… (50 chars)`],
  ])("%s", (_name, name, shown) => {
    expect(shownName(name)).toBe(shown);
  });
});

/** A signal reading, with fields replaced. */
const reading = (over: Partial<SignalReading> = {}): SignalReading => ({
  signal: "success_rate",
  status: "healthy",
  value: 1,
  samples: 30,
  ...over,
});

describe("formatValue and note: a reading's figure and what it rests on", () => {
  it.each([
    [reading({ value: null }), "n/a"],
    [reading({ value: 0.66666 }), "66.7%"],
    [reading({ value: 1 }), "100.0%"],
    [reading({ value: 0 }), "0.0%"],
    [reading({ signal: "latency_p95", value: 1234.4 }), "1234 ms"],
    [reading({ signal: "latency_p95", value: 1234.5 }), "1235 ms"],
  ])("%j: %s", (r, text) => {
    expect(formatValue(r)).toBe(text);
  });

  it.each([
    [reading({ value: null, samples: 0 }), ""],
    [reading({ value: null, samples: 3 }), " (too few samples)"],
    [reading({ signal: "latency_p95", value: 900 }), " (no learned baseline here: not judged)"],
    [
      reading({ signal: "latency_p95", value: 900, baselineMs: null }),
      " (no learned baseline here: not judged)",
    ],
    [reading({ signal: "latency_p95", value: 900, baselineMs: 300 }), ""],
    [
      reading({ signal: "latency_p95", value: 900, baselineMs: 300, recent: 0.5 }),
      " (recent 50.0%: recovering)",
    ],
    [reading({ value: 0.4, recent: 0.955 }), " (recent 95.5%: recovering)"],
    [reading({ value: 0.4 }), ""],
    [reading({ signal: "task_completion", value: 0.5 }), ""],
  ])("%j: %j", (r, text) => {
    expect(note(r)).toBe(text);
  });
});

const AT = Date.UTC(2026, 0, 2, 3, 4, 5);
const ISO = new Date(AT).toISOString();

/** A fleet with nothing in it, with fields replaced. */
const fleet = (over: Partial<FleetStatus> = {}): FleetStatus => ({
  prefix: "selfheal",
  at: AT,
  agents: [],
  openBreakers: [],
  throttledAlerts: [],
  budgets: { tasks: 0, totalUsd: 0, maxUsd: 0 },
  ...over,
});

const scope = (status: ScopeHealth["status"], signals: SignalReading[] = []): ScopeHealth => ({
  status,
  signals,
});

describe("renderStatus", () => {
  it("an empty fleet: the header lines, and that no agent wrote under the prefix", () => {
    expect(renderStatus(fleet({ prefix: "staging" }), "redis://h:6379").split("\n")).toEqual([
      `fleet under prefix "staging" at redis://h:6379, ${ISO}`,
      "thresholds: the defaults (an agent's own thresholds live in its code)",
      "breakers: none open",
      "alert throttles: none in force",
      "task budgets: 0 task(s) with recovery spend, $0.0000 in all, at most $0.0000",
      "",
      'no agent has written under prefix "staging"',
    ]);
  });

  it("open breakers, alert throttles (seconds left rounded up) and budgets, names on one line", () => {
    const until = AT + 60_000;
    const text = renderStatus(
      fleet({
        openBreakers: [
          { dependency: "openai", until, opens: 2 },
          { dependency: "evil\nbreakers: none open", until: until + 1, opens: 1 },
        ],
        throttledAlerts: [
          { kind: "billing/charge/AUTH", msLeft: 59_001, held: 1 },
          { kind: "x\ry", msLeft: 1_000, held: 0 },
        ],
        budgets: { tasks: 2, totalUsd: 0.75, maxUsd: 0.123456 },
      }),
      "redis://h:1/0",
    );
    expect(text.split("\n").slice(2, 5)).toEqual([
      `breakers open: openai until ${new Date(until).toISOString()} (2 in a row), evil\\nbreakers: none open until ${new Date(until + 1).toISOString()} (1 in a row)`,
      "alert throttles: billing/charge/AUTH (60 s left, 1 held), x\\ry (1 s left, 0 held)",
      "task budgets: 2 task(s) with recovery spend, $0.7500 in all, at most $0.1235",
    ]);
  });

  it("one block per agent: its status, each signal, each tool sorted (unhealthy ones say why)", () => {
    const failing = reading({ status: "critical", value: 1 / 3 });
    const slow = reading({
      signal: "latency_p95",
      status: "warning",
      value: 2500,
      baselineMs: 400,
    });
    const text = renderStatus(
      fleet({
        agents: [
          {
            agent: "billing",
            at: AT,
            status: "warning",
            signals: [
              reading({ status: "warning", value: 2 / 3, samples: 60 }),
              reading({ signal: "latency_p95", value: null, samples: 0 }),
              reading({ signal: "empty_response_rate", value: null, samples: 2 }),
            ],
            // Neither in order nor in reverse order: the sort has work to do.
            tools: {
              lookup: scope("healthy", [reading()]),
              Zeta: scope("warning", [slow]),
              charge: scope("critical", [failing, slow, reading({ signal: "task_completion" })]),
              merge: scope("healthy"),
              alpha: scope("healthy"),
            },
          },
          {
            agent: "support",
            at: AT,
            status: "healthy",
            signals: [reading({ signal: "task_completion", value: 1, samples: 123456 })],
            tools: {},
          },
        ],
      }),
      "redis://h:6379",
    );
    expect(text.split("\n").slice(5)).toEqual([
      "",
      "billing: warning",
      "  success_rate            66.7%      60 samples  warning",
      "  latency_p95               n/a       0 samples  healthy",
      "  empty_response_rate       n/a       2 samples  healthy (too few samples)",
      "  tools:",
      "    Zeta    warning (latency_p95 2500 ms)",
      "    alpha   healthy",
      "    charge  critical (success_rate 33.3%, latency_p95 2500 ms)",
      "    lookup  healthy",
      "    merge   healthy",
      "",
      "support: healthy",
      "  task_completion        100.0%  123456 samples  healthy",
    ]);
  });

  it("tool names are padded to the longest, at most 40 wide; longer ones are not cut there", () => {
    const long = "t".repeat(45);
    const tools = { [long]: scope("healthy"), a: scope("healthy") };
    const text = renderStatus(
      fleet({ agents: [{ agent: "x", at: AT, status: "healthy", signals: [], tools }] }),
      "u",
    );
    expect(text.split("\n").slice(-3)).toEqual([
      "  tools:",
      `    a${" ".repeat(39)}  healthy`,
      `    ${long}  healthy`,
    ]);
    const hostile = { "a\nb": scope("healthy"), c: scope("healthy") };
    expect(
      renderStatus(
        fleet({ agents: [{ agent: "x", at: AT, status: "healthy", signals: [], tools: hostile }] }),
        "u",
      )
        .split("\n")
        .slice(-2),
    ).toEqual(["    a\\nb  healthy", "    c     healthy"]);
  });
});

/** A fleet readFleet hands back. */
const FLEET = fleet({
  agents: [{ agent: "billing", at: AT, status: "healthy", signals: [reading()], tools: {} }],
});

/** A usage error of status (see expectUsageOf), and readFleet never called. */
async function expectUsage(args: string[], message: string | RegExp): Promise<void> {
  await expectUsageOf("status", args, message);
  expect(readFleet).not.toHaveBeenCalled();
}

describe("selfheal status (in process): flags", () => {
  it("no --redis, or no value for it", async () => {
    await expectUsage([], "status needs --redis URL: selfheal status --redis redis://HOST:6379");
    await expectUsage(
      ["--json"],
      "status needs --redis URL: selfheal status --redis redis://HOST:6379",
    );
    await expectUsage(["--redis"], /^selfheal: Option '--redis <value>' argument missing[^\n]*\n$/);
  });

  it("an unknown flag, or an argument it does not take", async () => {
    await expectUsage(
      ["--redis", "redis://h:1", "--agnt", "x"],
      /^selfheal: Unknown option '--agnt'[^\n]*\n$/,
    );
    await expectUsage(
      ["--redis", "redis://h:1", "extra"],
      /^selfheal: Unexpected argument 'extra'[^\n]*\n$/,
    );
  });

  it("a URL in the wrong place is not echoed; the error stays a usage error", async () => {
    for (const args of [
      ["redis://:hunter2@h:1"],
      ["--redis", "redis://h:1", "u:hunter2@h"],
      ["--rediss=redis://:hunter2@h:1"],
    ]) {
      const out = await cli("status", ...args);
      expect(out.exitCode).toBe(2);
      expect(out.stderr).not.toContain("hunter2");
      expect(out.stderr.split("\n")).toHaveLength(2);
    }
    const positional = await cli("status", "redis://:hunter2@h:1");
    expect(positional.stderr).toMatch(/^selfheal: Unexpected argument '\[a URL, not shown\]'/);
  });

  it("a bad --redis URL: the reason, never the URL", async () => {
    await expectUsage(["--redis", "not a url"], MALFORMED);
    await expectUsage(["--redis", "redis://:hunter2@h:1/x"], DB);
    await expectUsage(
      ["--redis", "http://h:1"],
      '--redis must be a redis:// or rediss:// URL, got the scheme "http://"',
    );
  });

  it.each(["", "  ", "\t"])("--agent %j: must not be empty", async (agent) => {
    await expectUsage(["--redis", "redis://h:1", "--agent", agent], "--agent must not be empty");
  });

  it("a bad --prefix: shown escaped, a URL in it hidden", async () => {
    const must = '--prefix must be 1-64 letters, digits, "_", "." or "-", got';
    await expectUsage(["--redis", "redis://h:1", "--prefix", "a:b"], `${must} "a:b"`);
    await expectUsage(["--redis", "redis://h:1", "--prefix", ""], `${must} ""`);
    await expectUsage(
      ["--redis", "redis://h:1", "--prefix", "p".repeat(65)],
      `${must} "${"p".repeat(65)}"`,
    );
    await expectUsage(
      ["--redis", "redis://:pw@h:1", "--prefix", "redis://:hunter2@h:1"],
      `${must} "[a URL, not shown]"`,
    );
    const out = await captured(() => status(["--redis", "redis://h:1", "--prefix", "a\nb"]));
    expect((out.error as Error).message).toBe(`${must} "a\\nb"`);
  });
});

describe("selfheal status (in process): reading the fleet", () => {
  it("reads with the URL as given, the prefix, short timeouts; prints the fleet", async () => {
    vi.mocked(readFleet).mockResolvedValue(FLEET);
    const url = "redis://:hunter2@127.0.0.1:7000/1";
    const out = await cli("status", "--redis", url);
    expect(out).toEqual({
      exitCode: 0,
      stdout: `${renderStatus(FLEET, "redis://127.0.0.1:7000/1")}\n`,
      stderr: "",
    });
    // No `agent` key at all (not even undefined): every agent.
    expect(vi.mocked(readFleet).mock.calls).toStrictEqual([
      [{ url, prefix: "selfheal", connectTimeoutMs: 3_000, commandTimeoutMs: 2_000 }],
    ]);
    expect(out.stdout).not.toContain("hunter2");
  });

  it("--agent and --prefix are passed on; --json prints the fleet as one document", async () => {
    vi.mocked(readFleet).mockResolvedValue(FLEET);
    const out = await cli(
      "status",
      "--redis",
      "redis://h:1",
      "--prefix",
      "staging",
      "--agent",
      "billing",
      "--json",
    );
    expect(out).toEqual({ exitCode: 0, stdout: `${JSON.stringify(FLEET)}\n`, stderr: "" });
    expect(readFleet).toHaveBeenCalledWith({
      url: "redis://h:1",
      prefix: "staging",
      agent: "billing",
      connectTimeoutMs: 3_000,
      commandTimeoutMs: 2_000,
    });
  });

  it("Redis cannot be read: exit 1, one line with the shown URL, the password redacted", async () => {
    vi.mocked(readFleet).mockRejectedValue(
      new Error("WRONGPASS for hunter2 (hunter%32)\nat the server"),
    );
    expect(await cli("status", "--redis", "redis://:hunter%32@h:1")).toEqual({
      exitCode: 1,
      stdout: "",
      stderr:
        "selfheal: cannot read the fleet from redis://h:1: WRONGPASS for [REDACTED] ([REDACTED])\\nat the server\n",
    });
    vi.mocked(readFleet).mockRejectedValue("a string with hunter2");
    const thrown = await captured(() => status(["--redis", "redis://:hunter2@h:1"]));
    expect(thrown.error).toBeInstanceOf(CommandFailedError);
    expect((thrown.error as Error).message).toBe(
      "cannot read the fleet from redis://h:1: a string with [REDACTED]",
    );
  });

  it("ioredis not installed: exit 1 with the command that installs it", async () => {
    const missing = Object.assign(new Error("needs ioredis"), {
      code: "ERR_SELFHEAL_MISSING_PEER",
    });
    vi.mocked(readFleet).mockRejectedValue(missing);
    expect(await cli("status", "--redis", "redis://h:1")).toEqual({
      exitCode: 1,
      stdout: "",
      stderr: "selfheal: status needs ioredis, an optional peer: npm install ioredis\n",
    });
    // Only an Error with that code says so.
    vi.mocked(readFleet).mockRejectedValue({ code: "ERR_SELFHEAL_MISSING_PEER" });
    expect((await cli("status", "--redis", "redis://h:1")).stderr).toBe(
      "selfheal: cannot read the fleet from redis://h:1: [object Object]\n",
    );
    vi.mocked(readFleet).mockRejectedValue(Object.assign(new Error("other"), { code: "EOTHER" }));
    expect((await cli("status", "--redis", "redis://h:1")).stderr).toBe(
      "selfheal: cannot read the fleet from redis://h:1: other\n",
    );
  });
});
