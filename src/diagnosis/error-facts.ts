/**
 * What the rules look at, read once from whatever was thrown: HTTP status, error codes and
 * names, the wait the server asked for, and the text. Knows the shapes that common clients
 * throw:
 * - OpenAI, Anthropic SDKs: `status`, `headers` (a `Headers`), the parsed body in `error`
 *   (OpenAI: `{ message, type, code }`; Anthropic: `{ type: "error", error: { type, message,
 *   details: { error_code } } }`), `code`/`type`/`errorCode` on the error itself.
 * - Google GenAI SDK: `ApiError` with `status` and the JSON body as its message (parsed).
 * - Vercel AI SDK: `APICallError` (`statusCode`, `responseHeaders` as an object, `responseBody`).
 * - fetch: `HttpResponseError` (`status`, `headers`, `error`, `body`); undici's `fetch failed`
 *   and `terminated` with the socket error as `cause`.
 * - axios: `code` (ERR_BAD_RESPONSE, ECONNABORTED, ECONNRESET…), `response.status`,
 *   `response.headers`, `response.data` (object or JSON text).
 * - got, ky: `response.statusCode`/`status`, `response.headers`, `response.body` or `data`.
 * - Node and undici errors (`code`: ECONNREFUSED, UND_ERR_SOCKET…), AWS SDK (`$metadata`),
 *   `cause` chains and AggregateError's `errors`.
 *
 * Bounded: at most MAX_ERRORS errors read, MAX_DEPTH deep, bodies parsed only when short, every
 * text cut, so a hostile error costs no more than a plain one.
 */

/** Longest text the message rules see: bounded input keeps every regex fast on hostile errors. */
export const MAX_MATCH_TEXT = 4 * 1024;
/** How deep `cause` chains and AggregateError members are followed. */
const MAX_DEPTH = 4;
/** Most errors read in all: the thrown one, its causes, the members of an AggregateError. */
const MAX_ERRORS = 12;
/** Most members of one AggregateError read. */
const MAX_MEMBERS = 4;
/** Longest body text parsed as JSON (error bodies are short; junk is not). */
const MAX_JSON = 16 * 1024;
/** Most headers kept from one error. */
const MAX_HEADERS = 128;
/** Most entries of a Google `details` list read. */
const MAX_DETAILS = 8;
/** Longest header value or duration read. */
const MAX_VALUE = 64;
/** Longest code or name kept. */
const MAX_CODE = 128;

export interface ErrorFacts {
  /** HTTP status, when the error carries one. */
  status: number | undefined;
  /**
   * Error codes and types, lower-cased: `rate_limit_exceeded`, `econnreset`,
   * `resource_exhausted`, Anthropic's `details.error_code`, Google's `details[].reason`.
   */
  codes: string[];
  /** Error class names: `RateLimitError`, `AbortError`, `TimeoutError`. */
  names: string[];
  /** Header names present, lower-cased. */
  headers: string[];
  /**
   * The wait the server asked for, ms: `retry-after-ms`, else `Retry-After` (seconds or an HTTP
   * date), else Google's `RetryInfo.retryDelay` in the body, else, on a 429 only, OpenAI's
   * `x-ratelimit-reset-requests` / `-tokens` (the limit that ran out; the later one when unsure).
   */
  retryAfterMs: number | undefined;
  /** Messages of the error, its body and its causes, joined and cut to MAX_MATCH_TEXT. */
  text: string;
}

type Bag = Record<string, unknown>;

/** What one pass over an error gathers before the facts are settled. */
interface Reading {
  facts: ErrorFacts;
  texts: string[];
  textLength: number;
  now: number;
  /** From `retry-after-ms` / `Retry-After`: the server's own instruction. */
  retryAfter: number | undefined;
  /** Google `RetryInfo.retryDelay`. */
  retryInfo: number | undefined;
  /** `x-ratelimit-reset-*`: honoured on a 429 only (they come on every response). */
  limitReset: number | undefined;
}

function isBag(value: unknown): value is Bag {
  return typeof value === "object" && value !== null;
}

