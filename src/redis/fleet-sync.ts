import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { BreakerSync, BreakerVerdict } from "../recovery/breaker.js";
import type { AlertGate } from "../notify/throttle.js";
import type { FleetSync } from "../fleet.js";
import { encodeName } from "./keys.js";
import { GATE } from "./scripts.js";

/** What the sync needs of the store: its client, whether Redis is away, its command timeout. */
export interface SyncHost {
  readonly client: Redis;
  readonly degraded: () => boolean;
  readonly timed: <T>(work: Promise<T>) => Promise<T>;
  readonly onTrouble: (error: unknown) => void;
}

interface Gated {
  selfhealGate(gate: string, count: string, periodMs: number): Promise<[number, number]>;
}

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
export class RedisFleetSync implements BreakerSync, AlertGate, FleetSync {
  readonly breakers: BreakerSync = this;
  readonly alerts: AlertGate = this;
  private readonly id = randomUUID();
  private readonly channel: string;
  private readonly tag: string;
  private readonly appliers = new Set<(dependency: string, verdict: BreakerVerdict) => void>();
  /** Leases this worker holds: dependency -> until (wall-clock ms, as Redis keeps them). */
  private readonly leases = new Map<string, number>();
  private readonly asking = new Set<string>();
  private subscriber: Redis | undefined;

  constructor(
    private readonly host: SyncHost,
    prefix: string,
  ) {
    this.channel = `${prefix}:breakers`;
    this.tag = `${prefix}:{fleet}`;
  }

  publish(dependency: string, verdict: BreakerVerdict): void {
    if (this.host.degraded()) return;
    const message: Message = { from: this.id, dependency, verdict };
    const multi = this.host.client.multi();
    multi.set(this.stateKey(dependency), JSON.stringify(verdict), "PX", 24 * 3_600_000);
    multi.del(this.leaseKey(dependency)); // the next half-open period may be leased at once
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
    subscriber.subscribe(this.channel).catch((error: unknown) => {
      this.host.onTrouble(error);
    });
  }

  async admit(
    kind: string,
    _now: number,
    periodMs: number,
  ): Promise<{ send: boolean; suppressed: number }> {
    if (this.host.degraded()) throw new Error("Redis is away"); // the escalator's own throttle
    const client = this.host.client as Redis & Gated;
    const gate = `${this.tag}:alert:${encodeName(kind)}`;
    const [send, suppressed] = await this.host.timed(
      client.selfhealGate(gate, `${gate}:held`, Math.max(1, Math.round(periodMs))),
    );
    return { send: send === 1, suppressed };
  }

  close(): void {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  private stateKey(dependency: string): string {
    return `${this.tag}:breaker:${encodeName(dependency)}`;
  }

  private leaseKey(dependency: string): string {
    return `${this.tag}:lease:${encodeName(dependency)}`;
  }

  /** Registers the scripts this sync runs on the store's client. */
  static define(client: Redis): void {
    client.defineCommand("selfhealGate", { numberOfKeys: 2, lua: GATE });
  }
}

/** A channel message, checked: anything else on the channel is ignored. */
function parseMessage(text: string): Message | undefined {
  try {
    const m = JSON.parse(text) as Partial<Message>;
    const v = m.verdict;
    if (
      typeof m.from !== "string" ||
      typeof m.dependency !== "string" ||
      typeof v !== "object" ||
      typeof v.open !== "boolean" ||
      !Number.isFinite(v.until) ||
      !Number.isFinite(v.opens) ||
      !Number.isFinite(v.at)
    )
      return undefined;
    return { from: m.from, dependency: m.dependency, verdict: v };
  } catch {
    return undefined;
  }
}
