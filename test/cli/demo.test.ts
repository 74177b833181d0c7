import { spawn, spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";

/** The built command, as `npx selfheal` runs it. */
const selfheal = (...args: string[]) =>
  spawnSync(process.execPath, ["dist/cli/main.js", ...args], { encoding: "utf8", timeout: 30_000 });

describe("selfheal demo (built CLI)", () => {
  it("--json prints one object with the run's figures, in well under 20 s", () => {
    const started = performance.now();
    const out = selfheal("demo", "--json");
    expect(out.status).toBe(0);
    expect(performance.now() - started).toBeLessThan(20_000);
    const r = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(r).toMatchObject({ scenario: "provider-outage", pages: 0, user_visible_failures: 0 });
    for (const key of [
      "mttr_seconds",
      "auto_recovery_rate",
      "recovery_cost_usd",
      "wasted_retries",
      "false_trips",
      "calls_per_provider",
    ]) {
      expect(r).toHaveProperty(key);
    }
    expect(r.auto_recovery_rate).toBeGreaterThanOrEqual(0.9);
  });

  it("--scenario long-runs: a night of supervised runs, each tier's recoveries and the pages sent", () => {
    const json = selfheal("demo", "--scenario", "long-runs", "--json");
    expect(json.status).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      scenario: "long-runs",
      runs: 40,
      recovered_by_tier: { nudge: 6, context_reset: 6, rotation: 3 },
      gave_up: 1,
      pages: 5,
    });
    const text = selfheal("demo", "--scenario", "long-runs");
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/\] result +night-\d+ nudge recovered/);
    expect(text.stdout).toMatch(/\] page +night-\d+ supervision of night-\d+ gave up/);
    expect(text.stdout).toMatch(/recovered, by tier +nudge 6, context_reset 6, rotation 3/);
    expect(text.stdout).toMatch(/pages sent \(throttled per run\) +5/);
  });

  it("--scenario streams: cut, stalled and late streams are answered whole from the secondary", () => {
    const out = selfheal("demo", "--scenario", "streams", "--json");
    expect(out.status).toBe(0);
    const r = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(r).toMatchObject({
      scenario: "streams",
      user_visible_failures: 0,
      truncated_answers: 0,
      auto_recovery_rate: 1,
      pages: 0,
    });
    expect(Object.keys(r.diagnoses as object)).toEqual(
      expect.arrayContaining(["STREAM_FIRST_TOKEN_TIMEOUT", "STREAM_STALLED", "STREAM_TRUNCATED"]),
    );
    const text = selfheal("demo", "--scenario", "streams");
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/truncated answers delivered as whole +0\n/);
    expect(text.stdout).toMatch(/diagnoses +.*STREAM_STALLED \d+/);
    expect(selfheal("demo", "--list").stdout).toMatch(/^streams +The answers stream/m);
    expect(selfheal("demo", "--help").stdout).toMatch(/--scenario NAME +one of: .*\bstreams\b/);
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
