import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisStore } from "../../src/redis/index.js";
import { breakerKeyPrefix, encodeName } from "../../src/redis/keys.js";
import { freePort } from "../helpers/binaries.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";

const available = haveRedis("selfheal status");

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The built command, as `npx selfheal` runs it (asynchronously: a test server may need to run).
 * Killed after 30 s: a guard against a hang, not a measure (its own timeouts are seconds).
 */
function selfheal(args: string[], nodeArgs: string[] = []): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, "dist/cli/main.js", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
      timeout: 30_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("close", (status) => {
      resolve({ status, stdout, stderr });
    });
  });
}

/** stderr is exactly one line. */
const oneLine = (out: Run) => {
  expect(out.stderr.trim().split("\n")).toHaveLength(1);
  expect(out.stderr).not.toMatch(/\n\s+at /);
};

/**
 * A preload that makes `ioredis` unresolvable, as where the optional peer is not installed
 * (selfheal/redis loads it with require(), when a store is made).
 */
const PRELOAD = join(mkdtempSync(join(tmpdir(), "selfheal-no-ioredis-")), "no-ioredis.cjs");
writeFileSync(
  PRELOAD,
  `const Module = require("node:module");
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === "ioredis" || request.startsWith("ioredis/")) {
    const error = new Error("Cannot find module 'ioredis'");
    error.code = "MODULE_NOT_FOUND";
    throw error;
  }
  return resolve.call(this, request, ...rest);
};
`,
);
const WITHOUT_IOREDIS = ["--require", PRELOAD];

