import { failedAttempts, type CallRecord } from "../health/store.js";
import { Buckets } from "../telemetry/log-buckets.js";

/** The span of time one rollup line covers. */
export const ROLLUP_MS = 60_000;

/**
 * One event-log line per tool per minute that had calls: the distribution of every call the
 * health signals counted, which `selfheal report --suggest-thresholds` reads (the recovery
 * events alone hold only incidents). Counted as the signal store counts: a call that reached no
 * dependency (blocked, failed fast by an open circuit, replayed, canned) is not in it. Calls
 * counted from other libraries' spans (`spanProcessor()`) are in it too, under their span's agent.
 */
export interface CallRollupLine {
  /** Tells rollup lines from recovery events (which have no `type`). */
  type: "calls";
  /** Start of the minute, ms since the epoch on the instance's clock (a multiple of 60 000). */
  at: number;
  /** The agent that made the calls: the instance's, or a counted span's `gen_ai.agent.name`. */
  agent: string;
  /** The tool called. */
  tool: string;
  /** Calls that got an answer from the tool: outcome `success` or `recovered`. */
  ok: number;
  /** Failed attempts, those of calls that recovered included (what the success rate counts). */
  failed: number;
  /** Calls of `llm` tools answered by the tool (empty or not): what the empty rate divides by. */
  llm: number;
  /** Of those, the calls whose answer was empty (nothing better replaced it). */
  empty: number;
  /**
   * Each counted call's duration (start to end, recovery included), as log-scale buckets
   * `{ "<index>": count }` (see `Buckets` in src/telemetry/log-buckets.ts).
   */
  latencyMs: Record<string, number>;
}

/** One agent's tool's counts in the open minute. */
interface Tally {
  readonly agent: string;
  readonly tool: string;
  ok: number;
  failed: number;
  llm: number;
  empty: number;
  readonly latency: Buckets;
}

/**
 * Tallies the calls of the open minute by tool and appends one `CallRollupLine` per tool when a
 * later minute begins, and on `flush()` (close()). No timer: a quiet minute writes nothing. It
 * holds one minute at a time, a tally per agent and tool called in it. A call whose minute is
 * earlier than the open one (the clock stepped back) counts in the open one: a written minute is
 * never reopened. After `close()`, a call still in flight when it came writes its own line as it
 * ends (the report adds lines of the same minute together).
 */
export class CallRollup {
  /** Start of the open minute; undefined before the first counted call. */
  private minute: number | undefined;
  /** By agent and tool (length-prefixed: no two pairs make one key). */
  private readonly tallies = new Map<string, Tally>();
  private closed = false;

  constructor(private readonly log: { append(line: object): void }) {}

  /** Counts a call the signal store was given (the same record, at the same `now`). */
  record(record: CallRecord, now: number): void {
    const ok = record.outcome === "success" || record.outcome === "recovered" ? 1 : 0;
    const failed = failedAttempts(record);
    if (ok + failed === 0) return; // no signal: the store skips it too
    const minute = Math.floor(now / ROLLUP_MS) * ROLLUP_MS;
    if (this.minute === undefined) this.minute = minute;
    else if (minute > this.minute) {
      this.flush();
      this.minute = minute;
    }
    const { agent, tool } = record;
    const key = `${agent.length}:${agent}${tool}`;
    let tally = this.tallies.get(key);
    if (!tally) {
      tally = { agent, tool, ok: 0, failed: 0, llm: 0, empty: 0, latency: new Buckets() };
      this.tallies.set(key, tally);
    }
    tally.ok += ok;
    tally.failed += failed;
    tally.latency.add(record.durationMs);
    if (record.empty !== undefined) {
      tally.llm += 1;
      if (record.empty) tally.empty += 1;
    }
    if (this.closed) this.flush();
  }

  /** Appends the open minute's lines, tools in the order first called, and empties it. */
  flush(): void {
    const at = this.minute;
    if (at === undefined) return;
    for (const t of this.tallies.values()) {
      const line: CallRollupLine = {
        type: "calls",
        at,
        agent: t.agent,
        tool: t.tool,
        ok: t.ok,
        failed: t.failed,
        llm: t.llm,
        empty: t.empty,
        latencyMs: t.latency.toJSON(),
      };
      this.log.append(line);
    }
    this.tallies.clear();
  }

  /** Writes the open minute; from now on each call counted writes its own line at once. */
  close(): void {
    this.flush();
    this.closed = true;
  }
}
