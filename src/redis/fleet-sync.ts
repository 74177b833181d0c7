import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { BreakerSync, BreakerVerdict } from "../recovery/breaker.js";
import type { AlertGate } from "../notify/throttle.js";
import type { BudgetSync } from "../recovery/budget.js";
import type { DriftSync } from "../diagnosis/drift.js";
import type { Claim, FleetWrite, LedgerSync } from "../recovery/idempotency.js";
import { hashKey } from "../telemetry/spans.js";
import { checkVerdict, readVerdicts } from "./verdicts.js";
import type { FleetSync } from "../fleet.js";
import {
  AgentKeys,
  alertKeyPrefix,
  breakerKeyPrefix,
  budgetKeyPrefix,
  encodeName,
  fleetTag,
} from "./keys.js";
import {
  DRIFT,
  EPOCH,
  GATE,
  LEDGER_CLAIM,
  LEDGER_COMPLETE,
  LEDGER_RELEASE,
  VERDICT_RESYNC,
} from "./scripts.js";

/** What the sync needs of the store: its client, whether Redis is away, its command timeout. */
export interface SyncHost {
  readonly client: Redis;
  readonly degraded: () => boolean;
  readonly timed: <T>(work: Promise<T>) => Promise<T>;
  readonly onTrouble: (error: unknown) => void;
  /** Resolves when the client is connected (within the command timeout). */
  readonly ready: () => Promise<void>;
}

interface Scripts {
  selfhealGate(gate: string, count: string, periodMs: number): Promise<[number, number]>;
  selfhealLedgerClaim(
    result: string,
    marker: string,
    epoch: string,
    id: string,
    leaseMs: number,
    keepMs: number,
    strict: number,
    graceMs: number,
    knew: number,
  ): Promise<[string, string]>;
  selfhealLedgerComplete(
    result: string,
    marker: string,
    text: string,
    ttlMs: number,
    id: string,
  ): Promise<number>;
  selfhealLedgerRelease(marker: string, id: string): Promise<number>;
  selfhealDrift(
    key: string,
    size: number,
    ttlMs: number,
    scope: string,
    value: string,
  ): Promise<[number, number, number, number]>;
}

/** The same scripts queued on a pipeline (replies come from exec()). */
interface QueuedScripts {
  selfhealEpoch(epoch: string, knew: number): Queued;
  selfhealLedgerComplete(
    result: string,
    marker: string,
    text: string,
    ttlMs: number,
    id: string,
  ): Queued;
  selfhealLedgerRelease(marker: string, id: string): Queued;
  selfhealVerdict(
    state: string,
    lease: string,
    verdict: string,
    at: number,
    leaseMs: number,
    holder: string,
    channel: string,
    message: string,
    ttlMs: number,
  ): Queued;
}
type Queued = ReturnType<Redis["pipeline"]> & QueuedScripts;

/** How long a task's shared spend is kept after its last recovery attempt, ms. */
const BUDGET_TTL_MS = 24 * 3_600_000;

/** How long a breaker verdict is kept in Redis, ms. */
const VERDICT_TTL_MS = 24 * 3_600_000;

/**
 * After Redis starts without the fleet's state (a restart without persistence), how long no new
 * claim of a keyed write is granted while the workers put back the claims and results they hold,
 * ms. A worker reconnects within RECONNECT_MAX_MS on its own connection, then puts them back in
 * one round trip. Not for a new fleet's first writes on a Redis up longer than this (see EPOCH
 * in scripts.ts).
 */
export const RESTART_GRACE_MS = 2_000;

/** How often what waits for Redis (verdicts, shares, gates) is tried again, ms. */
const RESYNC_POLL_MS = 200;

/** The longest the sync's own connection waits between reconnection attempts, ms. */
const RECONNECT_MAX_MS = 500;

/** Results this worker shared that it puts back after a restart (the newest). */
const MAX_REMEMBERED_RESULTS = 1_000;

/** Shares and releases kept while Redis is away (the oldest go first). */
const MAX_OUTBOX = 10_000;

