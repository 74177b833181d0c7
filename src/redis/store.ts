import { randomBytes } from "node:crypto";
import type { Cluster, Redis } from "ioredis";
import { ioredis } from "./peer.js";
import type { Clock } from "../clock.js";
import { systemClock } from "../clock.js";
import { closedWithInstances } from "../engine/options.js";
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
import { Pipelines, type Reply } from "./pipelines.js";
import { APPLY, READ } from "./scripts.js";

export interface RedisStoreOptions {
  /** An ioredis client (6.x) or Cluster; the store neither connects nor quits it. */
  client?: Redis | Cluster;
  /** Or a URL (`redis://host:6379/0`): the store makes its own client and quits it on close. */
  url?: string | undefined;
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

/** The scripts, as queued on a pipeline: one array, the key count first, then keys and args. */
interface Scripts {
  selfhealApply(keyCountKeysAndArgs: (string | number)[]): Pipeline;
  selfhealRead(keyCountKeysAndArgs: (string | number)[]): Pipeline;
}
type Pipeline = ReturnType<Redis["pipeline"]> & Scripts;

/** Counts to add to the hashes of one agent, by key, and LLM outcomes to push on its rings. */
class AgentBatch {
  readonly hashes = new Map<string, { ttlMs: number; fields: Map<string, number> }>();
  ring: string[] = [];
  /** Calls and tasks recorded into it. */
  records = 0;

  constructor(readonly keys: AgentKeys) {}

  add(key: string, ttlMs: number, field: string, delta: number): void {
    let hash = this.hashes.get(key);
    if (!hash) this.hashes.set(key, (hash = { ttlMs, fields: new Map() }));
    hash.fields.set(field, (hash.fields.get(field) ?? 0) + delta);
  }

