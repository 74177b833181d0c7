import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FLEET_BREAKER,
  KEY_HEADER,
  realtimeClock,
  WORKER_HEADER,
  type CallDone,
  type Charge,
  type ChargeDone,
  type Command,
  type Line,
} from "../fixtures/redis-fleet-worker.js";
import { startServer } from "../helpers/http-server.js";
import { haveRedis, startRedis, type RunningRedis } from "../helpers/redis-server.js";

const available = haveRedis("Redis fleet of worker processes calling a provider");

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const WORKER = fileURLToPath(new URL("../fixtures/redis-fleet-worker.ts", import.meta.url));
const WORKERS = 3;
const PREFIX = "fleet-proc";
/** How long the fake provider takes to charge a card, ms: the other workers arrive meanwhile. */
const CHARGE_MS = 150;
/** How long the fake LLM takes to answer, ms (so a request is well before its answer's events). */
const COMPLETE_MS = 10;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The clock every process reports on (see realtimeClock): the fake provider stamps with it. */
const clock = realtimeClock();
const { now } = clock;

/** One request the fake provider received (stamped on the realtime clock, ms with a fraction). */
interface Request {
  path: string;
  worker: number;
  at: number;
  key: string | undefined;
  status: number;
}

/**
 * The fake provider: /p1 (primary LLM, down while `p1Down`), /p2 (secondary, always up) and
 * /charge (a slow payment that counts charges per idempotency key). Every request is logged.
 */
async function startProvider() {
  const requests: Request[] = [];
  const charges = new Map<string, number>();
  const state = { p1Down: true };
  const answer = (res: ServerResponse, status: number, body: unknown, delayMs: number) => {
    setTimeout(() => {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    }, delayMs);
  };
  const server = await startServer((req: IncomingMessage, res: ServerResponse) => {
    const at = now();
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const path = req.url ?? "";
      const worker = Number(req.headers[WORKER_HEADER]);
      const header = req.headers[KEY_HEADER];
      const key = typeof header === "string" ? header : undefined;
      const log = (status: number) => requests.push({ path, worker, at, key, status });
      if (path === "/p1" && state.p1Down) {
        log(503);
        answer(res, 503, { error: { type: "overloaded", message: "p1 is down" } }, COMPLETE_MS);
      } else if (path === "/p1" || path === "/p2") {
        log(200);
        answer(res, 200, { text: "hi", provider: path.slice(1) }, COMPLETE_MS);
      } else if (path === "/charge" && key) {
        log(200);
        const n = (charges.get(key) ?? 0) + 1;
        charges.set(key, n);
        const { order } = JSON.parse(body) as { order: string };
        const charge: Charge = { order, chargeId: `ch_${key}_${n}`, by: worker };
        answer(res, 200, charge, CHARGE_MS);
      } else {
        log(404);
        answer(res, 404, { error: "no such endpoint" }, 0);
      }
    });
  });
  return { server, requests, charges, state };
}

