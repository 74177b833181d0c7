import { createSelfHealing } from "../engine/self-healing.js";
import type { CallContext } from "../engine/call-context.js";
import type { RecoveryEvent } from "../engine/recovery-step.js";
import type { Notifier } from "../notify/notifier.js";
import { InjectedApiError, httpFault } from "../testing/faults.js";
import { seededRandom } from "../testing/random.js";
import { VirtualClock } from "../testing/virtual-clock.js";
import type { Dependency, FaultWindow, Scenario } from "./scenarios.js";

/** One line of the run's story. */
export interface TimelineEntry {
  /** Virtual ms since the start. */
  atMs: number;
  kind: "status" | "circuit" | "drift" | "page" | "recovery";
  text: string;
}

/** The figures of one run (snake_case: they are the `--json` output). */
export interface SimResult {
  scenario: string;
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
  /** Called as each timeline entry happens (the CLI prints them live). */
  onTimeline?: (entry: TimelineEntry) => void;
  /** Called after each virtual minute; may wait to pace the run (`--speed`). */
  onMinute?: (virtualMs: number) => Promise<void> | void;
}

const MINUTE = 60_000;
/** Time the fleet gets after the last task starts to finish what it is doing. */
const GRACE_MS = 10 * MINUTE;

function activeFault(s: Scenario, dependency: string, t: number): FaultWindow | undefined {
  return s.faults.find((f) => f.dependency === dependency && t >= f.fromMs && t < f.toMs);
}

function percentile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? null;
}

/**
 * Plays a scenario on virtual time against a simulated fleet whose every tool call goes through
 * selfheal with its defaults: an hour of incident in a second or two.
 */
