/**
 * What an instance tells the things plugged into it (src/engine/finish.ts, engine-state.ts): a
 * long run's heartbeat moves one step per finished call, whatever the heartbeat does wrong; a
 * shared store's state changes reach `store-degraded` listeners until the instance closes.
 */
import { describe, expect, it } from "vitest";
import type { StoreState } from "../../src/health/store.js";
import { MemorySignalStore } from "../../src/health/memory-store.js";
import { isHealthCheckFailedError } from "../../src/index.js";
import { virtualInstance } from "../helpers/engine.js";
import { recordingMeters } from "../helpers/otel.js";

describe("a heartbeat", () => {
  it("moves one step per finished call, named for the tool; an error is a step too", async () => {
    const beats: unknown[] = [];
    const { sh } = virtualInstance({ heartbeat: { advance: (beat) => beats.push(beat) } });
    const search = sh.tool("search", { readOnly: true }, () => "found");
    const broken = sh.tool("broken", { readOnly: true }, () => {
      throw Object.assign(new Error("bad"), { status: 400 });
    });
    await search(undefined);
    await expect(broken(undefined)).rejects.toThrow("bad");
    expect(beats).toEqual([
      { stage: "tool_call", lastTool: "search" },
      { stage: "tool_call", lastTool: "broken" },
    ]);
  });

  it("that throws or rejects is logged, redacted, and never the call's failure", async () => {
    let mode: "throw" | "reject" = "throw";
    const { sh, warnings } = virtualInstance({
      heartbeat: {
        advance: () => {
          const error = new Error("EACCES writing /run/beat for admin@example.com");
          if (mode === "throw") throw error;
          return Promise.reject(error);
        },
      },
    });
    const search = sh.tool("search", { readOnly: true }, () => "found");
    expect(await search(undefined)).toBe("found");
    mode = "reject";
    expect(await search(undefined)).toBe("found");
    await new Promise((resolve) => setImmediate(resolve)); // the rejection is handled after
    expect(warnings).toHaveLength(2);
    for (const w of warnings) {
      expect(w).toMatch(/^selfheal: heartbeat failed after search: EACCES writing \/run\/beat/);
      expect(w).not.toContain("admin@example.com");
    }
  });

  it("moves for a write blocked by read-only mode too: the run did take a step", async () => {
    const beats: unknown[] = [];
    const { sh, clock } = virtualInstance({
      heartbeat: { advance: (beat) => beats.push(beat) },
      health: { cacheMs: 0 },
    });
    const failing = sh.tool("fetch", { readOnly: true }, () => {
      throw Object.assign(new Error("down"), { status: 503 });
    });
    for (let i = 0; i < 10; i++) await expect(failing(undefined)).rejects.toThrow("down");
    await clock.advance(1);
    const charge = sh.tool("charge", { readOnly: false }, () => "charged");
    await expect(charge(undefined)).rejects.toSatisfy(isHealthCheckFailedError);
    expect(beats.filter((b) => (b as { lastTool: string }).lastTool === "charge")).toEqual([
      { stage: "tool_call", lastTool: "charge" },
    ]);
  });
});

