import type { Redis } from "ioredis";
import { ioredis } from "./peer.js";
import { systemClock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import { HealthEvaluator, type HealthReport } from "../health/evaluator.js";
import type { SignalWindows } from "../health/store.js";
import { DEFAULT_BASELINE_TAU_MS, DEFAULT_THRESHOLDS } from "../health/thresholds.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import { readVerdicts, scanKeys } from "./verdicts.js";
import {
  agentsKey,
  alertKeyPrefix,
  breakerKeyPrefix,
  budgetKeyPrefix,
  checkPrefix,
  decodeName,
} from "./keys.js";
import { RedisSignalStore } from "./store.js";

/** What `selfheal status --redis` prints: each agent's health, computed from the fleet's buckets. */
export interface FleetStatus {
  prefix: string;
  at: number;
  agents: HealthReport[];
  /** The fleet's breakers that are open now, by dependency (the others are closed). */
  openBreakers: { dependency: string; until: number; opens: number }[];
  /** Alert kinds throttled now: the period left, and how many alerts were held back in it. */
  throttledAlerts: { kind: string; msLeft: number; held: number }[];
  /** Tasks with recovery spend kept by the fleet (ids are hashed in Redis: counts and sums). */
  budgets: { tasks: number; totalUsd: number; maxUsd: number };
}

export interface ReadFleetOptions {
  /** An ioredis client (neither connected nor quit here)... */
  client?: Redis;
  /** ...or a URL: one connection, one attempt, closed when read. */
  url?: string | undefined;
  prefix?: string;
  /** One agent only (default: every agent that wrote under the prefix). */
  agent?: string;
  windows?: Partial<SignalWindows>;
  /** Each command gives up after this long, ms (default 500). */
  commandTimeoutMs?: number;
  /** How long to wait for the connection (and its handshake), ms (default 3000). */
  connectTimeoutMs?: number;
}

/**
 * Reads the fleet's health from Redis with the default thresholds (an agent's own thresholds live
 * in its code). Throws when Redis cannot be read, or when `agent` never wrote under the prefix: a
 * status tool must not show a stale or made-up fleet. Errors are one line, credentials redacted.
 */
export async function readFleet(options: ReadFleetOptions): Promise<FleetStatus> {
  if ((options.client === undefined) === (options.url === undefined))
    throw new SelfHealConfigError("readFleet", "pass either `client` (an ioredis client) or `url`");
  const prefix = checkPrefix(options.prefix ?? "selfheal");
  const commandTimeoutMs = options.commandTimeoutMs ?? 500;
  const connectTimeoutMs = options.connectTimeoutMs ?? 3_000;
  // A one-shot read: one connection attempt, no reconnecting, and a server that never answers
  // (nor closes) is let go at once rather than after ioredis's 2 s disconnect grace.
  const client =
    options.client ??
    new (ioredis().Redis)(options.url ?? "", {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: connectTimeoutMs,
      commandTimeout: commandTimeoutMs,
      disconnectTimeout: 200,
      retryStrategy: () => null,
      protocol: 3,
    });
  let degradedBy: string | undefined;
  const store = new RedisSignalStore({
    client,
    prefix,
    ...(options.windows && { windows: options.windows }),
    commandTimeoutMs,
    logger: { warn: () => undefined }, // every failure is thrown instead
  });
  const stop = store.onStateChange((state) => {
    if (state.degraded) degradedBy = state.reason;
  });
  let fleet: FleetStatus;
  try {
    await ready(client, connectTimeoutMs);
    const names = await agentNames(client, prefix, options.agent);
    const at = Math.floor(systemClock.now()); // whole ms: the JSON reads as a timestamp
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
      if (store.isDegraded) throw new Error(degradedBy ?? "Redis could not be read");
    }
    const verdicts = await readVerdicts(client, breakerKeyPrefix(prefix), direct);
    const openBreakers = [...verdicts]
      .filter(([, v]) => v.open && v.until > at)
      .map(([dependency, v]) => ({ dependency, until: Math.ceil(v.until), opens: v.opens }))
      .sort((a, b) => a.dependency.localeCompare(b.dependency));
    fleet = {
      prefix,
      at,
      agents,
      openBreakers,
      throttledAlerts: await throttled(client, prefix),
      budgets: await budgets(client, prefix),
    };
  } catch (error) {
    stop();
    if (options.client) {
      await store.close().catch(() => undefined);
    } else {
      // Our own client is dropped at once: close() would wait out the command timeout again (its
      // last flush, on a connection that failed). Its timers do not hold the process open.
      client.disconnect();
      void store.close().catch(() => undefined);
    }
    let text = describeError(error);
    // ioredis's own words for its command timeout (the handshake of a server that never answers).
    if (text === "Command timed out") text = `Redis did not answer within ${commandTimeoutMs} ms`;
    throw new Error(redact(text), { cause: error });
  }
  stop();
  await store.close();
  if (!options.client) client.disconnect();
  return fleet;
}

