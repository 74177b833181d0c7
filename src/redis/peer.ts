import { createRequire } from "node:module";
import type * as Ioredis from "ioredis";

/** Thrown when `ioredis`, the optional peer of `selfheal/redis`, is not installed. */
export interface MissingPeerError extends Error {
  code: "ERR_SELFHEAL_MISSING_PEER";
  missing: string[];
}

let loaded: typeof Ioredis | undefined;

/**
 * ioredis, loaded when a store is made rather than when `selfheal/redis` is imported, so a
 * missing peer is a clear error at that call (naming the install command), not a module-not-found
 * at start-up. It is CommonJS: `require` loads it synchronously.
 */
export function ioredis(): typeof Ioredis {
  if (loaded) return loaded;
  try {
    loaded = createRequire(import.meta.url)("ioredis") as typeof Ioredis;
    return loaded;
  } catch (error) {
    const e = new Error(
      "selfheal/redis needs the optional peer dependency ioredis (6.x), not installed. Install it with: npm i ioredis",
      { cause: error },
    ) as MissingPeerError;
    e.code = "ERR_SELFHEAL_MISSING_PEER";
    e.missing = ["ioredis"];
    throw e;
  }
}
