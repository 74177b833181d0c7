/**
 * `selfheal demo`, in process: every flag error with its one line, --list, and short runs (blip,
 * streams, the long-runs night) as JSON and as text, set against the same runs made here (the
 * figures are the same whenever a run is made; the timeline's times are not), the progress line on
 * a terminal, --speed's pacing on fake timers, the event log and the telemetry endpoints shown.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  progressText,
  scenarioSummary,
  longRunsSummary,
  figuresOf,
} from "../../src/cli/demo-text.js";
import { demo } from "../../src/cli/demo.js";
import { LONG_RUNS, runLongRuns, type LongRunsResult } from "../../src/sim/long-runs.js";
import { NO_RECOVERY, runLengthMs, runScenario, type SimResult } from "../../src/sim/run.js";
import { SCENARIOS } from "../../src/sim/scenarios.js";
import { freePort } from "../helpers/binaries.js";
import { startReceiver } from "../helpers/otlp.js";
import { captured, cli, expectUsageOf, tempDir } from "./in-process.js";

const dir = tempDir("demo-inprocess");
const scenario = (name: string) => SCENARIOS[name] ?? expect.unreachable();
const KNOWN = [...Object.keys(SCENARIOS), LONG_RUNS.name].join(", ");

/** No OTLP endpoint, whatever the environment running the tests has (empty is unset). */
const NO_ENDPOINT = {
  OTEL_EXPORTER_OTLP_ENDPOINT: "",
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "",
};
beforeAll(() => {
  for (const [name, value] of Object.entries(NO_ENDPOINT)) vi.stubEnv(name, value);
});
afterAll(() => {
  vi.unstubAllEnvs();
});

/** A usage error of demo (see expectUsageOf). */
const expectUsage = (args: string[], message: string | RegExp) =>
  expectUsageOf("demo", args, message);

/** `value` as it comes back from JSON (undefined fields dropped). */
const viaJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe("selfheal demo (in process): flag errors", () => {
  it("an unknown flag, an argument", async () => {
    await expectUsage(["--sceanrio", "x"], /^selfheal: Unknown option '--sceanrio'[^\n]*\n$/);
    await expectUsage(["blip"], /^selfheal: Unexpected argument 'blip'[^\n]*\n$/);
  });

  it.each(["meteor-strike", "__proto__", "constructor", "toString", "", "Blip"])(
    "--scenario %j: unknown, the known ones named",
    async (name) => {
      await expectUsage(["--scenario", name], `unknown scenario "${name}" (known: ${KNOWN})`);
    },
  );

  it.each(["fast", "0", "-1", "", "NaN", "Infinity", "-Infinity"])(
    "--speed %j: a positive number",
    async (speed) => {
      await expectUsage([`--speed=${speed}`], `--speed must be a positive number, got "${speed}"`);
    },
  );

  it.each(["1e-9", "0.0999", "1000000.5", "1e9"])("--speed %j: out of bounds", async (speed) => {
    await expectUsage([`--speed=${speed}`], `--speed must be 0.1 to 1000000, got "${speed}"`);
  });

  it.each(["0.1", "1000000"])(
    "--speed %j is taken (the next flag's error shows)",
    async (speed) => {
      await expectUsage(
        ["--speed", speed, "--metrics-port", "0"],
        '--metrics-port must be a port number, got "0"',
      );
    },
  );

  it.each(["0", "65536", "1.5", "port", "", "-1"])("--metrics-port %j: no port", async (port) => {
    await expectUsage(
      [`--metrics-port=${port}`],
      `--metrics-port must be a port number, got "${port}"`,
    );
  });

  it.each(["1", "65535"])(
    "--metrics-port %j is taken (the next flag's error shows)",
    async (port) => {
      await expectUsage(["--metrics-port", port, "--event-log", ""], "--event-log : empty path");
    },
  );

  it("--event-log: empty, or in a folder that does not exist", async () => {
    await expectUsage(["--event-log", "  "], "--event-log   : empty path");
    const file = join(dir, "missing", "e.jsonl");
    await expectUsage(
      ["--event-log", file],
      `--event-log ${file}: folder ${join(dir, "missing")} does not exist`,
    );
  });
});

