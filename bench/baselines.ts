/**
 * What users would pick instead of selfheal, as simulator policies: no recovery, retry-only with
 * p-retry 6, and cockatiel 3 retry + circuit breaker + fallback, each configured as its README
 * shows. All get the same per-call timeouts. They run on the simulator's virtual time: their
 * timers and clocks are pointed at it while they run (as fake timers do).
 */
import {
  ConsecutiveBreaker,
  ExponentialBackoff,
  circuitBreaker,
  fallback,
  handleAll,
  retry,
  wrap,
} from "cockatiel";
import pRetry from "p-retry";
import { withDeadline } from "../src/deadline.js";
import type { Policy, PolicyFactory, World } from "../src/sim/run.js";
import type { Dependency } from "../src/sim/scenarios.js";
import type { VirtualClock } from "../src/testing/index.js";

const PAGE_THROTTLE_MS = 10 * 60_000; // the same throttle selfheal's alerts get

/** Points setTimeout, clearTimeout and Date.now at the virtual clock; returns the undo. */
function virtualGlobals(clock: VirtualClock): () => void {
  const saved = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    now: Date.now,
  };
  globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const cancel = clock.setTimer(ms ?? 0, () => {
      fn(...args);
    });
    return { cancel, unref: () => undefined, ref: () => undefined, hasRef: () => false };
  }) as unknown as typeof setTimeout;
  globalThis.clearTimeout = ((handle?: { cancel?: () => void }) => {
    handle?.cancel?.();
  }) as typeof clearTimeout;
  Date.now = () => Math.floor(clock.now());
  return () => {
    globalThis.setTimeout = saved.setTimeout;
    globalThis.clearTimeout = saved.clearTimeout;
    Date.now = saved.now;
  };
}

/** Counts what a baseline does: attempts, first failures, recoveries, spend and (throttled) pages. */
function baseline(
  world: World,
  shape: (attempt: (dep: Dependency, ms: number, answer: string) => Promise<string>) => {
    complete: (question: string) => Promise<string>;
    charge: (order: string) => Promise<string>;
  },
): Policy {
  const restore = virtualGlobals(world.clock);
  const f = {
    incidents: 0,
    recovered: 0,
    recoveryTimesMs: [] as number[],
    pages: 0,
    recoveryCostUsd: 0,
    wastedRetries: 0,
    falseTrips: 0,
    driftEvents: 0,
  };
  let lastPage = Number.NEGATIVE_INFINITY;
  /** One logical call: its attempts are counted, its first failure starts the clock. */
  const logical = async (
    run: (
      attempt: (dep: Dependency, ms: number, answer: string) => Promise<string>,
    ) => Promise<string>,
  ) => {
    let attempts = 0;
    let firstFailure: number | undefined;
    const attempt = async (dep: Dependency, ms: number, answer: string) => {
      if (attempts++ > 0) f.recoveryCostUsd += dep.usdPerCall;
      const controller = new AbortController();
      try {
        const value = await withDeadline(() => world.behave(dep, controller.signal, answer), {
          controller,
          timeoutMs: ms,
          timeoutError: () => new Error("timed out"),
          clock: world.clock,
        });
        if (value === "") throw new Error("empty answer"); // what a careful user checks, at least
        return value;
      } catch (e) {
        firstFailure ??= world.clock.now();
        throw e;
      }
    };
    try {
      const value = await run(attempt);
      if (firstFailure !== undefined) {
        f.incidents++;
        f.recovered++;
        f.recoveryTimesMs.push(world.clock.now() - firstFailure);
      }
      return value;
    } catch (e) {
      f.incidents++;
      if (world.clock.now() - lastPage >= PAGE_THROTTLE_MS) {
        lastPage = world.clock.now();
        f.pages++;
      }
      throw e;
    }
  };
  return {
    complete: (q) => logical((attempt) => shape(attempt).complete(q)),
    charge: (o) => logical((attempt) => shape(attempt).charge(o)),
    figures: () => f,
    close: () => {
      restore();
      return Promise.resolve();
    },
  };
}

const primaryOf = (w: World) => w.scenario.llm[0] as Dependency;
const secondaryOf = (w: World) => (w.scenario.llm[1] ?? w.scenario.llm[0]) as Dependency;

export const BASELINES: Record<string, PolicyFactory> = {
  "no recovery": (w) =>
    baseline(w, (attempt) => ({
      complete: (q) => attempt(primaryOf(w), 10_000, `answer to ${q}`),
      charge: (o) => attempt(w.scenario.api, 5_000, `charged ${o}`),
    })),
  "p-retry 6": (w) =>
    baseline(w, (attempt) => ({
      complete: (q) =>
        pRetry(() => attempt(primaryOf(w), 10_000, `answer to ${q}`), { retries: 5 }),
      charge: (o) => pRetry(() => attempt(w.scenario.api, 5_000, `charged ${o}`), { retries: 5 }),
    })),
  "cockatiel 3": (w) => {
    // One policy per dependency, shared by all calls: breakers are per dependency.
    const policy = () =>
      wrap(
        retry(handleAll, { maxAttempts: 3, backoff: new ExponentialBackoff() }),
        circuitBreaker(handleAll, { halfOpenAfter: 10_000, breaker: new ConsecutiveBreaker(5) }),
      );
    const llm = policy();
    const api = policy();
    return baseline(w, (attempt) => ({
      complete: (q) =>
        wrap(
          fallback(handleAll, () => attempt(secondaryOf(w), 10_000, `answer to ${q}`)),
          llm,
        ).execute(() => attempt(primaryOf(w), 10_000, `answer to ${q}`)),
      charge: (o) => api.execute(() => attempt(w.scenario.api, 5_000, `charged ${o}`)),
    }));
  },
};
