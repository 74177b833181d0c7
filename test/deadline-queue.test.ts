import { describe, expect, it } from "vitest";
import { DeadlineQueue, EXPIRE, type Expiring } from "../src/deadline.js";
import { VirtualClock } from "../src/testing/index.js";

const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));
const on = (expire: () => void): Expiring => ({ [EXPIRE]: expire });

describe("DeadlineQueue", () => {
  it("expires each deadline at its time, in time order, across durations", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const start = clock.now();
    const fired: [string, number][] = [];
    const at = (name: string) => on(() => fired.push([name, clock.now() - start]));
    q.add(300, start, at("a300"));
    q.add(100, start, at("b100"));
    await clock.advance(50);
    q.add(300, clock.now(), at("c350"));
    q.add(20, clock.now(), at("d70"));
    await clock.advance(1_000);
    expect(fired).toEqual([
      ["d70", 70],
      ["b100", 100],
      ["a300", 300],
      ["c350", 350],
    ]);
  });

  it("a cleared deadline never fires, and clearing twice is harmless", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const fired: string[] = [];
    const first = q.add(
      100,
      clock.now(),
      on(() => fired.push("first")),
    );
    q.add(
      100,
      clock.now(),
      on(() => fired.push("second")),
    );
    q.clear(first);
    q.clear(first);
    await clock.advance(200);
    expect(fired).toEqual(["second"]);
  });

  it("keeps one timer for many calls in flight, and none once the last one settles", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const deadlines = Array.from({ length: 1_000 }, () =>
      q.add(
        60_000,
        clock.now(),
        on(() => {}),
      ),
    );
    expect(clock.pendingTimers).toBe(1);
    for (const d of deadlines) q.clear(d);
    expect(clock.pendingTimers).toBe(1); // cancelled at the end of the turn, not per call
    await endOfTurn();
    expect(clock.pendingTimers).toBe(0);
  });

  it("re-arms for a later deadline when the earliest was cleared", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    const fired: number[] = [];
    const start = clock.now();
    const early = q.add(
      100,
      start,
      on(() => fired.push(100)),
    );
    q.add(
      500,
      start,
      on(() => fired.push(clock.now() - start)),
    );
    q.clear(early);
    await clock.advance(1_000);
    expect(fired).toEqual([500]);
  });

  it("a deadline added while the queue waits to disarm keeps its timer", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    q.clear(
      q.add(
        100,
        clock.now(),
        on(() => {}),
      ),
    );
    let fired = false;
    q.add(
      100,
      clock.now(),
      on(() => (fired = true)),
    );
    await endOfTurn();
    await clock.advance(100);
    expect(fired).toBe(true);
  });

  it("odd durations do not pile up lanes", async () => {
    const clock = new VirtualClock();
    const q = new DeadlineQueue(clock);
    for (let i = 0; i < 10_000; i++)
      q.clear(
        q.add(
          1_000 + i / 7,
          clock.now(),
          on(() => {}),
        ),
      );
    const lanes = (q as unknown as { lanes: Map<number, unknown> }).lanes;
    expect(lanes.size).toBeLessThanOrEqual(17);
    await endOfTurn();
  });
});