/** A worker process: commands on its stdin, events and replies (JSON lines) from its stdout. */
class Worker {
  readonly lines: Line[] = [];
  stderr = "";
  private nextId = 1;
  private readonly waiters = new Set<() => void>();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly index: number,
    readonly child: ChildProcessWithoutNullStreams,
  ) {
    createInterface({ input: child.stdout }).on("line", (text) => {
      this.lines.push(JSON.parse(text) as Line);
      for (const wake of this.waiters) wake();
    });
    child.stderr.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        resolve({ code, signal });
        for (const wake of this.waiters) wake();
      });
    });
  }

  static start(index: number, args: string[]): Worker {
    const child = spawn(process.execPath, ["--import", "tsx", WORKER, ...args, String(index)], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    return new Worker(index, child);
  }

  /** The first line that matches, waiting for it up to `ms`. */
  async waitFor<L extends Line>(match: (line: Line) => line is L, ms: number): Promise<L> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.lines.find(match);
      if (found) return found;
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(`worker ${this.index} exited: ${this.stderr}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`worker ${this.index}: no such line in ${ms} ms`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
  }

  /** Sends a command; resolves with its reply's result (rejects with its error). */
  async send<T>(command: DistributiveOmit<Command, "id">, ms = 8_000): Promise<T> {
    const id = this.nextId++;
    this.child.stdin.write(`${JSON.stringify({ ...command, id })}\n`);
    const reply = await this.waitFor(
      (l): l is Extract<Line, { type: "reply" }> => l.type === "reply" && l.id === id,
      ms,
    );
    if (!reply.ok) throw new Error(`worker ${this.index}: ${reply.error}`);
    return reply.result as T;
  }

  /** This worker's circuit-change events of p1. */
  circuits(): Extract<Line, { type: "event" }>[] {
    return this.lines.filter(
      (l): l is Extract<Line, { type: "event" }> => l.type === "event" && l.dependency === "p1",
    );
  }

  warnings(): string[] {
    return this.lines.flatMap((l) => (l.type === "warn" ? [l.message] : []));
  }

  /** Ends the process by its PID if it is still running. */
  kill(): void {
    const { pid } = this.child;
    if (pid !== undefined && this.child.exitCode === null && this.child.signalCode === null)
      process.kill(pid, "SIGKILL");
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const isEvent =
  (state: string) =>
  (l: Line): l is Extract<Line, { type: "event" }> =>
    l.type === "event" && l.dependency === "p1" && l.state === state;

describe.skipIf(!available)("three worker processes, one fleet, one fake provider", () => {
  let redis: RunningRedis;
  let admin: Redis;
  let provider: Awaited<ReturnType<typeof startProvider>>;
  let workers: Worker[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    provider = await startProvider();
  });
  afterAll(async () => {
    // Whatever happened, every child and server is stopped by its PID or handle.
    for (const w of workers) w.kill();
    await Promise.all(workers.map((w) => w.exited));
    admin.disconnect();
    await provider.server.close();
    await redis.stop();
  });

  it("share breaker verdicts, one half-open probe and one charge per key, by the provider's counts", async () => {
    const started = performance.now();
    workers = Array.from({ length: WORKERS }, (_, i) =>
      Worker.start(i, [redis.url, PREFIX, provider.server.url]),
    );
    const ready = await Promise.all(
      workers.map((w) =>
        w.waitFor((l): l is Extract<Line, { type: "ready" }> => l.type === "ready", 10_000),
      ),
    );
    // Three processes, none of them this one.
    expect(new Set(ready.map((r) => r.pid)).size).toBe(WORKERS);
    expect(ready.map((r) => r.pid)).not.toContain(process.pid);
    // Every worker's subscriber listens for verdicts before anyone calls.
    const channel = `${PREFIX}:breakers`;
    for (const deadline = Date.now() + 5_000; ; await sleep(20)) {
      const [, listeners] = (await admin.pubsub("NUMSUB", channel)) as [string, number];
      if (listeners === WORKERS) break;
      if (Date.now() > deadline) throw new Error("the workers did not subscribe in time");
    }
    const spawnedMs = performance.now() - started;
    const [w0, w1, w2] = workers as [Worker, Worker, Worker];
    const { requests } = provider;
    const p1Requests = (from: number, to = Infinity) =>
      requests.filter((r) => r.path === "/p1" && r.at >= from && r.at < to);

    // --- 1. p1 fails for worker 0 alone; its breaker opens; workers 1 and 2 never try p1. ---
    const phase1 = now();
    // Workers 1 and 2 will call once, each as soon as its own p1 breaker is open.
    const theirCalls = [w1, w2].map((w) => w.send<CallDone>({ cmd: "call-on-open", maxMs: 5_000 }));
    const own: CallDone[] = [];
    while (!w0.lines.some(isEvent("open"))) {
      own.push(await w0.send<CallDone>({ cmd: "call" }));
      if (own.length > 10) throw new Error("worker 0's breaker did not open");
    }
    // Each call was answered by p2 after p1's 503: recovered by failover.
    expect(own.map((c) => [c.provider, c.outcome])).toEqual(own.map(() => ["p2", "recovered"]));
    // minimumAttempts (2) failed attempts at failureRate 1 opened it: two 503s from worker 0.
    expect(p1Requests(phase1).map((r) => [r.worker, r.status])).toEqual([
      [0, 503],
      [0, 503],
    ]);
    const opened = await w0.waitFor(isEvent("open"), 1_000);
    const halfOpenAt = opened.at + FLEET_BREAKER.baseOpenMs;
    // Workers 1 and 2 hear the verdict (pub/sub): open, though p1 never failed for them.
    const heard = await Promise.all([w1, w2].map((w) => w.waitFor(isEvent("open"), 2_000)));
    const theirs = await Promise.all(theirCalls);
    // Straight to p2: first attempt, no failure, and the provider saw no /p1 from them.
    expect(theirs.map((c) => [c.provider, c.outcome, c.attempts])).toEqual([
      ["p2", "success", 1],
      ["p2", "success", 1],
    ]);
    expect(p1Requests(phase1)).toHaveLength(2); // still worker 0's two
    expect(requests.filter((r) => r.worker !== 0 && r.path === "/p1")).toEqual([]);
    const others = requests.filter((r) => r.worker !== 0).sort((a, b) => a.worker - b.worker);
    expect(others.map((r) => [r.worker, r.path])).toEqual([
      [1, "/p2"],
      [2, "/p2"],
    ]);
    // ...and all of that inside the open period (not a half-open rejection).
    for (const c of theirs) expect(c.ended).toBeLessThan(halfOpenAt);
    const verdictLagMs = Math.max(...heard.map((e) => e.at - opened.at));

    // --- 2. p1 is back; past the open period all three call at once: one probe in the fleet. ---
    provider.state.p1Down = false;
    const phase2 = now();
    const go = halfOpenAt + 50;
    const rounds = await Promise.all(
      workers.map((w) =>
        w.send<{ calls: CallDone[]; closed: boolean }>({
          cmd: "call-until-closed",
          at: go,
          pauseMs: 20,
          maxMs: 5_000,
        }),
      ),
    );
    expect(rounds.map((r) => r.closed)).toEqual([true, true, true]);
    // Nothing reached p1 while the breaker was open everywhere.
    expect(p1Requests(phase2, halfOpenAt)).toEqual([]);
    const closes = workers.map((w) =>
      w.circuits().filter((e) => e.at >= phase2 && e.state === "closed"),
    );
    for (const c of closes) expect(c).toHaveLength(1);
    const firstClosed = Math.min(...closes.map((c) => c[0]?.at ?? Infinity));
    // Between half-open and the first "closed": exactly one /p1 request in the whole fleet...
    const probes = p1Requests(halfOpenAt, firstClosed);
    expect(probes).toHaveLength(1);
    const prober = probes[0]?.worker ?? -1;
    // ...from the one worker that went half-open (it held the lease) and closed first, by its
    // own verdict; the others closed on hearing it.
    const halfOpens = workers.map(
      (w) => w.circuits().filter((e) => e.at >= phase2 && e.state === "half_open").length,
    );
    expect(halfOpens).toEqual(workers.map((w) => (w.index === prober ? 1 : 0)));
    expect(closes[prober]?.[0]?.at).toBe(firstClosed);
    // Every other call in the half-open period went to p2 and none failed.
    const calls = rounds.flatMap((r) => r.calls);
    expect(calls.every((c) => c.outcome === "success")).toBe(true);
    const halfOpenCalls = calls.filter((c) => c.started >= halfOpenAt && c.started < firstClosed);
    expect(halfOpenCalls.filter((c) => c.provider === "p1")).toHaveLength(1);
    expect(halfOpenCalls.length).toBeGreaterThan(WORKERS); // they did call repeatedly meanwhile
    const lastClosed = Math.max(...closes.map((c) => c[0]?.at ?? -Infinity));
    const afterFirstClose = p1Requests(firstClosed, lastClosed).length;
    // Closed everywhere: p1 takes each worker's traffic again.
    const after = await Promise.all(workers.map((w) => w.send<CallDone>({ cmd: "call" })));
    expect(after.map((c) => c.provider)).toEqual(["p1", "p1", "p1"]);

    // --- 3. The same order charged by all three at the same moment: one charge. ---
    const at = now() + 200;
    const charged = await Promise.all(
      workers.map((w) => w.send<ChargeDone>({ cmd: "charge", order: "order-1", at })),
    );
    const chargeRequests = requests.filter((r) => r.path === "/charge");
    // The provider charged once, and only one request ever reached it.
    expect(provider.charges.get("order-1")).toBe(1);
    expect([...provider.charges.values()].reduce((a, b) => a + b, 0)).toBe(1);
    expect(chargeRequests).toHaveLength(1);
    const sender = chargeRequests[0]?.worker;
    // All three got that one charge: the sender from the provider, the others from the ledger.
    const expected: Charge = { order: "order-1", chargeId: "ch_order-1_1", by: sender ?? -1 };
    expect(charged.map((c) => c.value)).toEqual([expected, expected, expected]);
    expect(charged.map((c) => c.replayed)).toEqual(workers.map((w) => w.index !== sender));
    // They did call at the same moment: each started before the charge was answered.
    const answeredAt = (chargeRequests[0]?.at ?? 0) + CHARGE_MS;
    for (const c of charged) expect(c.started).toBeLessThan(answeredAt);

    // --- The end: each worker closes its instance and store and exits 0 on its own. ---
    const closed = await Promise.all(
      workers.map((w) => w.send<{ degraded: boolean }>({ cmd: "close" })),
    );
    expect(closed.map((c) => c.degraded)).toEqual([false, false, false]);
    for (const w of workers) w.child.stdin.end();
    const exits = await Promise.race([
      Promise.all(workers.map((w) => w.exited)),
      sleep(5_000).then(() => undefined),
    ]);
    expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
    for (const w of workers) {
      expect(w.stderr).toBe("");
      expect(w.warnings()).toEqual([]);
    }

    console.info(
      JSON.stringify({
        spawnedMs: Math.round(spawnedMs),
        // How far each worker's engine clock is from this process's, ms (0 unless the wall clock
        // moved between their starts; the realtime clock every time here is on does not care).
        engineSkewMs: ready.map((r) => Math.round((r.offset - clock.offset) * 100) / 100),
        verdictLagMs: Math.round(verdictLagMs * 10) / 10,
        phase1Calls: own.length,
        prober,
        halfOpenCalls: halfOpenCalls.length,
        closeSpreadMs: Math.round((lastClosed - firstClosed) * 10) / 10,
        p1AfterFirstClose: afterFirstClose,
        totalMs: Math.round(performance.now() - started),
      }),
    );
    expect(performance.now() - started).toBeLessThan(20_000);
  }, 25_000);
});
