/**
 * `selfheal/redis` without its optional peer: ioredis is loaded when a store is made, so its
 * absence is a typed error at that call (naming the install command), tried again on the next
 * call, and a loaded ioredis is kept (one `require`).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { MissingPeerError } from "../../src/redis/peer.js";

type Peer = typeof import("../../src/redis/peer.js");

afterEach(() => {
  vi.doUnmock("node:module");
  vi.resetModules();
});

/** A fresh peer module whose `require("ioredis")` is counted, and fails while `missing()`. */
async function peerWith(missing: () => boolean): Promise<{ peer: Peer; loads: () => number }> {
  vi.resetModules();
  let loads = 0;
  vi.doMock("node:module", async (importOriginal) => {
    const real = await importOriginal<typeof import("node:module")>();
    return {
      createRequire: (from: string | URL) => {
        const require = real.createRequire(from);
        return (id: string) => {
          loads++;
          if (missing()) throw new Error(`Cannot find module '${id}'`);
          return require(id) as unknown;
        };
      },
    };
  });
  return { peer: await import("../../src/redis/peer.js"), loads: () => loads };
}

describe("ioredis, the optional peer of selfheal/redis", () => {
  it("not installed: ERR_SELFHEAL_MISSING_PEER naming it, with the install command; tried again", async () => {
    let absent = true;
    const { peer, loads } = await peerWith(() => absent);
    const error = (() => {
      try {
        peer.ioredis();
      } catch (e) {
        return e as MissingPeerError;
      }
      throw new Error("expected ioredis() to throw");
    })();
    expect(error.code).toBe("ERR_SELFHEAL_MISSING_PEER");
    expect(error.missing).toEqual(["ioredis"]);
    expect(error.message).toBe(
      "selfheal/redis needs the optional peer dependency ioredis (6.x), not installed. Install it with: npm i ioredis",
    );
    expect((error.cause as Error).message).toBe("Cannot find module 'ioredis'");

    absent = false; // installed meanwhile: the next call loads it
    expect(typeof peer.ioredis().Redis).toBe("function");
    expect(loads()).toBe(2);
  });

  it("installed: loaded once, then the same module every time", async () => {
    const { peer, loads } = await peerWith(() => false);
    const first = peer.ioredis();
    expect(peer.ioredis()).toBe(first);
    expect(loads()).toBe(1);
  });
});
