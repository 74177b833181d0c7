/**
 * What users would pick instead of selfheal, as simulator policies, each configured as its own
 * docs recommend for an LLM call with two providers and a payment write: no recovery (the
 * simulator's own, src/sim/no-recovery-policy.ts); p-retry 9 with failover; cockatiel 4 retry +
 * circuit breaker + fallback. All get the same providers and the same per-call timeouts as
 * selfheal, and run on the simulator's virtual time: their timers, clocks and Math.random are
 * pointed at it (seeded) while they run, as fake timers do.
 *
 * The payment goes without an idempotency key, as in both libraries' examples: neither retries
 * with one for you. A user who adds one gets selfheal's 0 double charges with either.
 */
import {
  BrokenCircuitError,
  ConsecutiveBreaker,
  DelegateBackoff,
  ExponentialBackoff,
  circuitBreaker,
  fallback,
  handleAll,
  handleWhen,
  retry,
  wrap,
  type IBackoff,
  type IRetryBackoffContext,
} from "cockatiel";
import pRetry, { AbortError } from "p-retry";
import { withDeadline } from "../src/deadline.js";
import {
  NO_RECOVERY,
  type Policy,
  type PolicyContext,
  type PolicyFactory,
} from "../src/sim/run.js";
import type { Dependency } from "../src/sim/scenarios.js";
import type { World } from "../src/sim/world.js";

/** The per-call timeouts selfheal's tools get in the simulation. */
const LLM_TIMEOUT_MS = 10_000;
const PAYMENT_TIMEOUT_MS = 5_000;
/** A Retry-After longer than this is not waited for (selfheal's cap). */
const RETRY_AFTER_CAP_MS = 60_000;

/** Points setTimeout, clearTimeout, Date.now and Math.random at the world; returns the undo. */
function virtualGlobals(world: World): () => void {
  const { clock } = world;
  const saved = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    now: Date.now,
    random: Math.random,
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
  Math.random = world.random;
  return () => {
    globalThis.setTimeout = saved.setTimeout;
    globalThis.clearTimeout = saved.clearTimeout;
    Date.now = saved.now;
    Math.random = saved.random;
  };
}

// What a careful user classifies from the error, as both libraries' docs suggest.
const statusOf = (e: unknown): number | undefined => {
  const status = (e as { status?: unknown } | undefined)?.status;
  return typeof status === "number" ? status : undefined;
};
/** Worth another try on the same route: no status (network, timeout), 408, 429, 5xx. */
const isTransient = (e: unknown): boolean => {
  const s = statusOf(e);
  return s === undefined || s === 408 || s === 429 || s >= 500;
};
/** What a breaker should count: the dependency is down, not throttling nor refusing the request. */
const isOutage = (e: unknown): boolean => {
  const s = statusOf(e);
  return s === undefined || s >= 500;
};
const retryAfterMs = (e: unknown): number | undefined => {
  const header = (
    e as { headers?: { get?: (name: string) => string | null } } | undefined
  )?.headers?.get?.("retry-after");
  const seconds = header == null ? NaN : Number(header);
  return Number.isFinite(seconds) && seconds >= 0
    ? Math.min(seconds * 1000, RETRY_AFTER_CAP_MS)
    : undefined;
};
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type Attempt = (dep: Dependency, timeoutMs: number, call: string) => Promise<string>;

/** A baseline policy: its shape of the two calls over one attempt function. */
function baseline(
  { world }: PolicyContext,
  shape: (attempt: Attempt) => Pick<Policy, "complete" | "charge">,
  falseTrips: () => number = () => 0,
): Policy {
  const restore = virtualGlobals(world);
  const attempt: Attempt = async (dep, timeoutMs, call) => {
    const controller = new AbortController();
    const value = await withDeadline(() => world.behave({ dep, call, signal: controller.signal }), {
      controller,
      timeoutMs,
      timeoutError: () => new Error("timed out"),
      clock: world.clock,
    });
    if (value === "") throw new Error("empty answer"); // what a careful user checks, at least
    return value;
  };
  return {
    ...shape(attempt),
    figures: () => ({ falseTrips: falseTrips(), driftEvents: 0 }),
    close: () => {
      restore();
      return Promise.resolve();
    },
  };
}

const llmOf = (world: World) => world.scenario.llm;

