import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { OTEL_PEERS } from "../../src/otel/index.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";

/** The built command, as `npx selfheal` runs it. */
const selfheal = (...args: string[]) =>
  spawnSync(process.execPath, ["dist/cli/main.js", ...args], { encoding: "utf8", timeout: 30_000 });

/** No OTLP endpoint, whatever the environment running the tests has (empty is unset). */
const NO_ENDPOINT = {
  OTEL_EXPORTER_OTLP_ENDPOINT: "",
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "",
};

/** The built command with node options (a preload) and environment variables. */
const selfhealWith = (nodeArgs: string[], env: Record<string, string>, ...args: string[]) =>
  spawnSync(process.execPath, [...nodeArgs, "dist/cli/main.js", ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...process.env, ...NO_ENDPOINT, ...env },
  });

/**
 * A preload that makes the OpenTelemetry SDK unresolvable, as where selfheal's optional peers are
 * not installed: every `@opentelemetry/*` package but the API (a dependency) fails to resolve,
 * for `import` (a resolve hook: selfheal/otel imports the SDK) and for `require.resolve` (with
 * which selfheal/otel names the missing peers).
 */
const NO_SDK = join(mkdtempSync(join(tmpdir(), "selfheal-no-otel-sdk-")), "no-otel-sdk.mjs");
const BLOCKED = `(s) => s.startsWith("@opentelemetry/") && s !== "@opentelemetry/api" && !s.startsWith("@opentelemetry/api/")`;
writeFileSync(
  NO_SDK,
  `import Module, { register } from "node:module";
const blocked = ${BLOCKED};
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (blocked(request)) {
    const error = new Error("Cannot find module '" + request + "'");
    error.code = "MODULE_NOT_FOUND";
    throw error;
  }
  return resolve.call(this, request, ...rest);
};
const hooks = \`const blocked = ${BLOCKED};
export async function resolve(specifier, context, next) {
  if (blocked(specifier)) {
    const error = new Error("Cannot find package '" + specifier + "'");
    error.code = "ERR_MODULE_NOT_FOUND";
    throw error;
  }
  return next(specifier, context);
}\`;
register("data:text/javascript," + encodeURIComponent(hooks));
`,
);
const WITHOUT_SDK = ["--import", pathToFileURL(NO_SDK).href];

/** Keys of the `--json` output, in every object, but those of records keyed by data. */
function jsonKeys(value: unknown, keys = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) jsonKeys(v, keys);
  else if (typeof value === "object" && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      keys.add(k);
      // Pattern, provider, tier and verdict names: data, in the product's own spelling.
      const byData = ["diagnoses", "callsPerProvider", "recoveredByTier", "failedByTier"];
      if (![...byData, "verdicts"].includes(k)) jsonKeys(v, keys);
    }
  }
  return keys;
}

