/**
 * Incidents and their recoveries, told in the timeline. The first incident of a kind (the
 * operation, its first route and what that request came to) is told as it happens, then how its
 * call ended; the calls hit by the same kind after it are counted, and told in one line when the
 * kind has been quiet for a while (or the run ends): how many, how many answered, their MTTR.
 * The same rule as the figures (score.ts): a call is an incident when its first request failed,
 * or when it failed without sending one.
 */
import { clockText } from "./clock-text.js";
import type { AttemptRecord, AttemptResult, CallRecord, TimelineEntry } from "./world.js";

/** A kind quiet this long, with none of its calls in flight, is told and closed. */
export const QUIET_MS = 5 * 60_000;

/** What a failed first request came to, as a verb phrase after its route's name. */
const FAILED: Record<AttemptResult, string> = {
  ok: "answered",
  empty: "answered empty",
  timeout: "timed out",
  rate_limit: "throttled (429)",
  unavailable: "failed (5xx)",
  worded: "failed (an error with no status)",
  bad_request: "refused the request (400)",
  auth: "refused the key (401)",
  ghost_write: "timed out (the write was applied)",
  cut: "cut the stream",
  no_finish: "ended the stream without its finish event",
};

interface Burst {
  /** `complete: openai timed out`. */
  title: string;
  firstAtMs: number;
  /** The call told in full (its incident and its end). */
  firstCall: string;
  calls: number;
  inFlight: number;
  lastEndMs: number;
  recovered: number;
  recoveryMs: number;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** Tells a run's incidents through `note`, as its calls and requests end. */
export class IncidentLog {
  private readonly bursts = new Map<string, Burst>();
  /** Incident calls in flight: the burst each belongs to. */
  private readonly open = new Map<string, string>();

  constructor(
    private readonly note: (kind: TimelineEntry["kind"], text: string) => void,
    private readonly now: () => number,
    /** The run's length (the times in the text are shown as the CLI shows the timeline's). */
    private readonly runMs: number,
  ) {}

  /** A request ended: the first request of a call that failed opens (or joins) an incident. */
  attemptEnded(call: CallRecord, attempt: AttemptRecord): void {
    // A first request that outlived its call (abandoned) was counted when the call ended.
    if (call.attempts[0] !== attempt || attempt.result === "ok" || call.endMs !== undefined) return;
    this.join(call, `${call.op}: ${attempt.dependency} ${FAILED[attempt.result]}`);
  }

  /** A call ended: told in full when it was the first of its incident, counted otherwise. */
  callEnded(call: CallRecord): void {
    const first = call.attempts[0];
    if (first?.result === "ok" && call.ok === true) return;
    if (!this.open.has(call.id)) {
      // No failed request told it: refused without one, or a whole-looking answer that was not.
      const title = first
        ? `${call.op}: ${first.dependency} ${FAILED[first.result]}, not whole`
        : `${call.op}: refused without a request`;
      this.join(call, title);
    }
    const key = this.open.get(call.id) ?? "";
    this.open.delete(call.id);
    const burst = this.bursts.get(key);
    if (!burst) return;
    const end = call.endMs ?? this.now();
    burst.inFlight--;
    burst.lastEndMs = Math.max(burst.lastEndMs, end);
    const tookMs = end - (first?.endMs ?? call.startMs);
    if (call.ok === true) {
      burst.recovered++;
      burst.recoveryMs += tookMs;
    }
    if (burst.firstCall !== call.id) return;
    const last = call.attempts.at(-1);
    const requests = plural(call.attempts.length, "request");
    if (call.ok === true)
      this.note(
        "recovered",
        `${call.op} answered by ${last?.dependency ?? "?"} ${seconds(tookMs)} after the failure (${requests})`,
      );
    else this.note("failed", `${call.op} failed for the user (${requests})`);
  }

  /** Tells and closes the kinds quiet for {@link QUIET_MS}; all of them when `all`. */
  flush(all = false): void {
    for (const [key, burst] of this.bursts) {
      if (!all && (burst.inFlight > 0 || this.now() - burst.lastEndMs < QUIET_MS)) continue;
      this.bursts.delete(key);
      // One call was told in full already.
      if (burst.calls === 1) continue;
      const failed = burst.calls - burst.recovered;
      const mttr = burst.recovered ? ` (MTTR ${seconds(burst.recoveryMs / burst.recovered)})` : "";
      this.note(
        failed === 0 ? "recovered" : "failed",
        `${burst.title} on ${plural(burst.calls, "call")} from ${clockText(burst.firstAtMs, this.runMs)}` +
          ` to ${clockText(burst.lastEndMs, this.runMs)}: ${burst.recovered} answered${mttr}, ` +
          `${failed} failed for users`,
      );
    }
  }

  private join(call: CallRecord, title: string): void {
    let burst = this.bursts.get(title);
    if (!burst) {
      burst = {
        title,
        firstAtMs: this.now(),
        firstCall: call.id,
        calls: 0,
        inFlight: 0,
        lastEndMs: this.now(),
        recovered: 0,
        recoveryMs: 0,
      };
      this.bursts.set(title, burst);
      this.note("incident", title);
    }
    burst.calls++;
    burst.inFlight++;
    this.open.set(call.id, title);
  }
}
