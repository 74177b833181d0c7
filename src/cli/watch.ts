/**
 * `selfheal watch --state-dir DIR [options] -- COMMAND ARGS`: runs an agent as a child process
 * and supervises it through its heartbeat (selfheal/watchdog): verdicts and tiers are printed as
 * they happen, signals are passed on, and the exit code is the child's, or 3 when supervision gave
 * up. `--once [--json]` prints one verdict of a session and exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { constants } from "node:os";
import { wallClock } from "../clock.js";
import { lastGeneration, WATCH_ENV } from "../watchdog/agent.js";
import { cleanStaleTemps, heartbeatFile, isSessionId, isStage } from "../watchdog/heartbeat.js";
import { readHeartbeat } from "../watchdog/reader.js";
import {
  Supervisor,
  type SupervisorEvent,
  type SupervisorOptions,
} from "../watchdog/supervisor.js";
import { DEFAULT_LIMITS, evaluate, type Limits } from "../watchdog/verdict.js";
import { shellQuote } from "../report/shell-quote.js";
import { oneLine, safeJson } from "../telemetry/redact.js";
import { UsageError } from "./errors.js";
import { parseFlags } from "./flags.js";
import { eventLogFlag, metricsPortFlag, startCliTelemetry, stopCliTelemetry } from "./telemetry.js";

export const WATCH_USAGE = `Usage: selfheal watch --state-dir DIR [options] -- COMMAND [ARGS...]
       selfheal watch --state-dir DIR --once [--json]

Runs COMMAND, an agent that beats (selfheal/watchdog's supervised(), or any language speaking
the file protocol of docs/watchdog-protocol.md), and supervises it: a stall is nudged (Tier 1),
a bloated context or a failed nudge gets a context reset and a restart (Tier 2), a dead or
unreadable agent is rotated to a new process that restores its snapshot (Tier 3). Each process
is a generation (1, 2, ...): only the current one's beats are judged, and a new one is
"starting" until its first beat. Verdicts and tiers are printed on stderr.

The child's environment: SELFHEAL_STATE_DIR, SELFHEAL_SESSION_ID, SELFHEAL_WATCH_GENERATION,
and its limits in whole ms: SELFHEAL_WATCH_DEAD_MS, SELFHEAL_WATCH_STALL_MS,
SELFHEAL_WATCH_GRACE_MS, SELFHEAL_WATCH_POLL_MS. Stale temporary files of the session (their
writer gone) are removed at start.

Exit code: 0 when the agent finishes (exits 0); an agent that fails (exits non-zero, or is
killed) is rotated, not passed on. 3 when supervision gave up (the agent gets SIGTERM, then
SIGKILL 2 s later). A SIGINT or SIGTERM to watch goes to the agent, and watch exits with the
agent's code, or 128 + the signal's number when the signal ended it (SIGTERM: 143). 127 when
the command cannot start; 2 on bad usage. With OTEL_EXPORTER_OTLP_ENDPOINT set, verdicts and tiers
go out as spans and metrics.

Options:
  --state-dir DIR            where the heartbeat, inbox, ack and snapshot live (required)
  --session ID               the session id (default agent)
  --agent NAME               agent label of the watchdog's spans and metrics (default the session)
  --event-log FILE           append each verdict and tier to FILE (JSONL, read by selfheal report),
                             with the limits in effect and each stage's step durations per minute
                             (what report --suggest-thresholds reads)
  --metrics-port P           serve the watchdog's Prometheus metrics on 127.0.0.1:P/metrics
  --once                     print one verdict and exit
  --json                     with --once: as JSON
  -h, --help                 this help

Limits (ms unless said; default in brackets):
  --dead-ms MS               no heartbeat this long: dead; also how long a new process has to
                             write its first beat [30000]
  --stall-ms MS              step unmoved this long: stalled [90000]
  --stage-stall-ms STAGE=MS  step unmoved this long in STAGE (snake_case): stalled, in place of
                             --stall-ms; repeat for more stages (the last per stage wins) [none]
  --grace-ms MS              no stall verdict this long after a process starts [60000]
  --poll-ms MS               how often the heartbeat is read; a look not answered within one
                             poll is abandoned [5000]
  --prove-ms MS              time each tier has to show progress (the step moves); Tier 2 also waits
                             up to this for the agent to acknowledge its reset; after a restart, at
                             least until a stall on the new step would be seen [15000, 60000, 60000]
  --token-limit N            the model's context limit, in tokens; bloated above 92% of it [none]
  --max-restarts N           restarts allowed in any restart period, context resets' and rotations
                             together, and in a row without a tier recovered; the next one gives
                             up (exit 3) [3]
  --restart-period-ms MS     that period [600000]
  --restart-backoff-ms MS    wait before a rotation, doubled for each restart in the period, to
                             60000 [1000]
  (--max-rotations, --rotation-period-ms, --rotation-backoff-ms: their older names)
A tier is recovered when the step moves and the run stays healthy to the end of its proving time;
a run that stalls, dies or bloats again within it goes to the next tier.
Fixed: a heartbeat over 64 KiB or not a regular file is not read; a read is time-boxed to 2 s;
a beat's timestamps may be up to 5 s ahead of this clock; 3 bad reads in a row are unreadable;
an agent being ended gets SIGTERM, then SIGKILL after 2 s; supervised() writes a keep-alive beat
every third of the dead limit (100 ms - 10 s).`;

/** A whole number (of ms, by default) from a flag, or undefined when the flag is absent. */
export function whole(
  value: string | undefined,
  flag: string,
  what = "a whole number of ms",
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isSafeInteger(n) || n < 0)
    throw new UsageError(`--${flag} must be ${what}, got "${value}"`);
  return n;
}
const ms = (value: string | undefined, flag: string) => whole(value, flag);
/** As `ms`, for a period that cannot be 0 (the poll, the restart period). */
function positiveMs(value: string | undefined, flag: string): number | undefined {
  const n = ms(value, flag);
  if (n === 0) throw new UsageError(`--${flag} must be a positive whole number of ms, got "0"`);
  return n;
}

