/**
 * One rule for every policy: the figures of a run, computed from what the dependencies saw
 * (world.ts), whatever the policy says about itself.
 */
import { NON_RETRYABLE, type CallRecord } from "./world.js";

/** Attempts of a call that could not help it. */
export function wastedAttempts(call: CallRecord): number {
  const retries = call.attempts.slice(1);
  // Every retry of a call that still failed was sent for nothing.
  if (!call.ok) return retries.length;
  // In a call that got its answer: same-route retries after an error retrying cannot fix, and
  // retries sent while the route had said it was throttled.
  return retries.filter((a, i) =>
    call.attempts
      .slice(0, i + 1)
      .some(
        (before) =>
          before.dependency === a.dependency &&
          (NON_RETRYABLE.has(before.result) || a.atMs < (before.throttledUntilMs ?? 0)),
      ),
  ).length;
}

/** What a person is paged for: the operation, and what its last request came to. */
export function pageKind(call: CallRecord): string {
  const last = call.attempts.at(-1);
  return last ? `${call.op}/${last.dependency}/${last.result}` : `${call.op}/refused`;
}

export interface CallFigures {
  /** Calls whose first request failed, or that failed without any. */
  incidents: number;
  /** Of those, the ones that still answered. */
  recovered: number;
  /** From the first failed request's end to the call's answer, ms, per recovered incident. */
  recoveryTimesMs: number[];
  /** Every request x its dependency's price. */
  spendUsd: number;
  /** Requests after a call's first. */
  recoverySpendUsd: number;
  wastedRetries: number;
}

export function scoreCalls(calls: Iterable<CallRecord>): CallFigures {
  const f: CallFigures = {
    incidents: 0,
    recovered: 0,
    recoveryTimesMs: [],
    spendUsd: 0,
    recoverySpendUsd: 0,
    wastedRetries: 0,
  };
  for (const call of calls) {
    call.attempts.forEach((a, i) => {
      f.spendUsd += a.usd;
      if (i > 0) f.recoverySpendUsd += a.usd;
    });
    f.wastedRetries += wastedAttempts(call);
    const first = call.attempts[0];
    if (first?.result === "ok" && call.ok) continue;
    f.incidents++;
    if (call.ok) {
      f.recovered++;
      f.recoveryTimesMs.push((call.endMs ?? 0) - (first?.endMs ?? call.startMs));
    }
  }
  return f;
}

/** Double charges: charges of an order past its first. */
export function doubleCharges(charges: ReadonlyMap<string, number>): number {
  let n = 0;
  for (const count of charges.values()) n += Math.max(0, count - 1);
  return n;
}
