/**
 * A Supervisor over an in-memory channel on virtual time (test/watchdog/supervisor-*.test.ts):
 * what the run's next read finds, what was sent to its inbox, what was done to its process, and
 * the events, in short.
 */
import { VirtualClock } from "../../src/testing/index.js";
import {
  Supervisor,
  type Heartbeat,
  type InboxMessage,
  type ReadResult,
  type RunChannel,
  type SupervisorEvent,
  type SupervisorOptions,
} from "../../src/watchdog/index.js";

export const POLL = 1_000;
export const STALL = 10_000;
export const DEAD = 30_000;

/** Lets the alerts (sent after a microtask) and background looks land. */
export const drain = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A supervisor over an in-memory channel on virtual time: `beat` is what the next read finds
 * (undefined: missing), `read` replaces the read altogether.
 */
export function harness(
  options: {
    acked?: boolean;
    numbered?: boolean;
    supervisor?: Partial<SupervisorOptions>;
  } = {},
) {
  const clock = new VirtualClock();
  const t0 = clock.now();
  const state = {
    beat: undefined as Heartbeat | undefined,
    read: undefined as ((now: number) => Promise<ReadResult>) | undefined,
    send: undefined as (() => Promise<unknown>) | undefined,
    ackedSeq: 0,
    acked: undefined as (() => Promise<number>) | undefined,
    reads: 0,
  };
  const sent: Omit<InboxMessage, "seq">[] = [];
  const actions: string[] = [];
  const events: SupervisorEvent[] = [];
  const alerts: { title: string; text: string }[] = [];
  const channel: RunChannel = {
    read: (now) => {
      state.reads++;
      if (state.read) return state.read(now);
      return Promise.resolve(
        state.beat
          ? { ok: true, heartbeat: state.beat }
          : { ok: false, problem: "missing", detail: "ENOENT" },
      );
    },
    send: (message) => {
      sent.push(message);
      if (state.send) return state.send();
      return Promise.resolve(options.numbered ? { ...message, seq: sent.length } : undefined);
    },
    ...(options.acked && {
      acked: () => (state.acked ? state.acked() : Promise.resolve(state.ackedSeq)),
    }),
  };
  const sv = new Supervisor({
    sessionId: "s",
    channel,
    clock,
    pollMs: POLL,
    limits: { graceMs: 0, deadMs: DEAD, stallMs: STALL },
    intensity: { maxRestarts: 3, periodMs: 600_000, baseBackoffMs: 1_000, maxBackoffMs: 4_000 },
    control: {
      restart: (generation) => {
        actions.push(`restart:${generation}`);
        return Promise.resolve();
      },
      rotate: (generation) => {
        actions.push(`rotate:${generation}`);
        return Promise.resolve();
      },
    },
    notify: (alert) => {
      alerts.push(alert);
    },
    onEvent: (event) => {
      events.push(event);
    },
    ...options.supervisor,
  });
  /** A beat of the current process at step `stepIdx`; `stale`: its step unmoved past the limit. */
  const beat = (stepIdx: number, { stale = false, gen = sv.currentGeneration } = {}) => {
    state.beat = {
      v: 1,
      sessionId: "s",
      pid: 42,
      stage: "tool_call",
      stepIdx,
      at: clock.now(),
      stepAt: stale ? clock.now() - 2 * STALL : clock.now(),
      startedAt: t0,
      gen,
    };
  };
  /** What happened since the last call, in short. */
  let seen = 0;
  const news = () => {
    const out = events.slice(seen).map((e) => {
      switch (e.kind) {
        case "verdict":
          return `verdict:${e.verdict}`;
        case "tier":
          return `tier:${e.tier}`;
        case "tier_result":
          return `${e.tier}:${e.outcome}`;
        case "gave_up":
          return "gave_up";
      }
    });
    seen = events.length;
    return out;
  };
  return { clock, t0, state, sent, actions, events, alerts, sv, beat, news };
}
