import { describe, expect, it } from "vitest";
import { FailureInjector, VirtualClock, seededRandom } from "../../src/testing/index.js";

const ok = (n: number) => Promise.resolve(n * 2);

describe("FailureInjector", () => {
  it("injects for the first N calls, then lets calls through, and counts", async () => {
    const inj = new FailureInjector();
    inj.inject("rate_limit", { first: 2 }, { retryAfterSeconds: 1 });
    const f = inj.wrap(ok);
    const e1 = await f(1, undefined).catch((e: unknown) => e);
    expect(e1).toMatchObject({ name: "RateLimitError", status: 429, code: "rate_limit_exceeded" });
    expect((e1 as { headers: Headers }).headers.get("retry-after")).toBe("1");
    await expect(f(2, undefined)).rejects.toMatchObject({ status: 429 });
    await expect(f(3, undefined)).resolves.toBe(6);
    expect(inj.calls).toBe(3);
    expect(inj.injected.get("rate_limit")).toBe(2);
  });

  it("injects during a window of virtual time", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    inj.inject("http_503", { during: { fromMs: 60_000, toMs: 120_000 } });
    const f = inj.wrap(ok);
    await expect(f(1, undefined)).resolves.toBe(2);
    await clock.advance(60_000);
    await expect(f(1, undefined)).rejects.toMatchObject({ status: 503 });
    await clock.advance(60_000);
    await expect(f(1, undefined)).resolves.toBe(2);
  });

  it("injects with a probability from a seeded generator: the same seed replays the same faults", async () => {
    const run = async (seed: number) => {
      const inj = new FailureInjector({ seed });
      inj.inject("connection_reset", { probability: 0.3 });
      const f = inj.wrap(ok);
      const outcomes: boolean[] = [];
      for (let i = 0; i < 1_000; i++)
        outcomes.push(
          await f(i, undefined).then(
            () => true,
            () => false,
          ),
        );
      return outcomes;
    };
    const a = await run(42);
    expect(await run(42)).toEqual(a);
    expect(await run(43)).not.toEqual(a);
    const failures = a.filter((x) => !x).length;
    expect(failures).toBeGreaterThan(250);
    expect(failures).toBeLessThan(350);
  });

  it("seededRandom: seed 7 gives a pinned sequence, other seeds differ, and a sequence replays in full", () => {
    // mulberry32 of seed 7, pinned: a change to the generator changes every recorded schedule.
    const seven = seededRandom(7);
    expect(Array.from({ length: 5 }, () => seven())).toEqual([
      0.011704753153026104, 0.06195825757458806, 0.97690763277933, 0.6990287057124078,
      0.5214452685322613,
    ]);
    const draw = (seed: number, n = 1_000) => {
      const next = seededRandom(seed);
      return Array.from({ length: n }, () => next());
    };
    const a = draw(7);
    expect(draw(7)).toEqual(a);
    expect(draw(8)).not.toEqual(a);
    expect(draw(8)[0]).not.toBe(a[0]);
    expect(draw(0)[0]).not.toBe(a[0]);
    expect(a.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(new Set(a).size).toBe(a.length); // no short cycle
  });

  it("hang waits for the call's signal; empty returns an empty answer; timeout waits its delay", async () => {
    const clock = new VirtualClock();
    const inj = new FailureInjector({ clock });
    const f = inj.wrap((n: number, _ctx: { signal?: AbortSignal }) => Promise.resolve(String(n)));
    const remove = inj.inject("hang", { first: 1 });
    const controller = new AbortController();
    const hung = f(1, { signal: controller.signal }).catch((e: unknown) => e);
    controller.abort(new Error("gave up"));
    expect(await hung).toMatchObject({ message: "gave up" });
    remove();
    inj.inject("empty", { first: 1 });
    await expect(f(2, {})).resolves.toBe("");
    inj.clear();
    inj.inject("timeout", { first: 1 }, { delayMs: 5_000 });
    const late = f(3, {}).catch((e: unknown) => e);
    await clock.advance(5_000);
    expect(await late).toMatchObject({ name: "APIConnectionTimeoutError", code: "ETIMEDOUT" });
  });

  it("the first injection whose trigger fires decides", async () => {
    const inj = new FailureInjector();
    inj.inject("auth", { first: 1 });
    inj.inject("http_500", { first: 2 });
    const f = inj.wrap(ok);
    await expect(f(1, undefined)).rejects.toMatchObject({ status: 401 });
    await expect(f(1, undefined)).rejects.toMatchObject({ status: 500 });
    await expect(f(1, undefined)).resolves.toBe(2);
  });

  it("rejects unknown faults and malformed triggers", () => {
    const inj = new FailureInjector();
    expect(() => inj.inject("gremlins" as never, { first: 1 })).toThrow(/unknown fault kind/);
    expect(() => inj.inject("auth", { first: -1 })).toThrow(/first/);
    expect(() => inj.inject("auth", { probability: 2 })).toThrow(/probability/);
    expect(() => inj.inject("auth", { during: { fromMs: 5, toMs: 1 } })).toThrow(/during/);
    expect(() => inj.inject("auth", { first: 1, probability: 1 })).toThrow(/exactly one/);
  });
});
