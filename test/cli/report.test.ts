import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Locator, Page } from "playwright-core";
import { createSelfHealing } from "../../src/index.js";
import { LONG_RUNS, runLongRuns } from "../../src/sim/long-runs.js";
import { runScenario } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import { CSP, SECTION_IDS } from "../../src/report/render-html.js";
import { FailureInjector, VirtualClock } from "../../src/testing/index.js";
import { line } from "./event-lines.js";

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

/** Opens the page in headless Chromium, no network, and hands the tab to `look`. */
async function inChromium(html: string, look: (tab: Page) => Promise<void>): Promise<void> {
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
    const tab = await browser.newPage({ viewport: { width: 1000, height: 800 } });
    await tab.goto(`file://${html}`);
    await look(tab);
  } finally {
    await browser.close();
  }
}

/** The boxes of what `locator` finds, drawn ones only. */
async function boxes(locator: Locator): Promise<{ width: number; height: number }[]> {
  const found: { width: number; height: number }[] = [];
  for (let i = 0; i < (await locator.count()); i++) {
    const box = await locator.nth(i).boundingBox();
    if (box) found.push(box);
  }
  return found;
}

const selfheal = (...args: string[]) =>
  spawnSync(process.execPath, ["dist/cli/main.js", ...args], { encoding: "utf8", timeout: 30_000 });