describe.skipIf(!available)("selfheal status on a real redis-server (built CLI)", () => {
  let redis: RunningRedis;
  beforeAll(async () => {
    redis = await startRedis();
    // Two agents of a fleet, written as their workers would: billing's charge tool failing.
    const store = redisStore({ url: redis.url });
    const now = Date.now();
    for (let i = 0; i < 30; i++) {
      const at = now - i * 1_000;
      const charge = i % 3 === 0 ? "success" : "error";
      store.recordCall({ agent: "billing", tool: "charge", outcome: charge, durationMs: 80 }, at);
      store.recordCall(
        { agent: "billing", tool: "lookup", outcome: "success", durationMs: 30 },
        at,
      );
      store.recordCall(
        { agent: "support", tool: "search", outcome: "success", durationMs: 40 },
        at,
      );
    }
    for (let i = 0; i < 6; i++) store.recordTask({ agent: "support", outcome: "completed" }, now);
    await store.flush();
    expect(store.isDegraded).toBe(false);
    await store.close();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it("lists the fleet's open breakers (only those still open), alert throttles and task budgets", async () => {
    const store = redisStore({ url: redis.url, prefix: "breakers" });
    store.recordCall({ agent: "a", tool: "t", outcome: "success", durationMs: 5 }, Date.now());
    await store.flush();
    const until = Date.now() + 60_000;
    store.fleet.publish("openai", { open: true, until, opens: 2, at: Date.now() });
    store.fleet.publish("anthropic", { open: false, until: 0, opens: 1, at: Date.now() });
    await store.fleet.admit("billing/charge/AUTH", Date.now(), 60_000);
    await store.fleet.admit("billing/charge/AUTH", Date.now(), 60_000); // held back
    await store.fleet.add("task-1", 0.25);
    await store.fleet.add("task-2", 0.5);
    // publish() does not wait for Redis: both verdicts are there before the command reads.
    const states = ["openai", "anthropic"].map(
      (d) => `${breakerKeyPrefix("breakers")}${encodeName(d)}`,
    );
    const admin = new Redis(redis.url);
    try {
      while ((await admin.exists(...states)) < states.length)
        await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      admin.disconnect();
    }
    await store.close();
    const out = await selfheal(["status", "--redis", redis.url, "--prefix", "breakers"]);
    expect(out.stdout).toContain(
      `breakers open: openai until ${new Date(Math.ceil(until)).toISOString()} (2 in a row)`,
    );
    // 60 s when read at once; less on a busy machine, however long the command took to start.
    const [, left] =
      /^alert throttles: billing\/charge\/AUTH \((\d+) s left, 1 held\)$/m.exec(out.stdout) ?? [];
    expect(Number(left)).toBeGreaterThan(30);
    expect(Number(left)).toBeLessThanOrEqual(60);
    expect(out.stdout).toContain(
      "task budgets: 2 task(s) with recovery spend, $0.7500 in all, at most $0.5000",
    );
    const json = await selfheal(["status", "--redis", redis.url, "--prefix", "breakers", "--json"]);
    expect((JSON.parse(json.stdout) as { openBreakers: unknown[] }).openBreakers).toEqual([
      { dependency: "openai", until: Math.ceil(until), opens: 2 },
    ]);
  });

  it("prints one block per agent: its status, each signal, each tool; defaults and what is not shared said", async () => {
    const out = await selfheal(["status", "--redis", redis.url]);
    expect(out.stderr).toBe("");
    expect(out.status).toBe(0);
    const text = out.stdout;
    expect(text).toContain('fleet under prefix "selfheal"');
    expect(text).toMatch(/^thresholds: the defaults/m);
    expect(text).toMatch(/^breakers: none open$/m);
    // billing: 40 of 60 calls failed (66.7 %): warning; its charge tool (33.3 %) critical.
    expect(text).toMatch(/^billing: warning$/m);
    expect(text).toMatch(/^ {2}success_rate +66\.7% +60 samples +warning$/m);
    expect(text).toMatch(/^ {4}charge +critical \(success_rate 33\.3%\)$/m);
    expect(text).toMatch(/^ {4}lookup +healthy$/m);
    expect(text).toMatch(/^support: healthy$/m);
    expect(text).toMatch(/^ {2}success_rate +100\.0% +30 samples +healthy$/m);
    expect(text).toMatch(/^ {2}task_completion +100\.0% +6 samples +healthy$/m);
    expect(text).toMatch(/^ {4}search +healthy$/m);
    for (const signal of ["latency_p95", "empty_response_rate"])
      expect(text).toMatch(new RegExp(`^ {2}${signal} .+ samples `, "m"));
    expect(text.indexOf("billing:")).toBeLessThan(text.indexOf("support:"));
  });

  it("--agent shows that agent only", async () => {
    const out = await selfheal(["status", "--redis", redis.url, "--agent", "support"]);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^support: healthy$/m);
    expect(out.stdout).not.toContain("billing");
  });

  it("--json prints the FleetStatus as one document", async () => {
    const out = await selfheal(["status", "--redis", redis.url, "--json"]);
    expect(out.status).toBe(0);
    const fleet = JSON.parse(out.stdout) as {
      prefix: string;
      at: number;
      agents: { agent: string; status: string; tools: Record<string, { status: string }> }[];
    };
    expect(fleet.prefix).toBe("selfheal");
    expect(Math.abs(fleet.at - Date.now())).toBeLessThan(60_000);
    expect(fleet.agents.map((a) => [a.agent, a.status])).toEqual([
      ["billing", "warning"],
      ["support", "healthy"],
    ]);
    expect(fleet.agents[0]?.tools.charge?.status).toBe("critical");
    const one = await selfheal(["status", "--redis", redis.url, "--json", "--agent", "billing"]);
    const only = JSON.parse(one.stdout) as { agents: { agent: string }[] };
    expect(only.agents.map((a) => a.agent)).toEqual(["billing"]);
  });

  it("another prefix has no agents; an agent that never wrote exits 1 naming the known ones", async () => {
    const empty = await selfheal(["status", "--redis", redis.url, "--prefix", "staging"]);
    expect(empty.status).toBe(0);
    expect(empty.stdout).toContain('no agent has written under prefix "staging"');
    const unknown = await selfheal(["status", "--redis", redis.url, "--agent", "biling"]);
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toMatch(/^selfheal: .*no agent "biling" .*known: "billing", "support"/);
    oneLine(unknown);
  });

  it("hostile agent and tool names (lone surrogates, :, {, }, *, newlines, 10 KB): one line each, exact in --json", async () => {
    const long = `${"n".repeat(10_000)}:end`;
    const agents = ["\uD800lone", "evil\nsupport: critical", "{x}*:y|z", long];
    const tools = ["t\uDC00", "charge\r\n    forged  healthy", "*", "{tag}", long];
    const store = redisStore({ url: redis.url, prefix: "hostile" });
    const now = Date.now();
    for (const agent of agents)
      for (const tool of tools)
        store.recordCall({ agent, tool, outcome: "success", durationMs: 10 }, now);
    await store.flush();
    expect(store.isDegraded).toBe(false);
    await store.close();

    const out = await selfheal(["status", "--redis", redis.url, "--prefix", "hostile"]);
    expect(out.stderr).toBe("");
    expect(out.status).toBe(0);
    const lines = out.stdout.trimEnd().split("\n");
    for (const line of lines) {
      expect(line).not.toMatch(/[\u0000-\u001f\u007f]|[\uD800-\uDFFF]/); // eslint-disable-line no-control-regex
      expect(line.length).toBeLessThan(200);
    }
    // One header per agent, nothing forged by a name's newline.
    const headers = lines.filter((l) => /^\S.*: (healthy|warning|critical)$/.test(l));
    expect(headers).toHaveLength(agents.length);
    expect(lines).not.toContain("support: critical");
    expect(lines.filter((l) => /^ {4}\S/.test(l))).toHaveLength(agents.length * tools.length);
    expect(lines.some((l) => l.trim().startsWith("forged"))).toBe(false);
    expect(out.stdout).toContain("nnnn… (10004 chars): healthy");
    expect(lines).toContain("\uFFFDlone: healthy"); // a lone surrogate, as a terminal shows it
    expect(out.stdout).toContain("evil\\nsupport: critical: healthy");

    const json = await selfheal(["status", "--redis", redis.url, "--prefix", "hostile", "--json"]);
    expect(json.status).toBe(0);
    const fleet = JSON.parse(json.stdout) as {
      agents: { agent: string; tools: Record<string, unknown> }[];
    };
    expect(fleet.agents.map((a) => a.agent).sort()).toEqual([...agents].sort());
    for (const a of fleet.agents) expect(Object.keys(a.tools).sort()).toEqual([...tools].sort());

    const one = await selfheal([
      "status",
      "--redis",
      redis.url,
      "--prefix",
      "hostile",
      "--agent",
      "{x}*:y|z",
      "--json",
    ]);
    expect(
      (JSON.parse(one.stdout) as { agents: { agent: string }[] }).agents.map((a) => a.agent),
    ).toEqual(["{x}*:y|z"]);
    const unknown = await selfheal([
      "status",
      "--redis",
      redis.url,
      "--prefix",
      "hostile",
      "--agent",
      "x",
    ]);
    expect(unknown.status).toBe(1);
    oneLine(unknown);
    expect(unknown.stderr.length).toBeLessThan(400); // the 10 KB name is cut
  });

  it("without ioredis installed: demo runs; status says what to install, exit 1", async () => {
    const demo = await selfheal(["demo", "--json"], WITHOUT_IOREDIS);
    expect(demo.status).toBe(0);
    expect(JSON.parse(demo.stdout)).toMatchObject({ scenario: "provider-outage" });
    const out = await selfheal(["status", "--redis", redis.url], WITHOUT_IOREDIS);
    expect(out.status).toBe(1);
    expect(out.stderr).toBe(
      "selfheal: status needs ioredis, an optional peer: npm install ioredis\n",
    );
  });
});

/** Two halves no message may show, whatever was cut between them. */
const HEAD = "xyzzyHead";
const TAIL = "plughTail";

/** Whether a run shows a password, or a part of it, in any form. */
function expectHidden(out: Run, password: string): void {
  const text = `${out.stdout}\n${out.stderr}`;
  const forms = [password, encodeURIComponent(password), encodeURI(password), HEAD, TAIL];
  for (const form of forms) expect(text.toLowerCase()).not.toContain(form.toLowerCase());
}

describe.skipIf(!available)("selfheal status: credentials are never shown (built CLI)", () => {
  // Each password is a user's (ACL), the default user's is the one with every character: the
  // server requires a password.
  const SEPARATORS = ["@", "/", ":", "%", "#", "?", "@/:%#?"];
  const passwordOf = (separator: string) => `${HEAD}${separator}${TAIL}`;
  let redis: RunningRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    const store = redisStore({ url: redis.url, prefix: "secret" });
    store.recordCall(
      { agent: "billing", tool: "charge", outcome: "success", durationMs: 5 },
      Date.now(),
    );
    await store.flush();
    await store.close();
    admin = new Redis(redis.url);
    for (const [i, separator] of SEPARATORS.entries())
      await admin.acl(
        "SETUSER",
        `user${i}`,
        "on",
        `>${passwordOf(separator)}`,
        "~*",
        "&*",
        "+@all",
      );
    await admin.config("SET", "requirepass", passwordOf("@/:%#?"));
  });
  afterAll(async () => {
    admin.disconnect();
    await redis.stop();
  });

  const host = () => `127.0.0.1:${redis.port}`;
  const run = (url: string, ...more: string[]) =>
    selfheal(["status", "--redis", url, "--prefix", "secret", ...more]);

  it.each(SEPARATORS.map((sep, i) => [sep, i] as const))(
    "a password with %j, percent-encoded: read, shown as host and port only",
    async (separator, i) => {
      const password = passwordOf(separator);
      const out = await run(`redis://user${i}:${encodeURIComponent(password)}@${host()}/0`);
      expect(out.stderr).toBe("");
      expect(out.status).toBe(0);
      expect(out.stdout).toContain(`fleet under prefix "secret" at redis://${host()}/0, `);
      expect(out.stdout).toMatch(/^billing: healthy$/m);
      expect(out.stdout).not.toContain(`user${i}`);
      expectHidden(out, password);
    },
  );

  it.each(SEPARATORS.map((sep, i) => [sep, i] as const))(
    "a password with %j, written raw: read or refused, never shown",
    async (separator, i) => {
      const password = passwordOf(separator);
      for (const url of [
        `redis://user${i}:${password}@${host()}`,
        `redis://:${password}@${host()}`,
      ]) {
        const out = await run(url);
        expectHidden(out, password);
        if (out.status !== 0) oneLine(out);
        // "@" and ":" parse as meant; "/", "?" and "#" split the URL early (malformed, never
        // connected to); "%" must start an escape ("%pl" does not: malformed).
        const expected = separator === "@" || separator === ":" ? [0, 1] : [2];
        expect(expected).toContain(out.status);
        if (out.status === 2)
          expect(out.stderr).toMatch(/^selfheal: --redis: malformed URL \(not shown/);
      }
    },
  );

  it('a password whose first digits would pass for a port (a raw "#" or "?" after them): malformed', async () => {
    for (const url of [
      `redis://default:4321#${TAIL}@${host()}`,
      `redis://default:4321?${TAIL}@${host()}`,
    ]) {
      const out = await run(url);
      expect(out.status).toBe(2);
      expect(out.stderr).not.toContain("4321");
      expectHidden(out, `4321#${TAIL}`);
      oneLine(out);
    }
  });

  it("the server refuses: a wrong password, none at all (exit 1, host and port only)", async () => {
    const wrong = `${HEAD}@/:%${TAIL}`;
    const refused = await run(`redis://:${encodeURIComponent(wrong)}@${host()}`);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(`^selfheal: cannot read the fleet from redis://${host()}: .*WRONGPASS`),
    );
    expectHidden(refused, wrong);
    oneLine(refused);
    const none = await run(`redis://${host()}`);
    expect(none.status).toBe(1);
    expect(none.stderr).toMatch(/NOAUTH/);
    oneLine(none);
  });

  it("a URL in the wrong place (a positional argument, --prefix, a misspelt flag) is not echoed", async () => {
    const password = passwordOf("@/:%#?");
    const url = `redis://:${encodeURIComponent(password)}@${host()}`;
    for (const args of [
      ["status", url],
      ["status", "--redis", url, "--prefix", url],
      ["status", `--rediss=${url}`],
      ["status", "--redis", url, url],
    ]) {
      const out = await selfheal(args);
      expect(out.status).toBe(2);
      expectHidden(out, password);
      oneLine(out);
    }
  });

  it("a URL that does not parse is not printed in any part", async () => {
    for (const url of [
      "not a url",
      `redis://:${HEAD}/${TAIL}@[::1`,
      `${HEAD}:${TAIL}@host`,
      `redis://:${HEAD}%zz${TAIL}@${host()}`,
    ]) {
      const out = await run(url);
      expect(out.status).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(/^selfheal: --redis: malformed URL \(not shown/);
      expect(out.stderr).not.toContain("not a url");
      expectHidden(out, HEAD);
      oneLine(out);
    }
  });
});

