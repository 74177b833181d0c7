/**
 * `selfheal/redis`: state a fleet of workers shares through Redis (ioredis 6, an optional peer:
 * `npm install ioredis`).
 *
 *   import { redisStore } from "selfheal/redis";
 *   const sh = createSelfHealing({ agent: "support", store: redisStore({ url: process.env.REDIS_URL }) });
 */
export { redisStore, RedisSignalStore, type RedisStoreOptions } from "./store.js";
export { readFleet, type FleetStatus } from "./fleet.js";
export type { MissingPeerError } from "./peer.js";
