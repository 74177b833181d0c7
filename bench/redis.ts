/**
 * selfheal/redis against a naive per-call design, on one real `redis-server` the bench starts on
 * a free port of 127.0.0.1 (no persistence) and stops by its PID.
 *
 * The naive design is what a straightforward shared health store does: every call adds one
 * member (`time:worker:seq:ok:failed:latency`) to a sorted set per tool, scored by time, and
 * trims the set to the window with ZREMRANGEBYSCORE: two commands per call, pipelined, never
 * awaited by the call. Its read takes each tool's members in the window (ZRANGEBYSCORE).
 *
 * (a) Recording: calls per second and Redis commands per call (deltas of `INFO commandstats`,
 *     every command Redis ran, those inside Lua scripts included, the bench's own INFO left
 *     out), through `sh.tool` (system clock, default store settings: a flush every 1 s or 500
 *     records, a status read when the 5 s health cache expires) and through the store directly
 *     (`recordCall`, then one flush). Time runs until everything recorded is in Redis.
 * (b) Memory: `INFO memory` used_memory after 1e4, 1e5 and 1e6 calls of 20 tools, spread over
 *     one 10 min window of virtual time (a `VirtualClock` drives the store's timers; records go
 *     out in explicit flushes of 500, the default `flushRecords`), on an emptied server each time.
 *
 * Run: npm run bench:redis (writes bench/results/redis.json)
 */
import { tracingChannel } from "node:diagnostics_channel";
import { startRedis } from "../test/helpers/redis-server.js";
import { Redis } from "ioredis";
import { createSelfHealing } from "../dist/index.js";
import { MemorySignalStore } from "../dist/health/memory-store.js";
import type {
  AgentSignals,
  CallRecord,
  ScopeSignals,
  SignalStore,
  TaskRecord,
} from "../dist/health/store.js";
import { emptyTotals, latencyBucket } from "../dist/health/window.js";
import { redisStore } from "../dist/redis/index.js";
import { VirtualClock } from "../dist/testing/index.js";
import { report } from "./harness.js";

/** Calls per throughput case (each case on an emptied server, its own connection). */
const CALLS = 50_000;
/** Throughput rounds, cases interleaved; the median round is kept. */
const ROUNDS = 3;
const MEMORY_SIZES = [1e4, 1e5, 1e6];
const TOOLS = 20;
const AGENT = "bench";
const WINDOW_MS = 10 * 60_000;
const FLUSH_EVERY = 500;

// ---------------------------------------------------------------------------------------------
// What Redis ran

/** Commands Redis ran, by name, from `INFO commandstats` (INFO itself left out). */
async function commandStats(admin: Redis): Promise<Map<string, number>> {
  const text = await admin.info("commandstats");
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1] ?? "";
    if (name !== "info") counts.set(name, Number(m[2]));
  }
  return counts;
}

function delta(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, n] of after) {
    const d = n - (before.get(name) ?? 0);
    if (d > 0) out.set(name, d);
  }
  return out;
}

const total = (counts: Map<string, number>) => [...counts.values()].reduce((a, b) => a + b, 0);

async function usedMemory(admin: Redis): Promise<number> {
  const text = await admin.info("memory");
  return Number(/^used_memory:(\d+)/m.exec(text)?.[1] ?? NaN);
}

// ---------------------------------------------------------------------------------------------
// The naive design

/**
 * One sorted-set member per call, trimmed to the window on every call (ZADD + ZREMRANGEBYSCORE,
 * pipelined, not awaited by the call). The tools it reads are the ones this worker has seen (a
 * fleet would need one more command per call, or a SCAN, to learn the others': not counted).
 */
class NaiveZsetStore implements SignalStore {
  private seq = 0;
  private last: Promise<unknown> = Promise.resolve();
  private readonly tools = new Map<string, Set<string>>();
  private readonly worker = Math.random().toString(36).slice(2, 8);

  constructor(
    private readonly client: Redis,
    private readonly prefix: string,
  ) {}

  private key(agent: string, tool: string): string {
    return `${this.prefix}:{${encodeURIComponent(agent)}}:calls:${encodeURIComponent(tool)}`;
  }