/** A published verdict, as it travels on the channel. */
interface Message {
  from: string;
  dependency: string;
  verdict: BreakerVerdict;
}

/** A share or a release that must reach Redis (sent again until it does). */
type Op =
  | {
      kind: "complete";
      result: string;
      marker: string;
      text: string;
      /** When the result expires (wall clock, ms). */
      expiresAt: number;
      claimId: string;
    }
  | { kind: "release"; marker: string; claimId: string };

/** The breaker channel of a prefix on a database: pub/sub is per server, not per database. */
export function breakerChannel(prefix: string, db: number): string {
  // Database 0 keeps the name it always had, so the workers of a rolling upgrade still hear
  // each other; any other database is in the name.
  return db === 0 ? `${prefix}:breakers` : `${prefix}:breakers:db${db}`;
}

/**
 * Breakers, the idempotency ledger and the alert throttle shared through Redis. Breaker
 * verdicts go out on a pub/sub channel (a second connection subscribes) and every worker applies
 * them at once; the half-open probe is a lease (`SET NX PX`) so one worker in the fleet probes.
 * Alerts pass a gate key set with `NX PX` per kind: the first worker in a period sends, the
 * others count what they held. A keyed write is claimed before it is sent (one round trip) and
 * its result shared after (fired, not awaited).
 *
 * While Redis is away every worker decides breakers and alerts alone, as a single process would,
 * and keyed writes follow `recovery.ledger.whenFleetDown`. What was decided meanwhile is kept
 * (the latest verdict per dependency, shares, releases, alert gates) and published when Redis is
 * back; on every reconnection a worker also puts back what a restart without persistence lost
 * and it still knows: open verdicts with their time left, alert gates, the claims it holds and
 * the results it shared. Redis is back when either connection says so (`ready`) or a retry,
 * every RESYNC_POLL_MS while something waits, gets through.
 */
export class RedisFleetSync implements BreakerSync, AlertGate, LedgerSync, BudgetSync, FleetSync {
  readonly breakers: BreakerSync = this;
  readonly alerts: AlertGate = this;
  readonly ledger: LedgerSync = this;
  readonly budgets: BudgetSync = this;
  private readonly id = randomUUID();
  private readonly channel: string;
  private readonly tag: string;
  private readonly breakerPrefix: string;
  private readonly epochKey: string;
  private readonly appliers = new Set<(dependency: string, verdict: BreakerVerdict) => void>();
  /** Leases this worker holds: dependency -> until (wall-clock ms, as Redis keeps them). */
  private readonly leases = new Map<string, number>();
  private readonly asking = new Set<string>();
  private subscriber: Redis | undefined;
  private claims = 0;
  private closed = false;
  /** The latest verdict this worker reached or heard, by dependency. */
  private readonly known = new Map<string, BreakerVerdict>();
  /** This worker's verdicts not known to have reached Redis, by dependency (the latest). */
  private readonly unpublished = new Map<string, BreakerVerdict>();
  /** Alert gates this worker passed or decided alone: gate key -> until (wall clock, ms). */
  private readonly gates = new Map<string, number>();
  private gatesWaiting = false;
  /** Keyed writes this worker is sending: claim id -> its marker and what it holds. */
  private readonly held = new Map<string, { marker: string; value: string; until: number }>();
  /** Shares and releases waiting for Redis, by claim id (and result key for lone writes). */
  private readonly outbox = new Map<string, Op>();
  /** Results this worker shared, newest last: result key -> text and expiry. */
  private readonly results = new Map<string, { text: string; expiresAt: number }>();
  private syncing: Promise<void> | undefined;
  /** A resync was asked for while one ran. */
  private again = false;
  /**
   * New connections seen, and the last one after which what Redis may have lost was put back
   * and the verdicts standing in it read: while they differ, that is still to do.
   */
  private connections = 0;
  private resynced = 0;
  /**
   * This worker has seen the fleet's epoch in Redis (a claim or a resync went through): an epoch
   * missing later means Redis lost the fleet's state, and the restart grace starts.
   */
  private knowsFleet = false;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  /** An engine uses this sync (a status read, say, does not: it writes nothing on connect). */
  private engaged = false;
  private readonly onReady = () => {
    if (this.engaged) void this.resync(true);
  };