export async function runScenario(
  scenario: Scenario,
  options: RunOptions = {},
): Promise<SimResult> {
  const clock = new VirtualClock();
  const t0 = clock.now();
  const elapsed = () => clock.now() - t0;
  const random = seededRandom(scenario.seed);
  const timeline: TimelineEntry[] = [];
  const note = (kind: TimelineEntry["kind"], text: string) => {
    const entry = { atMs: elapsed(), kind, text };
    timeline.push(entry);
    options.onTimeline?.(entry);
  };
  let pages = 0;
  const pager: Notifier = {
    channel: "pager",
    send: (alert) => {
      pages++;
      note("page", alert.title);
      return Promise.resolve();
    },
  };
  // The status page, answered in process from the scenario (no network in a simulation).
  const page = scenario.statusPage;
  const fakeFetch = (() => {
    const degraded = page !== undefined && elapsed() >= page.fromMs && elapsed() < page.toMs;
    return Promise.resolve(Response.json({ status: { indicator: degraded ? "major" : "none" } }));
  }) as typeof fetch;

  const [primary] = scenario.llm;
  const sh = createSelfHealing({
    agent: `sim-${scenario.name}`,
    clock,
    logger: { warn: () => undefined },
    diagnosis: {
      ...(page && {
        statusPages: { [page.dependency]: `http://status.${page.dependency}.invalid` },
      }),
      fetch: fakeFetch,
    },
    recovery: {
      random,
      notifiers: [pager],
      providers: [...scenario.llm, scenario.api].map((d) => ({
        name: d.name,
        usdPerCall: d.usdPerCall,
      })),
    },
  });

  const callsPerProvider: Record<string, number> = {};
  const behave = async (dep: Dependency, ctx: CallContext, answer: string): Promise<string> => {
    callsPerProvider[dep.name] = (callsPerProvider[dep.name] ?? 0) + 1;
    const w = activeFault(scenario, dep.name, elapsed());
    const latency = w?.slowMs ?? dep.latencyMs;
    const f = w?.fault;
    if (f?.kind === "timeout" && random() < f.rate) {
      await clock.sleep(Number.MAX_SAFE_INTEGER, ctx.signal); // until the caller's deadline
    } else if (f?.kind === "rate_limit" && random() < f.rate) {
      const fault = httpFault(
        "rate_limit",
        f.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: f.retryAfterSeconds },
      );
      if (fault) throw new InjectedApiError(fault);
    } else if (f?.kind === "worded" && random() < f.rate) {
      throw new Error(f.message);
    } else if (
      f?.kind === "flap" &&
      (elapsed() - (w?.fromMs ?? 0)) % (f.downMs + f.upMs) < f.downMs
    ) {
      const fault = httpFault("http_503");
      if (fault) throw new InjectedApiError(fault);
    } else if (f?.kind === "empty" && random() < f.rate) {
      answer = "";
    }
    await clock.sleep(latency, ctx.signal);
    return answer;
  };
  const llmByName = new Map(scenario.llm.map((d) => [d.name, d]));
  const complete = sh.tool(
    "complete",
    { readOnly: true, kind: "llm", providers: scenario.llm.map((d) => d.name), timeoutMs: 10_000 },
    (question: string, ctx) =>
      behave(
        llmByName.get(ctx.provider ?? "") ?? (primary as Dependency),
        ctx,
        `answer to ${question}`,
      ),
  );
  const charge = sh.tool(
    "charge",
    {
      readOnly: false,
      providers: [scenario.api.name],
      timeoutMs: 5_000,
      idempotencyKey: (order: string) => order,
    },
    (order: string, ctx) => behave(scenario.api, ctx, `charged ${order}`),
  );

  const recoveries: RecoveryEvent[] = [];
  let incidents = 0;
  let recovered = 0;
  let driftEvents = 0;
  let falseTrips = 0;
  sh.on("recovery", (e) => recoveries.push(e));
  sh.on("tool-call", (e) => {
    if (e.failedAttempts === undefined || e.failedAttempts === 0) return;
    incidents++;
    if (e.outcome === "recovered") recovered++;
  });
  sh.on("status-change", (e) => {
    if (e.tool === undefined) note("status", `agent ${e.from} -> ${e.to}`);
  });
  sh.on("circuit-change", (e) => {
    note("circuit", `${e.dependency} breaker ${e.state}`);
    if (e.state === "open" && !activeFault(scenario, e.dependency, elapsed())) falseTrips++;
  });
  sh.on("diagnoser-drift", (e) => {
    if (e.tool !== undefined) return;
    driftEvents++;
    note(
      "drift",
      `UNKNOWN share ${(e.share * 100).toFixed(0)}% of ${e.samples} diagnoses: "${e.unknown.at(-1)?.text ?? ""}"`,
    );
  });

  let userVisibleFailures = 0;
  const tasks: Promise<void>[] = [];
  let taskCount = 0;
  for (let agent = 0; agent < scenario.agents; agent++) {
    const offset = Math.floor((agent * scenario.taskEveryMs) / scenario.agents);
    for (let at = offset; at < scenario.durationMs; at += scenario.taskEveryMs) {
      const id = `agent${agent}-t${at}`;
      taskCount++;
      clock.setTimer(at, () => {
        tasks.push(
          sh
            .task(id, async () => {
              const answer = await complete(`ticket ${id}`);
              if (answer === "") throw new Error("empty answer reached the user");
              await charge(`order-${id}`);
            })
            .catch(() => {
              userVisibleFailures++;
            }),
        );
      });
    }
  }
  for (let t = 0; t < scenario.durationMs + GRACE_MS; t += MINUTE) {
    await clock.advance(MINUTE);
    await options.onMinute?.(elapsed());
  }
  await Promise.all(tasks);
  await sh.close();

  const times = recoveries
    .filter((r) => r.outcome === "recovered")
    .map((r) => r.durationMs / 1000)
    .sort((a, b) => a - b);
  const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
  return {
    scenario: scenario.name,
    virtual_minutes: scenario.durationMs / MINUTE,
    tasks: taskCount,
    incidents,
    recovered,
    auto_recovery_rate: incidents === 0 ? 1 : round(recovered / incidents, 4),
    mttr_seconds: times.length ? round(times.reduce((a, b) => a + b, 0) / times.length) : null,
    mttr_p95_seconds: times.length ? round(percentile(times, 0.95) ?? 0) : null,
    user_visible_failures: userVisibleFailures,
    pages,
    recovery_cost_usd: round(
      recoveries.reduce((sum, r) => sum + r.costUsd, 0),
      4,
    ),
    wasted_retries: recoveries.reduce((sum, r) => sum + r.wastedRetries, 0),
    false_trips: falseTrips,
    drift_events: driftEvents,
    calls_per_provider: callsPerProvider,
    timeline,
  };
}
