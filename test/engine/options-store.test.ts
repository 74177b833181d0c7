/**
 * Which store an instance closes (src/engine/options.ts): the memory store it made, a store
 * selfheal opened (marked by `closedWithInstances`, as `redisStore()` is) once its last instance
 * closes, and never a store the user made. With a real Redis: test/redis/close*.test.ts.
 */
import { describe, expect, it } from "vitest";
import { closedWithInstances, releaseStore, resolveOptions } from "../../src/engine/options.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { createSelfHealing, isSelfHealConfigError } from "../../src/index.js";

/** A store that counts its close() calls. */
function countingStore() {
  const store = new MemorySignalStore();
  let closes = 0;
  return Object.assign(store, {
    close: () => {
      closes++;
      return Promise.resolve();
    },
    closes: () => closes,
  });
}

const quiet = { warn: () => undefined };

describe("the store an instance lets go", () => {
  it("closes the memory store it made itself", async () => {
    const resolved = resolveOptions({ agent: "a", logger: quiet });
    expect(resolved.ownsStore).toBe(true);
    let closed = 0;
    resolved.store.close = () => {
      closed++;
      return Promise.resolve();
    };
    await releaseStore(resolved);
    expect(closed).toBe(1);
  });

  it("never closes a store the user made", async () => {
    const store = countingStore();
    const resolved = resolveOptions({ agent: "a", logger: quiet, store });
    expect(resolved.ownsStore).toBe(false);
    await releaseStore(resolved);
    const sh = createSelfHealing({ agent: "a", logger: quiet, store });
    await sh.close();
    expect(store.closes()).toBe(0);
  });

  it("closes a store selfheal opened when the last of its instances closes", async () => {
    const store = closedWithInstances(countingStore());
    expect(closedWithInstances(store)).toBe(store); // marking twice keeps one count
    const a = createSelfHealing({ agent: "a", logger: quiet, store });
    const b = createSelfHealing({ agent: "b", logger: quiet, store });
    await a.close();
    await a.close(); // twice: still one release
    expect(store.closes()).toBe(0);
    await b.close();
    expect(store.closes()).toBe(1);
    // Used again after: held again, closed again by its instance.
    const c = createSelfHealing({ agent: "c", logger: quiet, store });
    await c.close();
    expect(store.closes()).toBe(2);
  });

  it("an instance refused at construction holds nothing", async () => {
    const store = closedWithInstances(countingStore());
    expect(() => createSelfHealing({ agent: "", logger: quiet, store })).toThrow();
    expect(() =>
      createSelfHealing({ agent: "a", logger: quiet, store, health: { cacheMs: -1 } }),
    ).toThrow();
    const a = createSelfHealing({ agent: "a", logger: quiet, store });
    await a.close();
    expect(store.closes()).toBe(1); // the refused ones did not keep it open
  });

  it("a store marked by something else than a count is the user's", async () => {
    const store = countingStore();
    Object.defineProperty(store, Symbol.for("selfheal:store-holders"), { value: "mine" });
    const resolved = resolveOptions({ agent: "a", logger: quiet, store });
    expect(resolved.ownsStore).toBe(false);
    await releaseStore(resolved);
    expect(store.closes()).toBe(0);
  });
});

describe("resolveOptions: the store and the heartbeat", () => {
  it("a URL for a store is refused, naming redisStore", () => {
    let thrown: unknown;
    try {
      resolveOptions({ agent: "a", store: "redis://127.0.0.1:6379" });
    } catch (error) {
      thrown = error;
    }
    expect(isSelfHealConfigError(thrown)).toBe(true);
    expect((thrown as Error).message).toContain(
      'expected an object, got string: a store is a SignalStore; for Redis, pass redisStore({ url: "redis://127.0.0.1:6379" }) from selfheal/redis',
    );
  });

  it("a heartbeat without advance() is refused", () => {
    expect(() => resolveOptions({ agent: "a", heartbeat: {} })).toThrow(/heartbeat/);
    expect(() => resolveOptions({ agent: "a", heartbeat: { advance: 1 } })).toThrow(/advance/);
    const heartbeat = { advance: () => undefined };
    expect(resolveOptions({ agent: "a", heartbeat }).heartbeat).toBe(heartbeat);
  });
});