const direct = <T>(work: Promise<T>) => work;

/** Alert kinds in their throttle period now, with the time left and the count held back. */
async function throttled(client: Redis, prefix: string): Promise<FleetStatus["throttledAlerts"]> {
  const keyPrefix = alertKeyPrefix(prefix);
  const gates = (await scanKeys(client, keyPrefix, direct)).filter((k) => !k.endsWith(":held"));
  const out: FleetStatus["throttledAlerts"] = [];
  for (const gate of gates) {
    const [msLeft, held] = await Promise.all([client.pttl(gate), client.get(`${gate}:held`)]);
    if (msLeft <= 0) continue;
    out.push({ kind: decodeName(gate.slice(keyPrefix.length)), msLeft, held: Number(held ?? 0) });
  }
  return out.sort((a, b) => a.kind.localeCompare(b.kind));
}

/** The tasks whose recovery spend the fleet keeps. */
async function budgets(client: Redis, prefix: string): Promise<FleetStatus["budgets"]> {
  const keys = await scanKeys(client, budgetKeyPrefix(prefix), direct);
  const spends = keys.length ? (await client.mget(...keys)).map((v) => Number(v ?? 0)) : [];
  const totalUsd = spends.reduce((a, b) => a + b, 0);
  return { tasks: spends.length, totalUsd, maxUsd: Math.max(0, ...spends) };
}

/** The agents that wrote under the prefix, by name; or the one asked for, if it is one of them. */
async function agentNames(client: Redis, prefix: string, agent?: string): Promise<string[]> {
  const known = (await client.smembers(agentsKey(prefix))).map(decodeName).sort();
  if (agent === undefined || known.includes(agent)) return agent === undefined ? known : [agent];
  const shown = known.slice(0, 10).map(quoted);
  if (known.length > 10) shown.push(`${known.length - 10} more`);
  throw new Error(
    `no agent ${quoted(agent)} under prefix "${prefix}" (known: ${shown.join(", ") || "none"})`,
  );
}

/** A name in a message: quoted and escaped (JSON), cut past 60 characters. */
function quoted(name: string): string {
  const chars = Array.from(JSON.stringify(name)); // by code point: a pair is never cut
  return chars.length <= 62
    ? chars.join("")
    : `${chars.slice(0, 60).join("")}…" (${name.length} chars)`;
}

/**
 * Waits for the client to be ready: the store's client sends nothing while it is connecting (no
 * offline queue), and a refused or unreachable server must fail in seconds, not retry forever.
 */
async function ready(client: Redis, timeoutMs: number): Promise<void> {
  if (client.status === "ready") return;
  const closed = () => new Error("the Redis client is closed");
  if (client.status === "end" || client.status === "close") throw closed();
  if (client.status === "wait") void client.connect().catch(() => undefined);
  await new Promise<void>((resolve, reject) => {
    const done = (error?: unknown) => {
      clearTimeout(timer);
      client.off("ready", onReady);
      client.off("error", onError);
      client.off("end", onEnd);
      if (error === undefined) resolve();
      else reject(error instanceof Error ? error : new Error(describeThrown(error)));
    };
    const onReady = () => {
      done();
    };
    const onError = (error: unknown) => {
      done(error);
    };
    // disconnect() while connecting: it will never be ready, so say so now.
    const onEnd = () => {
      done(closed());
    };
    const timer = setTimeout(() => {
      done(new Error(`Redis did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    client.once("ready", onReady);
    client.once("error", onError);
    client.once("end", onEnd);
  });
}

/**
 * One line for an error: Node's AggregateError (a host with several addresses) by its inner
 * errors, an error with no message (some socket failures) by its code rather than its bare name.
 */
function describeError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  let text: string;
  if (error instanceof AggregateError && error.message === "" && error.errors.length > 0)
    text = [...new Set(error.errors.map((e) => describeThrown(e)))].join("; ");
  else if (error instanceof Error && error.message === "" && typeof code === "string") text = code;
  else text = describeThrown(error);
  // One space for each run of whitespace that holds a line break (each run matched once: linear).
  return text.replace(/\s+/g, (run) => (run.includes("\n") ? " " : run));
}