  get empty(): boolean {
    return this.hashes.size === 0 && this.ring.length === 0;
  }
}

/**
 * A batch that went on the wire: an id Redis keeps (`SET NX PX` in the script that applies it)
 * and contents that never take newer records, so sending it again (after a timeout, a lost
 * connection, a stalled event loop) applies nothing if it had landed.
 */
interface Flight {
  /** This worker's random id, then a sequence number. */
  readonly id: string;
  /**
   * Each agent's part, applied by its own script call (every key of one agent shares its hash
   * tag, so one Cluster slot); a part leaves once Redis has confirmed it.
   */
  readonly parts: Map<string, AgentBatch>;
  /** When it was first sent (store clock, ms). */
  readonly sentAt: number;
  /** Round trips it went out in. */
  sends: number;
  /** On the wire in a round trip that is still waiting for its answer. */
  busy: boolean;
}

/** A read asked of a round trip: the agent's hash tag (its slot) and the READ script's arguments. */
interface ReadRequest {
  tag: string;
  args: (string | number)[];
}

/** How a round trip went: whether everything in it was confirmed, and the read's reply. */
interface Exchanged {
  ok: boolean;
  read?: unknown;
}

/** How long the LLM rings are kept after their last push, ms. */
const RING_TTL_MS = 24 * 3_600_000;

const DEFAULTS = { prefix: "selfheal", flushMs: 1_000, flushRecords: 500, commandTimeoutMs: 500 };

/**
 * Health signals shared by a fleet through Redis. Each worker adds its calls to time-bucketed
 * hashes (counts and a latency histogram per tool, expiring with the window), in batches: one
 * round trip every `flushMs` or `flushRecords`, never one per call. A status read sends what is
 * waiting and reads the agent's buckets, summed on the server, in the same round trip; buckets of
 * all workers add up, so the fleet's rates and P95 are those of all its calls.
 *
 * Counts are applied exactly once. Each batch has an id (this worker's random id and a sequence
 * number); the script that applies an agent's part first sets `prefix:{agent}:b:<id>` with
 * `NX PX` and applies nothing if it was set, so a batch whose answer never came (a timeout, a
 * lost connection, an event loop that stalled past the timeout) is sent again with the same id
 * and the same contents, never merged with newer records. A late answer still confirms it. An id
 * is kept twice the call window (20 min by default); a batch is resent for at most one call
 * window (by then its call buckets have left every read) and then given up, with a log line.
 *
 * Redis down, slow or restarted: nothing throws, and no call waits. Every record is also kept in
 * local memory; while Redis is away, reads come from there (this worker's calls only), state
 * listeners hear `degraded`, records that never went on the wire wait merged as counts per bucket
 * (bounded) and go in one batch when Redis is back, and connection trouble is logged once per
 * `logIntervalMs`. Unconfirmed batches stay few: while Redis is away a new one is sent only when
 * no older one is waiting for its answer.
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
  /** How long Redis keeps a batch id, ms: longer than any resend of the batch can happen. */
  private readonly idTtlMs: number;
  /** How long an unconfirmed batch is sent again, ms. */
  private readonly resendForMs: number;
  private readonly agents = new Map<string, AgentKeys>();
  private readonly tools = new Map<string, Set<string>>();
  /** Records not yet put on the wire: merged, as counts per bucket. */
  private pending = new Map<string, AgentBatch>();
  private pendingRecords = 0;
  /** Batches sent but not confirmed, oldest first (resent as they are). */
  private flights: Flight[] = [];
  private readonly worker = randomBytes(8).toString("hex");
  private sequence = 0;
  private readonly counts = { resends: 0, duplicates: 0 };
  /** Round trips waiting for their answer. */
  private readonly running = new Set<Promise<Exchanged>>();
  private autoRunning = false;
  private degraded = false;
  private lastLogAt = Number.NEGATIVE_INFINITY;
  private readonly listeners = new Set<(state: StoreState) => void>();
  private cancelTimer: (() => void) | undefined;
  private closed = false;
  /** Closed and the last round trip done: nothing more goes out. */
  private finished = false;
  /** The latest time a caller passed in. */
  private latest = Number.NEGATIVE_INFINITY;
  private readonly onError = (error: unknown) => {
    this.trouble(error);
  };
  private readonly onReady = () => {
    void this.flush(); // back: send what waited, and say so when it lands
  };

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
    this.resendForMs = this.windows.callWindowMs;
    this.idTtlMs = Math.ceil(2 * this.windows.callWindowMs);
    this.clock = options.clock ?? systemClock;
    this.logger = safeLogger(options.logger ?? console);
    this.ownsClient = options.client === undefined;
    // A Cluster takes every command the store sends (one pipeline per slot): typed as one client.
    const client =
      (options.client as Redis | undefined) ??
      new (ioredis().Redis)(options.url ?? "", {
        // Fail fast while disconnected (the store falls back to memory) rather than queue.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout: this.options.commandTimeoutMs,
        retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5_000),
        protocol: 3,
      });
    client.defineCommand("selfhealApply", { lua: APPLY });
    client.defineCommand("selfhealRead", { lua: READ });
    RedisFleetSync.define(client);
    client.on("error", this.onError);
    client.on("ready", this.onReady);
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
    // The store opens connections of its own (its client when made from `url`, and the breaker
    // channel's subscriber): however it was made (`redisStore()`, or `new RedisSignalStore()`),
    // the instances that use it close it, the last one to close; a client the user passed stays
    // the user's (close() never quits it).
    closedWithInstances(this);
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
      // A ring keeps only the last N: older outcomes waiting would be pushed out anyway.
      const keep = 4 * this.windows.llmSampleSize;
      if (batch.ring.length > 2 * keep) batch.ring = batch.ring.slice(-keep);
    }
    this.counted(batch);
  }

  recordTask(record: TaskRecord, now: number): void {
    this.local.recordTask(record, now);
    this.seen(now);
    const batch = this.batch(record.agent);
    const key = batch.keys.tasks(Math.floor(now / this.taskBucketMs));
    const field = record.outcome === "completed" ? "ok" : "f";
    batch.add(key, this.windows.taskWindowMs + this.taskBucketMs, field, 1);
    this.counted(batch);
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
    const { read } = await this.exchange({
      tag: keys.tag,
      args: [2 * n + 1, ...callKeys, ...taskKeys, keys.llm, n, recent],
    });
    if (!Array.isArray(read)) return this.local.read(agent, now);
    return this.parse(read as string[][]);
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

  /**
   * Records this worker has recorded that Redis has not confirmed yet: waiting to be sent, or
   * sent without an answer (`batches` of them, each resent with its id).
   */
  get backlog(): { records: number; batches: number } {
    let records = this.pendingRecords;
    for (const flight of this.flights)
      for (const part of flight.parts.values()) records += part.records;
    return { records, batches: this.flights.length };
  }

  /**
   * Batches since the store was made: sent (each has an id); sent again because no answer came
   * in time; answers saying Redis had applied that batch already (a count not doubled; answers
   * that came after the client's own command timeout are not seen).
   */
  get stats(): { batches: number; resends: number; duplicates: number } {
    return { batches: this.sequence, ...this.counts };
  }

  /**
   * Sends what is waiting now (also done on a timer and on close), after the round trips already
   * on the wire have their answer: when it resolves, every record made before the call has been
   * confirmed by Redis, or the store is degraded.
   */
  async flush(): Promise<void> {
    await this.settled();
    // Records held back while Redis was away go once the first round trip says it is back.
    const away = this.degraded;
    if ((await this.exchange()).ok && away && this.waiting()) await this.exchange();
  }

  /** Sends what is left, once (however Redis is), then stops; closes the client if it made it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelTimer?.();
    await this.settled();
    await this.exchange(undefined, true);
    this.finished = true;
    const { records } = this.backlog;
    if (records > 0)
      this.logger.warn(`selfheal: closing with ${records} records Redis did not confirm`);
    this.fleet.close();
    if (this.ownsClient) this.client.disconnect();
    else {
      // The caller's client outlives the store: it keeps none of the store's listeners.
      this.client.off("error", this.onError);
      this.client.off("ready", this.onReady);
    }
  }

  /**
   * One round trip: the batches waiting for an answer (resent as they are), the records waiting
   * (as a new batch, unless Redis is away and an older batch still waits), the agents they are
   * of, and the read asked for. One pipeline; on a Cluster, one per hash slot, sent together.
   * Never throws: a failure degrades the store.
   */
  private exchange(read?: ReadRequest, last = false): Promise<Exchanged> {
    const work = this.exchangeNow(read, last);
    this.running.add(work);
    const done = () => {
      this.running.delete(work);
    };
    void work.then(done, done);
    return work;
  }

  private async exchangeNow(read: ReadRequest | undefined, last: boolean): Promise<Exchanged> {
    if (this.finished) return { ok: false };
    const deadline = this.clock.now() + this.options.commandTimeoutMs;
    this.prune();
    try {
      await this.connected();
      // Not connected: nothing goes on the wire, so the records keep waiting, merged.
      if (this.client.status !== "ready")
        throw new Error(`Redis connection is ${this.client.status}`);
    } catch (error) {
      return this.failed(error);
    }
    const flights = this.flights.filter((f) => !f.busy);
    if (this.pending.size > 0 && (!this.degraded || last || this.flights.length === 0)) {
      const flight: Flight = {
        id: `${this.worker}.${(this.sequence++).toString(36)}`,
        parts: this.pending,
        sentAt: this.clock.now(),
        sends: 0,
        busy: false,
      };
      this.pending = new Map();
      this.pendingRecords = 0;
      this.flights.push(flight);
      flights.push(flight);
    }
    const pipelines = new Pipelines<Pipeline>(this.client);
    if (flights.length === 0 && !read) {
      // Nothing waiting and nothing asked: no round trip, unless Redis is away. Then a PING asks
      // whether it is back: a store degraded by a timeout whose late answer confirmed everything
      // would otherwise read from memory until the next record.
      if (!this.degraded) return { ok: true };
      pipelines.add("", (p) => p.ping());
    }
    const sent: { flight: Flight; agent: string; at: Reply }[] = [];
    const agents = new Set<string>();
    for (const flight of flights) {
      for (const [agent, part] of flight.parts) {
        const at = pipelines.add(part.keys.tag, (p) =>
          p.selfhealApply(this.applyArgs(flight, part)),
        );
        sent.push({ flight, agent, at });
        agents.add(encodeName(agent));
      }
    }
    // Not in any batch's script (another slot): idempotent on its own.
    const set = agentsKey(this.prefix);
    if (agents.size > 0) pipelines.add(set, (p) => p.sadd(set, ...agents));
    const readAt = read && pipelines.add(read.tag, (p) => p.selfhealRead(read.args));

    for (const flight of flights) {
      flight.busy = true;
      if (flight.sends++ > 0) this.counts.resends++;
    }
    const answered = pipelines.exec().then((replies) => {
      // What landed is confirmed, even when the answer comes after the timeout.
      for (const { flight, agent, at } of sent) {
        if (replies.error(at)) continue;
        if (replies.value(at) === 0) this.counts.duplicates++;
        flight.parts.delete(agent);
        if (flight.parts.size === 0) this.flights = this.flights.filter((f) => f !== flight);
      }
      return replies;
    });
    try {
      // What is left of the deadline after the wait for a connection (none: the next tick).
      const replies = await this.timed(answered, deadline - this.clock.now());
      const error = replies.firstError();
      if (error) throw error;
      this.setDegraded(false);
      return { ok: true, read: readAt && replies.value(readAt) };
    } catch (error) {
      // Unconfirmed batches keep their id and contents: the next round trip sends them again.
      return this.failed(error);
    } finally {
      for (const flight of flights) flight.busy = false;
    }
  }

  /** The APPLY script's arguments for one agent's part of a batch. */
  private applyArgs(flight: Flight, part: AgentBatch): (string | number)[] {
    const keys = [`${part.keys.tag}:b:${flight.id}`];
    const args: (string | number)[] = [this.idTtlMs, part.hashes.size];
    for (const [key, hash] of part.hashes) {
      keys.push(key);
      args.push(Math.ceil(hash.ttlMs), hash.fields.size);
      for (const [field, delta] of hash.fields) args.push(field, delta);
    }
    if (part.ring.length > 0) {
      keys.push(part.keys.llm);
      args.push(this.windows.llmSampleSize, RING_TTL_MS);
      for (const value of part.ring) args.push(value);
    }
    return [keys.length, ...keys, ...args];
  }

  private failed(error: unknown): Exchanged {
    this.trouble(error);
    this.setDegraded(true, error);
    return { ok: false };
  }

  /** Whether something could go out now (waiting records, or a batch not on the wire). */
  private waiting(): boolean {
    return this.pending.size > 0 || this.flights.some((f) => !f.busy);
  }

  /** Resolves when the round trips on the wire now have their answer (or timed out). */
  private async settled(): Promise<void> {
    await Promise.all([...this.running]);
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
  private timed<T>(work: Promise<T>, ms = this.options.commandTimeoutMs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cancel = this.clock.setTimer(
        ms,
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

  /**
   * Drops buckets already out of every window from what waits (they would never be read), and
   * gives up batches Redis has not confirmed for `resendForMs` (their ids outlive any resend).
   */
  private prune(): void {
    const oldestCall = Math.floor(this.latest / this.callBucketMs) - this.windows.buckets;
    const oldestTask = Math.floor(this.latest / this.taskBucketMs) - this.windows.buckets;
    const trim = (part: AgentBatch) => {
      for (const key of part.hashes.keys()) {
        const epoch = Number(key.slice(key.lastIndexOf(":") + 1));
        if (epoch < (key.includes("}:t:") ? oldestTask : oldestCall)) part.hashes.delete(key);
      }
    };
    for (const [agent, part] of this.pending) {
      trim(part);
      if (part.empty) {
        this.pending.delete(agent);
        this.pendingRecords -= part.records;
      }
    }
    const now = this.clock.now();
    this.flights = this.flights.filter((flight) => {
      for (const [agent, part] of flight.parts) {
        trim(part);
        if (part.empty) flight.parts.delete(agent);
      }
      if (!flight.busy && now - flight.sentAt > this.resendForMs && flight.parts.size > 0) {
        let records = 0;
        for (const part of flight.parts.values()) records += part.records;
        this.logger.warn(
          `selfheal: Redis did not confirm a batch of ${records} records in ${Math.round(this.resendForMs / 1_000)} s; it is no longer sent`,
        );
        return false;
      }
      return flight.parts.size > 0;
    });
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

  private counted(batch: AgentBatch): void {
    batch.records++;
    if (++this.pendingRecords >= this.options.flushRecords && !this.degraded) this.autoFlush();
  }

  /** A flush of the timer or of `flushRecords`: one at a time, the next right after if due. */
  private autoFlush(): void {
    if (this.autoRunning || this.closed) return;
    this.autoRunning = true;
    void this.exchange().then(() => {
      this.autoRunning = false;
      if (!this.degraded && this.pendingRecords >= this.options.flushRecords) this.autoFlush();
    });
  }

  private schedule(): void {
    if (this.closed) return;
    this.cancelTimer = this.clock.setTimer(
      this.options.flushMs,
      () => {
        this.autoFlush();
        this.schedule();
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

/**
 * A store of health signals in Redis, shared by every worker that uses the same prefix; closed by
 * the `close()` of the instances that use it (see the constructor).
 */
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