/**
 * p-retry 9 as its README shows (`{ retries: 5 }` for the write, AbortError for what retrying
 * cannot fix, onFailedAttempt to wait out Retry-After), with failover: the primary with 2
 * retries, then the secondary with 2. Since p-retry 7, onFailedAttempt gets a context
 * (`{ error, retriesLeft, … }`), no longer the error itself.
 */
function pRetryPolicy(context: PolicyContext): Policy {
  const run = (
    attempt: Attempt,
    dep: Dependency,
    timeoutMs: number,
    call: string,
    retries: number,
  ) =>
    pRetry(
      async () => {
        try {
          return await attempt(dep, timeoutMs, call);
        } catch (e) {
          throw isTransient(e) ? e : new AbortError(e as Error); // 4xx: no retry
        }
      },
      {
        retries,
        onFailedAttempt: async ({ error, retriesLeft }) => {
          const wait = retryAfterMs(error);
          if (wait !== undefined && retriesLeft > 0) await sleep(wait);
        },
      },
    );
  return baseline(context, (attempt) => ({
    complete: async (question) => {
      let last: unknown;
      for (const dep of llmOf(context.world)) {
        try {
          return await run(attempt, dep, LLM_TIMEOUT_MS, question, 2);
        } catch (e) {
          last = e;
        }
      }
      throw last;
    },
    charge: (order) => run(attempt, context.world.scenario.api, PAYMENT_TIMEOUT_MS, order, 5),
  }));
}

/**
 * cockatiel 4 as its README composes it: retry (3, exponential backoff with its decorrelated
 * jitter from 1 s, Retry-After honoured through a DelegateBackoff) of transient errors only,
 * around a circuit breaker (5 consecutive failures, half-open after 10 s) that counts outages,
 * not 429s nor 4xx; for the LLM, a fallback to the secondary behind its own retry and breaker.
 * 4.0 changes nothing this uses (Node 22 and ESM, thrown values typed `unknown`; half-open still
 * lets one trial call through by default, now its `halfOpenSampling`).
 */
function cockatielPolicy(context: PolicyContext): Policy {
  const { world } = context;
  let falseTrips = 0;
  const backoff = new DelegateBackoff<IRetryBackoffContext<unknown>, IBackoff<unknown>>(
    (ctx, state) => {
      const next = (state ?? new ExponentialBackoff({ initialDelay: 1_000 })).next(ctx);
      const wait = "error" in ctx.result ? retryAfterMs(ctx.result.error) : undefined;
      return { delay: wait ?? next.duration, state: next };
    },
  );
  // One pipeline per dependency, shared by all calls: breakers are per dependency.
  const pipeline = (dep: Dependency) => {
    const breaker = circuitBreaker(handleWhen(isOutage), {
      halfOpenAfter: 10_000,
      breaker: new ConsecutiveBreaker(5),
    });
    breaker.onBreak(() => {
      world.note("circuit", `${dep.name} breaker open`);
      if (!world.faultNow(dep.name)) falseTrips++;
    });
    breaker.onReset(() => {
      world.note("circuit", `${dep.name} breaker closed`);
    });
    return wrap(
      retry(
        handleWhen((e) => !(e instanceof BrokenCircuitError) && isTransient(e)),
        { maxAttempts: 3, backoff },
      ),
      breaker,
    );
  };
  const [primary, secondary] = llmOf(world);
  if (!primary || !secondary) throw new Error("the cockatiel baseline needs two LLM providers");
  const llm = pipeline(primary);
  const llmFallback = pipeline(secondary);
  const api = pipeline(world.scenario.api);
  return baseline(
    context,
    (attempt) => ({
      complete: (question) =>
        wrap(
          fallback(handleAll, () =>
            llmFallback.execute(() => attempt(secondary, LLM_TIMEOUT_MS, question)),
          ),
          llm,
        ).execute(() => attempt(primary, LLM_TIMEOUT_MS, question)),
      charge: (order) => api.execute(() => attempt(world.scenario.api, PAYMENT_TIMEOUT_MS, order)),
    }),
    () => falseTrips,
  );
}

export const BASELINES: Record<string, PolicyFactory> = {
  // The simulator's own (`selfheal demo` shows it as "without selfheal").
  [NO_RECOVERY.name]: NO_RECOVERY.create,
  "p-retry 9": pRetryPolicy,
  "cockatiel 4": cockatielPolicy,
};
