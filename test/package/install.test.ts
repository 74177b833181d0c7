/**
 * The package as a user gets it: `npm pack` (of the built dist/: `npm test` builds it first),
 * installed into scratch projects, one CommonJS and one ESM TypeScript project
 * (`module`/`moduleResolution` nodenext), each type-checked with this repository's TypeScript
 * and running the README's quick start against a local HTTP server. Then every ```ts snippet of
 * the documentation (README.md, CONTRIBUTING.md, docs/) is type-checked (`strict`) in an ESM and a
 * CommonJS project that install the tarball with the frameworks of `FRAMEWORKS` (./snippets.ts),
 * once per version listed there; which snippet is checked as which kind: ./snippets.ts. The first
 * of these projects (the provider SDKs installed with the tarball) also runs the README's one-line
 * client and drives each healed client through a provider's faults (./clients.ts).
 * Installing needs the npm registry (for `@opentelemetry/api`): without it the suite is skipped
 * with a notice locally and fails under `CI=true`.
 */
import { execFile, spawn } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeProvider } from "../../src/testing/index.js";
import { doc } from "../helpers/readme.js";
import { CLIENT_SCRIPTS, expected, RUNS, type ScenarioResult } from "./clients.js";
import {
  checkedAs,
  docBlocks,
  FRAMEWORKS,
  PRELUDES,
  rounds,
  snippetFile,
  snippetFileName,
  snippets,
  type Round,
} from "./snippets.js";
import { typeCheck } from "./typecheck.js";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const TYPE_ROOTS = join(ROOT, "node_modules/@types");

let work = "";
let server: Server | undefined;
let docsUrl = "";
let unavailable: string | undefined;
const seen: string[] = [];

async function sh(
  cmd: string,
  args: string[],
  cwd: string,
  timeout = 60_000,
  env: Record<string, string> = {},
) {
  return run(cmd, args, { cwd, timeout, env: { ...process.env, DOCS_URL: docsUrl, ...env } });
}

/**
 * A ts block of the README's quick start (1: the one-line client, 2: the tools), split into its
 * import lines and its body.
 */
function quickStart(index: 1 | 2): { imports: string; body: string } {
  const block = doc("README.md")
    .blocks("ts")
    .find((b) => b.heading === "Quick start" && b.index === index);
  if (!block) throw new Error(`README.md: no ts block #${index} under "Quick start"`);
  const lines = block.code.split("\n");
  const imports = lines.filter((l) => l.startsWith("import "));
  const body = lines.filter((l) => !l.startsWith("import "));
  return { imports: imports.join("\n"), body: body.join("\n") };
}

/** What the quick start's tools leave to the reader: its docs URL and payments client. */
const PRELUDE = `
const DOCS_URL = process.env.DOCS_URL ?? "";
const payments = {
  refund: async (id: string, options: { idempotencyKey: string | undefined }) => {
    console.log("refunded " + id + " with key " + String(options.idempotencyKey));
    return { id };
  },
};
`;

const TSCONFIG = (module: string) =>
  JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      lib: ["ES2023"],
      module,
      moduleResolution: module,
      strict: true,
      skipLibCheck: false,
      typeRoots: [TYPE_ROOTS],
      types: ["node"],
      outDir: "out",
    },
    include: ["*.ts", "*.cts", "*.mts"],
  });

function project(name: string, type: "module" | "commonjs", files: Record<string, string>) {
  const dir = join(work, name);
  rmSync(dir, { recursive: true, force: true });
  const pkg = { name: `scratch-${name}`, private: true, version: "0.0.0", type };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify(pkg));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

let tarball = "";

/** The npm install of each round of FRAMEWORKS, started as soon as the tarball is packed. */
const roundInstalls = new Map<number, Promise<{ dir: string } | { error: unknown }>>();

/** The results of each script of ./clients/ (by file), run in round 0's project. */
const clientRuns = new Map<string, Promise<ScenarioResult[]>>();
const CLIENTS = join(ROOT, "test/package/clients");

