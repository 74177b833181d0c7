/**
 * A streamed tool on virtual time, for the end-to-end test's stream series (time to first token,
 * stream failures by pattern): one agent calls `sh.stream` every few seconds against two fake
 * routes for an hour, and the primary has three spells of trouble, one per STREAM_* pattern:
 * first tokens that come too late, answers that go silent midway, answers cut by a length limit.
 * Each spell hits a share of the primary's attempts; selfheal recovers those on the backup (a
 * failover before the first token, a restart after it), so the agent stays healthy and no alert
 * fires. Built as the simulator's runs are (real selfheal, virtual clock, the caller's
 * MeterProvider), but kept apart from src/sim so the dashboard's proof does not move with the
 * demo scenarios.
 */
import type { MeterProvider } from "@opentelemetry/api";
import {
  createSelfHealing,
  isStreamRestart,
  type ChunkInfo,
  type StreamFormat,
} from "../../src/index.js";
import { seededRandom } from "../../src/testing/random.js";
import { VirtualClock } from "../../src/testing/virtual-clock.js";

export const STREAM_WORKLOAD = {
  name: "stream-workload",
  /** The agent's name, `sim-<name>` as the simulator's. */
  agent: "sim-stream-workload",
  tool: "chat",
  routes: ["primary", "backup"],
  durationMs: 60 * 60_000,
  callEveryMs: 5_000,
  seed: 11,
} as const;

const MINUTE = 60_000;

/** A chunk of the fake model: a token, or the end with its finish reason. */
type Chunk = { text: string } | { finish: string; tokens: number };

const FORMAT: StreamFormat<Chunk> = {
  read: (c): ChunkInfo =>
    "text" in c
      ? { token: true, answer: true }
      : { finishReason: c.finish, outputTokens: c.tokens },
  completion: "finish",
};

/** What the primary does wrong in a spell: each spell is one STREAM_* pattern. */
type Fault = "slow_first_token" | "stall" | "length";
const SPELLS: { fromMin: number; toMin: number; fault: Fault; share: number }[] = [
  { fromMin: 10, toMin: 20, fault: "slow_first_token", share: 0.3 },
  { fromMin: 25, toMin: 35, fault: "stall", share: 0.3 },
  { fromMin: 40, toMin: 50, fault: "length", share: 0.3 },
];

export interface StreamWorkloadOptions {
  meterProvider: MeterProvider;
  /** Called after each virtual minute with the ms since the start. */
  onMinute: (virtualMs: number) => Promise<void> | void;
}

/** Plays the hour; resolves once every stream has ended and selfheal is closed. */
export async function runStreamWorkload({
  meterProvider,
  onMinute,
}: StreamWorkloadOptions): Promise<{ calls: number; failed: number }> {
  const w = STREAM_WORKLOAD;
  const clock = new VirtualClock();
  const start = clock.now();
  const random = seededRandom(w.seed);
  const sh = createSelfHealing({
    agent: w.agent,
    clock,
    meterProvider,
    logger: { warn: () => undefined },
    recovery: { random, providers: w.routes.map((name) => ({ name })) },
  });

  const faultNow = (): Fault | undefined => {
    const minute = (clock.now() - start) / MINUTE;
    const spell = SPELLS.find((s) => minute >= s.fromMin && minute < s.toMin);
    return spell && random() < spell.share ? spell.fault : undefined;
  };

  async function* model(route: string, signal: AbortSignal): AsyncGenerator<Chunk> {
    const fault = route === "primary" ? faultNow() : undefined;
    // First token: 0.2 to 2.5 s, skewed low; a slow one is past the 20 s limit.
    const firstMs = fault === "slow_first_token" ? 30_000 : 200 + 2_300 * random() ** 2;
    await clock.sleep(firstMs, signal);
    const tokens = 20 + Math.floor(random() * 40);
    for (let i = 0; i < tokens; i++) {
      if (i > 0) await clock.sleep(20 + random() * 60, signal);
      if (fault === "stall" && i === 5) await clock.sleep(10 * MINUTE, signal);
      yield { text: `${route}${i} ` };
    }
    yield { finish: fault === "length" ? "length" : "stop", tokens };
  }

  const chat = sh.stream(
    w.tool,
    {
      readOnly: true,
      providers: [...w.routes],
      format: FORMAT,
      afterFirstToken: "restart",
    },
    (_question: string, ctx) => model(ctx.provider ?? "primary", ctx.signal),
  );

  let calls = 0;
  let failed = 0;
  const reads: Promise<void>[] = [];
  for (let at = 0; at < w.durationMs; at += w.callEveryMs) {
    clock.setTimer(at, () => {
      calls++;
      reads.push(
        (async () => {
          let chunks = 0;
          for await (const item of chat(`question ${at}`)) if (!isStreamRestart(item)) chunks++;
          if (chunks === 0) throw new Error("an empty answer");
        })().catch(() => {
          failed++;
        }),
      );
    });
  }
  // Ten more minutes for the last calls to end.
  for (let t = 0; t < w.durationMs + 10 * MINUTE; t += MINUTE) {
    await clock.advance(MINUTE);
    await onMinute(clock.now() - start);
  }
  await Promise.all(reads);
  await sh.close();
  return { calls, failed };
}