/** One property, or undefined when reading it throws (hostile getters, revoked proxies). */
function get(value: unknown, key: string): unknown {
  if (!isBag(value)) return undefined;
  try {
    return value[key];
  } catch {
    return undefined;
  }
}

function asStatus(value: unknown): number | undefined {
  const n = typeof value === "string" && /^\d{3}$/.test(value) ? Number(value) : value;
  return typeof n === "number" && Number.isInteger(n) && n >= 100 && n <= 599 ? n : undefined;
}

function pushString(into: string[], value: unknown): void {
  if (typeof value === "string" && value !== "" && value.length <= MAX_CODE)
    into.push(value.toLowerCase());
}

function addText(r: Reading, value: unknown): void {
  if (typeof value !== "string" || value === "" || r.textLength >= MAX_MATCH_TEXT) return;
  const text = value.slice(0, MAX_MATCH_TEXT);
  r.texts.push(text);
  r.textLength += text.length + 3;
}

// ---- durations and headers ---------------------------------------------------------------

const UNIT_MS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1_000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  ns: 0.000001,
};
/** One `<number><unit>` of a Go duration ("6m0s", "20ms") or a protobuf Duration ("7s"). */
const DURATION_PART = /(\d{1,12}(?:\.\d{1,12})?)(ms|us|µs|ns|h|m|s)/y;
const SECONDS = /^\d{1,12}(?:\.\d{1,12})?$/;

/**
 * A wait in ms from "7s", "1.5s", "6m0s", "20ms", bare seconds ("2"), or a protobuf Duration
 * object (`{ seconds, nanos }`); undefined when it is none of these.
 */
export function parseDuration(value: unknown): number | undefined {
  if (isBag(value)) {
    const seconds = Number(get(value, "seconds") ?? 0);
    const nanos = Number(get(value, "nanos") ?? 0);
    const ms = seconds * 1000 + nanos / 1e6;
    return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
  }
  if (typeof value !== "string" || value.length > MAX_VALUE) return undefined;
  const text = value.trim();
  if (text === "") return undefined;
  if (SECONDS.test(text)) return Number(text) * 1000;
  let total = 0;
  for (let at = 0; at < text.length;) {
    DURATION_PART.lastIndex = at;
    const part = DURATION_PART.exec(text);
    if (!part) return undefined;
    total += Number(part[1]) * (UNIT_MS[part[2] ?? ""] ?? NaN);
    at = DURATION_PART.lastIndex;
  }
  return Number.isFinite(total) ? total : undefined;
}

/**
 * Reads a `Headers`, a `Map`, AxiosHeaders or a plain object into lower-cased names and values
 * (values cut to MAX_VALUE), at most MAX_HEADERS of them.
 */
function readHeaders(headers: unknown): Map<string, string> | undefined {
  if (!isBag(headers) || Array.isArray(headers)) return undefined;
  const values = new Map<string, string>();
  const add = (value: unknown, key: unknown) => {
    if (typeof key !== "string" || values.size >= MAX_HEADERS) return;
    const text = Array.isArray(value) ? "" : String(value);
    values.set(key.toLowerCase(), text.slice(0, MAX_VALUE));
  };
  const forEach = get(headers, "forEach");
  if (typeof forEach === "function") {
    (forEach as (cb: (value: unknown, key: unknown) => void) => void).call(headers, add);
  } else {
    let n = 0;
    for (const key in headers) {
      if (n++ >= MAX_HEADERS) break;
      if (Object.hasOwn(headers, key)) add(get(headers, key), key);
    }
  }
  return values;
}

