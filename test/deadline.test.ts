import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import type { Clock } from "../src/clock.js";
import { DeadlineQueue, EXPIRE, type Expiring, withDeadline } from "../src/deadline.js";
import { isToolTimeoutError } from "../src/errors.js";
import { VirtualClock } from "../src/testing/index.js";
import { virtualInstance } from "./helpers/engine.js";

const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));
const on = (expire: () => void): Expiring => ({ [EXPIRE]: expire });

/** A VirtualClock that counts the timers armed and cancelled through it. */
function countingClock() {
  const clock = new VirtualClock();
  const counts = { armed: 0, cancelled: 0 };
  const counting: Clock = {
    now: () => clock.now(),
    sleep: (ms, signal) => clock.sleep(ms, signal),
    setTimer(ms, callback) {
      counts.armed++;
      const cancel = clock.setTimer(ms, callback);
      return () => {
        counts.cancelled++;
        cancel();
      };
    },
  };
  return { clock, counting, counts };
}

/** A clock whose cancel comes too late: a cancelled timer still fires (a timer already queued). */
function lateCancelClock() {
  const clock = new VirtualClock();
  const late: Clock = {
    now: () => clock.now(),
    sleep: (ms, signal) => clock.sleep(ms, signal),
    setTimer(ms, callback) {
      clock.setTimer(ms, callback);
      return () => undefined;
    },
  };
  return { clock, late };
}

const deferred = <T>() => {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

const timeoutError = new Error("deadline");

describe("withDeadline", () => {
  it("the work's value when it comes first; the deadline is cancelled and never fires", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    let asked = 0;
    const result = await withDeadline(() => Promise.resolve("ok"), {
      controller,
      timeoutMs: 100,
      timeoutError: () => (asked++, timeoutError),
      clock,
    });
    expect(result).toBe("ok");
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(controller.signal.aborted).toBe(false);
    expect(asked).toBe(0);
  });

  it("the work's error when it comes first; the deadline is cancelled and never fires", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const failure = new Error("tool failed");
    await expect(
      withDeadline(() => Promise.reject(failure), {
        controller,
        timeoutMs: 100,
        timeoutError: () => timeoutError,
        clock,
      }),
    ).rejects.toBe(failure);
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(controller.signal.aborted).toBe(false);
  });

  it("a synchronous throw of the work rejects the call", async () => {
    const failure = new Error("sync");
    await expect(
      withDeadline(
        () => {
          throw failure;
        },
        {
          controller: new AbortController(),
          timeoutMs: undefined,
          timeoutError: () => timeoutError,
          clock: new VirtualClock(),
        },
      ),
    ).rejects.toBe(failure);
  });

  it("no deadline: a slow work's value comes back however long it takes", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const work = deferred<string>();
    const call = withDeadline(() => work.promise, {
      controller,
      timeoutMs: undefined,
      timeoutError: () => timeoutError,
      clock,
    });
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(3_600_000);
    work.resolve("late");
    await expect(call).resolves.toBe("late");
    expect(controller.signal.aborted).toBe(false);
  });

  it("the deadline first: rejects with the timeout error and aborts the controller with it", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const work = deferred<string>();
    const call = withDeadline(() => work.promise, {
      controller,
      timeoutMs: 100,
      timeoutError: () => timeoutError,
      clock,
    });
    call.catch(() => undefined);
    await clock.advance(99);
    expect(controller.signal.aborted).toBe(false);
    await clock.advance(1);
    await expect(call).rejects.toBe(timeoutError);
    expect(controller.signal.reason).toBe(timeoutError);
    work.resolve("too late");
    await expect(call).rejects.toBe(timeoutError);
  });

  it("the caller aborts mid-flight: rejects with its reason, aborts the controller, lets the deadline go", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const caller = new AbortController();
    const call = withDeadline(() => new Promise<never>(() => undefined), {
      controller,
      timeoutMs: 100,
      timeoutError: () => timeoutError,
      callerSignal: caller.signal,
      clock,
    });
    call.catch(() => undefined);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    const reason = new Error("caller gave up");
    caller.abort(reason);
    await expect(call).rejects.toBe(reason);
    expect(controller.signal.reason).toBe(reason);
    expect(clock.pendingTimers).toBe(0);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
  });

  it("a caller already aborted: rejects with its reason and the work never runs", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const reason = new Error("already gone");
    let ran = false;
    const call = withDeadline(
      () => {
        ran = true;
        return "ran";
      },
      {
        controller,
        timeoutMs: undefined,
        timeoutError: () => timeoutError,
        callerSignal: AbortSignal.abort(reason),
        clock,
      },
    );
    await expect(call).rejects.toBe(reason);
    expect(ran).toBe(false);
    expect(controller.signal.reason).toBe(reason);
    expect(clock.pendingTimers).toBe(0);
  });

  it("the caller's listener is removed once the work settles; a later abort changes nothing", async () => {
    const clock = new VirtualClock();
    const controller = new AbortController();
    const caller = new AbortController();
    const ok = await withDeadline(() => Promise.resolve(1), {
      controller,
      timeoutMs: 100,
      timeoutError: () => timeoutError,
      callerSignal: caller.signal,
      clock,
    });
    expect(ok).toBe(1);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    caller.abort(new Error("after the fact"));
    expect(controller.signal.aborted).toBe(false);
  });

  it("a deadline that fires after the work settled (its cancel came late) aborts nothing", async () => {
    const { clock, late } = lateCancelClock();
    const controller = new AbortController();
    const value = await withDeadline(() => Promise.resolve("ok"), {
      controller,
      timeoutMs: 100,
      timeoutError: () => timeoutError,
      clock: late,
    });
    expect(value).toBe("ok");
    await clock.advance(100);
    expect(controller.signal.aborted).toBe(false);
  });

  it("the work settling after the deadline changes nothing: the call keeps the timeout", async () => {
    const { clock, late } = lateCancelClock();
    const controller = new AbortController();
    const work = deferred<string>();
    const call = withDeadline(() => work.promise, {
      controller,
      timeoutMs: 100,
      timeoutError: () => timeoutError,
      clock: late,
    });
    call.catch(() => undefined);
    await clock.advance(100);
    work.reject(new Error("aborted work"));
    await expect(call).rejects.toBe(timeoutError);
    expect(controller.signal.reason).toBe(timeoutError);
  });
});

