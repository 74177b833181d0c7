import type { Redis } from "ioredis";
import { systemClock } from "../clock.js";
import { HealthEvaluator, type HealthReport } from "../health/evaluator.js";
import type { SignalWindows } from "../health/store.js";
import { DEFAULT_BASELINE_TAU_MS, DEFAULT_THRESHOLDS } from "../health/thresholds.js";
import { agentsKey, checkPrefix, decodeName } from "./keys.js";
import { RedisSignalStore } from "./store.js";

/** What `selfheal status --redis` prints: each agent's health, computed from the fleet's buckets. */
export interface FleetStatus {
  prefix: string;
  at: number;
  agents: HealthReport[];
}

export interface ReadFleetOptions {
  client?: Redis;
  url?: string;
  prefix?: string;
  /** One agent only (default: every agent that wrote under the prefix). */
  agent?: string;
  windows?: Partial<SignalWindows>;
  commandTimeoutMs?: number;
}

/**
 * Reads the fleet's health from Redis with the default thresholds (an agent's own thresholds live
 * in its code). Throws when Redis cannot be read: a status tool must not show a stale fleet.
 */
export async function readFleet(options: ReadFleetOptions): Promise<FleetStatus> {
  const prefix = checkPrefix(options.prefix ?? "selfheal");
  const problems: string[] = [];
  const store = new RedisSignalStore({
    ...(options.client ? { client: options.client } : { url: options.url ?? "" }),
    prefix,
    ...(options.windows && { windows: options.windows }),
    ...(options.commandTimeoutMs !== undefined && { commandTimeoutMs: options.commandTimeoutMs }),
    logger: { warn: (m) => problems.push(m) },
  });
  try {
    const client = options.client ?? store.connection;
    await client.ping();
    const names =
      options.agent !== undefined
        ? [options.agent]
        : (await client.smembers(agentsKey(prefix))).map(decodeName).sort();
    const at = systemClock.now();
    const agents: HealthReport[] = [];
    for (const agent of names) {
      const evaluator = new HealthEvaluator({
        agent,
        store,
        clock: systemClock,
        cacheMs: 0,
        baselineTauMs: DEFAULT_BASELINE_TAU_MS,
        thresholds: () => DEFAULT_THRESHOLDS,
        onChange: () => undefined,
        onStoreError: (error) => {
          throw error;
        },
      });
      agents.push(await evaluator.current(at));
      if (store.isDegraded) throw new Error(problems.at(-1) ?? "Redis could not be read");
    }
    return { prefix, at, agents };
  } finally {
    await store.close();
  }
}
