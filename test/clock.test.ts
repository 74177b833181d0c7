import { describe, expect, it } from "vitest";
import { systemClock } from "../src/clock.js";

describe("systemClock", () => {
  it("a sleep of n ms ends with now() at least n ms on (a cooldown waited out is over)", async () => {
    const short: number[] = [];
    for (let i = 0; i < 60; i++) {
      const ms = 1 + (i % 4);
      const start = systemClock.now();
      await systemClock.sleep(ms);
      if (systemClock.now() - start < ms) short.push(ms);
    }
    expect(short).toEqual([]);
  });

  it("a timer fires with now() at least n ms on, and a cancelled one never fires", async () => {
    const start = systemClock.now();
    const firedAt = await new Promise<number>((resolve) => {
      systemClock.setTimer(3, () => {
        resolve(systemClock.now());
      });
    });
    expect(firedAt - start).toBeGreaterThanOrEqual(3);
    let fired = false;
    const cancel = systemClock.setTimer(1, () => {
      fired = true;
    });
    cancel();
    await systemClock.sleep(5);
    expect(fired).toBe(false);
  });

  it("an aborted sleep rejects with the signal's reason", async () => {
    const controller = new AbortController();
    const sleeping = systemClock.sleep(10_000, controller.signal);
    controller.abort(new Error("caller gave up"));
    await expect(sleeping).rejects.toThrow("caller gave up");
  });
});
