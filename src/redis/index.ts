/**
 * `selfheal/redis`: state a fleet of workers shares through Redis (ioredis 6, an optional peer:
 * `npm install ioredis`).
 *
 *   import { redisStore } from "selfheal/redis";
 *   const sh = createSelfHealing({ agent: "support", store: redisStore({ url: process.env.REDIS_URL }) });
 *   // ...
 *   await sh.close(); // sends what waits, quits the connections the store opened
 */
import { closedWithInstances } from "../engine/options.js";
import { RedisSignalStore, type RedisStoreOptions } from "./store.js";

export { RedisSignalStore, type RedisStoreOptions } from "./store.js";
export { readFleet, type FleetStatus } from "./fleet.js";
export type { MissingPeerError } from "./peer.js";

/**
 * A store of health signals in Redis, shared by every worker that uses the same prefix. Given to
 * `createSelfHealing`, it is closed by the instance's `close()` (by the last one's, when several
 * instances share it): what waits is sent, and the connections the store opened (its client, made
 * from `url`, and the breaker channel's subscriber) are quit. A `client` you pass is never closed.
 */
export function redisStore(options: RedisStoreOptions): RedisSignalStore {
  return closedWithInstances(new RedisSignalStore(options));
}