describe("selfheal report (built CLI)", () => {
  it("prints the weekly review: patterns, UNKNOWN per tool with samples, strategies, MTTR, cost", () => {
    const out = selfheal("report", log);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain("Recovery review: 5 incidents");
    expect(out.stdout).toContain("(1 lines were not recovery events and were left out)");
    expect(out.stdout).toMatch(/RATE_LIMIT\s+3\s+60\.0%/);
    // Per tool: incidents, auto-recovered, MTTR p50 and p90, spend, UNKNOWN share.
    expect(out.stdout).toMatch(/^lookup\s+2\s+0\.0%\s+n\/a\s+n\/a\s+\$\d\.\d{4}\s+100\.0%$/m);
    expect(out.stdout).toMatch(/^search\s+3\s+100\.0%\s+5\.\d s\s+5\.\d s\s+\$\d\.\d{4}\s+0\.0%$/m);
    expect(out.stdout).toContain("flux capacitor <misaligned> for [REDACTED_EMAIL]");
    // Each 429 (no Retry-After) waits out the route's 5 s cooldown, then one retry answers;
    // the UNKNOWN lookups get their one retry too, which fails.
    expect(out.stdout).toMatch(/retry_once\s+5\s+3\s+60\.0%/);
    expect(out.stdout).toMatch(/^recovered\s+3\s+60\.0%/m);
    expect(out.stdout).toMatch(/^failed\s+2\s+40\.0%/m);
    // After the engine's own lines (its settings, its call rollups) and the five events.
    expect(out.stdout).toMatch(/line \d+: not JSON/);
    expect(out.stdout).toMatch(/MTTR \(recovered calls, 3\): p50 5\.\d s/);
  });

  it.each([
    [["report"], /^selfheal: report needs the event log/],
    [
      ["report", "/nonexistent/log.jsonl"],
      /^selfheal: cannot read \/nonexistent\/log\.jsonl: no such file \(ENOENT\)/,
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
      expect(page).toContain(`<meta http-equiv="Content-Security-Policy" content="${CSP}">`);
      await inChromium(html, async (tab) => {
        // The CSP lets the page's own styles apply: its <style> and its style attributes.
        // (Expressions as strings: this suite's TypeScript has no DOM types.)
        expect(await tab.evaluate("getComputedStyle(document.body).maxWidth")).toBe("960px");
        const colored = tab.locator("span[style]").first();
        expect(await colored.evaluate("(e) => getComputedStyle(e).color")).not.toBe(
          await tab.evaluate("getComputedStyle(document.body).color"),
        );
        // Incidents by pattern, the recovery rate and the spend per incident, the MTTR histogram.
        const charts = tab.locator("svg.chart");
        expect(await charts.count()).toBe(4);
        const bars = tab.locator("#over-time svg.chart rect");
        expect(await bars.count()).toBeGreaterThan(0);
        for (const box of await boxes(bars)) {
          expect(box.width).toBeGreaterThan(0);
          expect(box.height).toBeGreaterThan(0);
        }
        await tab.screenshot({ path: join(dir, "review.png"), fullPage: true });
      });
    },
    60_000,
  );
});

/**
 * The simulator's days in one log, as `scripts/review-week.ts` plays them: a rate-limit storm the
 * week before, wording drift (UNKNOWN texts: rules to suggest) and a bad-request storm (incidents
 * no recovery answers) this week, then the long runs' night (the watchdog's lines).
 */
describe.skipIf(!haveChromium)(
  "selfheal report --html of the simulator's week, in Chromium",
  () => {
    const DAY = 86_400_000;
    const MONDAY = Date.UTC(2026, 10, 23, 9);
    let html: string;
    let stdout: string;

    beforeAll(async () => {
      const week = join(dir, "week.jsonl");
      const days: [string, number][] = [
        ["rate-limit-storm", MONDAY - 2 * DAY],
        ["wording-drift", MONDAY],
        ["bad-request-storm", MONDAY + DAY],
      ];
      for (const [name, startMs] of days) {
        const scenario = SCENARIOS[name];
        if (!scenario) throw new Error(`no scenario ${name}`);
        await runScenario(scenario, { eventLog: week, startMs });
      }
      await runLongRuns(LONG_RUNS, { eventLog: week, startMs: MONDAY + 2 * DAY + 11 * 3_600_000 });
      html = join(dir, "week.html");
      const out = selfheal(
        "report",
        week,
        "--since",
        "2026-11-23",
        "--until",
        "2026-11-27",
        "--compare-previous",
        "--tz",
        "Europe/Paris",
        "--html",
        html,
      );
      expect(out.stderr).toBe("");
      expect(out.status).toBe(0);
      stdout = out.stdout;
    }, 120_000);

    it("the terminal compares the week with the one before, in the zone asked for", () => {
      expect(stdout).toMatch(
        /^Recovery review: \d+ incidents in 2026-11-23 01:00 GMT\+1 to 2026-11-27 01:00 GMT\+1$/m,
      );
      expect(stdout).toContain(
        "Headline, against the previous period (2026-11-19 01:00 GMT+1 to 2026-11-23 01:00 GMT+1)",
      );
      expect(stdout).toMatch(/^incidents\s+\d+\s+\d+\s+[+-]\d+ \([+-][\d.]+%\)$/m);
      expect(stdout).toMatch(/lines dated outside the period were left out/);
      expect(stdout).not.toContain("were not recovery events");
    });

    it("every section is on the page, visible and filled: charts drawn, tables with rows", async () => {
      await inChromium(html, async (tab) => {
        expect(await tab.locator("p.sub").textContent()).toContain("Times in Europe/Paris.");
        expect(await tab.locator("p.sub").textContent()).toContain("Compared with 2026-11-19");
        for (const id of SECTION_IDS) {
          const section = tab.locator(`section#${id}`);
          expect(await section.count(), id).toBe(1);
          expect(await section.isVisible(), id).toBe(true);
          expect((await section.innerText()).trim().length, id).toBeGreaterThan(20);
          const box = await section.boundingBox();
          expect(box?.height ?? 0, id).toBeGreaterThan(40);
        }
        // Each headline card says what the figure was the week before.
        expect(await tab.locator("#headline .card").count()).toBe(8);
        expect(await tab.locator("#headline .card .was").count()).toBe(8);
        // Bars of incidents, stacked by pattern: drawn, some tall.
        const heights = (await boxes(tab.locator("#over-time svg rect"))).map((b) => b.height);
        expect(heights.length).toBeGreaterThan(1);
        expect(Math.max(...heights)).toBeGreaterThan(10);
        // Two lines over time, each with its dots.
        const paths = tab.locator("#recovery-over-time svg path");
        expect(await paths.count()).toBe(2);
        for (let i = 0; i < 2; i++) {
          expect(await paths.nth(i).getAttribute("d")).toMatch(/^M[\d.]+ [\d.]+/);
          expect((await paths.nth(i).boundingBox())?.width).toBeGreaterThan(0);
        }
        expect(await tab.locator("#recovery-over-time svg circle").count()).toBeGreaterThan(2);
        // The MTTR histogram: ten bins, some filled, the percentiles marked.
        const bins = await boxes(tab.locator("#mttr svg rect"));
        expect(bins).toHaveLength(10);
        expect(bins.some((b) => b.height > 10)).toBe(true);
        expect(await tab.locator("#mttr svg line.mark").count()).toBe(3);
        // Tables: a row at least each, the comparison column where it belongs.
        for (const table of [
          "#agents table",
          "#tools table",
          "#unrecovered table.unrecovered",
          "#outcomes table.outcomes",
          "#outcomes table.strategies",
          "#watchdog table.watchdog",
          "#watchdog table.runs",
          "#suggested-rules table.rules",
        ]) {
          const rows = tab.locator(`${table} tbody tr`);
          expect(await rows.count(), table).toBeGreaterThan(0);
          expect(await rows.first().isVisible(), table).toBe(true);
        }
        expect(await tab.locator("#agents th").last().textContent()).toBe("incidents change");
        // Times in the zone: the unrecovered list's and the watchdog's.
        expect(await tab.locator("#unrecovered tbody tr td").first().textContent()).toMatch(
          /^2026-11-2\d \d\d:\d\d GMT\+1$/,
        );
        expect(await tab.locator("#watchdog table.runs tbody tr td").first().textContent()).toMatch(
          /^2026-11-2\d \d\d:\d\d GMT\+1$/,
        );
        await tab.screenshot({ path: join(dir, "week.png"), fullPage: true });
      });
    }, 60_000);
  },
);

/** Each run: exit code 2 or 0, never a stack trace. */
const noStack = (out: ReturnType<typeof selfheal>) => {
  expect(out.stderr).not.toMatch(/\n\s+at /);
  expect(out.stderr).not.toContain("Error:");
};

describe("selfheal report on bad input (built CLI)", () => {
  it.each([
    ['"steps":[null]', { steps: [null] }, "line 2: steps[0] is not a step"],
    ['"costUsd":"free"', { costUsd: "free" }, "line 2: costUsd is not a number"],
    ['"at":-1e20', { at: -1e20 }, "line 2: at is not a time"],
    ["a non-string error", { error: { message: "x" } }, "line 2: error is not a string"],
  ])("a line with %s is skipped and named, with --html too", async (_name, over, named) => {
    const file = join(dir, "bad.jsonl");
    await writeFile(file, `${line()}\n${line(over)}\n${line({ outcome: "recovered" })}\n`);
    const html = join(dir, "bad.html");
    const out = selfheal("report", file, "--html", html);
    noStack(out);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain("Recovery review: 2 incidents");
    expect(out.stdout).toContain("(1 lines were not recovery events and were left out)");
    expect(out.stdout).toContain(named);
    expect(await readFile(html, "utf8")).toContain(named);
  });

  it("percentiles are nearest-rank: 1..100 s gives p50 50 s", async () => {
    const file = join(dir, "ranks.jsonl");
    await writeFile(
      file,
      Array.from({ length: 100 }, (_, i) =>
        line({ outcome: "recovered", strategy: "retry_once", durationMs: (i + 1) * 1000 }),
      ).join("\n"),
    );
    const out = selfheal("report", file);
    expect(out.stdout).toContain("MTTR (recovered calls, 100): p50 50.0 s, p90 90.0 s, p99 99.0 s");
  });

  it("an outcome named constructor is just a name", async () => {
    const file = join(dir, "ctor.jsonl");
    await writeFile(
      file,
      `${line({ outcome: "constructor" })}\n${line({ outcome: "toString" })}\n`,
    );
    const out = selfheal("report", file);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^constructor\s+1\s+50\.0%/m);
    expect(out.stdout).not.toContain("function");
    expect(out.stdout).not.toContain("[native code]");
  });

  it("control characters in a bad line's content never reach the terminal", async () => {
    const file = join(dir, "ctl.jsonl");
    await writeFile(file, `${line({ tool: "t\u001b[2J" })}\n\u001b[31mjunk\n`);
    const out = selfheal("report", file);
    expect(out.stdout).not.toContain("\u001b");
    expect(out.stdout).toContain("line 2: not JSON");
  });

  it("refuses to write the HTML over its input: exit 2, one line, the log untouched", async () => {
    const file = join(dir, "keep.jsonl");
    const content = `${line()}\n`;
    await writeFile(file, content);
    const link = join(dir, "keep-link.html");
    await symlink(file, link);
    for (const target of [file, link, join(dir, ".", "keep.jsonl")]) {
      const out = selfheal("report", file, "--html", target);
      noStack(out);
      expect(out.status).toBe(2);
      expect(out.stderr).toMatch(/^selfheal: refusing to write the HTML over the input file/);
      expect(out.stderr.trim().split("\n")).toHaveLength(1);
      expect(await readFile(file, "utf8")).toBe(content);
    }
  });

  it.each([
    [
      "a missing folder for --html",
      () => ["--html", join(dir, "no", "such", "dir", "r.html")],
      /^selfheal: cannot write .*folder .*no such file \(ENOENT\)/,
    ],
    [
      "a folder as --html",
      () => ["--html", dir],
      /^selfheal: cannot write .*is a folder \(EISDIR\)/,
    ],
  ])("%s exits 2 with one line", async (_name, extra, message) => {
    const file = join(dir, "ok.jsonl");
    await writeFile(file, `${line()}\n`);
    const out = selfheal("report", file, ...extra());
    noStack(out);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("a folder as the log exits 2 with one line", () => {
    const out = selfheal("report", dir);
    noStack(out);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/^selfheal: cannot read .*: a directory, not a regular file\n$/);
  });

  it.skipIf(process.getuid?.() === 0)("an unreadable log exits 2 with one line", async () => {
    const file = join(dir, "secret.jsonl");
    await writeFile(file, `${line()}\n`);
    await chmod(file, 0o000);
    const out = selfheal("report", file);
    noStack(out);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/^selfheal: cannot read .*: permission denied \(EACCES\)\n$/);
  });

  it.each([
    ["an empty file", Buffer.alloc(0), /no recovery events in .*empty\.bin \(the file is empty\)/],
    [
      "a binary file",
      Buffer.from([0, 1, 2, 255, 254, 10, 0x1b, 0x5b, 0x32, 0x4a, 0, 0, 10, 7, 7]),
      /no recovery events in .*binary\.bin \(3 lines, none a recovery event or rollup; line 1: not JSON\)/,
    ],
  ])("%s: says there are no events, exit 2", async (name, bytes, message) => {
    const file = join(dir, name === "an empty file" ? "empty.bin" : "binary.bin");
    await writeFile(file, bytes);
    const out = selfheal("report", file);
    noStack(out);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stderr).not.toContain("\u001b");
    expect(out.stdout).toBe("");
  });

  it("a line longer than 1 MiB is skipped without being held", async () => {
    const file = join(dir, "long.jsonl");
    await writeFile(
      file,
      `${"x".repeat(3 * 1024 * 1024)}\n${line()}\n${"y".repeat(2 * 1024 * 1024)}`,
    );
    const out = selfheal("report", file);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain("Recovery review: 1 incidents");
    expect(out.stdout).toContain("line 1: longer than 1048576 bytes");
    expect(out.stdout).toContain("(2 lines were not recovery events");
  });

  it("reads the rotated set, oldest first; several files are read as given", async () => {
    const rotated = join(dir, "rot");
    await mkdir(rotated);
    const base = join(rotated, "log.jsonl");
    await writeFile(`${base}.2`, `${line({ at: Date.UTC(2026, 0, 1) })}\n`);
    await writeFile(`${base}.1`, `${line({ at: Date.UTC(2026, 0, 2) })}\nnope\n`);
    await writeFile(base, `${line({ at: Date.UTC(2026, 0, 3) })}\n`);
    const out = selfheal("report", base);
    expect(out.status).toBe(0);
    expect(out.stdout).toContain(
      "Recovery review: 3 incidents from 2026-01-01 00:00 UTC to 2026-01-03 00:00 UTC",
    );
    expect(out.stdout).toContain(`${base}.1 line 2: not JSON`);
    const two = selfheal("report", base, `${base}.2`);
    expect(two.stdout).toContain("Recovery review: 2 incidents");
  });
});

