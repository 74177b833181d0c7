/**
 * Failover in real time: the non-streaming scenarios of the public failoverbench catalogue,
 * restated against fake provider servers on 127.0.0.1 (selfheal/testing's `startFakeProvider`,
 * one server per route, speaking OpenAI Chat Completions and Anthropic Messages with each API's
 * own error bodies and headers), played by five clients side by side in one process, each
 * scenario on fresh servers and a fresh client:
 *
 *   selfheal       the built package's public API with README defaults: an `llm` tool with the
 *                  routes "primary" and "fallback", 20 s per attempt, `HttpResponseError.from(res)`
 *                  on a non-2xx response (fetch, Chat Completions).
 *   healOpenAI     the `openai` SDK healed in one line (selfheal/openai): `new OpenAI({ baseURL })`
 *                  per route, the SDK's default retries left on (healing turns them off per
 *                  attempt), the same routes and 20 s per attempt as `selfheal`.
 *   healAnthropic  the same with `@anthropic-ai/sdk` (selfheal/anthropic), on the Messages API.
 *   reference      a plain client written below: fetch with an AbortController timeout per attempt,
 *                  at most 3 attempts per request, Retry-After honoured up to 10 s, one same-route
 *                  retry of a transient error then failover, no retry of a 4xx but 408/429, and a
 *                  per-route breaker (3 consecutive failures, open 5 s, then one probe); on Chat
 *                  Completions.
 *   reference/anthropic  the same client on the Messages API (the healed Anthropic client's
 *                  yardstick: same scenarios, same wire).
 *
 * A scenario's faults are the injector's, served in each API's shapes (docs/testing.md, "Faults
 * per API"): a 429 with Retry-After, 500, 503, a reset socket, a hang and the two 400s
 * (Anthropic's `invalid_request_error` "prompt is too long" and "Output blocked by content
 * filtering policy") are the same events on both wires.
 *
 * Every request has a caller deadline of 45 s (aborted past it, counted failed). Requests per
 * route and the route whose answer came back are counted at the servers (each answers with its
 * own name); times by the wall clock. Nothing is taken from a client's account of itself.
 *
 * Run: npm run bench:failover   (writes bench/results/failover.json; 2-3 minutes)
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { createSelfHealing, HttpResponseError } from "../dist/index.js";
import { healAnthropic } from "../dist/clients/anthropic.js";
import { healOpenAI } from "../dist/clients/openai.js";
import { startFakeProvider, type FailureInjector } from "../dist/testing/index.js";
import { report } from "./harness.js";

/** Per attempt, both clients. */
const ATTEMPT_TIMEOUT_MS = 20_000;
/** The caller's patience per request: aborted past it, and counted failed. */
const DEADLINE_MS = 45_000;
/** A client that ignores the caller's abort is given up on this long after the deadline. */
const ABORT_GRACE_MS = 5_000;
/** A refusal is clean when a typed 4xx error comes back within this (and no route got a retry). */
const CLEAN_REFUSAL_MS = 2_000;
/** Scenario 9: the primary must answer again within this of its recovery. */
const RETURN_WITHIN_MS = 10_000;

// The reference client's settings.
const MAX_ATTEMPTS = 3;
const RETRY_AFTER_CAP_MS = 10_000;
const BACKOFF_MS = 250;
const BREAKER_THRESHOLD = 3;
const BREAKER_COOLDOWN_MS = 5_000;

type Route = "primary" | "fallback";
const ROUTES: readonly Route[] = ["primary", "fallback"];
const MODEL: Record<Route, string> = { primary: "primary-model", fallback: "fallback-model" };
type Urls = Record<Route, string>;

interface Client {
  complete(prompt: string, signal: AbortSignal): Promise<string>;
  close(): Promise<void>;
}

/** An HTTP API as the fetch clients speak it: where they post, what, and the answer's text. */
interface Wire {
  path: string;
  headers: Record<string, string>;
  body(model: string, prompt: string): unknown;
  text(body: unknown): string;
}

const MAX_TOKENS = 1024;

