/**
 * IncidentLog on its own: the exact timeline text of an incident, of its first call's end (which
 * route answered, how long after the failure, in how many requests), and of the one line that
 * sums up the later calls of its kind once it has been quiet for QUIET_MS or the run ends.
 * Requests and calls are fed by hand, shaped as world.ts records them, on a clock set by the test.
 */
import { describe, expect, it } from "vitest";
import { IncidentLog, QUIET_MS } from "../../src/sim/incidents.js";
import type { AttemptRecord, AttemptResult, CallRecord, Operation } from "../../src/sim/world.js";

const MIN = 60_000;

/** An IncidentLog whose lines are kept as `kind text`, on a clock the test sets with `at`. */
function incidentLog(runMs = 60 * MIN) {
  let now = 0;
  const lines: string[] = [];
  const log = new IncidentLog(
    (kind, text) => lines.push(`${kind} ${text}`),
    () => now,
    runMs,
  );
  const at = (ms: number) => {
    now = ms;
  };
  return { log, lines, at };
}

const request = (
  dependency: string,
  result: AttemptResult,
  atMs: number,
  endMs: number,
): AttemptRecord => ({ dependency, atMs, endMs, result, usd: 0.002 });

const call = (id: string, startMs: number, op: Operation = "complete"): CallRecord => ({
  id,
  op,
  startMs,
  attempts: [],
});

/** The request joins its call and ends at its `endMs`, as the world tells it. */
function requestEnds(
  incidents: ReturnType<typeof incidentLog>,
  record: CallRecord,
  attempt: AttemptRecord,
) {
  record.attempts.push(attempt);
  incidents.at(attempt.endMs);
  incidents.log.attemptEnded(record, attempt);
}

/** The call ends at `endMs` with `ok`, as the run tells it. */
function callEnds(
  incidents: ReturnType<typeof incidentLog>,
  record: CallRecord,
  endMs: number,
  ok: boolean,
) {
  record.endMs = endMs;
  record.ok = ok;
  incidents.at(endMs);
  incidents.log.callEnded(record);
}

describe("IncidentLog: the first call of an incident, told in full", () => {
  it("a failed first request opens the incident; the call answered on another route is told with the time since that failure", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "timeout", 0, 10_000));
    expect(incidents.lines).toEqual(["incident complete: openai timed out"]);
    requestEnds(incidents, c1, request("anthropic", "ok", 10_000, 12_500));
    // The second request's own end opens nothing: only a call's first request does.
    expect(incidents.lines).toHaveLength(1);
    callEnds(incidents, c1, 12_500, true);
    expect(incidents.lines).toEqual([
      "incident complete: openai timed out",
      "recovered complete answered by anthropic 2.5 s after the failure (2 requests)",
    ]);
  });

  it("a first call that failed for its user says so, with its one request in the singular", () => {
    const incidents = incidentLog();
    const c1 = call("o1", 1_000, "charge");
    requestEnds(incidents, c1, request("payments", "unavailable", 1_000, 1_200));
    callEnds(incidents, c1, 1_200, false);
    expect(incidents.lines).toEqual([
      "incident charge: payments failed (5xx)",
      "failed charge failed for the user (1 request)",
    ]);
  });

  it("the call's end is its recorded end, not the time the log is told of it", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "rate_limit", 0, 1_000));
    c1.attempts.push(request("anthropic", "ok", 1_000, 4_000));
    c1.endMs = 4_000;
    c1.ok = true;
    incidents.at(9_000); // told late
    incidents.log.callEnded(c1);
    expect(incidents.lines.at(-1)).toBe(
      "recovered complete answered by anthropic 3.0 s after the failure (2 requests)",
    );
  });

  it("a call with a whole first answer, or a first request that answered, is no incident", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "ok", 0, 800));
    callEnds(incidents, c1, 800, true);
    expect(incidents.lines).toEqual([]);
  });

  it("a first request that outlived its abandoned call is not told again", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    c1.endMs = 10_000;
    c1.ok = false;
    requestEnds(incidents, c1, request("openai", "timeout", 0, 30_000));
    expect(incidents.lines).toEqual([]);
  });

  it("an answer that came but was not whole is told when its call ends", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "empty", 0, 800));
    // An empty first answer already opened it: "answered empty".
    callEnds(incidents, c1, 800, false);
    const c2 = call("q2", 60_000);
    requestEnds(incidents, c2, request("openai", "ok", 60_000, 61_000));
    callEnds(incidents, c2, 61_000, false);
    expect(incidents.lines).toEqual([
      "incident complete: openai answered empty",
      "failed complete failed for the user (1 request)",
      "incident complete: openai answered, not whole",
      "failed complete failed for the user (1 request)",
    ]);
  });

  it("a call refused before any request is an incident of its own", () => {
    const incidents = incidentLog();
    const c1 = call("o1", 5_000, "charge");
    callEnds(incidents, c1, 5_000, false);
    expect(incidents.lines).toEqual([
      "incident charge: refused without a request",
      "failed charge failed for the user (0 requests)",
    ]);
  });

  it("as score.ts counts it, a call answered without a request (a replayed write) is an incident too", () => {
    const incidents = incidentLog();
    const c1 = call("o1", 6_000, "charge");
    callEnds(incidents, c1, 7_500, true);
    expect(incidents.lines).toEqual([
      "incident charge: refused without a request",
      "recovered charge answered by ? 1.5 s after the failure (0 requests)",
    ]);
  });
});

