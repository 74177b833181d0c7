import { quantile } from "../stats.js";
import { IncidentLog } from "./incidents.js";
import { noRecoveryPolicy } from "./no-recovery-policy.js";
import type { Scenario } from "./scenarios.js";
import { doubleCharges, pageKind, scoreCalls } from "./score.js";
import type { PolicyFactory, Telemetry } from "./policy.js";
import { selfhealPolicy } from "./selfheal-policy.js";
import { createWorld, type CallRecord, type Operation, type TimelineEntry } from "./world.js";

export type { TimelineEntry, World } from "./world.js";
export type { Policy, PolicyContext, PolicyFactory, PolicyFigures, Telemetry } from "./policy.js";

/** The figures of one run (camelCase, as every JSON selfheal writes: the `--json` output). */
export interface SimResult {
  scenario: string;
  policy: string;
  /** The scenario's length (the run plays {@link GRACE_MS} more for the calls in flight). */
  virtualMinutes: number;
  tasks: number;
  /** Calls whose first request failed, or that failed without sending any. */
  incidents: number;
  recovered: number;
  autoRecoveryRate: number;
  /** Mean time from a call's first failed request to its answer, s (null: nothing recovered). */
  mttrSeconds: number | null;
  mttrP95Seconds: number | null;
  /** Tasks that failed (an error, an empty answer or a truncated one reached the user). */
  userVisibleFailures: number;
  /** Answers cut short that reached the user as if whole (a streamed answer read to its end). */
  truncatedAnswers: number;
  /** Failed calls a person is paged for, one per kind per 10 min (the same rule for all). */
  pages: number;
  /** Every request x its dependency's price, USD. */
  spendUsd: number;
  /** Requests after a call's first, USD. */
  recoveryCostUsd: number;
  /** Requests that could not help (see score.ts). */
  wastedRetries: number;
  /** Orders charged more than once, counted past the first charge. */
  doubleCharges: number;
  /** Breakers opened on a dependency that had no fault at the time. */
  falseTrips: number;
  driftEvents: number;
  /** The policy's diagnoses by pattern (selfheal's; empty for a policy that diagnoses nothing). */
  diagnoses: Record<string, number>;
  callsPerProvider: Record<string, number>;
  timeline: TimelineEntry[];
}

export interface RunOptions {
  /** Default selfheal with its defaults. */
  policy?: { name: string; create: PolicyFactory };
  /** Export the run's spans and metrics (the CLI passes an OTLP / Prometheus SDK). */
  telemetry?: Telemetry;
  /** Append selfheal's recovery events to this JSONL file (`selfheal demo --event-log`). */
  eventLog?: string;
  /** Diagnosis rule files for selfheal to load (`selfheal demo --rule-file`). */
  ruleFile?: string;
  /** Called as each timeline entry happens (the CLI prints them live). */
  onTimeline?: (entry: TimelineEntry) => void;
  /** Called with each logical call's record (its every request) as the call ends. */
  onCall?: (call: CallRecord) => void;
  /** Called after each virtual minute; may wait to pace the run (`--speed`). */
  onMinute?: (virtualMs: number) => Promise<void> | void;
  /**
   * Virtual time the run starts at, epoch ms (default 2026-01-01 UTC). Spans and events are dated
   * on it: the CLI starts the run so that it ends now, and exported traces land in a backend's
   * recent view.
   */
  startMs?: number;
}

const MINUTE = 60_000;
/** Time the fleet gets after the last task starts to finish what it is doing. */
export const GRACE_MS = 10 * MINUTE;

/** Virtual time a run of `scenario` plays: the scenario, then the grace; the last `onMinute`. */
export const runLengthMs = (scenario: Scenario): number => scenario.durationMs + GRACE_MS;

/** The fleet without selfheal (no-recovery-policy.ts): the "without selfheal" figures. */
export const NO_RECOVERY: { name: string; create: PolicyFactory } = {
  name: "no recovery",
  create: noRecoveryPolicy,
};