describe("selfheal demo (in process): --list", () => {
  it("each scenario, long-runs last: its name (padded) and what it plays", async () => {
    const out = await cli("demo", "--list");
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toBe(
      [...Object.values(SCENARIOS), LONG_RUNS]
        .map((s) => `${s.name.padEnd(20)} ${s.description}\n`)
        .join(""),
    );
    expect(out.stdout.split("\n")[0]).toMatch(/^provider-outage {6}\S/);
  });
});

/** A scenario's run with selfheal and without it, made here. */
async function both(name: string): Promise<[SimResult, SimResult]> {
  const s = scenario(name);
  return [await runScenario(s), await runScenario(s, { policy: NO_RECOVERY })];
}

describe("selfheal demo (in process): a scenario", () => {
  it("--json: one line, the run's figures, those without selfheal beside, the timeline", async () => {
    const [withSelfheal, without] = await both("blip");
    const out = await cli("demo", "--scenario", "blip", "--json");
    expect(out.exitCode).toBe(0);
    expect(out.stderr).toBe("");
    expect(out.stdout.split("\n")).toHaveLength(2);
    const { timeline, ...figures } = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(figures).toEqual(
      viaJson({ ...figuresOf(withSelfheal), withoutSelfheal: figuresOf(without) }),
    );
    expect(timeline).toEqual([
      { atMs: 600_000, kind: "incident", text: "complete: openai failed (5xx)" },
      {
        atMs: expect.any(Number) as unknown,
        kind: "recovered",
        text: expect.stringMatching(
          /^complete answered by anthropic \d+\.\d s after the failure/,
        ) as unknown,
      },
    ]);
  });

  it("text: the header, the timeline as it happens, the summary beside the run without selfheal", async () => {
    const s = scenario("blip");
    const [withSelfheal, without] = await both("blip");
    const out = await cli("demo", "--scenario", "blip");
    expect(out.exitCode).toBe(0);
    const lines = out.stdout.split("\n");
    expect(lines.slice(0, 3)).toEqual([
      `blip: ${s.description}`,
      "",
      "  [10:00] incident   complete: openai failed (5xx)",
    ]);
    expect(lines[3]).toMatch(/^ {2}\[10:0\d\] recovered {2}complete answered by anthropic /);
    expect(lines[4]).toBe("");
    expect(lines[5]).toMatch(
      /^summary \(60 virtual minutes and 10 for the calls in flight, in \d+\.\d s\)$/,
    );
    expect(lines.slice(6)).toEqual([
      ...scenarioSummary(withSelfheal, without, { stream: false }),
      "",
    ]);
    expect(out.stdout).not.toContain("virtual time"); // no terminal: no progress line
    expect(out.stdout).not.toContain("appended");
  });

  it("a streamed scenario's summary has the streamed rows", async () => {
    const [withSelfheal, without] = await both("streams");
    const out = await cli("demo", "--scenario", "streams");
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toContain(
      scenarioSummary(withSelfheal, without, { stream: true }).join("\n"),
    );
    expect(out.stdout).toMatch(/^ {2}truncated answers delivered as whole +0 +[1-9]\d*$/m);
    const blip = await cli("demo", "--scenario", "blip");
    expect(blip.stdout).not.toContain("truncated answers");
  });

  it("the same figures whenever it is played: the run starts on a whole 5 minutes", async () => {
    // The windows' buckets are whole 10 s, 50 s and 60 s spans of the epoch: a run started
    // elsewhere in them was cut at other points, and told other figures (87 or 90 incidents).
    const at = async (iso: string) => {
      vi.useFakeTimers({ toFake: ["Date"], now: new Date(iso) });
      try {
        return (await cli("demo", "--scenario", "streams", "--json")).stdout;
      } finally {
        vi.useRealTimers();
      }
    };
    const onTheMinute = await at("2026-12-02T10:00:00.000Z");
    expect(await at("2026-12-02T10:07:07.777Z")).toBe(onTheMinute);
    const [withSelfheal, without] = await both("streams");
    expect(JSON.parse(onTheMinute)).toMatchObject(
      viaJson({ ...figuresOf(withSelfheal), withoutSelfheal: figuresOf(without) }) as object,
    );
  });

  it("the default scenario is provider-outage", async () => {
    const out = await cli("demo", "--json");
    expect(JSON.parse(out.stdout)).toMatchObject({ scenario: "provider-outage" });
  });

  it("--event-log: the run's events, dated in the hour before now; said in text, not in JSON", async () => {
    const log = join(dir, "blip.jsonl");
    const before = Date.now();
    const out = await cli("demo", "--scenario", "blip", "--event-log", log);
    expect(out.stdout.endsWith(`\n\nrecovery events appended to ${log}\n`)).toBe(true);
    const events = readFileSync(log, "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { at: number; tool: string; type?: string })
      .filter((e) => e.type === undefined); // recovery events, not the calls and settings lines
    expect(events.map((e) => e.tool)).toEqual(["complete"]);
    for (const e of events) {
      expect(e.at).toBeGreaterThanOrEqual(before - runLengthMs(scenario("blip")));
      expect(e.at).toBeLessThanOrEqual(Date.now());
    }
    const json = await cli("demo", "--scenario", "blip", "--json", "--event-log", log);
    expect(json.stdout).not.toContain("appended");
    const recoveries = readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l && (JSON.parse(l) as { type?: string }).type === undefined);
    expect(recoveries).toHaveLength(2);
  });

  it("an --event-log path with a newline is said on one line", async () => {
    const log = join(dir, "a\nb.jsonl");
    const out = await cli("demo", "--scenario", "blip", "--event-log", log);
    expect(out.stdout.endsWith(`recovery events appended to ${join(dir, "a\\nb.jsonl")}\n`)).toBe(
      true,
    );
  });
});

