/**
 * The simulated dependencies, answering as the scenario says at the current virtual time, and
 * the record of every request they get. Every policy is scored from this record by the same
 * rules (score.ts), never from its own account of itself.
 */
import { thrownFault } from "../testing/faults.js";
import { seededRandom } from "../testing/random.js";
import { VirtualClock } from "../testing/virtual-clock.js";
import type { Dependency, FaultWindow, Scenario } from "./scenarios.js";

/** What a request came to, as the dependency knows it. */
export type AttemptResult =
  | "ok"
  | "empty"
  | "timeout"
  | "rate_limit"
  | "unavailable"
  | "worded"
  | "bad_request"
  | "auth"
  /** Applied on the server, answered too late: the client saw a timeout. */
  | "ghost_write"
  /** A stream whose connection broke after some tokens: the client's read failed. */
  | "cut"
  /** A stream that ended without its finish event: what came may be only part of the answer. */
  | "no_finish";

/** Results that no retry on the same route can turn into an answer. */
export const NON_RETRYABLE: ReadonlySet<AttemptResult> = new Set(["bad_request", "auth"]);

export interface AttemptRecord {
  dependency: string;
  /** Sent at, virtual ms since the start. */
  atMs: number;
  /** Its answer or failure reached the client at, virtual ms since the start. */
  endMs: number;
  result: AttemptResult;
  usd: number;
  /** For a 429: the end of the throttled period (a same-route retry before it cannot help). */
  throttledUntilMs?: number;
}

export type Operation = "complete" | "charge";

/** One event of a streamed answer: a token of its text, or its end with the finish reason. */
export type StreamChunk = { text: string } | { finish: "stop"; tokens: number };

/** One logical call of a task (an LLM answer or a payment) and every request it made. */
export interface CallRecord {
  id: string;
  op: Operation;
  startMs: number;
  endMs?: number;
  ok?: boolean;
  attempts: AttemptRecord[];
}

export interface Request {
  dep: Dependency;
  /** The logical call this request belongs to (its id: the question or the order). */
  call: string;
  signal: AbortSignal | undefined;
  /** The idempotency key sent with a write, if any. */
  key?: string | undefined;
}

/** The simulated world a policy calls into. */
export interface World {
  scenario: Scenario;
  clock: VirtualClock;
  /** The policy's own randomness (jitter), seeded apart from the faults' draws. */
  random: () => number;
  /** Virtual ms since the start. */
  elapsed(): number;
  /**
   * One request to a dependency, as the scenario has it behave right now. An LLM answer of a
   * streaming scenario is read as a plain reader does: every token until the stream ends,
   * whether or not its finish event came.
   */
  behave(request: Request): Promise<string>;
  /** One streamed request to an LLM provider (a scenario with `stream`): its events on the clock. */
  stream(request: Request): AsyncIterable<StreamChunk>;
  /** Whether `value` is the whole answer to a call: false for an empty or a truncated one. */
  whole(call: string, value: string): boolean;
  /** The fault window a dependency is in now, if any. */
  faultNow(dependency: string): FaultWindow | undefined;
  note(kind: TimelineEntry["kind"], text: string): void;
}

/** One line of the run's story. */
export interface TimelineEntry {
  /** Virtual ms since the start. */
  atMs: number;
  kind:
    | "status"
    | "circuit"
    | "drift"
    | "escalation"
    | "page"
    /** A call's first request failed (the first of its kind for a while; see incidents.ts). */
    | "incident"
    /** That call answered after all; or every call of an incident's kind did. */
    | "recovered"
    /** That call failed for its user; or some calls of an incident's kind did. */
    | "failed";
  text: string;
}

/** The world and what it saw. */
export interface WorldRecord {
  world: World;
  calls: Map<string, CallRecord>;
  /** Charges applied on the payment server per order. */
  charges: Map<string, number>;
  requestsPerDependency: Record<string, number>;
}

/** What a request is in for: an error to throw at once, or a delay and an answer. */
interface Fate {
  result: AttemptResult;
  throw?: Error;
  hang?: boolean;
  delayMs?: number;
  applied?: true;
}

/** How a stream fault bends one streamed answer. */
interface Bend {
  /** Wait before the first token, ms. */
  firstMs: number;
  /** Silent for `silentMs` before this token (the answer's length: before the finish event). */
  stallAt?: number;
  silentMs?: number;
  /** The stream stops before this token: its connection breaks (`cut`) or it just ends. */
  stopAt?: number;
  stop?: "cut" | "no_finish";
}

/** What undici's fetch throws when the socket of a response being read dies. */
function terminated(): Error {
  return Object.assign(new TypeError("terminated"), {
    cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
  });
}

/** A stable share in [0, 1) for a call on a dependency: the same prompt fails the same way. */
function shareOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  // FNV-1a, then murmur3's finaliser: ids that differ in one digit land far apart.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

