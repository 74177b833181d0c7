import { describe, expect, it } from "vitest";
import type { CallContext, Clock, ProviderConfig, SelfHealEvents } from "../../src/index.js";
import { VirtualClock } from "../../src/testing/index.js";
import { virtualInstance } from "../helpers/engine.js";

const S = 1_000;
const INTERVAL = 30 * S;

type WarmupEvent = SelfHealEvents["warmup"];

/**
 * An instance whose provider `backup` warms up every 30 s with `warmup`; `routes` registers a
 * tool with a primary and `backup`, so backup's breaker may trip on its own evidence.
 */
function setup(warmup: NonNullable<ProviderConfig["warmup"]>, { routes = true } = {}) {
  const vi = virtualInstance({
    recovery: {
      warmupIntervalMs: INTERVAL,
      providers: [{ name: "primary" }, { name: "backup", warmup }],
    },
  });
  const { sh, clock } = vi;
  const start = clock.now();
  const warmups: WarmupEvent[] = [];
  const circuits: string[] = [];
  sh.on("warmup", (e) => warmups.push(e));
  sh.on("circuit-change", (e) => circuits.push(`${e.state}@${(e.at - start) / S}s`));
  if (routes) {
    sh.tool("complete", { readOnly: true, providers: ["primary", "backup"] }, () => "ok");
  }
  return { ...vi, start, warmups, circuits };
}

describe("warm-up probes", () => {
  it("report success without an error field, and failure with the redacted error and a warning", async () => {
    let fail = false;
    const { clock, start, warmups, warnings } = setup(() =>
      fail
        ? Promise.reject(new Error("backup key sk-abcdefghijklmnopqrstuvwx rejected"))
        : Promise.resolve(),
    );
    await clock.advance(INTERVAL);
    fail = true;
    await clock.advance(INTERVAL);
    expect(warmups).toHaveLength(2);
    expect(warmups[0]).toStrictEqual({ provider: "backup", ok: true, at: start + INTERVAL });
    expect(Object.keys(warmups[0] ?? {})).not.toContain("error");
    expect(warmups[1]).toStrictEqual({
      provider: "backup",
      ok: false,
      at: start + 2 * INTERVAL,
      error: "backup key [REDACTED_KEY] rejected",
    });
    expect(warnings).toEqual([
      'selfheal: warm-up of provider "backup" failed: backup key [REDACTED_KEY] rejected',
    ]);
  });

  it("a warm-up that never answers is cut at the breaker's probe timeout, its signal aborted", async () => {
    let signal: AbortSignal | undefined;
    const { clock, start, warmups, warnings } = setup((s) => {
      signal = s;
      return new Promise(() => undefined); // ignores its signal
    });
    await clock.advance(INTERVAL + 10 * S - 1);
    expect(warmups).toEqual([]);
    expect(signal?.aborted).toBe(false);
    await clock.advance(1);
    expect(warmups).toEqual([
      {
        provider: "backup",
        ok: false,
        at: start + INTERVAL + 10 * S,
        error: "warm-up of backup timed out",
      },
    ]);
    expect(signal?.aborted).toBe(true);
    expect(warnings).toEqual([
      'selfheal: warm-up of provider "backup" failed: warm-up of backup timed out',
    ]);
  });

  it("successful warm-ups count as successes: they never trip a tripping breaker", async () => {
    let warmups = 0;
    const { clock, circuits } = setup(() => {
      warmups++;
      return Promise.resolve();
    });
    await clock.advance(10 * INTERVAL);
    expect(warmups).toBe(10);
    expect(circuits).toEqual([]);
  });

  it("a failed warm-up on a closed breaker is one failure, not a failed probe: five in a row open it", async () => {
    const { clock, circuits } = setup(() => Promise.reject(new Error("backup is down")));
    await clock.advance(4 * INTERVAL);
    expect(circuits).toEqual([]);
    await clock.advance(INTERVAL);
    expect(circuits).toEqual(["open@150s"]);
  });

  it("on a half-open breaker the warm-up is the probe: its success closes the breaker", async () => {
    let up = false;
    const { clock, circuits, warmups } = setup(() =>
      up ? Promise.resolve() : Promise.reject(new Error("backup is down")),
    );
    await clock.advance(5 * INTERVAL); // the fifth failure opens it for 5 s
    up = true;
    await clock.advance(INTERVAL);
    expect(circuits).toEqual(["open@150s", "half_open@180s", "closed@180s"]);
    expect(warmups.at(-1)?.ok).toBe(true);
  });

  it("a failed probe warm-up reopens the breaker", async () => {
    const { clock, circuits } = setup(() => Promise.reject(new Error("backup is down")));
    await clock.advance(6 * INTERVAL);
    expect(circuits).toEqual(["open@150s", "half_open@180s", "open@180s"]);
  });

  it("while a call holds the half-open probe, a warm-up is no probe: it neither closes nor reopens", async () => {
    let up = false;
    const { sh, clock, circuits } = setup(() =>
      up ? Promise.resolve() : Promise.reject(new Error("backup is down")),
    );
    // A second tool that uses backup alone: its call is the probe once backup is half-open.
    const hang = sh.tool(
      "backup_only",
      { readOnly: true, providers: ["backup"] },
      (_: undefined, ctx: CallContext) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener("abort", () => {
            reject(ctx.signal.reason);
          });
        }),
    );
    await clock.advance(5 * INTERVAL); // open at 150 s for 5 s
    await clock.advance(25 * S); // 175 s: half-open
    const probe = hang(undefined).catch((e: unknown) => e);
    up = true;
    await clock.advance(5 * S); // 180 s: the warm-up runs while the call's probe is out
    expect(circuits).toEqual(["open@150s", "half_open@175s"]);
    await clock.advance(5 * S); // 185 s: the call's probe times out (10 s probe timeout)
    await probe;
    expect(circuits.slice(0, 2)).toEqual(["open@150s", "half_open@175s"]);
    expect(circuits).not.toContain("closed@180s");
  });

  it("stop on close(), even when a warm-up is in flight: nothing is scheduled after it settles", async () => {
    let started = 0;
    let finish: (() => void) | undefined;
    const { sh, clock, warmups } = setup(
      () =>
        new Promise<void>((resolve) => {
          started++;
          finish = resolve;
        }),
      { routes: false },
    );
    await clock.advance(INTERVAL);
    expect(started).toBe(1);
    await sh.close();
    finish?.();
    await clock.advance(10 * INTERVAL);
    expect(started).toBe(1);
    expect(clock.pendingTimers).toBe(0);
    expect(warmups).toEqual([]); // listeners were released by close()
  });

  it("run on unref'd timers, so they never keep the process alive", () => {
    const virtual = new VirtualClock();
    const timers: { ms: number; unref: boolean | undefined }[] = [];
    const clock: Clock = {
      now: () => virtual.now(),
      sleep: (ms, signal) => virtual.sleep(ms, signal),
      setTimer: (ms, callback, options) => {
        timers.push({ ms, unref: options?.unref });
        return virtual.setTimer(ms, callback);
      },
    };
    virtualInstance({
      clock,
      recovery: { providers: [{ name: "backup", warmup: () => Promise.resolve() }] },
    });
    expect(timers).toEqual([{ ms: 15 * 60_000, unref: true }]);
  });
});
