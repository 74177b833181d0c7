import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import type { Clock } from "../src/clock.js";
import {
  type DeadlineOptions,
  DeadlineQueue,
  EXPIRE,
  type Expiring,
  withDeadline,
} from "../src/deadline.js";
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

/** Starts `work` under withDeadline with a fresh controller: a 100 ms deadline unless `more` says otherwise. */
function run<R>(work: () => R | Promise<R>, clock: Clock, more: Partial<DeadlineOptions> = {}) {
  const controller = new AbortController();
  const call = withDeadline(work, {
    controller,
    timeoutMs: 100,
    timeoutError: () => timeoutError,
    clock,
    ...more,
  });
  return { controller, call };
}

/** A DeadlineQueue whose `at(name)` targets record [name, ms since start] when they expire. */
function recorder(clock: VirtualClock, timers: Clock = clock) {
  const q = new DeadlineQueue(timers);
  const start = clock.now();
  const fired: [string, number][] = [];
  const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
  return { q, start, fired, at };
}

const idle = () => on(() => undefined);

describe("withDeadline", () => {
  const failure = new Error("tool failed");
  it.each<[string, () => Promise<string>, (call: Promise<string>) => Promise<void>]>([
    ["value", () => Promise.resolve("ok"), (call) => expect(call).resolves.toBe("ok")],
    ["error", () => Promise.reject(failure), (call) => expect(call).rejects.toBe(failure)],
  ])(
    "the work's %s when it comes first; the deadline is cancelled and never fires",
    async (_, work, settles) => {
      const clock = new VirtualClock();
      let asked = 0;
      const { controller, call } = run(work, clock, {
        timeoutError: () => (asked++, timeoutError),
      });
      await settles(call);
      expect(clock.pendingTimers).toBe(0);
      await clock.advance(1_000);
      expect(controller.signal.aborted).toBe(false);
      expect(asked).toBe(0);
    },
  );

  it("a synchronous throw of the work rejects the call", async () => {
    const failure = new Error("sync");
    const work = () => {
      throw failure;
    };
    await expect(run(work, new VirtualClock(), { timeoutMs: undefined }).call).rejects.toBe(
      failure,
    );
  });

  it("no deadline: a slow work's value comes back however long it takes", async () => {
    const clock = new VirtualClock();
    const work = deferred<string>();
    const { controller, call } = run(() => work.promise, clock, { timeoutMs: undefined });
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(3_600_000);
    work.resolve("late");
    await expect(call).resolves.toBe("late");
    expect(controller.signal.aborted).toBe(false);
  });

  it("the deadline first: rejects with the timeout error and aborts the controller with it", async () => {
    const clock = new VirtualClock();
    const work = deferred<string>();
    const { controller, call } = run(() => work.promise, clock);
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
    const caller = new AbortController();
    const { controller, call } = run(() => new Promise<never>(() => undefined), clock, {
      callerSignal: caller.signal,
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
    const reason = new Error("already gone");
    let ran = false;
    const work = () => {
      ran = true;
      return "ran";
    };
    const { controller, call } = run(work, clock, {
      timeoutMs: undefined,
      callerSignal: AbortSignal.abort(reason),
    });
    await expect(call).rejects.toBe(reason);
    expect(ran).toBe(false);
    expect(controller.signal.reason).toBe(reason);
    expect(clock.pendingTimers).toBe(0);
  });

  it("the caller's listener is removed once the work settles; a later abort changes nothing", async () => {
    const caller = new AbortController();
    const { controller, call } = run(() => Promise.resolve(1), new VirtualClock(), {
      callerSignal: caller.signal,
    });
    expect(await call).toBe(1);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    caller.abort(new Error("after the fact"));
    expect(controller.signal.aborted).toBe(false);
  });

  it("a deadline that fires after the work settled (its cancel came late) aborts nothing", async () => {
    const { clock, late } = lateCancelClock();
    const { controller, call } = run(() => Promise.resolve("ok"), late);
    expect(await call).toBe("ok");
    await clock.advance(100);
    expect(controller.signal.aborted).toBe(false);
  });

  it("the work settling after the deadline changes nothing: the call keeps the timeout", async () => {
    const { clock, late } = lateCancelClock();
    const work = deferred<string>();
    const { controller, call } = run(() => work.promise, late);
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
    const { q, start, fired, at } = recorder(clock, counting);
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
    const { q, start, fired, at } = recorder(clock);
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
    const { q, start, fired, at } = recorder(clock);
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
    q.clear(q.add(100, clock.now(), idle()));
    await endOfTurn();
    expect(clock.pendingTimers).toBe(0);
    expect(counts).toEqual({ armed: 1, cancelled: 1 });
    let fired = false;
    const once = on(() => (fired = true));
    q.clear(q.add(100, clock.now(), once));
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
    const count = () => on(() => fired++);
    const first = q.add(100, clock.now(), count());
    q.add(200, clock.now(), count());
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
    const push = (n: number) => on(() => fired.push(n));
    for (let ms = 100; ms <= 2_000; ms += 100) {
      const first = q.add(ms, clock.now(), push(-ms));
      q.add(ms, clock.now(), push(ms));
      q.clear(first);
    }
    await clock.advance(2_000);
    expect(fired).toEqual(Array.from({ length: 20 }, (_, i) => (i + 1) * 100));
  });

  it("keeps 16 empty lanes for reuse: the usual durations stay, more go", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const lanes = (q as unknown as { lanes: Map<number, unknown> }).lanes;
    q.clear(q.add(1_000, clock.now(), idle()));
    expect([...lanes.keys()]).toEqual([1_000]);
    const deadlines = Array.from({ length: 17 }, (_, i) => q.add(2_000 + i, clock.now(), idle()));
    expect(lanes.size).toBe(18);
    for (const d of deadlines) q.clear(d);
    expect(lanes.size).toBe(16);
    await endOfTurn();
  });

  /** Lane 100 first in the queue's order, and empty when lane 50's deadline ("b") falls due: its expiry adds "c" to lane 100. */
  function addedByExpiry(clock: VirtualClock) {
    const r = recorder(clock);
    r.q.clear(r.q.add(100, r.start, idle()));
    const addC = () => {
      r.fired.push(["b", clock.now() - r.start]);
      r.q.add(100, clock.now(), r.at("c"));
    };
    r.q.add(50, r.start, on(addC));
    return r;
  }

  it.each<[string, [string, number][]]>([
    [
      "a deadline added by an expiry, in a lane already passed over, fires at its time",
      [["g", 500]],
    ],
    ["a deadline added by the last expiry, in a lane already passed over, fires", []],
  ])("%s", async (_, later) => {
    const clock = new VirtualClock();
    const { q, start, fired, at } = addedByExpiry(clock);
    for (const [name, ms] of later) q.add(ms, start, at(name));
    await clock.advance(1_000);
    expect(fired).toEqual([["b", 50], ["c", 150], ...later]);
    expect(clock.pendingTimers).toBe(0);
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
