import type { Redis } from "ioredis";
import { ioredis } from "./peer.js";
import type { Clock } from "../clock.js";
import { systemClock } from "../clock.js";
import { SelfHealConfigError } from "../errors.js";
import { MAX_TOOLS_PER_AGENT, MemorySignalStore, OVERFLOW_TOOL } from "../health/memory-store.js";
import {
  DEFAULT_WINDOWS,
  failedAttempts,
  type AgentSignals,
  type CallRecord,
  type ScopeSignals,
  type SignalStore,
  type SignalWindows,
  type StoreState,
  type TaskRecord,
} from "../health/store.js";
import { emptyTotals, LATENCY_BUCKET_COUNT, latencyBucket } from "../health/window.js";
import { describeThrown, redact, safeLogger } from "../telemetry/redact.js";
import { agentsKey, AgentKeys, checkPrefix, decodeName, encodeName } from "./keys.js";
import { RedisFleetSync } from "./fleet-sync.js";
import { ADD, READ, RING } from "./scripts.js";

export interface RedisStoreOptions {
  /** An ioredis client (6.x); the store neither connects nor quits it. */
  client?: Redis;
  /** Or a URL (`redis://host:6379/0`): the store makes its own client and quits it on close. */
  url?: string;
  /** Namespace of every key (default `selfheal`): letters, digits, `_`, `.`, `-`. */
  prefix?: string;
  /** Window sizes: every worker of a fleet must use the same (defaults as the memory store). */
  windows?: Partial<SignalWindows>;
  /** Records are sent every `flushMs` (default 1000)... */
  flushMs?: number;
  /** ...or as soon as this many are waiting (default 500): never a round trip per call. */
  flushRecords?: number;
  /** Every Redis command gives up after this long, ms (default 500): shorter than a tool's. */
  commandTimeoutMs?: number;
  /** Where connection trouble is told, once per `logIntervalMs` (default 60 s). */
  logger?: { warn(message: string): void };
  logIntervalMs?: number;
  /**
   * Timers of the flush and the command timeout (default the system clock: they wait on a real
   * server). Window time is the callers' own: the `now` each record and read carries.
   */
  clock?: Clock;
}

/** The scripts, as queued on a MULTI (their replies come from exec()). */
interface Scripts {
  selfhealAdd(key: string, ttlMs: number, ...fieldsAndDeltas: (string | number)[]): Multi;
  selfhealRing(key: string, size: number, ttlMs: number, ...scopesAndValues: string[]): Multi;
  selfhealRead(keyCount: number, ...keysAndArgs: (string | number)[]): Multi;
}
type Multi = ReturnType<Redis["multi"]> & Scripts;

/** Counts to add to the hashes of one agent, by key. */
class AgentBatch {
  readonly hashes = new Map<string, { ttlMs: number; fields: Map<string, number> }>();
  readonly ring: string[] = [];

  constructor(readonly keys: AgentKeys) {}

  add(key: string, ttlMs: number, field: string, delta: number): void {
    let hash = this.hashes.get(key);
    if (!hash) this.hashes.set(key, (hash = { ttlMs, fields: new Map() }));
    hash.fields.set(field, (hash.fields.get(field) ?? 0) + delta);
  }
}

const DEFAULTS = { prefix: "selfheal", flushMs: 1_000, flushRecords: 500, commandTimeoutMs: 500 };

/**
 * Health signals shared by a fleet through Redis. Each worker adds its calls to time-bucketed
 * hashes (counts and a latency histogram per tool, expiring with the window), in batches: one
 * round trip every `flushMs` or `flushRecords`, never one per call. A status read sends what is
 * waiting and reads the agent's buckets, summed on the server, in the same round trip; buckets of
 * all workers add up, so the fleet's rates and P95 are those of all its calls.
 *
 * Redis down, slow or restarted: nothing throws. Every record is also kept in local memory; while
 * Redis is away, reads come from there (this worker's calls only), state listeners hear
 * `degraded`, what was not sent is kept (as counts per bucket: bounded) and sent when Redis is
 * back, and connection trouble is logged once per `logIntervalMs`.
 */