  recordCall(record: CallRecord, now: number): void {
    let known = this.tools.get(record.agent);
    if (!known) this.tools.set(record.agent, (known = new Set()));
    known.add(record.tool);
    const ok = record.outcome === "success" || record.outcome === "recovered" ? 1 : 0;
    const failed = record.failedAttempts ?? (record.outcome === "error" ? 1 : 0);
    if (ok + failed === 0) return;
    const key = this.key(record.agent, record.tool);
    const member = `${now}:${this.worker}:${this.seq++}:${ok}:${failed}:${record.durationMs}`;
    this.last = this.client
      .pipeline()
      .zadd(key, now, member)
      .zremrangebyscore(key, "-inf", `(${now - WINDOW_MS}`)
      .exec();
  }

  recordTask(_record: TaskRecord, _now: number): void {
    // Not measured: the benchmark's calls are not tasks.
  }

  async read(agent: string, now: number): Promise<AgentSignals> {
    const tools = new Map<string, ScopeSignals>();
    const all: ScopeSignals = scope();
    for (const tool of this.tools.get(agent) ?? []) {
      const members = await this.client.zrangebyscore(this.key(agent, tool), now - WINDOW_MS, now);
      const s = scope();
      for (const member of members) {
        const [at, , , ok, failed, ms] = member.split(":").map(Number);
        s.calls.ok += ok ?? 0;
        s.calls.failed += failed ?? 0;
        const i = latencyBucket(ms ?? 0);
        s.calls.latency[i] = (s.calls.latency[i] ?? 0) + 1;
        if ((at ?? 0) > now - 60_000) {
          s.recent.ok += ok ?? 0;
          s.recent.failed += failed ?? 0;
        }
      }
      tools.set(tool, s);
      all.calls.ok += s.calls.ok;
      all.calls.failed += s.calls.failed;
      s.calls.latency.forEach((n, i) => (all.calls.latency[i] = (all.calls.latency[i] ?? 0) + n));
      all.recent.ok += s.recent.ok;
      all.recent.failed += s.recent.failed;
    }
    return { agent: all, tools };
  }

  /** Resolves when every call recorded so far is in Redis (replies come back in order). */
  drain(): Promise<unknown> {
    return this.last;
  }
}

function scope(): ScopeSignals {
  return {
    calls: emptyTotals(),
    recent: { ok: 0, failed: 0 },
    llm: { total: 0, empty: 0 },
    tasks: { completed: 0, failed: 0 },
  };
}

// ---------------------------------------------------------------------------------------------
// Counting what a client sends (the commands it writes, not those its scripts run)

/** Commands written by every ioredis client of this process while `on`, by name. */
const sent = new Map<string, number>();
let counting = false;
tracingChannel("ioredis:command").subscribe({
  start(message) {
    if (!counting) return;
    const name = (message as { command?: string }).command?.toLowerCase() ?? "?";
    sent.set(name, (sent.get(name) ?? 0) + 1);
  },
  end: () => undefined,
  asyncStart: () => undefined,
  asyncEnd: () => undefined,
  error: () => undefined,
});

/** Lets I/O run, as a worker whose tools await something does. */
const yieldToIo = () => new Promise<void>((resolve) => setImmediate(resolve));
const YIELD_EVERY = 100;

// ---------------------------------------------------------------------------------------------
// The workload

/** Call i: 20 tools, latencies from 20 ms to ~1 s; 1 in 20 fails when `failing`. */
function record(i: number, failing: boolean): CallRecord {
  return {
    agent: AGENT,
    tool: `tool-${i % TOOLS}`,
    outcome: failing && i % 20 === 0 ? "error" : "success",
    durationMs: 20 + ((i * 37) % 900),
  };
}

type Design = "selfheal" | "naive" | "memory";

interface Measured {
  seconds: number;
  /** Every command Redis ran (INFO commandstats), script internals included. */
  ran: Map<string, number>;
  /** Commands the bench's clients wrote (counted only in the counting pass). */
  sent: Map<string, number>;
  /** Calls the design reads back from Redis afterwards (ok + failed attempts). */
  inRedis: number;
}