describe("selfheal demo (built CLI)", () => {
  it("--json prints one object with the run's figures, in well under 20 s", () => {
    const started = performance.now();
    const out = selfheal("demo", "--json");
    expect(out.status).toBe(0);
    expect(performance.now() - started).toBeLessThan(20_000);
    const r = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(r).toMatchObject({ scenario: "provider-outage", pages: 0, userVisibleFailures: 0 });
    for (const key of [
      "mttrSeconds",
      "autoRecoveryRate",
      "recoveryCostUsd",
      "wastedRetries",
      "falseTrips",
      "callsPerProvider",
    ]) {
      expect(r).toHaveProperty(key);
    }
    expect(r.autoRecoveryRate).toBeGreaterThanOrEqual(0.9);
  });

  it("--scenario long-runs: a night of supervised runs, each tier's recoveries and the pages sent", () => {
    const json = selfheal("demo", "--scenario", "long-runs", "--json");
    expect(json.status).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      scenario: "long-runs",
      runs: 40,
      recoveredByTier: { nudge: 6, context_reset: 6, rotation: 3 },
      gaveUp: 1,
      pages: 5,
    });
    const text = selfheal("demo", "--scenario", "long-runs");
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/\] result +night-\d+ nudge recovered/);
    expect(text.stdout).toMatch(/\] page +supervision of night-\d+ gave up/);
    expect(text.stdout).toMatch(/recovered, by tier +nudge 6, context_reset 6, rotation 3/);
    expect(text.stdout).toMatch(/pages sent \(throttled per run\) +5 +0 \(nobody looks\)/);
  });

  it("--scenario streams: cut, stalled and late streams are answered whole from the secondary", () => {
    const out = selfheal("demo", "--scenario", "streams", "--json");
    expect(out.status).toBe(0);
    const r = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(r).toMatchObject({
      scenario: "streams",
      userVisibleFailures: 0,
      truncatedAnswers: 0,
      autoRecoveryRate: 1,
      pages: 0,
    });
    expect(Object.keys(r.diagnoses as object)).toEqual(
      expect.arrayContaining(["STREAM_FIRST_TOKEN_TIMEOUT", "STREAM_STALLED", "STREAM_TRUNCATED"]),
    );
    const text = selfheal("demo", "--scenario", "streams");
    expect(text.status).toBe(0);
    // Without selfheal, the early-ended streams reach users as whole answers.
    expect(text.stdout).toMatch(/truncated answers delivered as whole +0 +[1-9]\d*\n/);
    expect(text.stdout).toMatch(/diagnoses +.*STREAM_STALLED \d+/);
    expect(selfheal("demo", "--list").stdout).toMatch(/^streams +The answers stream/m);
    expect(selfheal("demo", "--help").stdout).toMatch(/--scenario NAME +one of: .*\bstreams\b/);
  });

  it.each(Object.keys(SCENARIOS))(
    "%s: the timeline tells incidents and recoveries; the summary sets each figure beside the run without selfheal",
    (name) => {
      const out = selfheal("demo", "--scenario", name);
      expect(out.status).toBe(0);
      const lines = out.stdout.split("\n");
      const timeline = lines.filter((l) => /^ {2}\[\d\d:\d\d\] /.test(l));
      expect(timeline.find((l) => /\] incident +\w+: /.test(l))).toBeDefined();
      expect(timeline.find((l) => /\] (recovered|failed) +/.test(l))).toBeDefined();
      expect(out.stdout).toMatch(/^ {51}with selfheal +without selfheal$/m);
      // Every figure the run without selfheal has: two columns.
      for (const figure of [
        "tasks",
        "incidents \\(calls whose first request failed\\)",
        "auto-recovery rate",
        "MTTR \\(first failed request to answer\\)",
        "user-visible failures",
        "pages \\(failed calls, one per kind per 10 min\\)",
        "spend \\(every request\\)",
        "recovery spend \\(requests after a call's first\\)",
        "wasted retries",
        "double charges",
      ])
        expect(out.stdout).toMatch(new RegExp(`^  ${figure} +\\S+( \\S+)? {3,}\\S+`, "m"));
      expect(out.stdout).toMatch(
        /MTTR \(first failed request to answer\) +\d+\.\d s +none recovered/,
      );
      expect(out.stdout).toMatch(/^ {4}without selfheal +openai \d+/m);
      expect(out.stdout).toMatch(
        /^Without selfheal: \d+ user-visible failures? and \d+ pages?\. With selfheal: \d+ user-visible failures? and \d+ pages?/m,
      );
    },
  );

  it("provider-outage: 170 user-visible failures and 5 pages without selfheal, where selfheal has 0 and 0", () => {
    const out = selfheal("demo");
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^ {2}user-visible failures +0 +170$/m);
    expect(out.stdout).toMatch(/^ {2}pages \(failed calls, one per kind per 10 min\) +0 +5$/m);
    expect(out.stdout).toContain(
      "Without selfheal: 170 user-visible failures and 5 pages. With selfheal: 0 user-visible failures and 0 pages.",
    );
    // The progress line is for a terminal only: a pipe gets none.
    expect(out.stdout).not.toContain("virtual time");
  });

  it("blip and single-route-500: the one incident and its recovery are in the timeline", () => {
    const blip = selfheal("demo", "--scenario", "blip");
    expect(blip.stdout).toMatch(/^ {2}\[10:00\] incident +complete: openai failed \(5xx\)$/m);
    expect(blip.stdout).toMatch(
      /^ {2}\[10:0\d\] recovered +complete answered by anthropic \d+\.\d s after the failure/m,
    );
    const single = selfheal("demo", "--scenario", "single-route-500");
    expect(single.stdout).toMatch(/^ {2}\[10:00\] incident +charge: payments failed \(5xx\)$/m);
    expect(single.stdout).toMatch(
      /^ {2}\[10:0\d\] recovered +charge answered by payments \d+\.\d s after the failure \(2 requests\)$/m,
    );
  });

  it("--json: one key style (camelCase) throughout, with the run without selfheal beside", () => {
    for (const scenario of ["provider-outage", "streams", "long-runs"]) {
      const out = selfheal("demo", "--scenario", scenario, "--json");
      expect(out.status).toBe(0);
      const r = JSON.parse(out.stdout) as Record<string, unknown>;
      const keys = [...jsonKeys(r)];
      expect(keys.filter((k) => !/^[a-z][a-zA-Z0-9]*$/.test(k))).toEqual([]);
      expect(keys).toEqual(expect.arrayContaining(["withoutSelfheal", "timeline", "atMs"]));
      expect(r.withoutSelfheal).not.toHaveProperty("timeline");
    }
    const r = JSON.parse(selfheal("demo", "--json").stdout) as Record<string, unknown>;
    expect(r.withoutSelfheal).toMatchObject({
      scenario: "provider-outage",
      policy: "no recovery",
      userVisibleFailures: 170,
      pages: 5,
      mttrSeconds: null,
    });
    const night = JSON.parse(selfheal("demo", "--scenario", "long-runs", "--json").stdout) as {
      finished: number;
      withoutSelfheal: Record<string, unknown>;
    };
    expect(night.withoutSelfheal).toMatchObject({ supervised: false, finished: 24, pages: 0 });
    expect(night.finished).toBe(39);
  });

  it("--scenario long-runs: times with hours, each run named once, the night without the watchdog beside", () => {
    const out = selfheal("demo", "--scenario", "long-runs");
    expect(out.status).toBe(0);
    const timeline = out.stdout.split("\n").filter((l) => l.startsWith("  ["));
    expect(timeline.length).toBeGreaterThan(20);
    for (const line of timeline) expect(line).toMatch(/^ {2}\[\d{1,2}:[0-5]\d:[0-5]\d\] \w/);
    // Recovered at the end of its 60 s proof from the rotation (8:44:25), not at its first step.
    expect(out.stdout).toMatch(/^ {2}\[8:45:25\] result +night-34 rotation recovered$/m);
    expect(out.stdout).not.toMatch(/\[\d{3,}:/); // no [524:55]
    expect(out.stdout).not.toMatch(/(night-\d+) \1/);
    expect(out.stdout).toMatch(/^ {2}\[3:52:00\] page +night-40 was rotated$/m);
    expect(out.stdout).toMatch(/^ {2}finished by morning +39 +24$/m);
    expect(out.stdout).toContain(
      "Without selfheal: 16 of 40 runs unfinished by morning, nobody told. With selfheal: 1 of 40 runs unfinished, 5 pages.",
    );
  });

  it.each([
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" },
      [],
      "OTEL_EXPORTER_OTLP_ENDPOINT is set: exporting",
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:9/v1/traces" },
      [],
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: exporting",
    ],
    [{}, ["--metrics-port", "9"], "--metrics-port"],
  ])(
    "without the OpenTelemetry SDK installed, %j %j: one line naming the packages to install, exit 2",
    (env, args, asker) => {
      const out = selfhealWith(WITHOUT_SDK, env, "demo", ...args);
      expect(out.status).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr).toBe(
        `selfheal: ${asker} needs the OpenTelemetry SDK (optional peers of selfheal), not installed; ` +
          `install it with: npm install ${OTEL_PEERS.join(" ")}\n`,
      );
      expect(OTEL_PEERS).toContain("@opentelemetry/sdk-trace-node");
    },
  );

  it("without the OpenTelemetry SDK and no endpoint, the demo runs as ever", () => {
    const out = selfhealWith(WITHOUT_SDK, {}, "demo", "--scenario", "blip", "--json");
    expect(out.status).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ scenario: "blip" });
  });

  it("prints a timeline and a summary", () => {
    const out = selfheal("demo", "--scenario", "silent-failure");
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^silent-failure: /);
    expect(out.stdout).toMatch(/auto-recovery rate\s+\d/);
  });

  it.each([
    [["demo", "--sceanrio", "x"], /^selfheal: Unknown option '--sceanrio'/],
    [
      ["demo", "--scenario", "meteor-strike"],
      /^selfheal: unknown scenario "meteor-strike" \(known: /,
    ],
    [["demo", "--speed", "fast"], /^selfheal: --speed must be a positive number/],
    [["launch"], /^selfheal: unknown command "launch"/],
    [["__proto__"], /^selfheal: unknown command "__proto__"/],
    [["toString"], /^selfheal: unknown command "toString"/],
    [["demo", "--scenario", "__proto__"], /^selfheal: unknown scenario "__proto__"/],
    [["demo", "--scenario", "constructor"], /^selfheal: unknown scenario "constructor"/],
    [["demo", "--scenario", "toString"], /^selfheal: unknown scenario "toString"/],
    [["demo", "--speed", "1e-9"], /^selfheal: --speed must be 0\.1 to 1000000, got "1e-9"/],
    [["demo", "--speed", "1e9"], /^selfheal: --speed must be 0\.1 to 1000000/],
    [["demo", "--metrics-port", "70000"], /^selfheal: --metrics-port must be a port number/],
    [["demo", "--metrics-port", "0"], /^selfheal: --metrics-port must be a port number/],
  ])("%j exits 2 with one line", (args, message) => {
    const out = selfheal(...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
    expect(out.stderr).not.toContain("Warning");
  });

  it("--version prints the package version", async () => {
    const { version } = JSON.parse(await readFile("package.json", "utf8")) as { version: string };
    const out = selfheal("--version");
    expect(out.status).toBe(0);
    expect(out.stdout).toBe(`${version}\n`);
  });

  it("no command prints the usage on stderr and exits 2", () => {
    const out = selfheal();
    expect(out.status).toBe(2);
    expect(out.stdout).toBe("");
    expect(out.stderr).toContain("Usage: selfheal <command>");
  });

  it("a closed stdout (demo | head -1) ends it quietly, exit 0", async () => {
    const child = spawn(process.execPath, ["dist/cli/main.js", "demo"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    // Read the first line, then close the pipe, as `head -1` does.
    await new Promise<void>((resolve) => {
      child.stdout.once("data", () => {
        resolve();
      });
    });
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });

  it("--help on the command and on demo", () => {
    expect(selfheal("--help").stdout).toContain("Usage: selfheal <command>");
    expect(selfheal("demo", "--help").stdout).toContain("--scenario NAME");
  });
});