const WIRES = {
  chat: {
    path: "/chat/completions",
    headers: { authorization: "Bearer sk-fake" },
    body: (model, prompt) => ({ model, messages: [{ role: "user", content: prompt }] }),
    text: (body) =>
      (body as { choices?: { message?: { content?: string | null } }[] }).choices?.[0]?.message
        ?.content ?? "",
  },
  anthropic: {
    path: "/messages",
    headers: { "x-api-key": "sk-fake", "anthropic-version": "2023-06-01" },
    body: (model, prompt) => ({
      model,
      max_tokens: MAX_TOKENS,
      messages: [{ role: "user", content: prompt }],
    }),
    text: (body) =>
      ((body as { content?: { type: string; text?: string }[] }).content ?? [])
        .map((block) => (block.type === "text" ? (block.text ?? "") : ""))
        .join(""),
  },
} satisfies Record<string, Wire>;

/** POST the request to the route's server, as the fetch clients send it. */
function post(
  wire: Wire,
  urls: Urls,
  route: Route,
  prompt: string,
  signal: AbortSignal,
): Promise<Response> {
  return fetch(`${urls[route]}${wire.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...wire.headers },
    body: JSON.stringify(wire.body(MODEL[route], prompt)),
    signal,
  });
}

async function messageContent(wire: Wire, res: Response): Promise<string> {
  return wire.text(await res.json());
}

// ---------------------------------------------------------------------------------------------
// selfheal, as the README's Recovery section shows it, with its defaults.

function selfhealClient(urls: Urls): Client {
  const sh = createSelfHealing({
    agent: "failover-bench",
    recovery: { providers: ROUTES.map((name) => ({ name })) },
  });
  const complete = sh.tool(
    "complete",
    { readOnly: true, kind: "llm", providers: ROUTES, timeoutMs: ATTEMPT_TIMEOUT_MS },
    async (prompt: string, ctx) => {
      const route = ROUTES.find((r) => r === ctx.provider);
      if (route === undefined) throw new Error(`unknown provider ${String(ctx.provider)}`);
      const res = await post(WIRES.chat, urls, route, prompt, ctx.signal);
      if (!res.ok) throw await HttpResponseError.from(res);
      return messageContent(WIRES.chat, res);
    },
  );
  return { complete: (prompt, signal) => complete(prompt, { signal }), close: () => sh.close() };
}

// ---------------------------------------------------------------------------------------------
// The provider SDKs healed in one line (selfheal/openai, selfheal/anthropic), with the same
// routes and attempt timeout as the selfheal client above; each SDK's own retries stay at their
// default in the constructor: the healed call sends every attempt with `maxRetries: 0`.

const benchInstance = () =>
  createSelfHealing({
    agent: "failover-bench",
    recovery: { providers: ROUTES.map((name) => ({ name })) },
  });

function healOpenAIClient(urls: Urls): Client {
  const sh = benchInstance();
  const sdk = (route: Route) => new OpenAI({ baseURL: urls[route], apiKey: "sk-fake" });
  const openai = healOpenAI(sh, sdk("primary"), {
    provider: "primary",
    fallback: { provider: "fallback", client: sdk("fallback"), model: MODEL.fallback },
    timeoutMs: ATTEMPT_TIMEOUT_MS,
  });
  return {
    async complete(prompt, signal) {
      const completion = await openai.chat.completions.create(
        { model: MODEL.primary, messages: [{ role: "user", content: prompt }] },
        { signal },
      );
      return completion.choices[0]?.message.content ?? "";
    },
    close: () => sh.close(),
  };
}

function healAnthropicClient(urls: Urls): Client {
  const sh = benchInstance();
  // The SDK appends /v1/messages to its base URL: the server's origin.
  const sdk = (route: Route) =>
    new Anthropic({ baseURL: new URL(urls[route]).origin, apiKey: "sk-fake" });
  const anthropic = healAnthropic(sh, sdk("primary"), {
    provider: "primary",
    fallback: { provider: "fallback", client: sdk("fallback"), model: MODEL.fallback },
    timeoutMs: ATTEMPT_TIMEOUT_MS,
  });
  return {
    async complete(prompt, signal) {
      const message = await anthropic.messages.create(
        {
          model: MODEL.primary,
          max_tokens: MAX_TOKENS,
          messages: [{ role: "user", content: prompt }],
        },
        { signal },
      );
      return message.content.map((block) => (block.type === "text" ? block.text : "")).join("");
    },
    close: () => sh.close(),
  };
}

// ---------------------------------------------------------------------------------------------
// The reference client: what a careful user writes by hand.

/** A non-2xx answer, shaped as the OpenAI SDK's errors: status, headers, parsed `error` body. */
class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly headers: Headers,
    readonly error: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

class AttemptTimeoutError extends Error {
  override readonly name = "AttemptTimeoutError";
}

/** Opens after BREAKER_THRESHOLD consecutive failures for the cooldown; then one probe at a time. */
class Breaker {
  private failures = 0;
  private openUntil = 0;
  private probing = false;

  get open(): boolean {
    return this.failures >= BREAKER_THRESHOLD;
  }

  admit(now: number): boolean {
    if (!this.open) return true;
    if (now < this.openUntil || this.probing) return false;
    this.probing = true; // half-open: this attempt is the probe
    return true;
  }

  success(): void {
    this.failures = 0;
    this.probing = false;
  }

  failure(now: number): void {
    this.failures++;
    this.probing = false;
    if (this.open) this.openUntil = now + BREAKER_COOLDOWN_MS;
  }

  /** The attempt said nothing about the route (a 4xx, the caller's abort). */
  release(): void {
    this.probing = false;
  }
}

function retryAfterMs(headers: Headers): number | undefined {
  const value = headers.get("retry-after");
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function referenceClient(wire: Wire, urls: Urls): Client {
  const breakers: Record<Route, Breaker> = { primary: new Breaker(), fallback: new Breaker() };

  async function attempt(route: Route, prompt: string, signal: AbortSignal): Promise<string> {
    const controller = new AbortController();
    const timer = setTimeout(() => {
      controller.abort(new AttemptTimeoutError(`${route}: no answer in ${ATTEMPT_TIMEOUT_MS} ms`));
    }, ATTEMPT_TIMEOUT_MS);
    const onAbort = () => {
      controller.abort(signal.reason);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    try {
      const res = await post(wire, urls, route, prompt, controller.signal);
      if (!res.ok) {
        let body: unknown;
        try {
          body = ((await res.json()) as { error?: unknown }).error;
        } catch {
          // not JSON: status and headers still say enough
        }
        throw new ApiError(res.status, res.headers, body);
      }
      return await messageContent(wire, res);
    } catch (error) {
      const reason: unknown = controller.signal.reason;
      throw reason instanceof AttemptTimeoutError ? reason : error;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }

  async function complete(prompt: string, signal: AbortSignal): Promise<string> {
    const abandoned = new Set<Route>();
    const retried = new Set<Route>();
    let last: unknown = new Error("reference: no route admits the request (breakers open)");
    for (let n = 1; n <= MAX_ATTEMPTS; n++) {
      const route = ROUTES.find((r) => !abandoned.has(r) && breakers[r].admit(Date.now()));
      if (route === undefined) break;
      const breaker = breakers[route];
      try {
        const answer = await attempt(route, prompt, signal);
        breaker.success();
        return answer;
      } catch (error) {
        last = error;
        if (signal.aborted) {
          breaker.release();
          throw error;
        }
        const status = error instanceof ApiError ? error.status : undefined;
        if (status !== undefined && status < 500 && status !== 408 && status !== 429) {
          breaker.release();
          throw error; // the request's fault: no retry, no failover
        }
        breaker.failure(Date.now());
        const wait = error instanceof ApiError ? retryAfterMs(error.headers) : undefined;
        const sameRoute =
          !(error instanceof AttemptTimeoutError) &&
          !breaker.open &&
          !retried.has(route) &&
          (wait ?? 0) <= RETRY_AFTER_CAP_MS;
        if (sameRoute) {
          retried.add(route);
          await sleep(wait ?? BACKOFF_MS * 2 ** (n - 1) * (0.8 + 0.4 * Math.random()), signal);
        } else {
          abandoned.add(route);
        }
      }
    }
    throw last;
  }

  return { complete, close: () => Promise.resolve() };
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

type Outcome = "answered" | "refused" | "failed";
type Verdict = Outcome | "partial";

interface Scenario {
  name: string;
  /** What the catalogue expects. */
  expected: string;
  /** Outcomes every request may have for the scenario to pass. */
  accept: readonly Outcome[];
  requests: number;
  /** Requests on a schedule, this far apart (overlapping when slow); one after another if unset. */
  everyMs?: number;
  /** The primary's faults (the fallback has none). */
  faults: (primary: FailureInjector) => void;
  /** No route may get two requests for one call (a 400 is not retried on its route). */
  noSameRouteRetry?: boolean;
  /** When the primary recovers, ms after it starts: traffic should come back to it. */
  recoversAtMs?: number;
}

const SCENARIOS: Scenario[] = [
  {
    name: "1. 429 + Retry-After: 2, first request",
    expected: "answered",
    accept: ["answered"],
    requests: 3,
    faults: (p) => p.inject("rate_limit", { first: 1 }, { retryAfterSeconds: 2 }),
  },
  {
    name: "2. 429 always (no Retry-After)",
    expected: "answered via fallback",
    accept: ["answered"],
    requests: 3,
    faults: (p) => p.inject("rate_limit", { probability: 1 }),
  },
  {
    name: "3. 500 once",
    expected: "answered",
    accept: ["answered"],
    requests: 3,
    faults: (p) => p.inject("http_500", { first: 1 }),
  },
  {
    name: "4. 503 always",
    expected: "answered via fallback",
    accept: ["answered"],
    requests: 3,
    faults: (p) => p.inject("http_503", { probability: 1 }),
  },
  {
    name: "5. TCP reset once",
    expected: "answered",
    accept: ["answered"],
    requests: 3,
    faults: (p) => p.inject("connection_reset", { first: 1 }),
  },
  {
    name: "6. primary hangs",
    expected: `answered via fallback in < ${DEADLINE_MS / 1000} s`,
    accept: ["answered"],
    requests: 2,
    faults: (p) => p.inject("hang", { probability: 1 }),
  },
  {
    name: "7. 400 context_length_exceeded",
    expected: "refused or fallback, no same-route retry",
    accept: ["answered", "refused"],
    requests: 3,
    noSameRouteRetry: true,
    faults: (p) => p.inject("context_length", { probability: 1 }),
  },
  {
    name: "8. 400 content_policy_violation",
    expected: "refused, no same-route retry",
    accept: ["refused"],
    requests: 3,
    noSameRouteRetry: true,
    faults: (p) => p.inject("content_policy", { probability: 1 }),
  },
  {
    name: "9. 503 for 6 s, then 200",
    expected: `answered, back on primary < ${RETURN_WITHIN_MS / 1000} s`,
    accept: ["answered"],
    requests: 17,
    everyMs: 1_200,
    recoversAtMs: 6_000,
    faults: (p) => p.inject("http_503", { during: { fromMs: 0, toMs: 6_000 } }),
  },
  {
    name: "10. 503 always, with fallback",
    expected: "answered via fallback",
    accept: ["answered"],
    requests: 8,
    faults: (p) => p.inject("http_503", { probability: 1 }),
  },
];

// ---------------------------------------------------------------------------------------------
// Playing a scenario.

const CLIENTS = {
  selfheal: selfhealClient,
  healOpenAI: healOpenAIClient,
  healAnthropic: healAnthropicClient,
  reference: (urls: Urls) => referenceClient(WIRES.chat, urls),
  "reference/anthropic": (urls: Urls) => referenceClient(WIRES.anthropic, urls),
} satisfies Record<string, (urls: Urls) => Client>;
type ClientName = keyof typeof CLIENTS;
/** Whose time each client's is judged against: the reference on the same wire. */
const YARDSTICK: Partial<Record<ClientName, ClientName>> = {
  selfheal: "reference",
  healOpenAI: "reference",
  healAnthropic: "reference/anthropic",
};
/** Goal of the clients healed in one line: their total time at most this times the reference's. */
const GOAL_RATIO = 1.1;

interface RequestResult {
  /** When it was sent, s after the primary started. */
  at: number;
  seconds: number;
  outcome: Outcome;
  /** Whose answer came back (each fake server answers with its own name). */
  route?: Route;
  error?: string;
}

class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}

/** The error and its causes: "HumanEscalationRequiredError <- HttpResponseError 429". */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && depth < 4; depth++) {
    if (!(e instanceof Error)) {
      parts.push(typeof e);
      break;
    }
    const status = (e as { status?: unknown }).status;
    parts.push(typeof status === "number" ? `${e.name} ${status}` : e.name);
    e = e.cause;
  }
  return parts.join(" <- ");
}

/** A 4xx the request itself caused (not 408 nor 429), on the error or one of its causes. */
function isRefusal(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; depth++, e = e.cause) {
    const status = (e as { status?: unknown }).status;
    if (typeof status === "number" && status >= 400 && status < 500)
      return status !== 408 && status !== 429;
  }
  return false;
}

const round = (x: number, digits = 1) => +x.toFixed(digits);
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function play(scenario: Scenario, clientName: ClientName) {
  const primary = await startFakeProvider({ reply: "answer from primary" });
  const startedAt = performance.now(); // the primary's fault windows count from here
  const fallback = await startFakeProvider({ reply: "answer from fallback" });
  scenario.faults(primary.injector);
  const client = CLIENTS[clientName]({ primary: primary.url, fallback: fallback.url });

  const one = async (i: number): Promise<RequestResult> => {
    const deadline = new AbortController();
    const timer = setTimeout(() => {
      deadline.abort(new DeadlineError(`caller deadline of ${DEADLINE_MS / 1000} s`));
    }, DEADLINE_MS);
    let giveUp: NodeJS.Timeout | undefined;
    const start = performance.now();
    const at = round((start - startedAt) / 1000, 2);
    try {
      const answer = await Promise.race([
        client.complete(`request ${i + 1}: summarise the incident report`, deadline.signal),
        new Promise<never>((_resolve, reject) => {
          giveUp = setTimeout(() => {
            reject(new Error("ignored the caller's abort"));
          }, DEADLINE_MS + ABORT_GRACE_MS);
        }),
      ]);
      const route = ROUTES.find((r) => answer.endsWith(r));
      const seconds = round((performance.now() - start) / 1000, 2);
      return route === undefined
        ? { at, seconds, outcome: "failed", error: `unexpected answer ${JSON.stringify(answer)}` }
        : { at, seconds, outcome: "answered", route };
    } catch (error) {
      const seconds = round((performance.now() - start) / 1000, 2);
      const clean = isRefusal(error) && seconds * 1000 <= CLEAN_REFUSAL_MS;
      return { at, seconds, outcome: clean ? "refused" : "failed", error: describe(error) };
    } finally {
      clearTimeout(timer);
      clearTimeout(giveUp);
    }
  };

  const t0 = performance.now();
  let results: RequestResult[] = [];
  if (scenario.everyMs !== undefined) {
    const every = scenario.everyMs;
    results = await Promise.all(
      Array.from({ length: scenario.requests }, async (_, i) => {
        await delay(i * every);
        return one(i);
      }),
    );
  } else {
    for (let i = 0; i < scenario.requests; i++) results.push(await one(i));
  }
  const wall = round((performance.now() - t0) / 1000, 2);
  const seen = { primary: primary.requests, fallback: fallback.requests };
  await client.close();
  await Promise.all([primary.close(), fallback.close()]);
  return { results, wall, seen };
}

function judge(scenario: Scenario, played: Awaited<ReturnType<typeof play>>) {
  const { results, seen } = played;
  const count = (o: Outcome) => results.filter((r) => r.outcome === o).length;
  const outcomes = [...new Set(results.map((r) => r.outcome))];
  const verdict: Verdict = outcomes.length === 1 && outcomes[0] ? outcomes[0] : "partial";
  const notes: string[] = [];
  let pass = results.every((r) => scenario.accept.includes(r.outcome));

  if (
    scenario.noSameRouteRetry &&
    (seen.primary > results.length || seen.fallback > results.length)
  ) {
    pass = false;
    notes.push(`same-route retry (${seen.primary} primary requests for ${results.length} calls)`);
  }
  let backOnPrimaryS: number | null = null;
  if (scenario.recoversAtMs !== undefined) {
    const recovered = scenario.recoversAtMs / 1000;
    const later = results.filter((r) => r.at >= recovered);
    const firstBack = later.find((r) => r.route === "primary");
    backOnPrimaryS = firstBack ? round(firstBack.at + firstBack.seconds - recovered, 2) : null;
    const afterRecovery = `${later.filter((r) => r.route === "primary").length} primary / ${later.filter((r) => r.route === "fallback").length} fallback`;
    notes.push(
      backOnPrimaryS === null
        ? "never back on the primary"
        : `back on the primary ${backOnPrimaryS} s after it recovered`,
    );
    notes.push(`answers sent after recovery: ${afterRecovery}`);
    if (backOnPrimaryS === null || backOnPrimaryS * 1000 > RETURN_WITHIN_MS) pass = false;
  }
  const errors = [...new Set(results.flatMap((r) => (r.error ? [r.error] : [])))];
  if (errors.length) notes.push(`errors: ${errors.join("; ")}`);

  const answeredBy = (route: Route) => results.filter((r) => r.route === route).length;
  return {
    verdict,
    pass,
    "ans/ref/fail": `${count("answered")}/${count("refused")}/${count("failed")}`,
    "answers p/f": `${answeredBy("primary")}/${answeredBy("fallback")}`,
    "primary reqs": seen.primary,
    "fallback reqs": seen.fallback,
    "wall s": played.wall,
    "slowest s": Math.max(...results.map((r) => r.seconds)),
    backOnPrimaryS,
    notes: notes.join("; "),
  };
}

// ---------------------------------------------------------------------------------------------

type Row = { scenario: string; client: ClientName; expected: string } & ReturnType<typeof judge>;
const CLIENT_NAMES = Object.keys(CLIENTS) as ClientName[];
const rows: Row[] = [];
const requests: { scenario: string; client: ClientName; requests: RequestResult[] }[] = [];
const benchStart = performance.now();
for (const scenario of SCENARIOS) {
  // The clients side by side, each on its own pair of servers.
  const played = await Promise.all(
    CLIENT_NAMES.map(async (client) => ({ client, ...(await play(scenario, client)) })),
  );
  for (const p of played) {
    const row: Row = {
      scenario: scenario.name,
      client: p.client,
      expected: scenario.expected,
      ...judge(scenario, p),
    };
    rows.push(row);
    requests.push({ scenario: scenario.name, client: p.client, requests: p.results });
    console.log(
      `${scenario.name.padEnd(40)} ${p.client.padEnd(19)} ${row.verdict.padEnd(8)} ${row.pass ? "pass" : "FAIL"}  ` +
        `p/f reqs ${row["primary reqs"]}/${row["fallback reqs"]}  ${row["wall s"]} s  ${row.notes}`,
    );
  }
}

const of = (client: ClientName) => rows.filter((r) => r.client === client);
const passed = (client: ClientName) => of(client).filter((r) => r.pass).length;
const totalS = (client: ClientName) =>
  round(
    of(client).reduce((sum, r) => sum + r["wall s"], 0),
    1,
  );
const ratioTo = (client: ClientName, yardstick: ClientName) =>
  round(totalS(client) / totalS(yardstick), 2);
const summary: Record<string, string | number | boolean> = {};
for (const client of CLIENT_NAMES) {
  summary[`scenarios passed, ${client}`] = `${passed(client)}/${SCENARIOS.length}`;
  summary[`total s, ${client}`] = totalS(client);
  const yardstick = YARDSTICK[client];
  if (yardstick) summary[`${client} / ${yardstick} (total s)`] = ratioTo(client, yardstick);
}
Object.assign(summary, {
  "healAnthropic / reference (total s)": ratioTo("healAnthropic", "reference"),
  goal: `the healed clients pass what selfheal passes, each within ${GOAL_RATIO}x its reference's total time`,
  met: (["healOpenAI", "healAnthropic"] as const).every(
    (client) =>
      passed(client) === passed("selfheal") &&
      ratioTo(client, YARDSTICK[client] ?? "reference") <= GOAL_RATIO,
  ),
  "bench wall s": round((performance.now() - benchStart) / 1000, 1),
});
report("failover", rows, summary, {
  settings: {
    attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
    callerDeadlineMs: DEADLINE_MS,
    cleanRefusalMs: CLEAN_REFUSAL_MS,
    returnToPrimaryWithinMs: RETURN_WITHIN_MS,
    reference: {
      maxAttempts: MAX_ATTEMPTS,
      retryAfterCapMs: RETRY_AFTER_CAP_MS,
      backoffMs: BACKOFF_MS,
      breakerConsecutiveFailures: BREAKER_THRESHOLD,
      breakerCooldownMs: BREAKER_COOLDOWN_MS,
    },
  },
  requests,
});

// docs/benchmarks.md's tables: one line per scenario, clients side by side.
const cell = (r: Row | undefined) =>
  r
    ? `${r.verdict}${r.pass ? "" : " (FAIL)"} | ${r["primary reqs"]}/${r["fallback reqs"]} | ${r["wall s"]}`
    : "| |";
for (const group of [
  ["selfheal", "reference"],
  ["healOpenAI", "healAnthropic", "reference/anthropic"],
] as const) {
  console.log(`\n| scenario | expected | ${group.map((c) => `${c} | p/f | s`).join(" | ")} |`);
  console.log(`| --- | --- | ${group.map(() => "--- | --- | ---").join(" | ")} |`);
  for (const scenario of SCENARIOS) {
    const find = (client: ClientName) =>
      rows.find((row) => row.scenario === scenario.name && row.client === client);
    console.log(
      `| ${scenario.name} | ${scenario.expected} | ${group.map((c) => cell(find(c))).join(" | ")} |`,
    );
  }
}
