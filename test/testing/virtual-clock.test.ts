import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/testing/index.js";
import { stateOf, turns } from "./settle.js";

const START = 1_000_000;

describe("VirtualClock: time", () => {
  it("starts at 2026-01-01T00:00:00Z by default, or at the given time", () => {
    expect(new VirtualClock().now()).toBe(Date.UTC(2026, 0, 1));
    expect(new Date(new VirtualClock().now()).toISOString()).toBe("2026-01-01T00:00:00.000Z");
    expect(new VirtualClock(START).now()).toBe(START);
    expect(new VirtualClock(0).now()).toBe(0);
  });

  it("moves only when advanced, by exactly the amount asked", async () => {
    const clock = new VirtualClock(START);
    await turns();
    expect(clock.now()).toBe(START);
    await clock.advance(250);
    expect(clock.now()).toBe(START + 250);
    await clock.advance(0);
    expect(clock.now()).toBe(START + 250);
    await clock.advance(3_600_000);
    expect(clock.now()).toBe(START + 250 + 3_600_000);
  });
});

describe("VirtualClock: timers", () => {
  it("fires a timer once its time has come, not before, and only once", async () => {
    const clock = new VirtualClock(START);
    const fired: number[] = [];
    clock.setTimer(100, () => fired.push(clock.now()));
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(99);
    expect(fired).toEqual([]);
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(1);
    expect(fired).toEqual([START + 100]);
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(fired).toEqual([START + 100]);
  });

  it("fires due timers in time order, each seeing its own deadline as now()", async () => {
    const clock = new VirtualClock(START);
    const fired: [string, number][] = [];
    for (const [name, ms] of [
      ["c", 300],
      ["a", 100],
      ["d", 5_000],
      ["b", 200],
    ] as const)
      clock.setTimer(ms, () => fired.push([name, clock.now() - START]));
    expect(clock.pendingTimers).toBe(4);
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["a", 100],
      ["b", 200],
      ["c", 300],
    ]);
    expect(clock.now()).toBe(START + 1_000);
    expect(clock.pendingTimers).toBe(1);
  });

  it("fires timers with equal deadlines in the order they were set", async () => {
    const clock = new VirtualClock(START);
    const fired: string[] = [];
    clock.setTimer(50, () => fired.push("late"));
    for (const name of ["first", "second", "third"]) clock.setTimer(10, () => fired.push(name));
    clock.setTimer(5, () => fired.push("early"));
    await clock.advance(100);
    expect(fired).toEqual(["early", "first", "second", "third", "late"]);
  });

  it.each([
    ["zero", 0],
    ["negative", -500],
    ["NaN", Number.NaN],
  ])("a %s delay fires at the current time, on the next advance", async (_name, ms) => {
    const clock = new VirtualClock(START);
    await clock.advance(40);
    const seen: number[] = [];
    clock.setTimer(ms, () => seen.push(clock.now()));
    clock.setTimer(1, () => seen.push(clock.now()));
    await clock.advance(0);
    expect(seen).toEqual([START + 40]);
    expect(clock.now()).toBe(START + 40);
    await clock.advance(1);
    expect(seen).toEqual([START + 40, START + 41]);
  });

  it("a positive delay does not fire on advance(0)", async () => {
    const clock = new VirtualClock(START);
    const fired: number[] = [];
    clock.setTimer(5, () => fired.push(1));
    await clock.advance(0);
    expect(fired).toEqual([]);
    expect(clock.pendingTimers).toBe(1);
  });

  it("cancel removes only its own timer, and is harmless when called again", async () => {
    const clock = new VirtualClock(START);
    const fired: string[] = [];
    const cancelA = clock.setTimer(10, () => fired.push("a"));
    clock.setTimer(20, () => fired.push("b"));
    clock.setTimer(30, () => fired.push("c"));
    cancelA();
    expect(clock.pendingTimers).toBe(2);
    cancelA();
    expect(clock.pendingTimers).toBe(2);
    await clock.advance(100);
    expect(fired).toEqual(["b", "c"]);
    cancelA();
    expect(clock.pendingTimers).toBe(0);
  });

  it("cancelling a fired timer leaves the others alone", async () => {
    const clock = new VirtualClock(START);
    const fired: string[] = [];
    const cancelA = clock.setTimer(10, () => fired.push("a"));
    clock.setTimer(20, () => fired.push("b"));
    await clock.advance(10);
    cancelA();
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(10);
    expect(fired).toEqual(["a", "b"]);
  });

  it("a timer set by a callback fires in the same advance if it falls due within it", async () => {
    const clock = new VirtualClock(START);
    const fired: [string, number][] = [];
    clock.setTimer(10, () => {
      fired.push(["outer", clock.now() - START]);
      clock.setTimer(15, () => fired.push(["inner", clock.now() - START]));
      clock.setTimer(500, () => fired.push(["beyond", clock.now() - START]));
    });
    clock.setTimer(20, () => fired.push(["other", clock.now() - START]));
    await clock.advance(100);
    expect(fired).toEqual([
      ["outer", 10],
      ["other", 20],
      ["inner", 25],
    ]);
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(410);
    expect(fired.at(-1)).toEqual(["beyond", 510]);
  });

  it("lets promise chains settle between timers: chained sleeps all run within one advance", async () => {
    const clock = new VirtualClock(START);
    const steps: number[] = [];
    const chain = (async () => {
      for (let i = 0; i < 4; i++) {
        await clock.sleep(10);
        steps.push(clock.now() - START);
      }
    })();
    await clock.advance(40);
    expect(steps).toEqual([10, 20, 30, 40]);
    await chain;
  });

  it("sees a sleep started in a pending promise callback before it looks for due timers", async () => {
    const clock = new VirtualClock(START);
    const fired: number[] = [];
    void Promise.resolve().then(() =>
      clock.sleep(5).then(() => {
        fired.push(clock.now() - START);
      }),
    );
    await clock.advance(5);
    expect(fired).toEqual([5]);
  });

  it("work a timer callback leaves two event-loop turns deep is done when advance returns", async () => {
    const clock = new VirtualClock(START);
    const done: string[] = [];
    clock.setTimer(10, () => {
      setImmediate(() => {
        setImmediate(() => done.push("deep"));
      });
    });
    await clock.advance(10);
    expect(done).toEqual(["deep"]);
  });
});