/** `retry-after-ms` (OpenAI), else `Retry-After` as seconds or an HTTP date. */
function retryAfter(headers: Map<string, string>, now: number): number | undefined {
  const ms = headers.get("retry-after-ms")?.trim();
  if (ms && SECONDS.test(ms)) return Number(ms);
  const value = headers.get("retry-after")?.trim();
  if (!value) return undefined;
  if (SECONDS.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * OpenAI's `x-ratelimit-reset-requests` / `-tokens` ("1s", "6m0s", "20ms"): the reset of the
 * limit that ran out (its `x-ratelimit-remaining-*` is 0), else of those not known to have room,
 * the later one.
 */
function rateLimitReset(headers: Map<string, string>): number | undefined {
  let spent: number | undefined;
  let any: number | undefined;
  for (const kind of ["requests", "tokens"]) {
    const reset = parseDuration(headers.get(`x-ratelimit-reset-${kind}`));
    if (reset === undefined) continue;
    any = Math.max(any ?? 0, reset);
    const remaining = headers.get(`x-ratelimit-remaining-${kind}`);
    if (remaining === undefined || Number(remaining) <= 0) spent = Math.max(spent ?? 0, reset);
  }
  return spent ?? any;
}

// ---- bodies --------------------------------------------------------------------------------

/** Parses a body text that is a JSON object; undefined for anything else or anything long. */
function parseJsonObject(text: string): Bag | undefined {
  if (text.length > MAX_JSON) return undefined;
  const start = text.trimStart();
  if (!start.startsWith("{")) return undefined;
  try {
    return JSON.parse(start) as Bag; // JSON that starts with "{" is an object
  } catch {
    return undefined;
  }
}

/** Google's `details`: ErrorInfo `reason` as a code, RetryInfo `retryDelay` as the wait. */
function readDetails(details: readonly unknown[], r: Reading): void {
  for (const detail of details.slice(0, MAX_DETAILS)) {
    pushString(r.facts.codes, get(detail, "reason"));
    const type = get(detail, "@type");
    if (typeof type === "string" && type.endsWith("RetryInfo"))
      r.retryInfo ??= parseDuration(get(detail, "retryDelay"));
  }
}

/**
 * An error body: `{ error: { … } }` or the error object itself. Codes from `code`, `type`,
 * `status` (Google: RESOURCE_EXHAUSTED), `error_code`, `details`; the text from `message`.
 */
function readBody(body: Bag, r: Reading, depth: number): void {
  const facts = r.facts;
  const code = get(body, "code");
  const status = get(body, "status");
  if (typeof code === "number") facts.status ??= asStatus(code);
  else pushString(facts.codes, code);
  if (typeof status === "number") facts.status ??= asStatus(status);
  else pushString(facts.codes, status);
  pushString(facts.codes, get(body, "type"));
  pushString(facts.codes, get(body, "error_code"));
  const details = get(body, "details");
  if (Array.isArray(details)) readDetails(details, r);
  else pushString(facts.codes, get(details, "error_code")); // Anthropic
  addText(r, get(body, "message"));
  const inner = get(body, "error");
  if (isBag(inner) && depth < 2) readBody(inner, r, depth + 1);
  else addText(r, inner); // `{ "error": "Rate limit exceeded" }`
}

/** A body as a client hands it over: an object, or its text (parsed when it is JSON). */
function readBodyValue(value: unknown, r: Reading): boolean {
  if (typeof value === "string") {
    const parsed = parseJsonObject(value);
    if (parsed) readBody(parsed, r, 0);
    else addText(r, value);
    return parsed !== undefined;
  }
  // Buffers, streams and arrays are not error bodies we can read without cost.
  if (!isBag(value) || Array.isArray(value) || ArrayBuffer.isView(value)) return false;
  if (typeof get(value, "pipe") === "function" || typeof get(value, "getReader") === "function")
    return false;
  readBody(value, r, 0);
  return true;
}

// ---- errors --------------------------------------------------------------------------------

function readOne(error: unknown, r: Reading): void {
  if (typeof error === "string") {
    addText(r, error);
    return;
  }
  const facts = r.facts;
  const response = get(error, "response"); // axios, got, ky
  const status =
    asStatus(get(error, "status")) ??
    asStatus(get(error, "statusCode")) ??
    asStatus(get(response, "status")) ??
    asStatus(get(response, "statusCode")) ??
    asStatus(get(get(error, "$metadata"), "httpStatusCode"));
  facts.status ??= status;

  pushString(facts.codes, get(error, "code"));
  pushString(facts.codes, get(error, "type"));
  pushString(facts.codes, get(error, "errorCode")); // Anthropic: details.error_code

  pushString(facts.names, get(error, "name"));
  const ctor = get(error, "constructor");
  if (typeof ctor === "function" && ctor !== Object) pushString(facts.names, ctor.name);

  // The AI SDK's APICallError keeps them as `responseHeaders`, a plain object.
  const headers = readHeaders(
    get(error, "headers") ?? get(response, "headers") ?? get(error, "responseHeaders"),
  );
  if (headers) {
    facts.headers.push(...headers.keys());
    r.retryAfter ??= retryAfter(headers, r.now);
    r.limitReset ??= rateLimitReset(headers);
  }

  const message = get(error, "message");
  addText(r, message);

  // The body: the SDKs' parsed `error`, axios' `response.data`, got's `response.body`, a fetch
  // wrapper's `body`, ky's `data`; else Google's ApiError, whose message is the JSON body.
  const parsed = get(error, "error");
  let found = isBag(parsed) && !Array.isArray(parsed);
  if (found) readBody(parsed as Bag, r, 0);
  for (const value of [get(response, "data"), get(response, "body"), get(error, "data")])
    if (readBodyValue(value, r)) found = true;
  // A fetch wrapper's `body`; the AI SDK's raw `responseBody` text.
  for (const body of [get(error, "body"), get(error, "responseBody")])
    if (!found && body !== undefined && readBodyValue(body, r)) found = true;
  const details = get(error, "errorDetails"); // @google/generative-ai
  if (Array.isArray(details)) readDetails(details, r);
  if (!found && status !== undefined && typeof message === "string") {
    const json = parseJsonObject(googleStreamBody(message) ?? message);
    if (json) readBody(json, r, 0);
  }
}

/**
 * @google/genai's error for a failure inside a stream: `got status: RESOURCE_EXHAUSTED. {json}`,
 * its body after the status; undefined for any other message.
 */
function googleStreamBody(message: string): string | undefined {
  if (!message.startsWith("got status: ")) return undefined;
  const at = message.indexOf("{");
  return at === -1 ? undefined : message.slice(at);
}

/**
 * The errors to read next: the cause, then the first members of an AggregateError (undefined
 * and null among them are skipped by the caller).
 */
function children(error: unknown): unknown[] {
  const members = get(error, "errors");
  const first: unknown[] = Array.isArray(members) ? members.slice(0, MAX_MEMBERS) : [];
  return [get(error, "cause"), ...first];
}

/**
 * Reads the facts of any thrown value, the outermost error first (its status and wait win).
 * Never throws: a hostile getter or a Proxy loses the facts it guards, not the diagnosis.
 */
export function readErrorFacts(error: unknown, now: number): ErrorFacts {
  const r: Reading = {
    facts: {
      status: undefined,
      codes: [],
      names: [],
      headers: [],
      retryAfterMs: undefined,
      text: "",
    },
    texts: [],
    textLength: 0,
    now,
    retryAfter: undefined,
    retryInfo: undefined,
    limitReset: undefined,
  };
  const queue: { error: unknown; depth: number }[] = [{ error, depth: 0 }];
  const seen = new Set<unknown>();
  for (let i = 0; i < queue.length && seen.size < MAX_ERRORS; i++) {
    const { error: current, depth } = queue[i] as { error: unknown; depth: number };
    if (current === undefined || current === null || seen.has(current)) continue;
    seen.add(current);
    try {
      readOne(current, r);
      if (depth < MAX_DEPTH)
        for (const child of children(current)) queue.push({ error: child, depth: depth + 1 });
    } catch {
      // Keep what was read before the hostile property.
    }
  }
  const facts = r.facts;
  facts.retryAfterMs =
    r.retryAfter ?? r.retryInfo ?? (facts.status === 429 ? r.limitReset : undefined);
  facts.text = r.texts.join(" | ").slice(0, MAX_MATCH_TEXT);
  return facts;
}