  constructor(
    private readonly host: SyncHost,
    private readonly prefix: string,
  ) {
    this.channel = breakerChannel(prefix, databaseOf(host.client));
    this.tag = fleetTag(prefix);
    this.breakerPrefix = breakerKeyPrefix(prefix);
    this.epochKey = `${this.tag}:epoch`;
    // Back after an outage (or a restart): publish what waited, put back what was lost.
    host.client.on("ready", this.onReady);
  }

  /** The breaker channel this sync publishes and listens on. */
  get breakerChannel(): string {
    return this.channel;
  }

  publish(dependency: string, verdict: BreakerVerdict): void {
    this.engaged = true;
    this.remember(dependency, verdict);
    if (this.host.degraded()) {
      this.unpublished.set(dependency, verdict); // published once, when Redis is back
      this.retrySoon();
      return;
    }
    const message: Message = { from: this.id, dependency, verdict };
    const multi = this.host.client.multi();
    multi.set(this.stateKey(dependency), JSON.stringify(verdict), "PX", VERDICT_TTL_MS);
    // The lease follows the verdict: held until an open period ends, so no worker can take it
    // (and probe) before then; after a close it lapses on its own, so a worker that has not yet
    // heard the close cannot take it and send a second probe.
    if (verdict.open) {
      const leaseMs = Math.max(1, Math.ceil(verdict.until - Date.now()));
      multi.set(this.leaseKey(dependency), this.id, "PX", leaseMs);
    }
    multi.publish(this.channel, JSON.stringify(message));
    this.host.timed(multi.exec()).catch((error: unknown) => {
      this.host.onTrouble(error);
      // It may have landed: the resync puts it back only if Redis has nothing newer.
      if ((this.known.get(dependency)?.at ?? -Infinity) <= verdict.at)
        this.unpublished.set(dependency, verdict);
      this.retrySoon();
    });
  }

  mayProbe(dependency: string, _now: number, leaseMs: number): boolean {
    if (this.host.degraded()) return true; // alone until Redis is back
    const held = this.leases.get(dependency);
    if (held !== undefined) {
      this.leases.delete(dependency); // one probe per lease
      if (held > Date.now()) return true;
    }
    if (!this.asking.has(dependency)) {
      this.asking.add(dependency);
      this.host
        .timed(this.host.client.set(this.leaseKey(dependency), this.id, "PX", leaseMs, "NX"))
        .then(
          (ok) => {
            if (ok === "OK") this.leases.set(dependency, Date.now() + leaseMs);
          },
          (error: unknown) => {
            this.host.onTrouble(error);
          },
        )
        .finally(() => this.asking.delete(dependency));
    }
    return false;
  }

