/**
 * What the rules look at, read once from whatever was thrown: HTTP status, error codes and
 * names, Retry-After, and the text. Knows the shapes of the errors the official OpenAI,
 * Anthropic and Google SDKs throw, of fetch/undici and Node network errors, AWS SDK and axios.
 */

/** Longest text the message rules see: bounded input keeps every regex fast on hostile errors. */
export const MAX_MATCH_TEXT = 4 * 1024;
/** How deep `cause` chains are followed. */
const MAX_CAUSE_DEPTH = 3;

export interface ErrorFacts {
  /** HTTP status, when the error carries one. */
  status: number | undefined;
  /** Error codes and types, lower-cased: `rate_limit_exceeded`, `econnreset`, `resource_exhausted`. */
  codes: string[];
  /** Error class names: `RateLimitError`, `AbortError`, `TimeoutError`. */
  names: string[];
  /** Header names present, lower-cased. */
  headers: string[];
  /** From `retry-after-ms`, or `Retry-After` seconds or HTTP date, when present. */
  retryAfterMs: number | undefined;
  /** Messages of the error, its body and its causes, joined and cut to MAX_MATCH_TEXT. */
  text: string;
}

type Bag = Record<string, unknown>;

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

/** Reads a header from a `Headers`, a `Map` or a plain object, case-insensitively. */
function headerReader(
  headers: unknown,
): { names: string[]; get(name: string): string | undefined } | undefined {
  if (!isBag(headers)) return undefined;
  const entries: [string, string][] = [];
  if (typeof (headers as { forEach?: unknown }).forEach === "function" && !Array.isArray(headers)) {
    (headers as { forEach(cb: (value: unknown, key: unknown) => void): void }).forEach(
      (value, key) => {
        if (typeof key === "string") entries.push([key.toLowerCase(), String(value)]);
      },
    );
  } else {
    for (const [key, value] of Object.entries(headers))
      entries.push([key.toLowerCase(), String(value)]);
  }
  const map = new Map(entries);
  return { names: [...map.keys()], get: (name) => map.get(name) };
}

/** `retry-after-ms` (OpenAI), else `Retry-After` as seconds or an HTTP date. */
function retryAfter(read: ReturnType<typeof headerReader>, now: number): number | undefined {
  if (!read) return undefined;
  const ms = Number(read.get("retry-after-ms"));
  if (read.get("retry-after-ms") !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const value = read.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function pushString(into: string[], value: unknown): void {
  if (typeof value === "string" && value !== "" && value.length <= 128)
    into.push(value.toLowerCase());
}

/**
 * Reads the facts of any thrown value. Never throws: a hostile getter or a Proxy loses the
 * facts it guards, not the diagnosis.
 */
export function readErrorFacts(error: unknown, now: number): ErrorFacts {
  const facts: ErrorFacts = {
    status: undefined,
    codes: [],
    names: [],
    headers: [],
    retryAfterMs: undefined,
    text: "",
  };
  const texts: string[] = [];
  let current: unknown = error;
  for (
    let depth = 0;
    depth <= MAX_CAUSE_DEPTH && current !== undefined && current !== null;
    depth++
  ) {
    try {
      readOne(current, facts, texts, now);
    } catch {
      // Keep what was read before the hostile property.
    }
    current = get(current, "cause");
  }
  facts.text = texts.join(" | ").slice(0, MAX_MATCH_TEXT);
  return facts;
}

function readOne(error: unknown, facts: ErrorFacts, texts: string[], now: number): void {
  if (typeof error === "string") {
    texts.push(error.slice(0, MAX_MATCH_TEXT));
    return;
  }
  if (!isBag(error)) return;
  const body = get(error, "error"); // OpenAI/Anthropic SDKs: the parsed error body
  const response = get(error, "response"); // axios, some fetch wrappers
  facts.status ??=
    asStatus(get(error, "status")) ??
    asStatus(get(error, "statusCode")) ??
    asStatus(get(response, "status")) ??
    asStatus(get(get(error, "$metadata"), "httpStatusCode")) ??
    asStatus(get(body, "code"));

  pushString(facts.codes, get(error, "code"));
  pushString(facts.codes, get(error, "type"));
  pushString(facts.codes, get(body, "code"));
  pushString(facts.codes, get(body, "type"));
  pushString(facts.codes, get(body, "status")); // Google: RESOURCE_EXHAUSTED
  pushString(facts.codes, get(get(body, "error"), "type")); // Anthropic: { error: { type } }

  pushString(facts.names, get(error, "name"));
  const ctor = get(error, "constructor");
  if (typeof ctor === "function" && ctor !== Object) pushString(facts.names, ctor.name);

  const headers = headerReader(get(error, "headers") ?? get(response, "headers"));
  if (headers) {
    facts.headers.push(...headers.names);
    facts.retryAfterMs ??= retryAfter(headers, now);
  }

  for (const text of [get(error, "message"), get(body, "message"), get(error, "body")]) {
    if (typeof text === "string" && text !== "") texts.push(text.slice(0, MAX_MATCH_TEXT));
  }
}