describe("a shared store's state", () => {
  /** A memory store that reports state changes as a Redis store does. */
  function watchedStore() {
    const listeners = new Set<(state: StoreState) => void>();
    const store = Object.assign(new MemorySignalStore(), {
      onStateChange(listener: (state: StoreState) => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      tell: (state: StoreState) => {
        for (const l of listeners) l(state);
      },
      listeners,
    });
    return store;
  }

  it("reaches store-degraded listeners with the agent and the time, until the instance closes", async () => {
    const store = watchedStore();
    const { sh, clock } = virtualInstance({ store });
    const seen: unknown[] = [];
    sh.on("store-degraded", (e) => seen.push(e));
    expect(store.listeners.size).toBe(1);
    store.tell({ degraded: true, reason: "Redis unreachable" });
    await clock.advance(5_000);
    store.tell({ degraded: false });
    expect(seen).toEqual([
      { agent: "test-agent", degraded: true, reason: "Redis unreachable", at: clock.now() - 5_000 },
      { agent: "test-agent", degraded: false, at: clock.now() },
    ]);
    await sh.close();
    expect(store.listeners.size).toBe(0);
  });
});

describe("the instance's gauges", () => {
  it("say nothing of health or read-only before a report; the store is not away", async () => {
    const meters = recordingMeters();
    virtualInstance({ meterProvider: meters.meterProvider });
    const points = await meters.read();
    expect(points.has("selfheal_health_status{agent=test-agent}")).toBe(false);
    expect(points.has("selfheal_read_only{agent=test-agent}")).toBe(false);
    expect(points.get("selfheal_store_degraded{agent=test-agent}")).toBe(0);
  });

  it("read-only is 1 while recovery holds the agent read-only, 0 once good calls lift it", async () => {
    const meters = recordingMeters();
    const { sh, clock } = virtualInstance({
      meterProvider: meters.meterProvider,
      health: { cacheMs: 0 },
      recovery: { plans: { SERVICE_DOWN: ["degrade_to_readonly"], BAD_REQUEST: [] } },
    });
    const read = async () => {
      const points = await meters.read();
      return [
        points.get("selfheal_health_status{agent=test-agent}"),
        points.get("selfheal_read_only{agent=test-agent}"),
      ];
    };
    const ok = sh.tool("ok", { readOnly: true }, () => "fine");
    await ok(undefined);
    await sh.status();
    expect(await read()).toEqual([0, 0]);
    // One 503, recovered by degrading: health is still healthy, writes are refused.
    const down = sh.tool("down", { readOnly: true }, () => {
      throw Object.assign(new Error("down"), { status: 503 });
    });
    await expect(clock.run(down(undefined))).rejects.toThrow("down");
    await sh.status(); // too few calls to judge: healthy, and not enough to lift read-only
    expect(await read()).toEqual([0, 1]);
    // Enough good calls after it: the next read lifts read-only mode.
    for (let i = 0; i < 40; i++) await ok(undefined);
    await sh.status();
    expect(await read()).toEqual([0, 0]);
  });

  it("store_degraded follows the shared store's state", async () => {
    const meters = recordingMeters();
    const listeners: ((state: StoreState) => void)[] = [];
    const store = Object.assign(new MemorySignalStore(), {
      onStateChange(listener: (state: StoreState) => void) {
        listeners.push(listener);
        return () => undefined;
      },
    });
    virtualInstance({ meterProvider: meters.meterProvider, store });
    for (const l of listeners) l({ degraded: true, reason: "gone" });
    expect((await meters.read()).get("selfheal_store_degraded{agent=test-agent}")).toBe(1);
    for (const l of listeners) l({ degraded: false });
    expect((await meters.read()).get("selfheal_store_degraded{agent=test-agent}")).toBe(0);
  });
});

describe("diagnoser drift", () => {
  it("is emitted with the agent once UNKNOWN errors pass the share", async () => {
    const { sh } = virtualInstance({
      diagnosis: { drift: { threshold: 0.5, window: 10, minSamples: 4 } },
    });
    const drifts: { agent: string; tool: string | undefined }[] = [];
    sh.on("diagnoser-drift", (e) => drifts.push({ agent: e.agent, tool: e.tool }));
    const t = sh.tool("t", { readOnly: true }, () => {
      throw new Error("flux capacitor misaligned");
    });
    for (let i = 0; i < 6; i++) await expect(t(undefined)).rejects.toThrow("flux");
    expect(drifts.length).toBeGreaterThan(0);
    expect(drifts.every((d) => d.agent === "test-agent")).toBe(true);
    expect(drifts.map((d) => d.tool)).toContain("t");
  });
});