describe("selfheal demo (in process): on a terminal", () => {
  const tty = Object.getOwnPropertyDescriptor(process.stdout, "isTTY");
  beforeAll(() => {
    Object.defineProperty(process.stdout, "isTTY", { value: true, configurable: true });
  });
  afterAll(() => {
    if (tty) Object.defineProperty(process.stdout, "isTTY", tty);
    else Reflect.deleteProperty(process.stdout, "isTTY");
  });

  it("a progress line each virtual minute, cleared before each timeline line and the summary", async () => {
    const runMs = runLengthMs(scenario("blip"));
    const out = await cli("demo", "--scenario", "blip");
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toContain(`\r  ${progressText(60_000, runMs)}`);
    expect(out.stdout).toContain(`\r  ${progressText(runMs, runMs)}\r\u001b[K\nsummary (`);
    expect(out.stdout).toContain(`\r\u001b[K  [10:00] incident   complete`);
    expect(out.stdout.match(/\r {2}virtual time/g)).toHaveLength(runMs / 60_000);
  });

  it("no progress line with --json", async () => {
    const out = await cli("demo", "--scenario", "blip", "--json");
    expect(out.stdout).not.toContain("\r");
    expect(out.stdout.split("\n")).toHaveLength(2);
  });
});

/**
 * Runs `demo ...argv` on fake timers (setTimeout and performance.now, started 1 s in), moving fake
 * time only while the run waits: each wait is then exactly the time to the virtual minute it
 * waits for. Resolves with the output and those waits.
 */
