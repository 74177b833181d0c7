import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { BreakerSync, BreakerVerdict } from "../recovery/breaker.js";
import type { AlertGate } from "../notify/throttle.js";
import type { BudgetSync } from "../recovery/budget.js";
import type { DriftSync } from "../diagnosis/drift.js";
import type { Claim, LedgerSync } from "../recovery/idempotency.js";
import { hashKey } from "../telemetry/spans.js";
import type { FleetSync } from "../fleet.js";
import {
  AgentKeys,
  alertKeyPrefix,
  breakerKeyPrefix,
  budgetKeyPrefix,
  decodeName,
  encodeName,
  fleetTag,
} from "./keys.js";
import { CLAIM, DRIFT, GATE, RELEASE } from "./scripts.js";

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
  selfhealClaim(result: string, marker: string, id: string, leaseMs: number): Promise<string[]>;
  selfhealRelease(marker: string, id: string): Promise<number>;
  selfhealDrift(
    key: string,
    size: number,
    ttlMs: number,
    scope: string,
    value: string,
  ): Promise<[number, number, number, number]>;
}

/** How long a task's shared spend is kept after its last recovery attempt, ms. */
const BUDGET_TTL_MS = 24 * 3_600_000;

/** A published verdict, as it travels on the channel. */
interface Message {
  from: string;
  dependency: string;
  verdict: BreakerVerdict;
}