/** A directory of its own (own node_modules) with the tarball and `specs` installed. */
async function installRound(round: Round): Promise<string> {
  const dir = join(work, `round-${round.index}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true }));
  await sh(
    "npm",
    [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      "--loglevel=error",
      tarball,
      ...round.specs,
    ],
    dir,
    300_000,
  );
  return dir;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "selfheal-install-"));
  server = createServer((req, res) => {
    seen.push(req.url ?? "");
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ hits: [{ title: "Refund policy" }] }));
  });
  await new Promise<void>((done) => server?.listen(0, "127.0.0.1", done));
  docsUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/search`;

  const { stdout } = await sh(
    "npm",
    ["pack", "--ignore-scripts", "--json", "--pack-destination", work],
    ROOT,
  );
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  if (!packed) throw new Error("npm pack printed nothing");
  tarball = join(work, packed.filename);
  writeFileSync(join(work, "files.json"), JSON.stringify(packed.files.map((f) => f.path)));

  // The frameworks' installs run meanwhile; a round's test waits for its own (and reports its
  // failure there, unless the registry is unreachable).
  for (const round of rounds()) {
    const install = installRound(round).then(
      (dir) => ({ dir }),
      (error: unknown) => ({ error }),
    );
    roundInstalls.set(round.index, install);
  }
  // The client scripts run, all at once, as soon as round 0 (the tarball and the SDKs) is in.
  const clientsDir = roundInstalls.get(0)?.then((installed) => {
    if ("error" in installed) throw installed.error;
    const dir = join(installed.dir, "clients");
    mkdirSync(dir, { recursive: true });
    for (const file of readdirSync(CLIENTS)) copyFileSync(join(CLIENTS, file), join(dir, file));
    return dir;
  });
  for (const { file } of CLIENT_SCRIPTS) {
    const results = clientsDir?.then(async (dir) => {
      const { stdout } = await sh(process.execPath, [file], dir, 240_000);
      return JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as ScenarioResult[];
    });
    results?.catch(() => undefined); // its test reports the failure
    if (results) clientRuns.set(file, results);
  }

  // One install, shared: node_modules at the root of `work` serves every project below it.
  writeFileSync(join(work, "package.json"), JSON.stringify({ name: "scratch", private: true }));
  try {
    await sh(
      "npm",
      ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", tarball],
      work,
      90_000,
    );
  } catch (error) {
    const text = String((error as { stderr?: string }).stderr ?? error);
    if (!/E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT)|network|ENETUNREACH/i.test(text))
      throw error;
    if (process.env.CI === "true")
      throw new Error(`npm registry unreachable under CI: ${text}`, { cause: error });
    unavailable = `npm registry unreachable, package install tests skipped: ${text.split("\n")[0]}`;
    console.warn(unavailable);
  }
}, 120_000);

afterAll(async () => {
  server?.close();
  await Promise.all(roundInstalls.values()); // never rejects; an install still running is waited
  await Promise.allSettled(clientRuns.values());
  if (!work) return;
  // The frameworks' node_modules are some 30 000 files: a detached process deletes them, so the
  // suite does not wait on it (up to a minute on a loaded machine).
  const rm = `require("node:fs").rmSync(${JSON.stringify(work)}, { recursive: true, force: true })`;
  spawn(process.execPath, ["-e", rm], { detached: true, stdio: "ignore" }).unref();
}, 300_000);

describe("the packed tarball", () => {
  it("ships dist, the sources its maps point at, README and LICENSE; no tests", () => {
    const files = JSON.parse(readFileSync(join(work, "files.json"), "utf8")) as string[];
    expect(files).toContain("LICENSE");
    expect(files).toContain("README.md");
    expect(files).toContain("dist/index.js");
    expect(files.some((f) => f.startsWith("test/"))).toBe(false);
    // Every source map's sources are in the tarball.
    for (const map of files.filter((f) => f.endsWith(".map"))) {
      const { sources } = JSON.parse(
        readFileSync(join(work, "node_modules/selfheal", map), "utf8"),
      ) as { sources: string[] };
      for (const source of sources) {
        const shipped = join(map, "..", source).replace(/\\/g, "/");
        expect(files, `${map} -> ${source}`).toContain(shipped);
      }
    }
  });
});