export class RedisSignalStore implements SignalStore {
  readonly windows: SignalWindows;
  /** Breaker verdicts, the probe lease and the alert throttle, shared by the fleet. */
  readonly fleet: RedisFleetSync;
  private readonly client: Redis;
  private readonly ownsClient: boolean;
  private readonly prefix: string;
  private readonly local: MemorySignalStore;
  private readonly clock: Clock;
  private readonly logger: { warn(message: string): void };
  private readonly options: typeof DEFAULTS & { logIntervalMs: number };
  private readonly callBucketMs: number;
  private readonly taskBucketMs: number;
  private readonly agents = new Map<string, AgentKeys>();
  private readonly tools = new Map<string, Set<string>>();
  private pending = new Map<string, AgentBatch>();
  private pendingRecords = 0;
  private degraded = false;
  private lastLogAt = Number.NEGATIVE_INFINITY;
  private readonly listeners = new Set<(state: StoreState) => void>();
  private cancelTimer: (() => void) | undefined;
  private closed = false;
  /** The latest time a caller passed in. */
  private latest = Number.NEGATIVE_INFINITY;

  constructor(options: RedisStoreOptions) {
    if ((options.client === undefined) === (options.url === undefined)) {
      throw new SelfHealConfigError(
        "redisStore",
        "pass either `client` (an ioredis client) or `url`",
      );
    }
    this.prefix = checkPrefix(options.prefix ?? DEFAULTS.prefix);
    this.options = {
      prefix: this.prefix,
      flushMs: positive(options.flushMs, "flushMs", DEFAULTS.flushMs),
      flushRecords: positive(options.flushRecords, "flushRecords", DEFAULTS.flushRecords),
      commandTimeoutMs: positive(
        options.commandTimeoutMs,
        "commandTimeoutMs",
        DEFAULTS.commandTimeoutMs,
      ),
      logIntervalMs: positive(options.logIntervalMs, "logIntervalMs", 60_000),
    };
    this.windows = { ...DEFAULT_WINDOWS, ...options.windows };
    this.local = new MemorySignalStore(this.windows);
    this.callBucketMs = this.windows.callWindowMs / this.windows.buckets;
    this.taskBucketMs = this.windows.taskWindowMs / this.windows.buckets;
    this.clock = options.clock ?? systemClock;
    this.logger = safeLogger(options.logger ?? console);
    this.ownsClient = options.client === undefined;
    const client =
      options.client ??
      new (ioredis().Redis)(options.url ?? "", {
        // Fail fast while disconnected (the store falls back to memory) rather than queue.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout: this.options.commandTimeoutMs,
        retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5_000),
        protocol: 3,
      });
    client.defineCommand("selfhealAdd", { numberOfKeys: 1, lua: ADD });
    client.defineCommand("selfhealRing", { numberOfKeys: 1, lua: RING });
    client.defineCommand("selfhealRead", { lua: READ });
    RedisFleetSync.define(client);
    client.on("error", (error: unknown) => {
      this.trouble(error);
    });
    client.on("ready", () => {
      void this.flush(); // back: send what waited, and say so when it lands
    });
    this.client = client;
    this.fleet = new RedisFleetSync(
      {
        client,
        degraded: () => this.degraded,
        timed: (work) => this.timed(work),
        onTrouble: (error) => {
          this.trouble(error);
        },
        ready: () => this.connected(),
      },
      this.prefix,
    );
    this.schedule();
  }

  recordCall(record: CallRecord, now: number): void {
    this.local.recordCall(record, now);
    this.seen(now);
    const ok = record.outcome === "success" || record.outcome === "recovered" ? 1 : 0;
    const failed = failedAttempts(record);
    if (ok + failed === 0) return; // as the memory store: no dependency was reached
    const batch = this.batch(record.agent);
    const tool = encodeName(this.toolName(record.agent, record.tool));
    const key = batch.keys.calls(Math.floor(now / this.callBucketMs));
    const ttlMs = this.windows.callWindowMs + this.callBucketMs;
    if (ok) batch.add(key, ttlMs, `${tool}|ok`, ok);
    if (failed) batch.add(key, ttlMs, `${tool}|f`, failed);
    batch.add(key, ttlMs, `${tool}|h${latencyBucket(record.durationMs)}`, 1);
    if (record.empty !== undefined) {
      const v = record.empty ? "1" : "0";
      batch.ring.push(`t:${tool}`, v, "a", v);
    }
    this.counted();
  }

  recordTask(record: TaskRecord, now: number): void {
    this.local.recordTask(record, now);
    this.seen(now);
    const batch = this.batch(record.agent);
    const key = batch.keys.tasks(Math.floor(now / this.taskBucketMs));
    const field = record.outcome === "completed" ? "ok" : "f";
    batch.add(key, this.windows.taskWindowMs + this.taskBucketMs, field, 1);
    this.counted();
  }

  /** The fleet's signals (this worker's waiting records sent in the same round trip). */
  async read(agent: string, now: number): Promise<AgentSignals> {
    this.seen(now);
    if (this.degraded) {
      void this.flush(); // a probe: the first success says Redis is back
      return this.local.read(agent, now);
    }
    const keys = this.agentKeys(agent);
    const newest = Math.floor(now / this.callBucketMs);
    const newestTask = Math.floor(now / this.taskBucketMs);
    const n = this.windows.buckets;
    const callKeys = Array.from({ length: n }, (_, i) => keys.calls(newest - i));
    const taskKeys = Array.from({ length: n }, (_, i) => keys.tasks(newestTask - i));
    const recent = Math.ceil(this.windows.recentWindowMs / this.callBucketMs);
    const raw = await this.send((multi) =>
      multi.selfhealRead(2 * n + 1, ...callKeys, ...taskKeys, keys.llm, n, recent),
    );
    const reply = raw?.at(-1);
    if (!raw || !Array.isArray(reply)) return this.local.read(agent, now);
    return this.parse(reply as string[][]);
  }

  /** Says when Redis goes away and comes back (the engine turns it into an event and a metric). */
  onStateChange(listener: (state: StoreState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The client the store talks through. */
  get connection(): Redis {
    return this.client;
  }

  /** Whether Redis is away (reads come from this worker's memory). */
  get isDegraded(): boolean {
    return this.degraded;
  }

  /** Sends what is waiting now (also done on a timer and on close). */
  async flush(): Promise<void> {
    await this.send(() => undefined);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelTimer?.();
    if (!this.degraded) await this.flush();
    this.fleet.close();
    if (this.ownsClient) this.client.disconnect();
  }

  /**
   * One round trip: the waiting records (a MULTI, all or nothing) and, optionally, one more
   * command. On failure the records go back to waiting and the store is degraded.
   */
  private async send(also: (multi: Multi) => unknown): Promise<unknown[] | undefined> {
    const batch = this.pending;
    this.pending = new Map();
    this.pendingRecords = 0;
    const multi = this.client.multi() as Multi;
    for (const [agent, b] of batch) {
      multi.sadd(agentsKey(this.prefix), encodeName(agent));
      for (const [key, hash] of b.hashes) {
        const args: (string | number)[] = [];
        for (const [field, delta] of hash.fields) args.push(field, delta);
        multi.selfhealAdd(key, Math.ceil(hash.ttlMs), ...args);
      }
      if (b.ring.length)
        multi.selfhealRing(b.keys.llm, this.windows.llmSampleSize, 24 * 3_600_000, ...b.ring);
    }
    const before = multi.length;
    also(multi);
    // Nothing waiting and nothing asked: no round trip (a MULTI counts itself in `length`).
    if (batch.size === 0 && multi.length === before) return [];
    try {
      await this.connected();
      const results: [Error | null, unknown][] | null = await this.timed(multi.exec());
      if (!results) throw new Error("Redis discarded the transaction");
      for (const [error] of results) if (error) throw error;
      this.setDegraded(false);
      return results.map(([, value]) => value);
    } catch (error) {
      this.requeue(batch);
      this.trouble(error);
      this.setDegraded(true, error);
      return undefined;
    }
  }

  /** Waits (within the command timeout) for a client that is still connecting at start. */
  private async connected(): Promise<void> {
    const client = this.client;
    if (client.status === "ready") return;
    if (client.status === "wait") void client.connect().catch(() => undefined);
    if (client.status !== "connecting" && client.status !== "connect" && client.status !== "wait")
      return; // reconnecting or closed: the command fails fast, the store degrades
    await this.timed(
      new Promise<void>((resolve, reject) => {
        const ready = () => {
          client.off("error", failed);
          resolve();
        };
        const failed = (error: unknown) => {
          client.off("ready", ready);
          reject(error);
        };
        client.once("ready", ready);
        client.once("error", failed);
      }),
    );
  }

  /** Races a command against the store's own timeout (a user's client may have none). */
  private timed<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cancel = this.clock.setTimer(
        this.options.commandTimeoutMs,
        () => {
          reject(new Error(`Redis did not answer within ${this.options.commandTimeoutMs} ms`));
        },
        { unref: true },
      );
      work.then(
        (value) => {
          cancel();
          resolve(value);
        },
        (error: unknown) => {
          cancel();
          reject(error);
        },
      );
    });
  }

  /** Records that could not be sent wait again; buckets already out of every window are dropped. */
  private requeue(batch: Map<string, AgentBatch>): void {
    const oldestCall = Math.floor(this.latest / this.callBucketMs) - this.windows.buckets;
    const oldestTask = Math.floor(this.latest / this.taskBucketMs) - this.windows.buckets;
    for (const [agent, b] of batch) {
      const into = this.batch(agent);
      for (const [key, hash] of b.hashes) {
        const epoch = Number(key.slice(key.lastIndexOf(":") + 1));
        const oldest = key.includes("}:t:") ? oldestTask : oldestCall;
        if (epoch < oldest) continue;
        for (const [field, delta] of hash.fields) into.add(key, hash.ttlMs, field, delta);
      }
      // A ring keeps only the last N: older outcomes waiting would be pushed out anyway.
      into.ring.unshift(...b.ring.slice(-4 * this.windows.llmSampleSize));
    }
  }

  private parse([calls = [], recent = [], tasks = [], rings = []]: string[][]): AgentSignals {
    const tools = new Map<string, ScopeSignals>();
    const scope = (encoded: string): ScopeSignals => {
      const name = decodeName(encoded);
      let s = tools.get(name);
      if (!s) {
        s = {
          calls: emptyTotals(),
          recent: { ok: 0, failed: 0 },
          llm: { total: 0, empty: 0 },
          tasks: { completed: 0, failed: 0 },
        };
        tools.set(name, s);
      }
      return s;
    };
    forPairs(calls, (field, n) => {
      const bar = field.lastIndexOf("|");
      const s = scope(field.slice(0, bar));
      const what = field.slice(bar + 1);
      if (what === "ok") s.calls.ok += n;
      else if (what === "f") s.calls.failed += n;
      else {
        const i = Number(what.slice(1));
        if (i >= 0 && i < LATENCY_BUCKET_COUNT) s.calls.latency[i] = (s.calls.latency[i] ?? 0) + n;
      }
    });
    forPairs(recent, (field, n) => {
      const bar = field.lastIndexOf("|");
      const s = scope(field.slice(0, bar));
      if (field.endsWith("|ok")) s.recent.ok += n;
      else s.recent.failed += n;
    });
    // A tool's last-N LLM ring outlives its calls' window (it is not time-bound), as in memory.
    forPairs(rings, (field) => {
      if (field.startsWith("t:") && field.endsWith("|n")) scope(field.slice(2, -2));
    });
    const agent: ScopeSignals = {
      calls: emptyTotals(),
      recent: { ok: 0, failed: 0 },
      llm: ring(rings, "a", this.windows.llmSampleSize),
      tasks: { completed: 0, failed: 0 },
    };
    for (const [name, s] of tools) {
      agent.calls.ok += s.calls.ok;
      agent.calls.failed += s.calls.failed;
      for (let i = 0; i < LATENCY_BUCKET_COUNT; i++)
        agent.calls.latency[i] = (agent.calls.latency[i] ?? 0) + (s.calls.latency[i] ?? 0);
      agent.recent.ok += s.recent.ok;
      agent.recent.failed += s.recent.failed;
      s.llm = ring(rings, `t:${encodeName(name)}`, this.windows.llmSampleSize);
    }
    forPairs(tasks, (field, n) => {
      if (field === "ok") agent.tasks.completed += n;
      else agent.tasks.failed += n;
    });
    return { agent, tools };
  }

  private batch(agent: string): AgentBatch {
    let b = this.pending.get(agent);
    if (!b) this.pending.set(agent, (b = new AgentBatch(this.agentKeys(agent))));
    return b;
  }

  private agentKeys(agent: string): AgentKeys {
    let keys = this.agents.get(agent);
    if (!keys) this.agents.set(agent, (keys = new AgentKeys(this.prefix, agent)));
    return keys;
  }

  /** Tools past the per-agent limit share one name, so hostile names cannot grow Redis. */
  private toolName(agent: string, tool: string): string {
    let known = this.tools.get(agent);
    if (!known) this.tools.set(agent, (known = new Set()));
    if (known.has(tool)) return tool;
    if (known.size >= MAX_TOOLS_PER_AGENT) return OVERFLOW_TOOL;
    known.add(tool);
    return tool;
  }

  /** Time as the callers tell it (their clock, maybe virtual): what the window is measured on. */
  private seen(now: number): void {
    if (now > this.latest) this.latest = now;
  }

  private counted(): void {
    if (++this.pendingRecords >= this.options.flushRecords && !this.degraded) void this.flush();
  }

  private schedule(): void {
    if (this.closed) return;
    this.cancelTimer = this.clock.setTimer(
      this.options.flushMs,
      () => {
        void this.flush().finally(() => {
          this.schedule();
        });
      },
      { unref: true },
    );
  }

  private setDegraded(degraded: boolean, error?: unknown): void {
    if (this.degraded === degraded) return;
    this.degraded = degraded;
    const state: StoreState = degraded
      ? { degraded, reason: redact(describeThrown(error)) }
      : { degraded };
    if (!degraded) this.logger.warn("selfheal: Redis is back; signals are shared again");
    for (const listener of this.listeners) {
      try {
        listener(state);
      } catch {
        // A listener that throws must not stop the others or the store.
      }
    }
  }

  /** Connection trouble, told at most once per logIntervalMs. */
  private trouble(error: unknown): void {
    const now = this.clock.now();
    if (now - this.lastLogAt < this.options.logIntervalMs) return;
    this.lastLogAt = now;
    this.logger.warn(
      `selfheal: Redis unavailable, using local memory until it is back: ${redact(describeThrown(error))}`,
    );
  }
}

/** A store of health signals in Redis, shared by every worker that uses the same prefix. */
export function redisStore(options: RedisStoreOptions): RedisSignalStore {
  return new RedisSignalStore(options);
}

function positive(value: number | undefined, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0)
    throw new SelfHealConfigError(
      `redisStore.${field}`,
      `expected a positive number, got ${String(value)}`,
    );
  return value;
}

function forPairs(flat: string[], each: (field: string, n: number) => void): void {
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const n = Number(flat[i + 1]);
    if (Number.isFinite(n)) each(flat[i] ?? "", n);
  }
}

/** Counts of one last-N ring read back from its hash. */
function ring(flat: string[], scope: string, size: number): { total: number; empty: number } {
  let pushes = 0;
  let empty = 0;
  const prefix = `${scope}|`;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = flat[i] ?? "";
    if (!field.startsWith(prefix)) continue;
    const what = field.slice(prefix.length);
    if (what === "n") pushes = Number(flat[i + 1]);
    else if (flat[i + 1] === "1" && Number(what) < size) empty++;
  }
  return { total: Math.min(pushes, size), empty };
}