describe("DeadlineQueue edges", () => {
  it("a later deadline leaves the timer armed for the earlier one", async () => {
    const { clock, counting, counts } = countingClock();
    const q = new DeadlineQueue(counting);
    const start = clock.now();
    const fired: [string, number][] = [];
    const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
    q.add(100, start, at("a"));
    q.add(300, start, at("b"));
    q.add(100, start, at("c")); // the same time as the armed one
    expect(counts.armed).toBe(1);
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["a", 100],
      ["c", 100],
      ["b", 300],
    ]);
  });

  it("after a timer fires, it is armed for the earliest deadline of every lane", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const start = clock.now();
    const fired: [string, number][] = [];
    const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
    q.add(50, start, at("x50"));
    q.add(100, start, at("y100"));
    q.add(300, start, at("z300"));
    q.add(200, start, at("w200"));
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["x50", 50],
      ["y100", 100],
      ["w200", 200],
      ["z300", 300],
    ]);
    expect(clock.pendingTimers).toBe(0);
  });

  it("clearing a deadline in the middle or at the end of a lane keeps the others", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const start = clock.now();
    const fired: [string, number][] = [];
    const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
    q.add(100, start, at("a"));
    await clock.advance(10);
    const b = q.add(100, clock.now(), at("b"));
    await clock.advance(10);
    q.add(100, clock.now(), at("c"));
    await clock.advance(10);
    const d = q.add(100, clock.now(), at("d"));
    q.clear(b);
    q.clear(d);
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["a", 100],
      ["c", 120],
    ]);
  });

  it("the last deadline cleared: no timer is left at the end of the turn, every time", async () => {
    const { clock, counting, counts } = countingClock();
    const q = new DeadlineQueue(counting);
    q.clear(
      q.add(
        100,
        clock.now(),
        on(() => undefined),
      ),
    );
    await endOfTurn();
    expect(clock.pendingTimers).toBe(0);
    expect(counts).toEqual({ armed: 1, cancelled: 1 });
    let fired = false;
    const again = q.add(
      100,
      clock.now(),
      on(() => (fired = true)),
    );
    q.clear(again);
    await endOfTurn();
    expect(clock.pendingTimers).toBe(0);
    expect(counts).toEqual({ armed: 2, cancelled: 2 });
    await clock.advance(1_000);
    expect(fired).toBe(false);
  });

  it("a deadline cleared while others remain keeps the timer for them", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    let fired = 0;
    const first = q.add(
      100,
      clock.now(),
      on(() => fired++),
    );
    q.add(
      200,
      clock.now(),
      on(() => fired++),
    );
    q.clear(first);
    q.clear(first);
    await endOfTurn();
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(200);
    expect(fired).toBe(1);
  });

  it("with more than 16 lanes, a lane with deadlines left is kept", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const fired: number[] = [];
    for (let ms = 100; ms <= 2_000; ms += 100) {
      const first = q.add(
        ms,
        clock.now(),
        on(() => fired.push(-ms)),
      );
      q.add(
        ms,
        clock.now(),
        on(() => fired.push(ms)),
      );
      q.clear(first);
    }
    await clock.advance(2_000);
    expect(fired).toEqual(Array.from({ length: 20 }, (_, i) => (i + 1) * 100));
  });

  it("keeps 16 empty lanes for reuse: the usual durations stay, more go", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const lanes = (q as unknown as { lanes: Map<number, unknown> }).lanes;
    q.clear(
      q.add(
        1_000,
        clock.now(),
        on(() => undefined),
      ),
    );
    expect([...lanes.keys()]).toEqual([1_000]);
    const deadlines = Array.from({ length: 17 }, (_, i) =>
      q.add(
        2_000 + i,
        clock.now(),
        on(() => undefined),
      ),
    );
    expect(lanes.size).toBe(18);
    for (const d of deadlines) q.clear(d);
    expect(lanes.size).toBe(16);
    await endOfTurn();
  });

  it("a deadline added by an expiry, in a lane already passed over, fires at its time", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const start = clock.now();
    const fired: [string, number][] = [];
    const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
    // Lane 100 first in the queue's order, and empty when lane 50's deadline falls due.
    q.clear(q.add(100, start, at("cleared")));
    q.add(
      50,
      start,
      on(() => {
        fired.push(["b", clock.now() - start]);
        q.add(100, clock.now(), at("c"));
      }),
    );
    q.add(500, start, at("g"));
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["b", 50],
      ["c", 150],
      ["g", 500],
    ]);
    expect(clock.pendingTimers).toBe(0);
  });

  it("a deadline added by the last expiry, in a lane already passed over, fires", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const start = clock.now();
    const fired: [string, number][] = [];
    q.clear(
      q.add(
        100,
        start,
        on(() => undefined),
      ),
    );
    q.add(
      50,
      start,
      on(() => {
        q.add(
          100,
          clock.now(),
          on(() => fired.push(["c", clock.now() - start])),
        );
      }),
    );
    await clock.advance(1_000);
    expect(fired).toEqual([["c", 150]]);
  });
});

