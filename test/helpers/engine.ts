import type { TracerProvider } from "@opentelemetry/api";
import {
  createSelfHealing,
  isSelfHealConfigError,
  type SelfHealConfigError,
  type RecoveryEvent,
  type RecoveryOptions,
  type SelfHealingOptions,
} from "../../src/index.js";
import type { Notifier } from "../../src/notify/index.js";
import type { WhenFleetDown } from "../../src/recovery/idempotency.js";
import type { RedisSignalStore } from "../../src/redis/index.js";
import { PATTERNS } from "../../src/telemetry/conventions.js";
import { VirtualClock } from "../../src/testing/index.js";

/** Recovery plans that do nothing: for tests of what happens before recovery. */
export const NO_RECOVERY = { plans: Object.fromEntries(PATTERNS.map((p) => [p, []])) };

/**
 * A selfheal instance on virtual time with a logger that keeps what it is told. Recovery is off
 * unless the test passes `recovery` (then the default plans apply).
 */
export function virtualInstance(options: Partial<SelfHealingOptions> = {}) {
  const clock = new VirtualClock();
  const warnings: string[] = [];
  const sh = createSelfHealing({
    agent: "test-agent",
    clock,
    logger: { warn: (m) => warnings.push(m) },
    recovery: NO_RECOVERY,
    ...options,
  });
  return { sh, clock, warnings };
}

/** The config error `fn` throws; fails the test when it throws anything else, or nothing. */
export function configError(fn: () => unknown): SelfHealConfigError {
  try {
    fn();
  } catch (e) {
    if (isSelfHealConfigError(e)) return e;
    throw e;
  }
  throw new Error("expected a SelfHealConfigError");
}

/**
 * An instance on virtual time for recovery tests: spans to `tracerProvider`, the default plans,
 * `random: 0` (no jitter), and the recovery events and circuit changes it emits, in order.
 */
export function recoveryInstance(
  tracerProvider: TracerProvider,
  recovery: RecoveryOptions = {},
  options: Partial<SelfHealingOptions> = {},
) {
  const events: RecoveryEvent[] = [];
  const circuits: string[] = [];
  const vi = virtualInstance({
    tracerProvider,
    recovery: { random: () => 0, ...recovery },
    ...options,
  });
  vi.sh.on("recovery", (e) => events.push(e));
  vi.sh.on("circuit-change", (e) => circuits.push(`${e.dependency}:${e.state}`));
  return { ...vi, events, circuits };
}

/** A notifier that keeps the title of every alert it is sent. */
export function recordingPager(pages: string[]): Notifier {
  return {
    channel: "pager",
    send: (alert) => {
      pages.push(alert.title);
      return Promise.resolve();
    },
  };
}

/**
 * A payment worker of a fleet: an instance on `store` whose keyed `charge` write pushes `name`
 * onto `sent` each time it is really sent.
 */
export function chargingWorker(
  store: RedisSignalStore,
  name: string,
  sent: string[],
  whenFleetDown: WhenFleetDown,
) {
  const sh = createSelfHealing({
    agent: "pay",
    store,
    logger: { warn: () => undefined },
    recovery: { ledger: { whenFleetDown } },
  });
  const charge = sh.tool(
    "charge",
    { readOnly: false, idempotencyKey: (o: { order: string }) => o.order },
    (o: { order: string }) => {
      sent.push(name);
      return { charged: o.order, by: name };
    },
  );
  return { sh, store, charge };
}
