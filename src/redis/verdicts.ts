/**
 * The breaker verdicts stored in Redis: read under a key prefix (for `readFleet` and the fleet's
 * resync) and checked, since anything stored or published may be another program's.
 */
import type { Cluster, Redis } from "ioredis";
import type { BreakerVerdict } from "../recovery/breaker.js";
import { decodeName } from "./keys.js";

/** The keys under a prefix (SCAN; at most 10,000: a status tool, not an export). */
export async function scanKeys(
  client: Redis,
  keyPrefix: string,
  timed: <T>(work: Promise<T>) => Promise<T>,
): Promise<string[]> {
  const keys: string[] = [];
  // A Cluster client sends a keyless SCAN to one master picked at random: scan every master.
  const nodes = client.isCluster ? (client as unknown as Cluster).nodes("master") : [client];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, found] = await timed(node.scan(cursor, "MATCH", `${keyPrefix}*`, "COUNT", 200));
      cursor = next;
      keys.push(...found);
    } while (cursor !== "0" && keys.length < 10_000);
  }
  return keys;
}

/** The breaker verdicts standing in Redis under a key prefix, by dependency (SCAN, then MGET). */
export async function readVerdicts(
  client: Redis,
  keyPrefix: string,
  timed: <T>(work: Promise<T>) => Promise<T>,
): Promise<Map<string, BreakerVerdict>> {
  const keys = await scanKeys(client, keyPrefix, timed);
  const verdicts = new Map<string, BreakerVerdict>();
  if (keys.length === 0) return verdicts;
  const values = await timed(client.mget(...keys));
  keys.forEach((key, i) => {
    const verdict = parseVerdict(values[i]);
    if (verdict) verdicts.set(decodeName(key.slice(keyPrefix.length)), verdict);
  });
  return verdicts;
}

/** A stored verdict, checked. */
function parseVerdict(text: string | null | undefined): BreakerVerdict | undefined {
  try {
    return checkVerdict(JSON.parse(text ?? "null"));
  } catch {
    return undefined;
  }
}

/** A verdict read from Redis or the channel, checked: anything else is no verdict. */
export function checkVerdict(v: unknown): BreakerVerdict | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { open, until, opens, at } = v as Record<string, unknown>;
  if (typeof open !== "boolean") return undefined;
  if (typeof until !== "number" || typeof opens !== "number" || typeof at !== "number")
    return undefined;
  if (![until, opens, at].every(Number.isFinite)) return undefined;
  return { open, until, opens, at };
}