// Long on purpose: the world's state and the request handler whose closures share it.
export function createWorld(
  scenario: Scenario,
  onTimeline: (entry: TimelineEntry) => void,
  startMs?: number,
  /** Told as each request's answer or failure reaches the client (its record complete). */
  onAttemptEnd?: (call: CallRecord, attempt: AttemptRecord) => void,
): WorldRecord {
  const clock = new VirtualClock(startMs);
  const t0 = clock.now();
  const elapsed = () => clock.now() - t0;
  const faultRandom = seededRandom(scenario.seed);
  const calls = new Map<string, CallRecord>();
  const charges = new Map<string, number>();
  const appliedKeys = new Set<string>();
  /** Per dependency: the throttled period it is in, and whether its 429s say Retry-After. */
  const throttles = new Map<string, { untilMs: number; header: boolean }>();
  const requestsPerDependency: Record<string, number> = {};
  /** Faults served per window, for those that hit only the first few calls. */
  const served = new Map<FaultWindow, number>();
  const faultNow = (dependency: string) =>
    scenario.faults.find(
      (f) => f.dependency === dependency && elapsed() >= f.fromMs && elapsed() < f.toMs,
    );
  const charge = (call: string, key: string | undefined) => {
    if (key !== undefined && appliedKeys.has(key)) return; // the server replays the first result
    if (key !== undefined) appliedKeys.add(key);
    charges.set(call, (charges.get(call) ?? 0) + 1);
  };

  /** The request's fate: an error to throw after no delay, or a delay and an answer. */
  const decide = ({ dep, call }: Request, window: FaultWindow | undefined): Fate => {
    const f = window?.fault;
    const now = elapsed();
    const periodMs = f?.kind === "rate_limit" ? f.throttleSeconds * 1000 : 0;
    // A period over, the quota is refilled: calls pass for as long again before the next draw.
    if (
      f?.kind === "rate_limit" &&
      now >= (throttles.get(dep.name)?.untilMs ?? -periodMs) + periodMs
    ) {
      if (faultRandom() < f.rate)
        throttles.set(dep.name, { untilMs: now + periodMs, header: f.retryAfter });
    }
    // A throttled period lasts its whole length, even past the fault window that started it.
    const throttle = throttles.get(dep.name);
    if (throttle && now < throttle.untilMs) {
      const left = Math.ceil((throttle.untilMs - now) / 1000);
      return {
        result: "rate_limit",
        throw: thrownFault("rate_limit", throttle.header ? { retryAfterSeconds: left } : {}),
      };
    }
    if (f?.kind === "timeout" && faultRandom() < f.rate) {
      return { result: "timeout", hang: true };
    } else if (f?.kind === "worded" && faultRandom() < f.rate) {
      return { result: "worded", throw: new Error(f.message) };
    } else if (
      f?.kind === "flap" &&
      (now - (window?.fromMs ?? 0)) % (f.downMs + f.upMs) < f.downMs
    ) {
      return { result: "unavailable", throw: thrownFault("http_503") };
    } else if (f?.kind === "empty" && faultRandom() < f.rate) {
      return { result: "empty" };
    } else if (f?.kind === "bad_request" && shareOf(`${dep.name}/${call}`) < f.share) {
      return { result: "bad_request", throw: thrownFault(f.fault) };
    } else if (f?.kind === "unavailable") {
      return { result: "unavailable", throw: thrownFault("http_503") };
    } else if (f?.kind === "server_error" && window && (served.get(window) ?? 0) < f.times) {
      served.set(window, (served.get(window) ?? 0) + 1);
      return { result: "unavailable", throw: thrownFault("http_500") };
    } else if (f?.kind === "auth") {
      return { result: "auth", throw: thrownFault("auth") };
    } else if (f?.kind === "ghost_write" && faultRandom() < f.rate) {
      return { result: "ghost_write", delayMs: f.delayMs, applied: true };
    }
    return { result: "ok" };
  };

  /** A request arrives: it is counted, its fate drawn and its attempt recorded. */
  const receive = (request: Request) => {
    const { dep, call } = request;
    const record = calls.get(call);
    if (!record) throw new Error(`request for unknown call "${call}"`);
    requestsPerDependency[dep.name] = (requestsPerDependency[dep.name] ?? 0) + 1;
    const window = faultNow(dep.name);
    const fate = decide(request, window);
    const attempt: AttemptRecord = {
      dependency: dep.name,
      atMs: elapsed(),
      endMs: elapsed(),
      result: fate.result,
      usd: dep.usdPerCall,
    };
    if (fate.result === "rate_limit")
      attempt.throttledUntilMs = throttles.get(dep.name)?.untilMs ?? 0;
    record.attempts.push(attempt);
    const ended = () => {
      attempt.endMs = elapsed();
      onAttemptEnd?.(record, attempt);
    };
    return { window, fate, attempt, ended };
  };

  const shape = scenario.stream ?? { tokens: 0, tokenMs: 0 };
  const streams = (dep: Dependency) =>
    scenario.stream !== undefined && scenario.llm.some((d) => d.name === dep.name);
  const token = (i: number) => `t${i} `;
  let wholeText: string | undefined;
  /** A streamed answer's whole text (every call gets the same one). */
  const wholeAnswer = () =>
    (wholeText ??= Array.from({ length: shape.tokens }, (_, i) => token(i)).join(""));

  /** How a stream fault, if one strikes this request (one not failed already), bends its answer. */
  const bend = (dep: Dependency, window: FaultWindow | undefined, healthy: boolean): Bend => {
    const f = healthy ? window?.fault : undefined;
    const firstMs = window?.slowMs ?? dep.latencyMs;
    const at = (share: number) =>
      Math.min(shape.tokens, Math.max(0, Math.floor(shape.tokens * share)));
    if (f?.kind === "slow_first_token" && faultRandom() < f.rate) {
      return { firstMs: firstMs + f.delayMs };
    } else if (f?.kind === "stream_stall" && faultRandom() < f.rate) {
      return { firstMs, stallAt: at(f.share), silentMs: f.silentMs };
    } else if (f?.kind === "stream_cut" && faultRandom() < f.rate) {
      return { firstMs, stopAt: at(f.share), stop: "cut" };
    } else if (f?.kind === "no_finish" && faultRandom() < f.rate) {
      return { firstMs, stopAt: at(f.share), stop: "no_finish" };
    }
    return { firstMs };
  };

  /**
   * A streamed answer on the clock: the first token after `firstMs`, one every `tokenMs`, then
   * the finish event, as bent. A reader that stops before the end (its signal, a break) leaves
   * a request that was going well recorded as a timeout: too slow for the caller.
   */
  async function* play(
    signal: AbortSignal | undefined,
    fate: Fate,
    bent: Bend,
    attempt: AttemptRecord,
    ended: () => void,
  ): AsyncGenerator<StreamChunk> {
    const tokens = fate.result === "empty" ? 0 : shape.tokens;
    let done = false;
    try {
      if (fate.throw) throw fate.throw;
      await clock.sleep(fate.hang ? Number.MAX_SAFE_INTEGER : bent.firstMs, signal);
      // Step i is where token i goes; step `tokens` is where the finish event goes.
      for (let i = 0; i <= tokens; i++) {
        if (i > 0 && i < tokens) await clock.sleep(shape.tokenMs, signal);
        if (i === bent.stallAt) await clock.sleep(bent.silentMs ?? 0, signal);
        if (i === bent.stopAt) {
          done = true;
          attempt.result = bent.stop ?? "cut";
          if (bent.stop === "cut") throw terminated();
          return;
        }
        if (i < tokens) yield { text: token(i) };
      }
      done = true;
      yield { finish: "stop", tokens };
    } finally {
      if (!done && (attempt.result === "ok" || attempt.result === "empty"))
        attempt.result = "timeout";
      ended();
    }
  }

  const world: World = {
    scenario,
    clock,
    random: seededRandom(scenario.seed ^ 0x5eed),
    elapsed,
    faultNow,
    note(kind, text) {
      onTimeline({ atMs: elapsed(), kind, text });
    },
    async behave(request) {
      if (streams(request.dep)) {
        let text = "";
        for await (const chunk of world.stream(request)) if ("text" in chunk) text += chunk.text;
        return text;
      }
      const { dep, call, signal, key } = request;
      const { window, fate, attempt, ended } = receive(request);
      try {
        if (fate.throw) throw fate.throw;
        const isWrite = dep.name === scenario.api.name;
        if (isWrite && (fate.result === "ok" || fate.applied)) charge(call, key);
        try {
          await clock.sleep(
            fate.hang ? Number.MAX_SAFE_INTEGER : (fate.delayMs ?? window?.slowMs ?? dep.latencyMs),
            signal,
          );
        } catch (e) {
          if (fate.result === "ok" || fate.result === "empty") attempt.result = "timeout"; // too slow for the caller
          throw e;
        }
        if (fate.result === "empty") return "";
        if (fate.result === "ghost_write") attempt.result = "ok"; // the client waited long enough
        return isWrite ? `charged ${call}` : `answer to ${call}`;
      } finally {
        ended();
      }
    },
    stream(request) {
      const { fate, attempt, window, ended } = receive(request);
      const bent = bend(request.dep, window, fate.result === "ok");
      return play(request.signal, fate, bent, attempt, ended);
    },
    whole(call, value) {
      if (value === "") return false;
      return !(scenario.stream && calls.get(call)?.op === "complete") || value === wholeAnswer();
    },
  };
  return { world, calls, charges, requestsPerDependency };
}