describe("VirtualClock: sleep", () => {
  it("resolves once the clock has moved ms, not before", async () => {
    const clock = new VirtualClock(START);
    const slept = clock.sleep(1_000);
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(999);
    expect(await stateOf(slept)).toBe("pending");
    await clock.advance(1);
    expect(await stateOf(slept)).toEqual({ resolved: undefined });
    expect(clock.pendingTimers).toBe(0);
  });

  it("rejects at once with the reason of a signal aborted before, and sets no timer", async () => {
    const clock = new VirtualClock(START);
    const reason = new Error("already gone");
    const slept = clock.sleep(1_000, AbortSignal.abort(reason));
    expect(clock.pendingTimers).toBe(0);
    expect(await stateOf(slept)).toEqual({ rejected: reason });
  });

  it("rejects with the abort reason when aborted while sleeping, and drops its timer", async () => {
    const clock = new VirtualClock(START);
    const controller = new AbortController();
    const fired: string[] = [];
    clock.setTimer(2_000, () => fired.push("other"));
    const slept = clock.sleep(1_000, controller.signal);
    await clock.advance(500);
    expect(await stateOf(slept)).toBe("pending");
    const reason = new Error("stop");
    controller.abort(reason);
    expect(await stateOf(slept)).toEqual({ rejected: reason });
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(2_000);
    expect(fired).toEqual(["other"]);
  });

  it("an abort without a reason rejects with an AbortError", async () => {
    const clock = new VirtualClock(START);
    const controller = new AbortController();
    const slept = clock.sleep(1_000, controller.signal);
    controller.abort();
    const outcome = (await stateOf(slept)) as { rejected: unknown };
    expect(outcome.rejected).toMatchObject({ name: "AbortError" });
  });

  it("an abort after the sleep resolved changes nothing", async () => {
    const clock = new VirtualClock(START);
    const controller = new AbortController();
    const slept = clock.sleep(10, controller.signal);
    await clock.advance(10);
    controller.abort(new Error("late"));
    expect(await stateOf(slept)).toEqual({ resolved: undefined });
    expect(clock.pendingTimers).toBe(0);
  });

  it.each([0, -5, Number.NaN])("sleep(%s) resolves on the next advance(0)", async (ms) => {
    const clock = new VirtualClock(START);
    const slept = clock.sleep(ms);
    expect(await stateOf(slept)).toBe("pending");
    await clock.advance(0);
    expect(await stateOf(slept)).toEqual({ resolved: undefined });
    expect(clock.now()).toBe(START);
  });
});

describe("VirtualClock: run", () => {
  it("advances in steps until the promise settles and returns its value", async () => {
    const clock = new VirtualClock(START);
    const work = clock.sleep(2_500).then(() => "done");
    await expect(clock.run(work)).resolves.toBe("done");
    expect(clock.now()).toBe(START + 3_000); // default steps of 1 s
  });

  it("takes the step size asked", async () => {
    const clock = new VirtualClock(START);
    const work = clock.sleep(2_500).then(() => clock.now() - START);
    await expect(clock.run(work, { stepMs: 100 })).resolves.toBe(2_500);
    expect(clock.now()).toBe(START + 2_500);
  });

  it("passes a rejection on, even one that comes after several steps", async () => {
    const clock = new VirtualClock(START);
    const failure = new Error("boom");
    const work = clock.sleep(3_000).then(() => {
      throw failure;
    });
    await expect(clock.run(work, { stepMs: 1_000 })).rejects.toBe(failure);
    expect(clock.now()).toBe(START + 3_000);
  });

  it("stops advancing after maxMs: a promise that never settles leaves the clock at start + maxMs", async () => {
    const clock = new VirtualClock(START);
    const never = new Promise<never>(() => undefined);
    const running = clock.run(never, { stepMs: 1_000, maxMs: 5_000 });
    while (clock.now() < START + 5_000) await turns(1);
    await turns(20);
    expect(clock.now()).toBe(START + 5_000);
    expect(await stateOf(running)).toBe("pending");
  });

  it("with maxMs 0 it does not move the clock", async () => {
    const clock = new VirtualClock(START);
    await expect(clock.run(Promise.resolve(7), { maxMs: 0 })).resolves.toBe(7);
    expect(clock.now()).toBe(START);
  });

  it("the default limit is a day", async () => {
    const clock = new VirtualClock(START);
    const day = 24 * 3_600_000;
    const work = clock.sleep(day - 1).then(() => "just in time");
    await expect(clock.run(work, { stepMs: 3_600_000 })).resolves.toBe("just in time");
    expect(clock.now()).toBe(START + day);
    const never = clock.run(new Promise<never>(() => undefined), { stepMs: 3_600_000 });
    while (clock.now() < START + 2 * day) await turns(1);
    await turns(20);
    expect(clock.now()).toBe(START + 2 * day);
    expect(await stateOf(never)).toBe("pending");
  });
});