async function paced(argv: string[]) {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  try {
    vi.advanceTimersByTime(1_000);
    const start = performance.now();
    let done = false as boolean;
    const run = captured(() => demo(argv)).finally(() => {
      done = true;
    });
    const waits: number[] = [];
    while (!done) {
      if (vi.getTimerCount() === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      const before = performance.now();
      await vi.advanceTimersToNextTimerAsync();
      waits.push(performance.now() - before);
    }
    return { ...(await run), waits, elapsed: performance.now() - start };
  } finally {
    vi.useRealTimers();
  }
}

describe("selfheal demo (in process): --speed", () => {
  it("paces the run on the wall clock: each virtual minute waits until it is due at that speed", async () => {
    const runMs = runLengthMs(scenario("blip"));
    const out = await paced(["--scenario", "blip", "--speed", "2"]);
    expect(out.threw).toBe(false);
    expect(out.waits).toEqual(Array.from({ length: runMs / 60_000 }, () => 30_000));
    expect(out.elapsed).toBe(runMs / 2);
    // The summary's wall time is the paced one: 70 virtual minutes at 2x.
    expect(out.stdout).toContain(
      "\nsummary (60 virtual minutes and 10 for the calls in flight, in 2100.0 s)\n",
    );
  });
});

describe("selfheal demo (in process): the long-runs night", () => {
  let night: LongRunsResult;
  let without: LongRunsResult;
  beforeAll(async () => {
    night = await runLongRuns(LONG_RUNS);
    without = await runLongRuns(LONG_RUNS, { supervise: false });
  });

  it("--json: the night's figures, the night without the watchdog beside, the timeline; nothing else", async () => {
    const log = join(dir, "night-json.jsonl");
    const out = await cli("demo", "--scenario", "long-runs", "--json", "--event-log", log);
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n")).toHaveLength(2);
    const { timeline, ...figures } = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(figures).toEqual(viaJson({ ...figuresOf(night), withoutSelfheal: figuresOf(without) }));
    expect(timeline).toHaveLength(night.timeline.length);
    expect(readFileSync(log, "utf8")).toContain('"type":"watchdog"');
  });

  it("text: the summary, then the event log said", async () => {
    const log = join(dir, "night.jsonl");
    const out = await cli("demo", "--scenario", "long-runs", "--event-log", log);
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toContain(
      `\n${longRunsSummary(night, without).join("\n")}\n\nwatchdog events appended to ${log}\n`,
    );
    expect(readFileSync(log, "utf8")).toContain('"type":"watchdog"');
  });

  it("text on a terminal at 1000x: progress to 12:00:00, times with hours, tier results as 'result', the summary", async () => {
    const tty = Object.getOwnPropertyDescriptor(process.stdout, "isTTY");
    Object.defineProperty(process.stdout, "isTTY", { value: true, configurable: true });
    let out: Awaited<ReturnType<typeof paced>>;
    try {
      out = await paced(["--scenario", "long-runs", "--speed", "1000"]);
    } finally {
      if (tty) Object.defineProperty(process.stdout, "isTTY", tty);
      else Reflect.deleteProperty(process.stdout, "isTTY");
    }
    expect(out.threw).toBe(false);
    expect(out.waits).toHaveLength(720);
    const runMs = LONG_RUNS.durationMs;
    expect(out.stdout).toContain(`\r  ${progressText(runMs, runMs)}\r\u001b[K\n`);
    // Without the progress line and its clearing: the lines a pipe gets.
    const lines = out.stdout
      .replace(/\r {2}virtual time [^\r]*/g, "")
      .replaceAll("\r\u001b[K", "")
      .split("\n");
    expect(lines[0]).toBe(`long-runs: ${LONG_RUNS.description}`);
    expect(lines).toContain("  [8:45:25] result     night-34 rotation recovered");
    expect(lines).toContain("  [3:52:00] page       night-40 was rotated");
    // No event log: nothing said of one.
    const summary = longRunsSummary(night, without).join("\n");
    expect(
      lines.join("\n").endsWith(`\n\nsummary (720 virtual minutes in 43.2 s)\n${summary}\n`),
    ).toBe(true);
  });
});

describe("selfheal demo (in process): telemetry", () => {
  it("an OTLP endpoint: where the spans and metrics go, and they get there", async () => {
    const collector = await startReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url);
      const out = await cli("demo", "--scenario", "blip");
      expect(out.exitCode).toBe(0);
      expect(out.stdout.split("\n").slice(2, 5)).toEqual([
        `  traces:  ${collector.url}/v1/traces (http/protobuf)`,
        `  metrics: ${collector.url}/v1/metrics (http/protobuf)`,
        "  [10:00] incident   complete: openai failed (5xx)",
      ]);
      expect(out.stderr).toBe("");
      expect(collector.spans().map((s) => s.resource["service.name"])).toContain(
        "selfheal-demo-blip",
      );
    } finally {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "");
      await collector.close();
    }
  });

  it("--metrics-port only: where the metrics are served", async () => {
    const port = await freePort();
    const out = await cli("demo", "--scenario", "blip", "--metrics-port", String(port));
    expect(out.exitCode).toBe(0);
    expect(out.stdout.split("\n").slice(2, 4)).toEqual([
      `  metrics: http://127.0.0.1:${port}/metrics`,
      "  [10:00] incident   complete: openai failed (5xx)",
    ]);
  });
});
