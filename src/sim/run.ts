import { quantile } from "../stats.js";
import type { Scenario } from "./scenarios.js";
import { doubleCharges, pageKind, scoreCalls } from "./score.js";
import type { PolicyFactory, Telemetry } from "./policy.js";
import { selfhealPolicy } from "./selfheal-policy.js";
import { createWorld, type CallRecord, type Operation, type TimelineEntry } from "./world.js";

export type { TimelineEntry, World } from "./world.js";
export type { Policy, PolicyContext, PolicyFactory, PolicyFigures, Telemetry } from "./policy.js";

/** The figures of one run (snake_case: they are the `--json` output). */
export interface SimResult {
  scenario: string;
  policy: string;
  virtual_minutes: number;
  tasks: number;
  /** Calls whose first request failed, or that failed without sending any. */
  incidents: number;
  recovered: number;
  auto_recovery_rate: number;
  /** Mean time from a call's first failed request to its answer, s (null: nothing recovered). */
  mttr_seconds: number | null;
  mttr_p95_seconds: number | null;
  /** Tasks that failed (an error, an empty answer or a truncated one reached the user). */
  user_visible_failures: number;
  /** Answers cut short that reached the user as if whole (a streamed answer read to its end). */
  truncated_answers: number;
  /** Failed calls a person is paged for, one per kind per 10 min (the same rule for all). */
  pages: number;
  /** Every request x its dependency's price, USD. */
  spend_usd: number;
  /** Requests after a call's first, USD. */
  recovery_cost_usd: number;
  /** Requests that could not help (see score.ts). */
  wasted_retries: number;
  /** Orders charged more than once, counted past the first charge. */
  double_charges: number;
  /** Breakers opened on a dependency that had no fault at the time. */
  false_trips: number;
  drift_events: number;
  /** The policy's diagnoses by pattern (selfheal's; empty for a policy that diagnoses nothing). */
  diagnoses: Record<string, number>;
  calls_per_provider: Record<string, number>;
  timeline: TimelineEntry[];
}

export interface RunOptions {
  /** Default selfheal with its defaults. */
  policy?: { name: string; create: PolicyFactory };
  /** Export the run's spans and metrics (the CLI passes an OTLP / Prometheus SDK). */
  telemetry?: Telemetry;
  /** Append selfheal's recovery events to this JSONL file (`selfheal demo --event-log`). */
  eventLog?: string;
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
const GRACE_MS = 10 * MINUTE;
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
  const { world, calls, charges, requestsPerDependency } = createWorld(
    scenario,
    (entry) => {
      timeline.push(entry);
      options.onTimeline?.(entry);
    },
    options.startMs,
  );
  const policyName = options.policy?.name ?? "selfheal";
  const policy = (options.policy?.create ?? selfhealPolicy)({
    world,
    telemetry: options.telemetry ?? {},
    eventLog: options.eventLog,
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
  for (let t = 0; t < scenario.durationMs + GRACE_MS; t += MINUTE) {
    await world.clock.advance(MINUTE);
    await options.onMinute?.(world.elapsed());
  }
  await Promise.all(tasks);
  await policy.close();

  const f = scoreCalls(calls.values());
  const own = policy.figures();
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
    truncated_answers: truncatedAnswers,
    pages,
    spend_usd: round(f.spendUsd, 4),
    recovery_cost_usd: round(f.recoverySpendUsd, 4),
    wasted_retries: f.wastedRetries,
    double_charges: doubleCharges(charges),
    false_trips: own.falseTrips,
    drift_events: own.driftEvents,
    diagnoses: own.diagnoses ?? {},
    calls_per_provider: requestsPerDependency,
    timeline,
  };
}