describe("deadlines of calls started at another call's timeout", () => {
  it("a call started from an abort listener when another tool times out still times out", async () => {
    const { sh, clock } = virtualInstance();
    const settled = (p: Promise<unknown>) =>
      p.then(
        () => "resolved",
        (e: unknown) => (isToolTimeoutError(e) ? "timed out" : "failed"),
      );
    const hang = sh.tool(
      "hang",
      { readOnly: true, timeoutMs: 1_000 },
      (_: undefined) => new Promise<never>(() => undefined),
    );
    // A call of 1 s settled earlier: its duration's lane is kept, empty.
    await sh.tool("warm", { readOnly: true, timeoutMs: 1_000 }, (_: undefined) => "ok")(undefined);
    const outcomes: string[] = [];
    const first = sh.tool("first", { readOnly: true, timeoutMs: 100 }, (_: undefined, ctx) => {
      ctx.signal.addEventListener("abort", () => {
        void settled(hang(undefined)).then((o) => outcomes.push(`hang ${o}`));
      });
      return new Promise<never>(() => undefined);
    });
    void settled(first(undefined)).then((o) => outcomes.push(`first ${o}`));
    await clock.advance(100);
    expect(outcomes).toEqual(["first timed out"]);
    await clock.advance(1_000);
    expect(outcomes).toEqual(["first timed out", "hang timed out"]);
  });
});