  attach(apply: (dependency: string, verdict: BreakerVerdict) => void): void {
    this.engaged = true;
    this.appliers.add(apply);
    if (this.subscriber || this.closed) return;
    // Its own connection (a subscribed one takes no other commands under RESP2; under RESP3 it
    // does, and carries the resync while the store's client still waits to reconnect). It
    // reconnects quickly (the verdicts of an outage reach it within a second of Redis being
    // back) and queues commands until connected.
    const subscriber = this.host.client.duplicate({
      enableOfflineQueue: true,
      // ioredis's own resubscribe drops its promise: cut or timed out before the answer, it is
      // an unhandled rejection (a crash). The "ready" handler below subscribes, with a handler.
      autoResubscribe: false,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 4), RECONNECT_MAX_MS),
    });
    RedisFleetSync.define(subscriber);
    this.subscriber = subscriber;
    subscriber.on("error", (error: unknown) => {
      this.host.onTrouble(error);
    });
    subscriber.on("message", (channel: string, text: string) => {
      if (channel !== this.channel) return;
      const message = parseMessage(text);
      if (!message || message.from === this.id) return;
      this.remember(message.dependency, message.verdict);
      this.apply(message.dependency, message.verdict);
    });
    // On every connection (the first, and after each outage): subscribed first, then what
    // stands in Redis is read, so no verdict falls between the two.
    subscriber.on("ready", () => {
      subscriber.subscribe(this.channel).then(
        () => this.resync(true),
        (error: unknown) => {
          this.host.onTrouble(error);
        },
      );
    });
  }

  async admit(
    kind: string,
    _now: number,
    periodMs: number,
  ): Promise<{ send: boolean; suppressed: number }> {
    this.engaged = true;
    const gate = `${alertKeyPrefix(this.prefix)}${encodeName(kind)}`;
    const client = this.host.degraded() ? undefined : this.via();
    if (!client) {
      this.decidedAlone(gate, periodMs);
      throw new Error("Redis is away"); // the escalator's own throttle
    }
    try {
      const [send, suppressed] = await this.host.timed(
        client.selfhealGate(gate, `${gate}:held`, Math.max(1, Math.round(periodMs))),
      );
      if (send === 1) this.gates.set(gate, Date.now() + periodMs);
      return { send: send === 1, suppressed };
    } catch (error) {
      this.decidedAlone(gate, periodMs);
      throw error;
    }
  }

  away(): boolean {
    return this.host.degraded() || (!this.connecting() && this.via() === undefined);
  }

  write(tool: string, key: string): FleetWrite {
    this.engaged = true;
    const [result, marker] = this.ledgerKeys(tool, key);
    const claimId = `${this.id}:${(this.claims++).toString(36)}`;
    /** A claim was sent: this call may hold the key (one that timed out may yet land). */
    let asked = false;
    return {
      claim: async (leaseMs, holdMs) => {
        if (this.connecting()) await this.host.ready().catch(() => undefined);
        const client = this.via();
        if (!client) throw new Error("Redis is not connected");
        asked = true;
        const lease = Math.max(1, Math.ceil(leaseMs));
        const knew = this.knowsFleet;
        const [kind, detail] = await this.host.timed(
          client.selfhealLedgerClaim(
            result,
            marker,
            this.epochKey,
            claimId,
            lease,
            Math.max(lease, Math.ceil(holdMs ?? 0)),
            holdMs === undefined ? 0 : 1,
            RESTART_GRACE_MS,
            knew ? 1 : 0,
          ),
        );
        this.knowsFleet = true;
        return this.claimed(kind, detail, claimId, marker, holdMs ?? lease);
      },
      complete: (value, ttlMs) => {
        this.held.delete(claimId);
        // A result JSON cannot hold is kept as "done, not shareable": another worker must still
        // never send the write again.
        let text: string;
        try {
          text = JSON.stringify({ value });
        } catch {
          text = '{"unshareable":true}';
        }
        const expiresAt = Date.now() + ttlMs;
        this.results.delete(result);
        this.results.set(result, { text, expiresAt });
        if (this.results.size > MAX_REMEMBERED_RESULTS) this.forgetOldest(this.results);
        this.send(asked ? claimId : `${result}|alone`, {
          kind: "complete",
          result,
          marker,
          text,
          expiresAt,
          claimId: asked ? claimId : "",
        });
      },
      release: () => {
        this.held.delete(claimId);
        if (asked) this.send(claimId, { kind: "release", marker, claimId });
      },
    };
  }

  async spent(taskId: string): Promise<number> {
    if (this.host.degraded()) throw new Error("Redis is away");
    return Number((await this.host.timed(this.host.client.get(this.budgetKey(taskId)))) ?? 0);
  }

  async add(taskId: string, usd: number): Promise<number> {
    if (this.host.degraded()) throw new Error("Redis is away");
    const multi = this.host.client.multi();
    multi.incrbyfloat(this.budgetKey(taskId), usd);
    multi.pexpire(this.budgetKey(taskId), BUDGET_TTL_MS);
    const results = await this.host.timed(multi.exec());
    return Number(results?.[0]?.[1] ?? 0);
  }

  drift(agent: string, window: number): DriftSync {
    const key = `${new AgentKeys(this.prefix, agent).tag}:drift`;
    const client = this.host.client as Redis & Scripts;
    return {
      push: async (tool, unknown) => {
        if (this.host.degraded()) throw new Error("Redis is away");
        const [total, hits, toolTotal, toolHits] = await this.host.timed(
          client.selfhealDrift(
            key,
            window,
            24 * 3_600_000,
            `t:${encodeName(tool)}`,
            unknown ? "1" : "0",
          ),
        );
        return { overall: { total, hits }, tool: { total: toolTotal, hits: toolHits } };
      },
    };
  }

  /**
   * Whether something decided while Redis was away still waits to reach it (a verdict, a share,
   * a release, an alert gate).
   */
  get waiting(): boolean {
    return this.unpublished.size > 0 || this.outbox.size > 0 || this.gatesWaiting;
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.host.client.off("ready", this.onReady);
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /** A claim's reply, read; a key this call now holds is remembered (to put back if lost). */
  private claimed(
    kind: string,
    detail: string,
    claimId: string,
    marker: string,
    holdMs: number,
  ): Claim {
    switch (kind) {
      case "mine":
        this.held.set(claimId, {
          marker,
          value: `${claimId}|${detail}`,
          until: Date.now() + holdMs,
        });
        return { kind: "mine" };
      case "done":
        return { kind: "done", value: parseStored(detail) };
      case "busy":
        return { kind: "busy", retryMs: Math.max(1, Number(detail) || 1) };
      case "settle":
        return { kind: "settle", retryMs: Math.max(1, Number(detail) || 1) };
      case "lost":
        return { kind: "lost" };
      default:
        throw new Error(`unexpected ledger reply ${JSON.stringify(kind).slice(0, 40)}`);
    }
  }

  /** Sends a share or a release now; kept for the resync if it does not land. */
  private send(id: string, op: Op): void {
    this.outbox.set(id, op);
    if (this.outbox.size > MAX_OUTBOX) this.forgetOldest(this.outbox);
    const client = this.via();
    if (!client || this.closed) {
      this.retrySoon();
      return;
    }
    const sent =
      op.kind === "complete"
        ? client.selfhealLedgerComplete(
            op.result,
            op.marker,
            op.text,
            Math.max(1, Math.ceil(op.expiresAt - Date.now())),
            op.claimId,
          )
        : client.selfhealLedgerRelease(op.marker, op.claimId);
    this.host.timed(sent).then(
      () => {
        if (this.outbox.get(id) === op) this.outbox.delete(id);
      },
      (error: unknown) => {
        this.host.onTrouble(error);
        this.retrySoon();
      },
    );
  }

  /** An alert decided by this worker's own throttle: the fleet's gate is set when Redis is back. */
  private decidedAlone(gate: string, periodMs: number): void {
    if ((this.gates.get(gate) ?? -Infinity) > Date.now()) return; // a gate already in force
    this.gates.set(gate, Date.now() + periodMs);
    this.gatesWaiting = true;
    this.retrySoon();
  }

  /** Keeps the latest verdict of a dependency (by the time it was reached). */
  private remember(dependency: string, verdict: BreakerVerdict): void {
    const known = this.known.get(dependency);
    if (!known || known.at <= verdict.at) this.known.set(dependency, verdict);
  }

  private apply(dependency: string, verdict: BreakerVerdict): void {
    for (const applier of this.appliers) applier(dependency, verdict);
  }

  /** Tries again soon while something decided during an outage waits for Redis. */
  private retrySoon(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed || !(this.waiting || this.connections > this.resynced)) return;
      void this.resync(false).finally(() => {
        if (this.waiting || this.connections > this.resynced) this.retrySoon();
      });
    }, RESYNC_POLL_MS);
    this.retryTimer.unref();
  }

  /**
   * Publishes what waited, in one round trip. After `newConnection` (Redis may have restarted
   * empty) also puts back everything this worker still knows and then takes the verdicts other
   * workers reached meanwhile (tried again until it succeeds). One at a time: asked while one
   * runs, it runs again after.
   */
  private resync(newConnection: boolean): Promise<void> {
    if (newConnection) this.connections++;
    if (this.closed) return Promise.resolve();
    if (this.syncing) {
      this.again = true;
      return this.syncing;
    }
    const run = async () => {
      while (!this.closed) {
        const ok = await this.resyncOnce();
        if (!this.takeAgain() || !ok) return;
      }
    };
    this.syncing = run().finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  /** Whether a resync was asked for while one ran (and forgets it). */
  private takeAgain(): boolean {
    const again = this.again;
    this.again = false;
    return again;
  }

  private async resyncOnce(): Promise<boolean> {
    const client = this.via();
    if (!client) {
      this.retrySoon();
      return false;
    }
    const now = Date.now();
    // On a new connection (Redis may have restarted empty) everything this worker still knows
    // is put back; otherwise (a retry while Redis was slow or stopped: nothing was lost) only
    // what waits to be sent.
    const connection = this.connections;
    const fresh = connection > this.resynced;
    const pipeline = client.pipeline() as Queued;
    const knew = this.knowsFleet;
    pipeline.selfhealEpoch(this.epochKey, knew ? 1 : 0);
    // Verdicts: this worker's that never reached Redis, and (fresh) every open one standing.
    const verdicts = new Map<string, BreakerVerdict>();
    for (const [dependency, verdict] of this.known) {
      const standing = fresh && verdict.open && verdict.until > now;
      if (this.unpublished.get(dependency) === verdict || standing)
        verdicts.set(dependency, verdict);
    }
    for (const [dependency, verdict] of verdicts) {
      const leaseMs = verdict.open ? Math.max(0, Math.ceil(verdict.until - now)) : 0;
      const message: Message = { from: this.id, dependency, verdict };
      pipeline.selfhealVerdict(
        this.stateKey(dependency),
        this.leaseKey(dependency),
        JSON.stringify(verdict),
        verdict.at,
        leaseMs,
        this.id,
        this.channel,
        JSON.stringify(message),
        VERDICT_TTL_MS,
      );
    }
    for (const [gate, until] of this.gates) {
      if (until <= now) this.gates.delete(gate);
      else if (fresh || this.gatesWaiting)
        pipeline.set(gate, "1", "PX", Math.ceil(until - now), "NX");
    }
    if (fresh) {
      for (const [claimId, held] of this.held) {
        if (held.until > now)
          pipeline.set(held.marker, held.value, "PX", Math.ceil(held.until - now), "NX");
        else this.held.delete(claimId);
      }
      for (const [result, { text, expiresAt }] of this.results) {
        if (expiresAt > now) pipeline.set(result, text, "PX", Math.ceil(expiresAt - now), "NX");
        else this.results.delete(result);
      }
    }
    const ops = [...this.outbox];
    for (const [id, op] of ops) {
      if (op.kind === "release") pipeline.selfhealLedgerRelease(op.marker, op.claimId);
      else if (op.expiresAt > now) {
        pipeline.selfhealLedgerComplete(
          op.result,
          op.marker,
          op.text,
          Math.ceil(op.expiresAt - now),
          op.claimId,
        );
      } else this.outbox.delete(id);
    }
    const gatesWaiting = this.gatesWaiting;
    try {
      const replies = await this.host.timed(pipeline.exec());
      if (!replies) throw new Error("Redis discarded the resync");
      for (const [error] of replies) if (error) throw error;
      this.knowsFleet = true;
    } catch (error) {
      this.host.onTrouble(error);
      this.retrySoon();
      return false;
    }
    for (const [dependency, verdict] of verdicts)
      if (this.unpublished.get(dependency) === verdict) this.unpublished.delete(dependency);
    for (const [id, op] of ops) if (this.outbox.get(id) === op) this.outbox.delete(id);
    if (gatesWaiting) this.gatesWaiting = false;
    if (fresh) {
      try {
        await this.catchUp(client);
        this.resynced = connection;
      } catch (error) {
        this.host.onTrouble(error);
        this.retrySoon();
        return false;
      }
    }
    return true;
  }

  /**
   * Takes the verdicts standing in Redis that are newer than what this worker knows: those of a
   * fleet it joins late (an open breaker, say), and those reached while it was disconnected.
   */
  private async catchUp(client: Redis): Promise<void> {
    const standing = await readVerdicts(client, this.breakerPrefix, (w) => this.host.timed(w));
    for (const [dependency, verdict] of standing) {
      const known = this.known.get(dependency);
      if (known ? known.at >= verdict.at : !verdict.open) continue;
      this.remember(dependency, verdict);
      this.apply(dependency, verdict);
    }
  }

  /**
   * The connection fleet commands go through: the store's client when it is connected, else
   * the subscriber when it can take commands (RESP3) and is; undefined while neither is.
   */
  private via(): (Redis & Scripts & QueuedScripts) | undefined {
    const client = this.host.client;
    if (client.status === "ready") return client as Redis & Scripts & QueuedScripts;
    const subscriber = this.subscriber;
    if (subscriber?.status === "ready" && subscriber.mode !== "subscriber")
      return subscriber as Redis & Scripts & QueuedScripts;
    return undefined;
  }

  /** The store's client is making its first connection (not yet known to be away). */
  private connecting(): boolean {
    const status = this.host.client.status;
    return status === "wait" || status === "connecting" || status === "connect";
  }

  private forgetOldest(map: Map<string, unknown>): void {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }

  private stateKey(dependency: string): string {
    return `${this.breakerPrefix}${encodeName(dependency)}`;
  }

  /** The stored result and the in-flight marker of a write (the key is hashed: it may be user data). */
  private ledgerKeys(tool: string, key: string): [string, string] {
    const base = `${this.tag}:ledger:${encodeName(tool)}:${hashKey(key)}`;
    return [base, `${base}:inflight`];
  }

  private budgetKey(taskId: string): string {
    return `${budgetKeyPrefix(this.prefix)}${hashKey(taskId)}`;
  }

  private leaseKey(dependency: string): string {
    return `${this.tag}:lease:${encodeName(dependency)}`;
  }

  /** Registers the scripts this sync runs on a client. */
  static define(client: Redis): void {
    client.defineCommand("selfhealGate", { numberOfKeys: 2, lua: GATE });
    client.defineCommand("selfhealLedgerClaim", { numberOfKeys: 3, lua: LEDGER_CLAIM });
    client.defineCommand("selfhealLedgerComplete", { numberOfKeys: 2, lua: LEDGER_COMPLETE });
    client.defineCommand("selfhealLedgerRelease", { numberOfKeys: 1, lua: LEDGER_RELEASE });
    client.defineCommand("selfhealVerdict", { numberOfKeys: 2, lua: VERDICT_RESYNC });
    client.defineCommand("selfhealEpoch", { numberOfKeys: 1, lua: EPOCH });
    client.defineCommand("selfhealDrift", { numberOfKeys: 1, lua: DRIFT });
  }
}

/** The database a client selects (a Cluster has only 0). */
function databaseOf(client: Redis): number {
  const db = (client.options as { db?: unknown } | undefined)?.db;
  return typeof db === "number" && Number.isInteger(db) && db > 0 ? db : 0;
}

/** A stored result: its value (undefined for one JSON could not hold). */
function parseStored(text: string | undefined): unknown {
  try {
    const parsed = JSON.parse(text ?? "{}") as { value?: unknown };
    return parsed.value;
  } catch {
    return undefined;
  }
}

/** A channel message, checked: anything else on the channel is ignored. */
function parseMessage(text: string): Message | undefined {
  try {
    const m = JSON.parse(text) as Partial<Message>;
    const verdict = checkVerdict(m.verdict);
    if (typeof m.from !== "string" || typeof m.dependency !== "string" || !verdict)
      return undefined;
    return { from: m.from, dependency: m.dependency, verdict };
  } catch {
    return undefined;
  }
}
