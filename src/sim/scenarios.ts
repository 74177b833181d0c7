/**
 * Incident scenarios, as data: which dependency misbehaves, how, and when (virtual time). The
 * simulator (run.ts) plays them against a simulated agent fleet.
 */

/** What a dependency does to one call during a window of the run. */
export type Fault =
  /** The call hangs until the caller's timeout; `rate` is the share of calls hit. */
  | { kind: "timeout"; rate: number }
  /**
   * Throttling as servers do it: a call lands in a throttled period with chance `rate`; the
   * dependency then answers 429 to every call for `throttleSeconds` (with `Retry-After`: the
   * seconds left, when `retryAfter`), and answers every call for as long again after it (the
   * quota refilled) before the next period can start.
   */
  | { kind: "rate_limit"; rate: number; throttleSeconds: number; retryAfter: boolean }
  /** Errors with no status code, only a message (as some SDKs throw them). */
  | { kind: "worded"; rate: number; message: string }
  /** 503 on every call. */
  | { kind: "unavailable" }
  /** 500 on the first `times` calls of the window, then fine. */
  | { kind: "server_error"; times: number }
  /** 503 for `downMs`, then fine for `upMs`, over and over. */
  | { kind: "flap"; downMs: number; upMs: number }
  /** A 200 with an empty answer. */
  | { kind: "empty"; rate: number }
  /**
   * A 400 for the requests this dependency cannot take (e.g. a prompt over its context window):
   * the same `share` of calls fails on every attempt; another provider may take them.
   */
  | { kind: "bad_request"; share: number; fault: "context_length" | "content_policy" }
  /** A 401 on every call (a revoked key): nothing but a person helps. */
  | { kind: "auth" }
  /**
   * The write is applied on the server, but the answer comes after `delayMs` (past the
   * client's timeout): a retry without an idempotency key charges twice.
   */
  | { kind: "ghost_write"; rate: number; delayMs: number }
  // Faults of a streamed answer (an LLM call of a scenario with `stream`); a call that is not
  // streamed is answered normally under them. `share`: the part of the answer's tokens that
  // come before the fault strikes.
  /** The first token comes `delayMs` late (a queued request), then the answer streams as usual. */
  | { kind: "slow_first_token"; rate: number; delayMs: number }
  /**
   * The connection breaks after `share` of the tokens: the read fails (undici's "terminated", as
   * a destroyed socket surfaces in Node), no finish event.
   */
  | { kind: "stream_cut"; rate: number; share: number }
  /** Silent for `silentMs` after `share` of the tokens, connection open; then the rest, whole. */
  | { kind: "stream_stall"; rate: number; share: number; silentMs: number }
  /**
   * The stream ends quietly after `share` of the tokens, without its terminal event (finish
   * reason, usage): a gateway closed the response cleanly, and an SSE reader just ends. A plain
   * reader takes the part for the whole answer. `share: 1`: every token came, only the end did not.
   */
  | { kind: "no_finish"; rate: number; share: number };

export interface FaultWindow {
  dependency: string;
  fromMs: number;
  toMs: number;
  fault: Fault;
  /** Latency of the calls that get through during the window, ms (default: the usual). */
  slowMs?: number;
}

export interface Dependency {
  name: string;
  /** Usual latency, ms. */
  latencyMs: number;
  usdPerCall: number;
}

/** How the LLM providers stream an answer: its token events and their pace. */
export interface StreamShape {
  /** Token events of a whole answer (each may carry a few tokens). */
  tokens: number;
  /** Time between token events, ms; the first comes after the provider's `latencyMs`. */
  tokenMs: number;
}

export interface Scenario {
  name: string;
  description: string;
  durationMs: number;
  seed: number;
  /** Agents in the fleet; each starts a task every `taskEveryMs`. */
  agents: number;
  taskEveryMs: number;
  /** LLM providers, primary first. */
  llm: Dependency[];
  /**
   * The LLM answers stream, shaped so (undefined: each comes whole after `latencyMs`). A
   * streamed answer is whole only if every token and the finish event came.
   */
  stream?: StreamShape;
  /** The write API each task ends with. */
  api: Dependency;
  faults: FaultWindow[];
  /** When a dependency's status page admits the incident, if it ever does. */
  statusPage?: { dependency: string; fromMs: number; toMs: number };
}

const MIN = 60_000;
const llm: Dependency[] = [
  { name: "openai", latencyMs: 800, usdPerCall: 0.002 },
  { name: "anthropic", latencyMs: 1_100, usdPerCall: 0.003 },
];
const api: Dependency = { name: "payments", latencyMs: 200, usdPerCall: 0.0005 };
const fleet = { durationMs: 60 * MIN, agents: 3, taskEveryMs: 30_000, llm, api };

