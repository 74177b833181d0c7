import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSelfHealing } from "../../src/index.js";
import { FailureInjector, VirtualClock } from "../../src/testing/index.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI === "true")
  throw new Error(`CI needs Chromium at ${CHROMIUM} (apt-get install chromium)`);
if (!haveChromium)
  console.warn(
    `[skipped] report HTML rendering: no Chromium at ${CHROMIUM} (apt-get install chromium)`,
  );

let dir: string;
let log: string;

/** A real event log: recovered rate limits, UNKNOWN failures, one malformed line. */
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "selfheal-report-"));
  log = join(dir, "recoveries.jsonl");
  const clock = new VirtualClock();
  const sh = createSelfHealing({
    agent: "bot",
    clock,
    logger: { warn: () => undefined },
    recovery: { eventLog: log, random: () => 0 },
  });
  const injector = new FailureInjector({ clock });
  const search = sh.tool(
    "search",
    { readOnly: true },
    injector.wrap(() => Promise.resolve("ok")),
  );
  for (let i = 0; i < 3; i++) {
    injector.inject("rate_limit", { first: 1 }); // each call: one 429, then an answer
    await clock.run(search(undefined), { stepMs: 500 });
  }
  const lookup = sh.tool("lookup", { readOnly: true }, () =>
    Promise.reject(new Error("flux capacitor <misaligned> for ops@example.com")),
  );
  for (let i = 0; i < 2; i++) {
    await clock.run(
      lookup(undefined).catch(() => undefined),
      { stepMs: 500 },
    );
  }
  await sh.close();
  await writeFile(log, `${await readFile(log, "utf8")}not json at all\n`);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const selfheal = (...args: string[]) =>
  spawnSync(process.execPath, ["dist/cli/main.js", ...args], { encoding: "utf8", timeout: 30_000 });

describe("selfheal report (built CLI)", () => {
  it("prints the weekly review: patterns, UNKNOWN per tool with samples, strategies, MTTR, cost", () => {
    const out = selfheal("report", log);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain("Recovery review: 5 incidents");
    expect(out.stdout).toContain("(1 lines were not recovery events and were left out)");
    expect(out.stdout).toMatch(/RATE_LIMIT\s+3\s+60\.0%/);
    expect(out.stdout).toMatch(/lookup\s+2\s+2\s+100\.0%/);
    expect(out.stdout).toContain("flux capacitor <misaligned> for [REDACTED_EMAIL]");
    // Each 429 (no Retry-After) waits out the route's 5 s cooldown, then one retry answers;
    // the UNKNOWN lookups get their one retry too, which fails.
    expect(out.stdout).toMatch(/retry_once\s+5\s+3\s+60\.0%/);
    expect(out.stdout).toContain("Outcomes: recovered 3, failed 2");
    expect(out.stdout).toMatch(/MTTR \(recovered calls, 3\): p50 5\.\d s/);
  });

  it.each([
    [["report"], /^selfheal: report needs the event log/],
    [
      ["report", "/nonexistent/log.jsonl"],
      /^selfheal: cannot read \/nonexistent\/log\.jsonl: ENOENT/,
    ],
    [["report", "a.jsonl", "--pdf", "x"], /^selfheal: Unknown option '--pdf'/],
  ])("%j exits 2 with one line", (args, message) => {
    const out = selfheal(...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
  });

  it.skipIf(!haveChromium)(
    "--html writes a self-contained page whose charts Chromium draws",
    async () => {
      const html = join(dir, "review.html");
      expect(selfheal("report", log, "--html", html).status).toBe(0);
      const page = await readFile(html, "utf8");
      expect(page).not.toMatch(/<script|<link|https?:\/\//); // nothing to fetch: no CDN, no script
      expect(page).toContain("flux capacitor &lt;misaligned&gt;");
      const { chromium } = await import("playwright-core");
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      });
      try {
        const tab = await browser.newPage();
        await tab.goto(`file://${html}`);
        const charts = tab.locator("svg.chart");
        expect(await charts.count()).toBe(3);
        for (let c = 0; c < 3; c++) {
          const bars = charts.nth(c).locator("rect.bar");
          const n = await bars.count();
          expect(n).toBeGreaterThan(0);
          for (let b = 0; b < n; b++)
            expect((await bars.nth(b).boundingBox())?.width).toBeGreaterThan(0);
        }
        await tab.screenshot({ path: join(dir, "review.png") });
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
