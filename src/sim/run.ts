import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import { quantile } from "../stats.js";
import { thrownFault } from "../testing/faults.js";
import { seededRandom } from "../testing/random.js";
import { VirtualClock } from "../testing/virtual-clock.js";
import type { Dependency, FaultWindow, Scenario } from "./scenarios.js";
import { selfhealPolicy } from "./selfheal-policy.js";

/** One line of the run's story. */
export interface TimelineEntry {
  /** Virtual ms since the start. */
  atMs: number;
  kind: "status" | "circuit" | "drift" | "page" | "recovery";
  text: string;
}

/** What a policy counts about its own recoveries. */
export interface PolicyFigures {
  /** Calls whose first attempt failed. */
  incidents: number;
  /** Of those, the ones that still answered. */
  recovered: number;
  /** First error to recovered answer, ms, per recovered call. */
  recoveryTimesMs: number[];
  pages: number;
  recoveryCostUsd: number;
  wastedRetries: number;
  falseTrips: number;
  driftEvents: number;
}

/** A way of calling the fleet's dependencies: selfheal, or what users would pick instead. */
export interface Policy {
  complete(question: string): Promise<string>;
  charge(order: string): Promise<string>;
  figures(): PolicyFigures;
  close(): Promise<void>;
}

/** The simulated world a policy calls into. */
export interface World {
  scenario: Scenario;
  /** Where selfheal's spans and metrics go (default: nowhere). */
  telemetry: Telemetry;
  clock: VirtualClock;
  random: () => number;
  /** Virtual ms since the start. */
  elapsed(): number;
  /** One call to a dependency, as the scenario has it behave right now. */
  behave(dep: Dependency, signal: AbortSignal | undefined, answer: string): Promise<string>;
  /** The fault window a dependency is in now, if any. */
  faultNow(dependency: string): FaultWindow | undefined;
  note(kind: TimelineEntry["kind"], text: string): void;
}

export type PolicyFactory = (world: World) => Policy;

export interface Telemetry {
  tracerProvider?: TracerProvider | undefined;
  meterProvider?: MeterProvider | undefined;
}

/** The figures of one run (snake_case: they are the `--json` output). */
export interface SimResult {
  scenario: string;
  policy: string;
  virtual_minutes: number;
  tasks: number;
  incidents: number;
  recovered: number;
  auto_recovery_rate: number;
  /** Mean time from a call's first error to its recovered answer, s (null: nothing recovered). */
  mttr_seconds: number | null;
  mttr_p95_seconds: number | null;
  user_visible_failures: number;
  pages: number;
  recovery_cost_usd: number;
  wasted_retries: number;
  /** Breakers opened on a dependency that had no fault at the time. */
  false_trips: number;
  drift_events: number;
  calls_per_provider: Record<string, number>;
  timeline: TimelineEntry[];
}

export interface RunOptions {
  /** Default selfheal with its defaults. */
  policy?: { name: string; create: PolicyFactory };
  /** Export the run's spans and metrics (the CLI passes an OTLP / Prometheus SDK). */
  telemetry?: Telemetry;
  /** Called as each timeline entry happens (the CLI prints them live). */
  onTimeline?: (entry: TimelineEntry) => void;
  /** Called after each virtual minute; may wait to pace the run (`--speed`). */
  onMinute?: (virtualMs: number) => Promise<void> | void;
}

