import { SelfHealConfigError } from "../errors.js";

/**
 * Redis key names. Every name that comes from users (agent, tool) is percent-encoded before it
 * goes into a key or a hash field: `:`, `{`, `}`, `|`, spaces and control characters can never
 * change a key's shape or its Cluster slot. The keys of one agent share a hash tag, so the read
 * script (which touches them all) runs on one Cluster node.
 */

/** A name as it may appear inside a key or a field. */
export const encodeName = (name: string): string => encodeURIComponent(name);
export const decodeName = (encoded: string): string => decodeURIComponent(encoded);

/** The prefix is the user's own namespace: plain characters only, checked once. */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(prefix)) {
    throw new SelfHealConfigError(
      "redisStore.prefix",
      `expected 1-64 letters, digits, "_", "." or "-", got ${JSON.stringify(String(prefix)).slice(0, 80)}`,
    );
  }
  return prefix;
}

/** The keys of one agent under one prefix. */
export class AgentKeys {
  /** `prefix:{agent}`: the hash tag every key of the agent starts with. */
  readonly tag: string;

  constructor(prefix: string, agent: string) {
    this.tag = `${prefix}:{${encodeName(agent)}}`;
  }

  /** Call counts and latency of one time bucket, a hash: `tool|ok`, `tool|f`, `tool|h<i>`. */
  calls(epoch: number): string {
    return `${this.tag}:c:${epoch}`;
  }

  /** Task outcomes of one time bucket, a hash: `ok`, `f`. */
  tasks(epoch: number): string {
    return `${this.tag}:t:${epoch}`;
  }

  /** The last-N rings of LLM answers (empty or not), a hash per agent. */
  get llm(): string {
    return `${this.tag}:llm`;
  }
}

/** The set of agents that wrote under a prefix (for `selfheal status`). */
export const agentsKey = (prefix: string): string => `${prefix}:agents`;

/** The hash tag of the state the whole fleet shares (breakers, ledger, budgets, alerts). */
export const fleetTag = (prefix: string): string => `${prefix}:{fleet}`;

/** Where a dependency's standing breaker verdict is kept: this prefix, then the encoded name. */
export const breakerKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:breaker:`;

/** Where the alert gate of one kind is kept (`:held` after it: the count held back). */
export const alertKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:alert:`;

/** Where a task's shared recovery spend is kept (then the hashed task id). */
export const budgetKeyPrefix = (prefix: string): string => `${fleetTag(prefix)}:budget:`;