describe("installed into scratch projects", () => {
  it("CommonJS: require() of every entry, the quick start type-checks and runs (Node >= 20.19)", async (ctx) => {
    if (unavailable) ctx.skip(unavailable);
    const { imports, body } = quickStart(2);
    const dir = project("cjs", "commonjs", {
      "tsconfig.json": TSCONFIG("nodenext"),
      "quickstart.ts": `${imports}\n${PRELUDE}\nasync function main() {\n${body}\n  await sh.close();\n}\nvoid main();\n`,
      "require.js": `
const core = require("selfheal");
const testing = require("selfheal/testing");
const notify = require("selfheal/notify");
const otel = require("selfheal/otel");
const redis = require("selfheal/redis");
const watchdog = require("selfheal/watchdog");
const openai = require("selfheal/openai");
const anthropic = require("selfheal/anthropic");
const genai = require("selfheal/google-genai");
console.log([typeof core.createSelfHealing, typeof testing.FailureInjector, typeof notify.slackNotifier, typeof otel.startTelemetry, typeof redis.redisStore, typeof watchdog.heartbeat, typeof openai.sseChunks, typeof openai.healOpenAI, typeof anthropic.healAnthropic, typeof genai.healGoogleGenAI].join(" "));
`,
    });
    // No SDK is installed here: the client entries load without their optional peers.
    const required = await sh(process.execPath, ["require.js"], dir);
    expect(required.stdout.trim()).toBe(Array(10).fill("function").join(" "));
    await sh(process.execPath, [TSC, "-p", "."], dir);
    expect(readFileSync(join(dir, "out/quickstart.js"), "utf8")).toContain('require("selfheal")');
    const { stdout } = await sh(process.execPath, ["out/quickstart.js"], dir, 20_000);
    expect(stdout).toContain("refunded A-42 with key refund-A-42");
    expect(stdout).toContain("status: 'healthy'");
  }, 60_000);

  it("ESM TypeScript (nodenext): the quick start type-checks and runs", async (ctx) => {
    if (unavailable) ctx.skip(unavailable);
    const { imports, body } = quickStart(2);
    const dir = project("esm", "module", {
      "tsconfig.json": TSCONFIG("nodenext"),
      "quickstart.ts": `${imports}\n${PRELUDE}\n${body}\nawait sh.close();\n`,
      "testing.ts": doc("docs/testing.md").block("Example"),
    });
    await sh(process.execPath, [TSC, "-p", "."], dir);
    const before = seen.length;
    const { stdout } = await sh(process.execPath, ["out/quickstart.js"], dir, 20_000);
    expect(stdout).toContain("refunded A-42 with key refund-A-42");
    expect(stdout).toContain("status: 'healthy'");
    expect(seen.slice(before)).toEqual(["/search?q=refund%20policy"]);
  }, 60_000);

  it("selfheal/redis without ioredis: imports, then a clear error naming the install command", async (ctx) => {
    if (unavailable) ctx.skip(unavailable);
    const dir = project("redis", "module", {
      "start.mjs": `
import { redisStore } from "selfheal/redis";
try {
  redisStore({ url: "redis://127.0.0.1:1" });
  console.log("made");
} catch (e) {
  console.log(e.code + "\\n" + e.message);
}
`,
    });
    const { stdout } = await sh(process.execPath, ["start.mjs"], dir);
    expect(stdout).toContain("ERR_SELFHEAL_MISSING_PEER");
    expect(stdout).toContain("npm i ioredis");
  }, 30_000);

  it("selfheal/otel without its optional peers: a clear error naming them and the install command", async (ctx) => {
    if (unavailable) ctx.skip(unavailable);
    const dir = project("otel", "module", {
      "start.mjs": `
import { startTelemetry } from "selfheal/otel";
try {
  await startTelemetry({ serviceName: "x" });
  console.log("started");
} catch (e) {
  console.log(e.code + "\\n" + e.message);
}
`,
    });
    const { stdout } = await sh(process.execPath, ["start.mjs"], dir);
    expect(stdout).toContain("ERR_SELFHEAL_MISSING_PEER");
    expect(stdout).toContain("@opentelemetry/sdk-trace-node");
    expect(stdout).toMatch(
      /npm i @opentelemetry\/sdk-trace-node .*@opentelemetry\/exporter-prometheus/,
    );
  }, 30_000);
});