describe("selfheal demo --event-log, then report (built CLI)", () => {
  it("the demo's recovery events make a review", () => {
    const file = join(dir, "demo.jsonl");
    const before = Date.now();
    const demo = selfheal("demo", "--event-log", file);
    expect(demo.status).toBe(0);
    expect(demo.stdout).toContain(`recovery events appended to ${file}`);
    const out = selfheal("report", file, "--html", join(dir, "demo.html"));
    expect(out.status).toBe(0);
    // The simulated hour ends as the demo runs: its events are dated in the hour before.
    const [, from, to] =
      /^Recovery review: \d+ incidents from (\S+ \S+) UTC to (\S+ \S+) UTC/.exec(out.stdout) ?? [];
    const utc = (shown = "") => Date.parse(`${shown.replace(" ", "T")}Z`);
    expect(utc(from)).toBeGreaterThan(before - 2 * 3_600_000);
    expect(utc(to)).toBeLessThanOrEqual(Date.now());
    expect(out.stdout).not.toContain("were not recovery events");
    expect(out.stdout).toMatch(/^recovered\s+\d+/m);
  });

  it("an --event-log it cannot write exits 2 with one line, before the run", () => {
    const out = selfheal("demo", "--event-log", join(dir, "missing", "e.jsonl"));
    noStack(out);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/^selfheal: --event-log .*folder .* does not exist\n$/);
    expect(out.stdout).toBe("");
  });
});
