import { spawnSync } from "node:child_process";
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
  ])("%j exits 2 with one line", (args, message) => {
    const out = selfheal(...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("--help on the command and on demo", () => {
    expect(selfheal("--help").stdout).toContain("Usage: selfheal <command>");
    expect(selfheal("demo", "--help").stdout).toContain("--scenario NAME");
  });
});