/** Round 0's project: the tarball with the first version of every framework and SDK. */
async function roundZero(): Promise<string> {
  const installed = await roundInstalls.get(0);
  if (!installed) throw new Error("round 0 was not installed");
  if ("error" in installed) throw installed.error;
  return installed.dir;
}

describe("the provider clients healed in one line, with their SDKs (round 0's project)", () => {
  it("the quick start's one-line client heals a 429 from a fake provider (OPENAI_BASE_URL)", async (ctx) => {
    if (unavailable) ctx.skip(unavailable);
    const dir = await roundZero();
    const { imports, body } = quickStart(1);
    // Type-checked with the snippets; run here as the JavaScript a user's build makes of it.
    const { outputText } = ts.transpileModule(`${imports}\n${body}\nawait sh.close();\n`, {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(join(dir, "quickstart-client.mjs"), outputText);
    const provider = await startFakeProvider({ tokenIntervalMs: 0 });
    try {
      provider.injector.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 1 });
      const env = { OPENAI_BASE_URL: provider.url, OPENAI_API_KEY: "sk-test" };
      const { stdout } = await sh(process.execPath, ["quickstart-client.mjs"], dir, 60_000, env);
      expect(stdout.trim()).toBe("Hello from the fake provider.");
      // The 429 and selfheal's one retry: the SDK's own retries are off.
      expect(provider.byApi.responses.requests).toBe(2);
    } finally {
      await provider.close();
    }
  }, 300_000);

  // Each client's scenarios (./clients/harness.mjs) against what the docs promise (./clients.ts).
  for (const script of CLIENT_SCRIPTS) {
    it(`${script.tool}: 429, 5xx, 401, cut, stalled and truncated answers, plain and streamed`, async (ctx) => {
      if (unavailable) ctx.skip(unavailable);
      const results = await clientRuns.get(script.file);
      if (!results) throw new Error(`${script.file} did not run`);
      expect(results.map((r) => `${r.scenario}/${r.mode}`)).toEqual(RUNS);
      // One assertion over every run: a failure shows each scenario that differs.
      expect(results).toMatchObject(results.map((r) => expected(script, r) ?? { unknown: r }));
    }, 300_000);
  }
});

/** A project of one kind in `dir` (below a round's install): the snippets as files, strict. */
function snippetProject(dir: string, kind: "esm" | "cjs", round: Round) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const type = kind === "esm" ? "module" : "commonjs";
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `snippets-${kind}`, type }));
  const compilerOptions = {
    target: "ES2022",
    lib: ["ES2023"],
    module: "nodenext",
    moduleResolution: "nodenext",
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    typeRoots: [TYPE_ROOTS],
    types: ["node"],
  };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
  const checked = checkedAs(snippets(), kind).filter(
    (s) =>
      round.index === 0 || (!s.firstRoundOnly && s.packages.some((p) => round.changed.includes(p))),
  );
  for (const snippet of checked)
    writeFileSync(join(dir, snippetFileName(snippet)), snippetFile(snippet, kind));
  return checked.map((s) => s.key);
}