const MINUTE = 60_000;
/** Time the fleet gets after the last task starts to finish what it is doing. */
const GRACE_MS = 10 * MINUTE;

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The simulated dependencies, answering as the scenario says at the current virtual time. */
function createWorld(
  scenario: Scenario,
  timeline: TimelineEntry[],
  options: RunOptions,
  calls: Record<string, number>,
): World {
  const clock = new VirtualClock();
  const t0 = clock.now();
  const elapsed = () => clock.now() - t0;
  const random = seededRandom(scenario.seed);
  const faultNow = (dependency: string) =>
    scenario.faults.find(
      (f) => f.dependency === dependency && elapsed() >= f.fromMs && elapsed() < f.toMs,
    );
  return {
    scenario,
    telemetry: options.telemetry ?? {},
    clock,
    random,
    elapsed,
    faultNow,
    note(kind, text) {
      const entry = { atMs: elapsed(), kind, text };
      timeline.push(entry);
      options.onTimeline?.(entry);
    },
    async behave(dep, signal, answer) {
      calls[dep.name] = (calls[dep.name] ?? 0) + 1;
      const w = faultNow(dep.name);
      const f = w?.fault;
      if (f?.kind === "timeout" && random() < f.rate) {
        await clock.sleep(Number.MAX_SAFE_INTEGER, signal); // until the caller's deadline
      } else if (f?.kind === "rate_limit" && random() < f.rate) {
        throw thrownFault(
          "rate_limit",
          f.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: f.retryAfterSeconds },
        );
      } else if (f?.kind === "worded" && random() < f.rate) {
        throw new Error(f.message);
      } else if (
        f?.kind === "flap" &&
        (elapsed() - (w?.fromMs ?? 0)) % (f.downMs + f.upMs) < f.downMs
      ) {
        throw thrownFault("http_503");
      } else if (f?.kind === "empty" && random() < f.rate) {
        answer = "";
      }
      await clock.sleep(w?.slowMs ?? dep.latencyMs, signal);
      return answer;
    },
  };
}

/**
 * Plays a scenario on virtual time against a simulated fleet: each agent runs a task every
 * `taskEveryMs` (an LLM answer, then a payment) through the policy. An hour of incident takes
 * a second or two.
 */
export async function runScenario(
  scenario: Scenario,
  options: RunOptions = {},
): Promise<SimResult> {
  const timeline: TimelineEntry[] = [];
  const calls: Record<string, number> = {};
  const world = createWorld(scenario, timeline, options, calls);
  const policyName = options.policy?.name ?? "selfheal";
  const policy = (options.policy?.create ?? selfhealPolicy)(world);

  let userVisibleFailures = 0;
  let taskCount = 0;
  const tasks: Promise<void>[] = [];
  for (let agent = 0; agent < scenario.agents; agent++) {
    const offset = Math.floor((agent * scenario.taskEveryMs) / scenario.agents);
    for (let at = offset; at < scenario.durationMs; at += scenario.taskEveryMs) {
      const id = `agent${agent}-t${at}`;
      taskCount++;
      world.clock.setTimer(at, () => {
        const task = async () => {
          const answer = await policy.complete(`ticket ${id}`);
          if (answer === "") throw new Error("an empty answer reached the user");
          await policy.charge(`order-${id}`);
        };
        tasks.push(
          task().catch(() => {
            userVisibleFailures++;
          }),
        );
      });
    }
  }
  for (let t = 0; t < scenario.durationMs + GRACE_MS; t += MINUTE) {
    await world.clock.advance(MINUTE);
    await options.onMinute?.(world.elapsed());
  }
  await Promise.all(tasks);
  await policy.close();

  const f = policy.figures();
  const times = f.recoveryTimesMs.map((ms) => ms / 1000).sort((a, b) => a - b);
  return {
    scenario: scenario.name,
    policy: policyName,
    virtual_minutes: scenario.durationMs / MINUTE,
    tasks: taskCount,
    incidents: f.incidents,
    recovered: f.recovered,
    auto_recovery_rate: f.incidents === 0 ? 1 : round(f.recovered / f.incidents, 4),
    mttr_seconds: times.length ? round(times.reduce((a, b) => a + b, 0) / times.length) : null,
    mttr_p95_seconds: times.length ? round(quantile(times, 0.95) ?? 0) : null,
    user_visible_failures: userVisibleFailures,
    pages: f.pages,
    recovery_cost_usd: round(f.recoveryCostUsd, 4),
    wasted_retries: f.wastedRetries,
    false_trips: f.falseTrips,
    drift_events: f.driftEvents,
    calls_per_provider: calls,
    timeline,
  };
}