interface Case {
  name: string;
  design: Design;
  via: "sh.tool" | "store";
  failing: boolean;
}

/** A store of one design on its own connection (the in-memory one needs none). */
function makeStore(url: string, design: Design, prefix: string, extra: object = {}) {
  const client = new Redis(url);
  const naive = design === "naive" ? new NaiveZsetStore(client, prefix) : undefined;
  const self = design === "selfheal" ? redisStore({ client, prefix, ...extra }) : undefined;
  const store: SignalStore = naive ?? self ?? new MemorySignalStore();
  return {
    client,
    store,
    /** Until everything recorded is in Redis. */
    settle: async () => {
      await self?.flush();
      await naive?.drain();
    },
    close: async () => {
      await self?.close();
      client.disconnect();
    },
    /** What Redis holds for the agent now, read through a fresh connection of the design. */
    readBack: async (now: number): Promise<number> => {
      if (design === "memory") return NaN;
      const reader = naive
        ? undefined
        : redisStore({ url, prefix, logger: { warn: () => undefined } });
      try {
        const calls = (await (naive ?? reader)?.read(AGENT, now))?.agent.calls;
        return calls ? calls.ok + calls.failed : NaN;
      } finally {
        await reader?.close();
      }
    },
  };
}

/** One case: `CALLS` calls, timed until everything recorded is in Redis. */
async function run(url: string, admin: Redis, c: Case, count: boolean): Promise<Measured> {
  await admin.flushall();
  const prefix = `${c.via}-${c.design}`;
  const s = makeStore(url, c.design, prefix);
  await s.client.ping(); // connected: the handshake is not billed to the case
  const sh =
    c.via === "sh.tool"
      ? createSelfHealing({ agent: AGENT, store: s.store, logger: { warn: () => undefined } })
      : undefined;
  const tools = Array.from({ length: TOOLS }, (_, t) =>
    sh?.tool(`tool-${t}`, { readOnly: true }, (fail: boolean) => {
      if (fail) throw Object.assign(new Error("bad request"), { status: 400 });
      return "ok";
    }),
  );
  let expected = 0;
  const before = await commandStats(admin);
  sent.clear();
  counting = count;
  const t0 = Date.now();
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const r = record(i, c.failing);
    expected++;
    const tool = tools[i % TOOLS];
    if (tool) await tool(r.outcome === "error").catch(() => undefined);
    else s.store.recordCall(r, t0 + i);
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await yieldToIo();
  }
  await s.settle();
  const seconds = (performance.now() - started) / 1000;
  counting = false;
  const ran = delta(await commandStats(admin), before);
  const written = new Map(sent);
  await sh?.close();
  const inRedis = await s.readBack(c.via === "sh.tool" ? Date.now() : t0 + CALLS);
  await s.close();
  if (c.design !== "memory" && inRedis !== expected)
    console.warn(`${c.name}: ${inRedis} calls in Redis for ${expected} made`);
  return { seconds, ran, sent: written, inRedis };
}

/** Redis memory after `calls` calls over one window of virtual time, on an emptied server. */
async function memoryAfter(url: string, admin: Redis, design: "selfheal" | "naive", calls: number) {
  await admin.flushall();
  const clock = new VirtualClock();
  const start = clock.now();
  // No timer flush, no count flush: records go out in the explicit flushes below.
  const s = makeStore(url, design, `mem-${design}`, {
    clock,
    flushMs: 3_600_000,
    flushRecords: 1e9,
  });
  await s.client.ping();
  const memoryBefore = await usedMemory(admin);
  const before = await commandStats(admin);
  const started = performance.now();
  const spacing = WINDOW_MS / calls;
  for (let i = 0; i < calls; i++) {
    s.store.recordCall(record(i, true), start + Math.floor(i * spacing));
    if ((i + 1) % FLUSH_EVERY === 0) await s.settle(); // both designs send in rounds of 500
  }
  await s.settle();
  const seconds = (performance.now() - started) / 1000;
  const commands = total(delta(await commandStats(admin), before));
  const bytes = (await usedMemory(admin)) - memoryBefore;
  const keys = await admin.dbsize();
  const byKind = await memoryByKind(admin);
  const inRedis = await s.readBack(start + WINDOW_MS - 1);
  await s.close();
  return { bytes, keys, byKind, seconds, commands, inRedis };
}