/** One page per kind of failure per 10 min: selfheal's own notifier throttle, for every policy. */
const PAGE_THROTTLE_MS = 10 * MINUTE;

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * Plays a scenario on virtual time against a simulated fleet: each agent runs a task every
 * `taskEveryMs` (an LLM answer, then a payment) through the policy. An hour of incident takes
 * a second or two.
 */
// Long on purpose: the schedule, the scoring hooks and the results, in the order they happen.
export async function runScenario(
  scenario: Scenario,
  options: RunOptions = {},
): Promise<SimResult> {
  const timeline: TimelineEntry[] = [];
  // Told through the world once it exists: its first request ends after the clock starts.
  const incidents = new IncidentLog(
    (kind, text) => {
      world.note(kind, text);
    },
    () => world.elapsed(),
    runLengthMs(scenario),
  );
  const { world, calls, charges, requestsPerDependency } = createWorld(
    scenario,
    (entry) => {
      timeline.push(entry);
      options.onTimeline?.(entry);
    },
    options.startMs,
    (record, attempt) => {
      incidents.attemptEnded(record, attempt);
    },
  );
  const policyName = options.policy?.name ?? "selfheal";
  const policy = (options.policy?.create ?? selfhealPolicy)({
    world,
    telemetry: options.telemetry ?? {},
    eventLog: options.eventLog,
    ruleFile: options.ruleFile,
  });

  const lastPage = new Map<string, number>();
  let pages = 0;
  let truncatedAnswers = 0;
  /** One logical call through the policy, recorded; an empty or a truncated answer is a failure. */
  const call = async (op: Operation, id: string, run: () => Promise<string>) => {
    const record: CallRecord = { id, op, startMs: world.elapsed(), attempts: [] };
    calls.set(id, record);
    let value: string | undefined;
    try {
      value = await run();
    } finally {
      record.endMs = world.elapsed();
      record.ok = value !== undefined && world.whole(id, value);
      incidents.callEnded(record);
      options.onCall?.(record);
      if (!record.ok) {
        const kind = pageKind(record);
        if (world.elapsed() - (lastPage.get(kind) ?? -Infinity) >= PAGE_THROTTLE_MS) {
          lastPage.set(kind, world.elapsed());
          pages++;
          world.note("page", `${kind} failed for a user`);
        }
      }
    }
    if (value === "") throw new Error("an empty answer reached the user");
    if (!record.ok) {
      truncatedAnswers++;
      throw new Error("a truncated answer reached the user as if whole");
    }
    return value;
  };

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
          const question = `ticket ${id}`;
          await call("complete", question, () => policy.complete(question));
          const order = `order-${id}`;
          await call("charge", order, () => policy.charge(order));
        };
        tasks.push(
          task().catch(() => {
            userVisibleFailures++;
          }),
        );
      });
    }
  }
  for (let t = 0; t < runLengthMs(scenario); t += MINUTE) {
    await world.clock.advance(MINUTE);
    incidents.flush();
    await options.onMinute?.(world.elapsed());
  }
  await Promise.all(tasks);
  incidents.flush(true);
  await policy.close();

  const f = scoreCalls(calls.values());
  const own = policy.figures();
  const times = f.recoveryTimesMs.map((ms) => ms / 1000).sort((a, b) => a - b);
  return {
    scenario: scenario.name,
    policy: policyName,
    virtualMinutes: scenario.durationMs / MINUTE,
    tasks: taskCount,
    incidents: f.incidents,
    recovered: f.recovered,
    autoRecoveryRate: f.incidents === 0 ? 1 : round(f.recovered / f.incidents, 4),
    mttrSeconds: times.length ? round(times.reduce((a, b) => a + b, 0) / times.length) : null,
    mttrP95Seconds: times.length ? round(quantile(times, 0.95) ?? 0) : null,
    userVisibleFailures,
    truncatedAnswers,
    pages,
    spendUsd: round(f.spendUsd, 4),
    recoveryCostUsd: round(f.recoverySpendUsd, 4),
    wastedRetries: f.wastedRetries,
    doubleCharges: doubleCharges(charges),
    falseTrips: own.falseTrips,
    driftEvents: own.driftEvents,
    diagnoses: own.diagnoses ?? {},
    callsPerProvider: requestsPerDependency,
    timeline,
  };
}