export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  "provider-outage": {
    ...fleet,
    name: "provider-outage",
    description:
      "Primary LLM provider: 47 min partial outage, 60% timeouts and the rest slow; its status page admits it late.",
    seed: 47,
    faults: [
      {
        dependency: "openai",
        fromMs: 5 * MIN,
        toMs: 52 * MIN,
        fault: { kind: "timeout", rate: 0.6 },
        slowMs: 6_000,
      },
    ],
    statusPage: { dependency: "openai", fromMs: 17 * MIN, toMs: 55 * MIN },
  },
  "rate-limit-storm": {
    ...fleet,
    name: "rate-limit-storm",
    description:
      "The payments API throttles for 20 min: each throttled period answers 429 to every call for 15 s (with Retry-After, then without), then lets calls through.",
    seed: 429,
    faults: [
      {
        dependency: "payments",
        fromMs: 10 * MIN,
        toMs: 20 * MIN,
        fault: { kind: "rate_limit", rate: 0.25, throttleSeconds: 15, retryAfter: true },
      },
      {
        dependency: "payments",
        fromMs: 20 * MIN,
        toMs: 30 * MIN,
        fault: { kind: "rate_limit", rate: 0.25, throttleSeconds: 15, retryAfter: false },
      },
    ],
  },
  "wording-drift": {
    ...fleet,
    name: "wording-drift",
    description:
      "A provider throttles with status-less errors and changes their wording mid-run to one no rule knows: the UNKNOWN share rises and drift fires.",
    seed: 7,
    faults: [
      {
        dependency: "openai",
        fromMs: 5 * MIN,
        toMs: 30 * MIN,
        fault: { kind: "worded", rate: 0.3, message: "Quota exceeded for requests per minute" },
      },
      {
        dependency: "openai",
        fromMs: 30 * MIN,
        toMs: 60 * MIN,
        fault: {
          kind: "worded",
          rate: 0.3,
          message: "Request budget spent for this minute, slow down",
        },
      },
    ],
  },
  "flapping-dependency": {
    ...fleet,
    name: "flapping-dependency",
    description:
      "The primary alternates down and up every 30 s for an hour: the budget caps spend and the breaker does not flap along.",
    seed: 30,
    faults: [
      {
        dependency: "openai",
        fromMs: 0,
        toMs: 60 * MIN,
        fault: { kind: "flap", downMs: 30_000, upMs: 30_000 },
      },
    ],
  },
  "silent-failure": {
    ...fleet,
    name: "silent-failure",
    description: "The LLM returns an empty answer on 15% of calls while every call 'succeeds'.",
    seed: 15,
    faults: [
      { dependency: "openai", fromMs: 0, toMs: 60 * MIN, fault: { kind: "empty", rate: 0.15 } },
    ],
  },
  "bad-request-storm": {
    ...fleet,
    name: "bad-request-storm",
    description:
      "Long tickets: for 30 min a quarter of prompts exceed the primary's context window (400, every attempt; the secondary takes them); then the payments key is revoked for 10 min (401 on every call).",
    seed: 400,
    faults: [
      {
        dependency: "openai",
        fromMs: 5 * MIN,
        toMs: 35 * MIN,
        fault: { kind: "bad_request", share: 0.25, fault: "context_length" },
      },
      { dependency: "payments", fromMs: 40 * MIN, toMs: 50 * MIN, fault: { kind: "auth" } },
    ],
  },
  "ghost-write": {
    ...fleet,
    name: "ghost-write",
    description:
      "For 20 min the payments API applies 30% of charges but answers after 8 s, past the client's 5 s timeout: a retry without an idempotency key charges twice.",
    seed: 8,
    faults: [
      {
        dependency: "payments",
        fromMs: 10 * MIN,
        toMs: 30 * MIN,
        fault: { kind: "ghost_write", rate: 0.3, delayMs: 8_000 },
      },
    ],
  },
  blip: {
    ...fleet,
    name: "blip",
    description:
      "The primary LLM is down for 6 s (503) at minute 10, then fine: traffic should be back on it within seconds.",
    seed: 6,
    faults: [
      {
        dependency: "openai",
        fromMs: 10 * MIN,
        toMs: 10 * MIN + 6_000,
        fault: { kind: "unavailable" },
      },
    ],
  },
  "single-route-500": {
    ...fleet,
    name: "single-route-500",
    description:
      "The payments API (one route, no alternative) answers one 500 at minute 10, then is fine: writes must go on.",
    seed: 500,
    faults: [
      {
        dependency: "payments",
        fromMs: 10 * MIN,
        toMs: 60 * MIN,
        fault: { kind: "server_error", times: 1 },
      },
    ],
  },
  streams: {
    ...fleet,
    name: "streams",
    description:
      "The answers stream (40 token events, 125 ms apart). For 45 min the primary's streams go wrong in turn: first tokens 30 s late, 45 s stalls mid-answer, connections cut mid-answer, then streams that end early without their finish event, which a plain reader takes for whole answers. The secondary streams fine.",
    seed: 100,
    stream: { tokens: 40, tokenMs: 125 },
    faults: [
      {
        dependency: "openai",
        fromMs: 5 * MIN,
        toMs: 15 * MIN,
        fault: { kind: "slow_first_token", rate: 0.4, delayMs: 30_000 },
      },
      {
        dependency: "openai",
        fromMs: 15 * MIN,
        toMs: 25 * MIN,
        fault: { kind: "stream_stall", rate: 0.3, share: 0.5, silentMs: 45_000 },
      },
      {
        dependency: "openai",
        fromMs: 25 * MIN,
        toMs: 35 * MIN,
        fault: { kind: "stream_cut", rate: 0.3, share: 0.4 },
      },
      {
        dependency: "openai",
        fromMs: 35 * MIN,
        toMs: 50 * MIN,
        fault: { kind: "no_finish", rate: 0.3, share: 0.7 },
      },
    ],
  },
};