/**
 * The stall limits per stage from `--stage-stall-ms STAGE=MS` (each time it is given; the last
 * for a stage wins): a stage is snake_case as beats name it, a limit a positive whole number of ms.
 */
export function stageStallFlags(values: readonly string[] | undefined): Record<string, number> {
  const limits: Record<string, number> = {};
  for (const value of values ?? []) {
    const split = value.indexOf("=");
    if (split === -1) throw new UsageError(`--stage-stall-ms must be STAGE=MS, got "${value}"`);
    const stage = value.slice(0, split);
    const limit = value.slice(split + 1);
    if (!isStage(stage))
      throw new UsageError(
        `--stage-stall-ms: the stage must be snake_case (a-z, 0-9, _; a letter first; up to 40), got "${stage}"`,
      );
    const n = Number(limit);
    if (limit.trim() === "" || !Number.isSafeInteger(n) || n <= 0)
      throw new UsageError(
        `--stage-stall-ms: the limit of ${stage} must be a positive whole number of ms, got "${limit}"`,
      );
    limits[stage] = n;
  }
  return limits;
}

export async function watch(argv: string[]): Promise<void> {
  const split = argv.indexOf("--");
  const own = split === -1 ? argv : argv.slice(0, split);
  const command = split === -1 ? [] : argv.slice(split + 1);
  const { values } = parseFlags(
    own,
    {
      "state-dir": { type: "string" },
      session: { type: "string", default: "agent" },
      "token-limit": { type: "string" },
      "poll-ms": { type: "string" },
      "dead-ms": { type: "string" },
      "stall-ms": { type: "string" },
      "stage-stall-ms": { type: "string", multiple: true },
      "grace-ms": { type: "string" },
      "prove-ms": { type: "string" },
      "max-restarts": { type: "string" },
      "restart-period-ms": { type: "string" },
      "restart-backoff-ms": { type: "string" },
      "max-rotations": { type: "string" },
      "rotation-period-ms": { type: "string" },
      "rotation-backoff-ms": { type: "string" },
      agent: { type: "string" },
      "event-log": { type: "string" },
      "metrics-port": { type: "string" },
      once: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    {
      // `selfheal watch --state-dir d node -e 1`: the command was meant to come after --.
      positionals: (rest) =>
        `the agent's command goes after --: selfheal watch [options] -- ${rest.map((a) => shellQuote(a) ?? a).join(" ")}`,
    },
  );
  if (values.help) {
    console.log(WATCH_USAGE);
    return;
  }
  const stateDir = values["state-dir"];
  if (!stateDir) throw new UsageError("watch needs --state-dir DIR");
  const tokens = values["token-limit"];
  const tokenLimit = tokens === undefined ? undefined : Number(tokens);
  if (tokenLimit !== undefined && !(Number.isSafeInteger(tokenLimit) && tokenLimit > 0))
    throw new UsageError(`--token-limit must be a positive whole number, got "${tokens}"`);
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    tokenLimit,
    deadMs: ms(values["dead-ms"], "dead-ms") ?? DEFAULT_LIMITS.deadMs,
    stallMs: ms(values["stall-ms"], "stall-ms") ?? DEFAULT_LIMITS.stallMs,
    stageStallMs: stageStallFlags(values["stage-stall-ms"]),
    graceMs: ms(values["grace-ms"], "grace-ms") ?? DEFAULT_LIMITS.graceMs,
  };
  const session = values.session;
  if (!isSessionId(session))
    throw new UsageError(
      `--session must be 1-128 letters, digits, '_', '.' or '-' (it names files), got "${session}"`,
    );
  if (values.once) return once(stateDir, session, limits, values.json);
  if (command.length === 0) throw new UsageError("watch needs the agent's command after --");
  try {
    mkdirSync(stateDir, { recursive: true });
  } catch (error) {
    throw new UsageError(
      `cannot use --state-dir ${stateDir}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  await cleanStaleTemps(stateDir, session);
  const generation = (await lastGeneration(stateDir, session)) + 1;
  const prove = ms(values["prove-ms"], "prove-ms");
  /** A restart flag's value, under its name or its older one (not both), with the name given. */
  const restartFlag = (
    flag: "max-restarts" | "restart-period-ms" | "restart-backoff-ms",
    older: "max-rotations" | "rotation-period-ms" | "rotation-backoff-ms",
  ): [string | undefined, string] => {
    const [value, old] = [values[flag], values[older]];
    if (value !== undefined && old !== undefined)
      throw new UsageError(`--${older} is the older name of --${flag}: give one of them`);
    return old === undefined ? [value, flag] : [old, older];
  };
  const maxRestarts = whole(...restartFlag("max-restarts", "max-rotations"), "a whole number");
  const periodMs = positiveMs(...restartFlag("restart-period-ms", "rotation-period-ms"));
  const baseBackoffMs = ms(...restartFlag("restart-backoff-ms", "rotation-backoff-ms"));
  const pollMs = positiveMs(values["poll-ms"], "poll-ms") ?? 5_000;
  const eventLog = eventLogFlag(values["event-log"]);
  const agent = values.agent ?? session;
  const telemetry = await startCliTelemetry(
    `selfheal-watch-${agent}`,
    metricsPortFlag(values["metrics-port"]),
  );
  process.exitCode = await supervise(command, {
    stateDir,
    sessionId: session,
    generation,
    limits,
    pollMs,
    agent,
    ...(prove !== undefined && {
      proveMs: { nudge: prove, context_reset: prove, rotation: prove },
    }),
    intensity: {
      ...(maxRestarts !== undefined && { maxRestarts }),
      ...(periodMs !== undefined && { periodMs }),
      ...(baseBackoffMs !== undefined && { baseBackoffMs }),
    },
    ...(eventLog !== undefined && { eventLog }),
    ...(telemetry && {
      tracerProvider: telemetry.tracerProvider,
      meterProvider: telemetry.meterProvider,
    }),
  });
  await stopCliTelemetry(telemetry);
}

async function once(
  stateDir: string,
  session: string,
  limits: Limits,
  json: boolean,
): Promise<void> {
  const now = wallClock.now();
  const read = await readHeartbeat(heartbeatFile(stateDir, session), now);
  const result = read.ok
    ? {
        session,
        ...evaluate(read.heartbeat, undefined, now, limits),
        stepIdx: read.heartbeat.stepIdx,
      }
    : { session, verdict: "unreadable", reason: `heartbeat ${read.problem}: ${read.detail}` };
  // The reason quotes the heartbeat, which the agent writes: shown, never obeyed by the terminal.
  console.log(
    json ? safeJson(result) : oneLine(`${session}: ${result.verdict} (${result.reason})`),
  );
}

/** What `supervise` passes to the supervisor: all but the control, alerts and events it owns. */
type WatchOptions = Omit<SupervisorOptions, "control" | "notify" | "onEvent">;

/** How long an agent has to end after SIGTERM before it gets SIGKILL, ms (restart and give-up). */
const KILL_AFTER_MS = 2_000;

/** The shell's exit code for a process ended by `signal`: 128 + its number (SIGTERM: 143). */
export function signalExitCode(signal: NodeJS.Signals | null): number {
  const number = signal === null ? undefined : constants.signals[signal];
  return 128 + (number ?? constants.signals.SIGTERM);
}

/**
 * Ends `proc`: SIGTERM, then SIGKILL when it is still there after `KILL_AFTER_MS`; resolves once it
 * has exited (or, should even SIGKILL not be reported, after another `KILL_AFTER_MS`).
 */
async function end(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  let timer: NodeJS.Timeout | undefined;
  const gone = new Promise<void>((done) =>
    proc.once("exit", () => {
      done();
    }),
  );
  proc.kill("SIGTERM");
  const killed = new Promise<void>((done) => {
    timer = setTimeout(() => {
      proc.kill("SIGKILL");
      timer = setTimeout(done, KILL_AFTER_MS);
    }, KILL_AFTER_MS);
  });
  await Promise.race([gone, killed]);
  clearTimeout(timer);
}

/** Runs the child under a supervisor; resolves with the exit code watch should end with. */
function supervise(command: string[], options: WatchOptions): Promise<number> {
  const { stateDir = "", sessionId } = options;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const [file = "", ...args] = command;
  // Reasons and alerts quote the heartbeat and the command: one line each, escapes shown.
  const say = (line: string) => process.stderr.write(`selfheal watch: ${oneLine(line)}\n`);
  let child: ChildProcess | undefined;
  let replacing = false;
  return new Promise<number>((resolve) => {
    const launch = (generation: number) => {
      const proc = spawn(file, args, {
        stdio: "inherit",
        env: {
          ...process.env,
          [WATCH_ENV.stateDir]: stateDir,
          [WATCH_ENV.sessionId]: sessionId,
          [WATCH_ENV.generation]: String(generation),
          [WATCH_ENV.deadMs]: String(limits.deadMs),
          [WATCH_ENV.stallMs]: String(limits.stallMs),
          [WATCH_ENV.graceMs]: String(limits.graceMs),
          [WATCH_ENV.pollMs]: String(options.pollMs ?? 5_000),
        },
      });
      child = proc;
      if (proc.pid !== undefined) say(`generation ${generation} started (pid ${proc.pid})`);
      proc.once("error", (error) => {
        say(`cannot start ${file}: ${error.message}`);
        finish(127);
      });
      proc.once("exit", (code, signal) => {
        if (child !== proc || replacing) return; // one we ended to replace it
        if (code === 0) {
          // The run is over: a tier still proving itself got it to its end.
          void supervisor.processFinished().then(() => {
            finish(0);
          });
          return;
        }
        const how = signal ? `signal ${signal}` : `code ${code ?? "?"}`;
        void supervisor.processDied(`the agent exited with ${how}`);
      });
    };
    /** Ends the running child (SIGTERM, then SIGKILL after 2 s) and starts `generation`. */
    const replace = async (generation: number) => {
      replacing = true;
      await end(child);
      replacing = false;
      launch(generation);
    };
    const supervisor = new Supervisor({
      ...options,
      control: { restart: replace, rotate: replace },
      notify: (alert) => say(`alert: ${alert.title}: ${alert.text}`),
      onEvent: (event) => {
        say(describe(event));
        if (event.kind === "gave_up") {
          // A hung agent may ignore SIGTERM: it gets SIGKILL, so watch does end (exit 3).
          replacing = true;
          supervisor.stop();
          void end(child).then(() => {
            finish(3);
          });
        }
      },
    });
    let done = false;
    const finish = (code: number) => {
      if (done) return;
      done = true;
      supervisor.stop();
      process.off("SIGINT", forward);
      process.off("SIGTERM", forward);
      void supervisor.flush().then(() => {
        resolve(code);
      });
    };
    // Signals go to the child; watch ends with the child's own exit.
    const forward = (signal: NodeJS.Signals) => {
      supervisor.stop();
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) {
        finish(signalExitCode(signal));
        return;
      }
      proc.once("exit", (code, how) => {
        finish(code ?? signalExitCode(how ?? signal));
      });
      proc.kill(signal);
    };
    process.on("SIGINT", forward);
    process.on("SIGTERM", forward);
    launch(supervisor.currentGeneration);
    supervisor.start();
  });
}

function describe(event: SupervisorEvent): string {
  switch (event.kind) {
    case "verdict":
      return `verdict ${event.verdict}: ${event.reason}`;
    case "tier":
      return `tier ${event.tier}: ${event.reason}`;
    case "tier_result":
      return `tier ${event.tier} ${event.outcome}`;
    case "gave_up":
      return `gave up: ${event.reason}`;
  }
}