/**
 * Breakers and the alert throttle shared through Redis. Breaker verdicts go out on a pub/sub
 * channel (a second connection subscribes) and every worker applies them at once; the half-open
 * probe is a lease (`SET NX PX`) so one worker in the fleet probes. Alerts pass a gate key set
 * with `NX PX` per kind: the first worker in a period sends, the others count what they held.
 * While Redis is away every worker decides alone, as a single process would.
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
  private readonly appliers = new Set<(dependency: string, verdict: BreakerVerdict) => void>();
  /** Leases this worker holds: dependency -> until (wall-clock ms, as Redis keeps them). */
  private readonly leases = new Map<string, number>();
  private readonly asking = new Set<string>();
  private subscriber: Redis | undefined;

  constructor(
    private readonly host: SyncHost,
    private readonly prefix: string,
  ) {
    this.channel = `${prefix}:breakers`;
    this.tag = fleetTag(prefix);
    this.breakerPrefix = breakerKeyPrefix(prefix);
  }

  publish(dependency: string, verdict: BreakerVerdict): void {
    if (this.host.degraded()) return;
    const message: Message = { from: this.id, dependency, verdict };
    const multi = this.host.client.multi();
    multi.set(this.stateKey(dependency), JSON.stringify(verdict), "PX", 24 * 3_600_000);
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
    this.appliers.add(apply);
    if (this.subscriber) return;
    // Its own connection (a subscribed one takes no other commands); it queues the SUBSCRIBE
    // until connected and subscribes again after every reconnect.
    const subscriber = this.host.client.duplicate({ enableOfflineQueue: true });
    this.subscriber = subscriber;
    subscriber.on("error", (error: unknown) => {
      this.host.onTrouble(error);
    });
    subscriber.on("message", (channel: string, text: string) => {
      if (channel !== this.channel) return;
      const message = parseMessage(text);
      if (!message || message.from === this.id) return;
      for (const applier of this.appliers) applier(message.dependency, message.verdict);
    });
    subscriber.subscribe(this.channel).then(
      () => this.catchUp(),
      (error: unknown) => {
        this.host.onTrouble(error);
      },
    );
  }

  /** A worker that joins late takes the verdicts already standing (an open breaker, say). */
  private async catchUp(): Promise<void> {
    try {
      await this.host.ready(); // the subscriber may be up before the main connection
      const standing = await readVerdicts(this.host.client, this.breakerPrefix, (w) =>
        this.host.timed(w),
      );
      for (const [dependency, verdict] of standing) {
        if (!verdict.open) continue;
        for (const applier of this.appliers) applier(dependency, verdict);
      }
    } catch (error) {
      this.host.onTrouble(error);
    }
  }

  async admit(
    kind: string,
    _now: number,
    periodMs: number,
  ): Promise<{ send: boolean; suppressed: number }> {
    if (this.host.degraded()) throw new Error("Redis is away"); // the escalator's own throttle
    const client = this.host.client as Redis & Scripts;
    const gate = `${alertKeyPrefix(this.prefix)}${encodeName(kind)}`;
    const [send, suppressed] = await this.host.timed(
      client.selfhealGate(gate, `${gate}:held`, Math.max(1, Math.round(periodMs))),
    );
    return { send: send === 1, suppressed };
  }

  async claim(tool: string, key: string, leaseMs: number): Promise<Claim> {
    if (this.host.degraded()) throw new Error("Redis is away"); // the caller decides alone
    const client = this.host.client as Redis & Scripts;
    const [result, marker] = this.ledgerKeys(tool, key);
    const [kind, stored] = await this.host.timed(
      client.selfhealClaim(result, marker, this.id, Math.ceil(leaseMs)),
    );
    if (kind === "mine") return { kind: "mine" };
    if (kind === "busy") return { kind: "busy" };
    return { kind: "done", value: parseStored(stored) };
  }

  async complete(tool: string, key: string, value: unknown, ttlMs: number): Promise<void> {
    const [result, marker] = this.ledgerKeys(tool, key);
    // A result JSON cannot hold is kept as "done, not shareable": another worker must still
    // never send the write again.
    let text: string;
    try {
      text = JSON.stringify({ value });
    } catch {
      text = '{"unshareable":true}';
    }
    const multi = this.host.client.multi();
    multi.set(result, text, "PX", Math.ceil(ttlMs));
    multi.del(marker);
    await this.host.timed(multi.exec());
  }

  async release(tool: string, key: string): Promise<void> {
    const client = this.host.client as Redis & Scripts;
    await this.host.timed(client.selfhealRelease(this.ledgerKeys(tool, key)[1], this.id));
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

  close(): void {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
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

  /** Registers the scripts this sync runs on the store's client. */
  static define(client: Redis): void {
    client.defineCommand("selfhealGate", { numberOfKeys: 2, lua: GATE });
    client.defineCommand("selfhealClaim", { numberOfKeys: 2, lua: CLAIM });
    client.defineCommand("selfhealRelease", { numberOfKeys: 1, lua: RELEASE });
    client.defineCommand("selfhealDrift", { numberOfKeys: 1, lua: DRIFT });
  }
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

/** The keys under a prefix (SCAN; at most 10,000: a status tool, not an export). */
export async function scanKeys(
  client: Redis,
  keyPrefix: string,
  timed: <T>(work: Promise<T>) => Promise<T>,
): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await timed(client.scan(cursor, "MATCH", `${keyPrefix}*`, "COUNT", 200));
    cursor = next;
    keys.push(...found);
  } while (cursor !== "0" && keys.length < 10_000);
  return keys;
}

/** The breaker verdicts standing in Redis under a key prefix, by dependency (SCAN, then MGET). */
export async function readVerdicts(
  client: Redis,
  keyPrefix: string,
  timed: <T>(work: Promise<T>) => Promise<T>,
): Promise<Map<string, BreakerVerdict>> {
  const keys = await scanKeys(client, keyPrefix, timed);
  const verdicts = new Map<string, BreakerVerdict>();
  if (keys.length === 0) return verdicts;
  const values = await timed(client.mget(...keys));
  keys.forEach((key, i) => {
    const verdict = parseVerdict(values[i]);
    if (verdict) verdicts.set(decodeName(key.slice(keyPrefix.length)), verdict);
  });
  return verdicts;
}

/** A stored verdict, checked. */
function parseVerdict(text: string | null | undefined): BreakerVerdict | undefined {
  try {
    return checkVerdict(JSON.parse(text ?? "null"));
  } catch {
    return undefined;
  }
}

function checkVerdict(v: unknown): BreakerVerdict | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const { open, until, opens, at } = v as Record<string, unknown>;
  if (typeof open !== "boolean") return undefined;
  if (typeof until !== "number" || typeof opens !== "number" || typeof at !== "number")
    return undefined;
  if (![until, opens, at].every(Number.isFinite)) return undefined;
  return { open, until, opens, at };
}