/**
 * `MEMORY USAGE` of every key, summed by kind: the part of the key after the hash tag up to the
 * next `:` (`c` call buckets, `b` batch ids, `calls` the naive sets...), or the key itself.
 */
async function memoryByKind(
  admin: Redis,
): Promise<Record<string, { keys: number; bytes: number }>> {
  const kinds: Record<string, { keys: number; bytes: number }> = {};
  let cursor = "0";
  do {
    const [next, keys] = await admin.scan(cursor, "COUNT", 1_000);
    cursor = next;
    for (const key of keys) {
      const kind = /\}:([^:]+)/.exec(key)?.[1] ?? key;
      const bytes = (await admin.memory("USAGE", key, "SAMPLES", 0)) ?? 0;
      const k = (kinds[kind] ??= { keys: 0, bytes: 0 });
      k.keys++;
      k.bytes += bytes;
    }
  } while (cursor !== "0");
  return kinds;
}

// ---------------------------------------------------------------------------------------------

const server = await startRedis();
const admin = new Redis(server.url);
try {
  const version = /^redis_version:(.+)$/m.exec(await admin.info("server"))?.[1]?.trim();

  // (a) throughput and commands per call, cases interleaved round by round; then one more
  // round per case counting what the clients write (tracing costs time: not in the timed rounds).
  const cases: Case[] = [
    {
      name: "sh.tool, in-memory store (no Redis)",
      design: "memory",
      via: "sh.tool",
      failing: false,
    },
    { name: "sh.tool, selfheal redisStore", design: "selfheal", via: "sh.tool", failing: false },
    { name: "sh.tool, naive ZSET per call", design: "naive", via: "sh.tool", failing: false },
    {
      name: "sh.tool 5% failing, in-memory store (no Redis)",
      design: "memory",
      via: "sh.tool",
      failing: true,
    },
    {
      name: "sh.tool 5% failing, selfheal redisStore",
      design: "selfheal",
      via: "sh.tool",
      failing: true,
    },
    {
      name: "sh.tool 5% failing, naive ZSET per call",
      design: "naive",
      via: "sh.tool",
      failing: true,
    },
    {
      name: "store.recordCall, selfheal redisStore",
      design: "selfheal",
      via: "store",
      failing: true,
    },
    { name: "store.recordCall, naive ZSET per call", design: "naive", via: "store", failing: true },
  ];
  const timed = new Map<string, Measured[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of cases)
      timed.set(c.name, [...(timed.get(c.name) ?? []), await run(server.url, admin, c, false)]);
  }
  const counted = new Map<string, Measured>();
  for (const c of cases)
    if (c.design !== "memory") counted.set(c.name, await run(server.url, admin, c, true));

  const rows: Record<string, unknown>[] = [];
  const breakdown: Record<string, { ran: object; sent: object }> = {};
  const perCall = new Map<string, { ran: number; sent: number }>();
  for (const c of cases) {
    const ms = timed.get(c.name) ?? [];
    const median = [...ms].sort((a, b) => a.seconds - b.seconds)[Math.floor(ms.length / 2)];
    if (!median) continue;
    const count = counted.get(c.name);
    const ran = total(count?.ran ?? new Map<string, number>());
    const written = total(count?.sent ?? new Map<string, number>());
    perCall.set(c.name, { ran: ran / CALLS, sent: written / CALLS });
    if (count)
      breakdown[c.name] = {
        ran: Object.fromEntries([...count.ran].sort((a, b) => b[1] - a[1])),
        sent: Object.fromEntries([...count.sent].sort((a, b) => b[1] - a[1])),
      };
    rows.push({
      case: c.name,
      "calls/s": Math.round(CALLS / median.seconds),
      "sent/call": c.design === "memory" ? 0 : +(written / CALLS).toFixed(4),
      "ran/call": c.design === "memory" ? 0 : +(ran / CALLS).toFixed(4),
      "in Redis / made": c.design === "memory" ? "" : `${count?.inRedis ?? NaN}/${CALLS}`,
    });
  }
  const ratio = (naive: string, self: string, what: "ran" | "sent") =>
    +((perCall.get(naive)?.[what] ?? NaN) / (perCall.get(self)?.[what] ?? NaN)).toFixed(1);

  // (b) memory.
  const memory: Record<string, unknown>[] = [];
  const bytes = new Map<string, number>();
  const kinds = new Map<string, Record<string, { keys: number; bytes: number }>>();
  for (const calls of MEMORY_SIZES) {
    for (const design of ["selfheal", "naive"] as const) {
      const m = await memoryAfter(server.url, admin, design, calls);
      bytes.set(`${design}:${calls}`, m.bytes);
      kinds.set(`${design}:${calls}`, m.byKind);
      memory.push({
        design,
        calls,
        "used_memory delta (bytes)": m.bytes,
        "bytes/call": +(m.bytes / calls).toFixed(2),
        keys: m.keys,
        "keys by kind": Object.entries(m.byKind)
          .map(([kind, k]) => `${kind} ${k.keys} (${k.bytes} B)`)
          .join(", "),
        "ran/call": +(m.commands / calls).toFixed(4),
        "in Redis": m.inRedis,
        seconds: +m.seconds.toFixed(2),
      });
    }
  }
  console.table(memory);
  const mem = (design: string, calls: number) => bytes.get(`${design}:${calls}`) ?? NaN;
  const pairs = [
    ["sh.tool", "sh.tool, naive ZSET per call", "sh.tool, selfheal redisStore"],
    [
      "sh.tool 5% failing",
      "sh.tool 5% failing, naive ZSET per call",
      "sh.tool 5% failing, selfheal redisStore",
    ],
    [
      "store.recordCall",
      "store.recordCall, naive ZSET per call",
      "store.recordCall, selfheal redisStore",
    ],
  ] as const;
  const summary: Record<string, unknown> = {};
  for (const [label, naive, self] of pairs) {
    summary[`${label}: commands sent, naive / selfheal`] = ratio(naive, self, "sent");
    summary[`${label}: commands run (Lua included), naive / selfheal`] = ratio(naive, self, "ran");
  }
  summary["selfheal memory 1e6 / 1e4"] = +(mem("selfheal", 1e6) / mem("selfheal", 1e4)).toFixed(2);
  summary["selfheal memory 1e6 / 1e5"] = +(mem("selfheal", 1e6) / mem("selfheal", 1e5)).toFixed(2);
  // Of selfheal's: the call buckets (`c`, bounded by the window) and the batch ids (`b`, one per
  // agent and batch sent, kept 20 min: they follow the number of batches, not of calls).
  const kind = (calls: number, k: string) => kinds.get(`selfheal:${calls}`)?.[k]?.bytes ?? NaN;
  summary["selfheal call buckets (MEMORY USAGE) 1e4 / 1e5 / 1e6"] = MEMORY_SIZES.map((n) =>
    kind(n, "c"),
  ).join(" / ");
  summary["selfheal batch ids (MEMORY USAGE) 1e4 / 1e5 / 1e6"] = MEMORY_SIZES.map((n) =>
    kind(n, "b"),
  ).join(" / ");
  summary["naive memory 1e6 / 1e4"] = +(mem("naive", 1e6) / mem("naive", 1e4)).toFixed(2);
  summary["memory at 1e6, naive / selfheal"] = +(mem("naive", 1e6) / mem("selfheal", 1e6)).toFixed(
    1,
  );

  report("redis", rows, summary, {
    redis: version,
    calls: CALLS,
    rounds: ROUNDS,
    tools: TOOLS,
    memory,
    "commands by name (counting pass)": breakdown,
  });
} finally {
  admin.disconnect();
  await server.stop();
}