describe("selfheal status: bad flags and an unreachable Redis (built CLI)", () => {
  it.each([
    [["status"], /^selfheal: status needs --redis URL/],
    [["status", "--redis"], /^selfheal: Option '--redis <value>' argument missing/],
    [
      ["status", "--redis", "redis://127.0.0.1:1", "--agnt", "x"],
      /^selfheal: Unknown option '--agnt'/,
    ],
    [
      ["status", "--redis", "http://127.0.0.1:6379"],
      /^selfheal: --redis must be a redis:\/\/ or rediss:\/\/ URL, got the scheme "http:\/\/"/,
    ],
    [["status", "--redis", "127.0.0.1:6379"], /^selfheal: --redis: malformed URL \(not shown/],
    [["status", "--redis", "not a url"], /^selfheal: --redis: malformed URL \(not shown/],
    [
      ["status", "--redis", "redis://127.0.0.1:6379/x"],
      /^selfheal: --redis: the database must be a number/,
    ],
    [
      ["status", "--redis", "redis://127.0.0.1:1", "--prefix", "a:b"],
      /^selfheal: --prefix must be 1-64 letters/,
    ],
    [
      ["status", "--redis", "redis://127.0.0.1:1", "--prefix", ""],
      /^selfheal: --prefix must be 1-64 letters/,
    ],
    [
      ["status", "--redis", "redis://127.0.0.1:1", "--agent", ""],
      /^selfheal: --agent must not be empty/,
    ],
    [
      ["status", "--redis", "redis://127.0.0.1:1", "extra"],
      /^selfheal: Unexpected argument 'extra'/,
    ],
  ])("%j exits 2 with one line", async (args, message) => {
    const out = await selfheal(args);
    expect(out.status).toBe(2);
    expect(out.stdout).toBe("");
    expect(out.stderr).toMatch(message);
    oneLine(out);
  });

  it("a bad URL's password is not echoed", async () => {
    const out = await selfheal(["status", "--redis", "redis://:hunter2@127.0.0.1:6379/x"]);
    expect(out.status).toBe(2);
    expect(out.stderr).not.toContain("hunter2");
  });

  it("a port nothing listens on: exit 1, one line", async () => {
    const port = await freePort();
    const out = await selfheal(["status", "--redis", `redis://:hunter2@127.0.0.1:${port}`]);
    expect(out.status).toBe(1);
    expect(out.stdout).toBe("");
    expect(out.stderr).toMatch(/^selfheal: cannot read the fleet from redis:\/\/.*ECONNREFUSED/);
    expect(out.stderr).not.toContain("hunter2");
    oneLine(out);
  });

  it("a server that accepts but never answers: exit 1, one line (the command's own timeouts end it)", async () => {
    const sockets = new Set<Socket>();
    const server: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    try {
      const out = await selfheal(["status", "--redis", `redis://127.0.0.1:${port}`, "--json"]);
      expect(out.status).toBe(1);
      expect(out.stdout).toBe("");
      expect(out.stderr).toMatch(/^selfheal: cannot read the fleet from .*did not answer within/);
      oneLine(out);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("is in the usage text and has its own --help", async () => {
    const usage = await selfheal(["--help"]);
    expect(usage.stdout).toMatch(/^ {2}status +The fleet's health from Redis/m);
    const help = await selfheal(["status", "--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: selfheal status --redis URL/);
  });
});