describe("IncidentLog: later calls of a kind, summed up once it is quiet", () => {
  /** Three calls hit by openai timing out: the first answered, the second failed, the third answered. */
  function threeCalls() {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "timeout", 0, 10_000));
    requestEnds(incidents, c1, request("anthropic", "ok", 10_000, 12_500));
    callEnds(incidents, c1, 12_500, true);
    const c2 = call("q2", 30_000);
    requestEnds(incidents, c2, request("openai", "timeout", 30_000, 40_000));
    callEnds(incidents, c2, 40_000, false);
    const c3 = call("q3", 60_000);
    requestEnds(incidents, c3, request("openai", "timeout", 60_000, 70_000));
    requestEnds(incidents, c3, request("anthropic", "ok", 70_000, 74_500));
    callEnds(incidents, c3, 74_500, true);
    return incidents;
  }

  it("only the first call is told as it goes; the others wait for the summary", () => {
    const incidents = threeCalls();
    expect(incidents.lines).toEqual([
      "incident complete: openai timed out",
      "recovered complete answered by anthropic 2.5 s after the failure (2 requests)",
    ]);
  });

  it("told once quiet for QUIET_MS after the last call's end (not a millisecond before), with the MTTR of those answered", () => {
    const incidents = threeCalls();
    incidents.at(74_500 + QUIET_MS - 1);
    incidents.log.flush();
    expect(incidents.lines).toHaveLength(2);
    incidents.at(74_500 + QUIET_MS);
    incidents.log.flush();
    // MTTR: (2.5 s + 4.5 s) / 2.
    expect(incidents.lines.slice(2)).toEqual([
      "failed complete: openai timed out on 3 calls from 00:10 to 01:14: 2 answered (MTTR 3.5 s), 1 failed for users",
    ]);
    // Told and closed: a later flush says nothing more.
    incidents.at(74_500 + 2 * QUIET_MS);
    incidents.log.flush();
    expect(incidents.lines).toHaveLength(3);
  });

  it("a kind every call of which answered is told as recovered; a kind none answered has no MTTR", () => {
    const incidents = incidentLog();
    for (const [i, startMs] of [0, 20_000].entries()) {
      const c = call(`o${i}`, startMs, "charge");
      requestEnds(incidents, c, request("payments", "rate_limit", startMs, startMs + 200));
      requestEnds(incidents, c, request("payments", "ok", startMs + 15_000, startMs + 15_200));
      callEnds(incidents, c, startMs + 15_200, true);
    }
    for (const [i, startMs] of [0, 20_000].entries()) {
      const c = call(`q${i}`, startMs);
      requestEnds(incidents, c, request("openai", "auth", startMs, startMs + 100));
      callEnds(incidents, c, startMs + 100, false);
    }
    incidents.at(35_200 + QUIET_MS);
    incidents.log.flush();
    expect(incidents.lines.filter((l) => l.includes(" on 2 calls "))).toEqual([
      "recovered charge: payments throttled (429) on 2 calls from 00:00 to 00:35: 2 answered (MTTR 15.0 s), 0 failed for users",
      "failed complete: openai refused the key (401) on 2 calls from 00:00 to 00:20: 0 answered, 2 failed for users",
    ]);
  });

  it("a kind with a call still in flight is not told, however long it has been quiet", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "timeout", 0, 10_000));
    callEnds(incidents, c1, 10_000, false);
    const c2 = call("q2", 20_000);
    requestEnds(incidents, c2, request("openai", "timeout", 20_000, 30_000));
    incidents.at(30_000 + 2 * QUIET_MS);
    incidents.log.flush();
    expect(incidents.lines).toHaveLength(2);
    callEnds(incidents, c2, 30_000 + 2 * QUIET_MS, false);
    incidents.log.flush();
    expect(incidents.lines).toHaveLength(2); // just ended: not quiet yet
    incidents.at(30_000 + 3 * QUIET_MS);
    incidents.log.flush();
    expect(incidents.lines.slice(2)).toEqual([
      "failed complete: openai timed out on 2 calls from 00:10 to 10:30: 0 answered, 2 failed for users",
    ]);
  });

  it("at the run's end every kind is told at once, in flight or not, up to its last call's end, in the run's clock", () => {
    const incidents = incidentLog(12 * 60 * MIN);
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "unavailable", 0, 1_000));
    callEnds(incidents, c1, 1_000, false);
    const c2 = call("q2", 2_000);
    requestEnds(incidents, c2, request("openai", "unavailable", 2_000, 3_000));
    callEnds(incidents, c2, 3_000, false);
    const c3 = call("q3", 4_000);
    requestEnds(incidents, c3, request("openai", "unavailable", 4_000, 5_000));
    incidents.log.flush(true);
    expect(incidents.lines.slice(2)).toEqual([
      "failed complete: openai failed (5xx) on 3 calls from 0:00:01 to 0:00:03: 0 answered, 3 failed for users",
    ]);
    // The call in flight ends after its kind was told: nothing more, and no error.
    callEnds(incidents, c3, 9_000, true);
    expect(incidents.lines).toHaveLength(3);
  });

  it("a kind of one call is closed without a summary: its call was told in full", () => {
    const incidents = incidentLog();
    const c1 = call("q1", 0);
    requestEnds(incidents, c1, request("openai", "timeout", 0, 10_000));
    callEnds(incidents, c1, 10_000, false);
    incidents.log.flush(true);
    // Closed: the same kind again is a new incident, told in full.
    const c2 = call("q2", 20_000);
    requestEnds(incidents, c2, request("openai", "timeout", 20_000, 30_000));
    expect(incidents.lines).toEqual([
      "incident complete: openai timed out",
      "failed complete failed for the user (1 request)",
      "incident complete: openai timed out",
    ]);
  });
});
