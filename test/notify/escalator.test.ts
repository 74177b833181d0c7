import { alert } from "./alert.js";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { Escalator } from "../../src/notify/escalator.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { AlertThrottle, type AlertGate } from "../../src/notify/throttle.js";

/** A notifier that keeps what it is sent. */
function recorder(channel: string): Notifier & { alerts: Alert[] } {
  const alerts: Alert[] = [];
  return {
    channel,
    alerts,
    send: (a) => {
      alerts.push(a);
      return Promise.resolve();
    },
  };
}

/** An escalator with a 1 s throttle, counting what it reports to onAlert. */
function escalator(notifiers: Notifier[], gate?: AlertGate) {
  const counted: string[] = [];
  const warnings: string[] = [];
  const e = new Escalator({
    notifiers,
    throttleMs: 1_000,
    timeoutMs: 30_000,
    clock: systemClock,
    logger: { warn: (m) => warnings.push(m) },
    onAlert: (channel, suppressed) => counted.push(`${channel}:${String(suppressed)}`),
    gate,
  });
  return { e, counted, warnings };
}

describe("Escalator", () => {
  it("counts each alert per channel: sent (false), then suppressed (true); the next sent one carries the count", async () => {
    const slack = recorder("slack");
    const hook = recorder("webhook");
    const { e, counted } = escalator([slack, hook]);
    await expect(e.escalate(alert)).resolves.toBe(true);
    await expect(e.escalate({ ...alert, at: 500 })).resolves.toBe(false);
    expect(counted).toEqual(["slack:false", "webhook:false", "slack:true", "webhook:true"]);
    expect(slack.alerts).toHaveLength(1);
    await expect(e.escalate({ ...alert, at: 1_000 })).resolves.toBe(true);
    expect(slack.alerts.map((a) => a.suppressed)).toEqual([0, 1]);
    expect(hook.alerts.map((a) => a.suppressed)).toEqual([0, 1]);
  });

  it("follows the shared gate's decision", async () => {
    const slack = recorder("slack");
    const calls: unknown[][] = [];
    const gate: AlertGate = {
      admit: (...args) => {
        calls.push(args);
        return Promise.resolve({ send: false, suppressed: 7 });
      },
    };
    const { e, counted } = escalator([slack], gate);
    await expect(e.escalate(alert)).resolves.toBe(false);
    expect(calls).toEqual([[alert.kind, alert.at, 1_000]]);
    expect(counted).toEqual(["slack:true"]);
    expect(slack.alerts).toHaveLength(0);
  });

  const rejects: AlertGate = { admit: () => Promise.reject(new Error("redis down")) };
  const throws: AlertGate = {
    admit: () => {
      throw new Error("redis down");
    },
  };
  it.each([
    ["rejects", rejects],
    ["throws", throws],
  ])("a shared gate that %s falls back to this process's throttle", async (_, gate) => {
    const slack = recorder("slack");
    const { e, counted } = escalator([slack], gate);
    await expect(e.escalate(alert)).resolves.toBe(true);
    await expect(e.escalate({ ...alert, at: 10 })).resolves.toBe(false);
    await expect(e.escalate({ ...alert, at: 1_000 })).resolves.toBe(true);
    expect(counted).toEqual(["slack:false", "slack:true", "slack:false"]);
    expect(slack.alerts.map((a) => a.suppressed)).toEqual([0, 1]);
  });
});

describe("AlertThrottle", () => {
  it("one alert of a kind per period: the rest are counted, and the count goes out with the next", () => {
    const t = new AlertThrottle(1_000);
    expect(t.admit("k", 0)).toEqual({ send: true, suppressed: 0 });
    expect(t.admit("k", 1)).toEqual({ send: false, suppressed: 1 });
    expect(t.admit("k", 999)).toEqual({ send: false, suppressed: 2 });
    // Another kind has its own period.
    expect(t.admit("other", 999)).toEqual({ send: true, suppressed: 0 });
    // A full period after the last one sent: it goes out, with the count.
    expect(t.admit("k", 1_000)).toEqual({ send: true, suppressed: 2 });
    expect(t.admit("k", 1_999)).toEqual({ send: false, suppressed: 1 });
    expect(t.admit("k", 2_000)).toEqual({ send: true, suppressed: 1 });
    expect(t.admit("k", 5_000)).toEqual({ send: true, suppressed: 0 });
  });
});