describe("the documentation's snippets, type-checked as a user's code (strict, ESM and CommonJS)", () => {
  it("every ts block is a snippet, every prelude names one, every package a snippet needs has a version", () => {
    const all = snippets(); // throws for a prelude that breaks its rules
    expect(all.length).toBe(docBlocks().length);
    expect(new Set(all.map((s) => s.key)).size, "two blocks with one key").toBe(all.length);
    const keys = all.map((s) => s.key);
    expect(
      Object.keys(PRELUDES).filter((k) => !keys.includes(k)),
      "preludes of no block",
    ).toEqual([]);
    // Each kind has its snippets: a `// CommonJS` one, ESM ones with and without top-level await.
    expect(all.some((s) => s.commonJs)).toBe(true);
    expect(all.some((s) => s.esm && s.topLevelAwait)).toBe(true);
    expect(all.some((s) => s.esm && !s.topLevelAwait)).toBe(true);
    const pinned = FRAMEWORKS.map((f) => f.name);
    for (const snippet of all)
      for (const name of snippet.packages)
        expect(pinned, `${snippet.key}: ${name}`).toContain(name);
  });

  // A page whose snippet only type-checks with the first round's versions must not install the
  // latest (Mastra's types refuse an AI SDK 7 provider's model): its `npm i` pins their major.
  it("a page checked with first-round versions only pins their majors in its install line", () => {
    const pages = new Set(snippets().flatMap((s) => (s.firstRoundOnly ? [s.block.file] : [])));
    expect(pages.size).toBeGreaterThan(0);
    for (const page of pages) {
      const installs = doc(page)
        .blocks("sh")
        .flatMap((b) => b.code.split("\n"))
        .filter((l) => l.startsWith("npm i "))
        .flatMap((l) => l.split(/\s+/).slice(2));
      expect(installs.length, page).toBeGreaterThan(0);
      for (const { name, versions } of FRAMEWORKS) {
        const spec = installs.find((s) => s === name || s.startsWith(`${name}@`));
        if (spec === undefined || versions.length < 2) continue;
        expect(spec, page).toBe(`${name}@${versions[0]?.split(".")[0]}`);
      }
    }
  });

  it("the first version of each framework is the one this repository's tests use", () => {
    for (const { name, versions } of FRAMEWORKS) {
      const installed = JSON.parse(
        readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8"),
      ) as { version: string };
      expect(versions[0], name).toBe(installed.version);
    }
  });

  for (const round of rounds()) {
    const label =
      round.index === 0
        ? round.specs.join(", ")
        : `with ${round.changed.map((n) => round.specs.find((s) => s.startsWith(`${n}@`))).join(", ")}`;
    it(`round ${round.index} (${label}): every snippet it concerns type-checks, as CommonJS and as ESM`, async (ctx) => {
      if (unavailable) ctx.skip(unavailable);
      const installed = await roundInstalls.get(round.index);
      if (!installed) throw new Error(`round ${round.index} was not installed`);
      if ("error" in installed) throw installed.error;
      const checked = snippetProject(join(installed.dir, "esm"), "esm", round);
      snippetProject(join(installed.dir, "cjs"), "cjs", round);
      expect(checked.length).toBeGreaterThan(0);
      // Both kinds, then one assertion: a failure shows every error of both.
      const errors = {
        esm: typeCheck(join(installed.dir, "esm")),
        cjs: typeCheck(join(installed.dir, "cjs")),
      };
      expect(errors).toEqual({ esm: [], cjs: [] });
      if (round.index > 0) return;
      // require() of every entry, frameworks installed: the .cjs beside each entry, whose
      // exports are the ESM module's namespace (the very object import() gives).
      const { exports } = JSON.parse(
        readFileSync(join(installed.dir, "node_modules/selfheal/package.json"), "utf8"),
      ) as { exports: Record<string, unknown> };
      const entries = Object.keys(exports)
        .filter((e) => !e.includes("*") && !e.endsWith(".json"))
        .map((e) => e.replace(/^\./, "selfheal"));
      writeFileSync(
        join(installed.dir, "cjs", "require.js"),
        `(async () => {
  for (const entry of ${JSON.stringify(entries)}) {
    const required = require(entry);
    console.log(entry, required === (await import(entry)), Object.keys(required).length > 0);
  }
})();
`,
      );
      const { stdout } = await sh(process.execPath, ["require.js"], join(installed.dir, "cjs"));
      expect(stdout.trim().split("\n")).toEqual(entries.map((e) => `${e} true true`));
    }, 300_000);
  }
});
