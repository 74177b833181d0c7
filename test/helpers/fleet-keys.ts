/**
 * What the tests of RedisFleetSync read back from Redis: its key names (spelled as the source
 * builds them, from keys.ts), verdicts and TTLs; and a client's first connection.
 */
import type { Redis } from "ioredis";
import { expect } from "vitest";
import type { BreakerVerdict } from "../../src/recovery/breaker.js";
import { alertKeyPrefix, breakerKeyPrefix, encodeName, fleetTag } from "../../src/redis/keys.js";
import { hashKey } from "../../src/telemetry/spans.js";

export const stateKey = (p: string, dependency: string): string =>
  `${breakerKeyPrefix(p)}${encodeName(dependency)}`;
export const leaseKey = (p: string, dependency: string): string =>
  `${fleetTag(p)}:lease:${encodeName(dependency)}`;
export const gateKey = (p: string, kind: string): string =>
  `${alertKeyPrefix(p)}${encodeName(kind)}`;
export const resultKey = (p: string, tool: string, key: string): string =>
  `${fleetTag(p)}:ledger:${encodeName(tool)}:${hashKey(key)}`;
export const markerKey = (p: string, tool: string, key: string): string =>
  `${resultKey(p, tool, key)}:inflight`;
export const epochKey = (p: string): string => `${fleetTag(p)}:epoch`;

/** A verdict reached at `at`, open for `openMs` (closed when undefined). */
export function verdict(openMs: number | undefined, at = Date.now(), opens = 1): BreakerVerdict {
  return openMs === undefined
    ? { open: false, until: at, opens, at }
    : { open: true, until: at + openMs, opens, at };
}

/** A TTL in (0, max]. */
export function within(ttl: number, max: number): void {
  expect(ttl).toBeGreaterThan(0);
  expect(ttl).toBeLessThanOrEqual(max);
}

/** Resolves once `client` is connected (connecting a lazy one). */
export function connected(client: Redis): Promise<void> {
  if (client.status === "ready") return Promise.resolve();
  if (client.status === "wait") void client.connect().catch(() => undefined);
  return new Promise((resolve) => {
    client.once("ready", () => {
      resolve();
    });
  });
}
