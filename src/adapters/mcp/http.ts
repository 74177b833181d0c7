import { AsyncLocalStorage } from "node:async_hooks";
import { SelfHealConfigError } from "../../index.js";

/** The fetch both SDKs' HTTP client transports take as their `fetch` option. */
export type McpFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** A refused HTTP response of an attempt: its status and rate-limit headers. */
export interface HttpFailure {
  readonly status: number;
  readonly headers: Record<string, string>;
}

/** One attempt of a healed call, as `mcpFetch` sees it from inside the transport. */
interface HttpAttempt {
  /** The MCP tool it calls: a response is this attempt's only if its request calls it. */
  readonly tool: string;
  failure: HttpFailure | undefined;
}

/**
 * The attempt whose request the transport is sending. The transport's `send` runs inside the
 * client's `callTool`, so the attempt that called it is the one in this async context.
 */
const attempts = new AsyncLocalStorage<HttpAttempt>();

/** Longest request body read to tell whose request a refused response answers. */
const MAX_BODY = 256 * 1024;
/** The headers kept from a refused response: what tells the wait, nothing else. */
const KEPT_HEADER = /^(?:retry-after(?:-ms)?|x-ratelimit-.+|ratelimit(?:-.+)?)$/;
const MAX_HEADERS = 16;

/** Runs one attempt of `tool` so that `mcpFetch` can record the response that refused it. */
export function inHttpAttempt<T>(
  tool: string,
  run: () => T,
): { result: T; failure: () => HttpFailure | undefined } {
  const attempt: HttpAttempt = { tool, failure: undefined };
  const result = attempts.run(attempt, run);
  return { result, failure: () => attempt.failure };
}

/** Whether a request body (one JSON-RPC message, or a batch) calls `tool`. */
function callsTool(body: unknown, tool: string): boolean {
  if (typeof body !== "string" || body.length > MAX_BODY) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return false;
  }
  const messages: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
  return messages.some((m) => {
    if (typeof m !== "object" || m === null) return false;
    const { method, params } = m as { method?: unknown; params?: { name?: unknown } };
    return method === "tools/call" && params?.name === tool;
  });
}

function keptHeaders(headers: Headers): Record<string, string> {
  const kept: Record<string, string> = {};
  let n = 0;
  headers.forEach((value, name) => {
    const key = name.toLowerCase();
    if (n < MAX_HEADERS && KEPT_HEADER.test(key)) {
      kept[key] = value;
      n++;
    }
  });
  return kept;
}

/**
 * A `fetch` for the MCP SDK's Streamable HTTP client transport (`new
 * StreamableHTTPClientTransport(url, { fetch: mcpFetch() })`, 1.x and v2 alike) that lets a
 * healed client see the HTTP response behind a failed `tools/call`: the SDKs' HTTP errors keep
 * the status but no headers, so without it a 429's `Retry-After` is lost and the retry waits
 * selfheal's default. It records the status and the rate-limit headers (`Retry-After`,
 * `retry-after-ms`, `x-ratelimit-*`, `RateLimit-*`) of a refused `tools/call` request for the
 * attempt that sent it, and changes nothing else: the transport gets the response untouched,
 * and the caller the SDK's own error. `fetch` is the one to call (default: the global `fetch`,
 * read on each request).
 */
export function mcpFetch(fetch?: McpFetch): McpFetch {
  if (fetch !== undefined && typeof fetch !== "function")
    throw new SelfHealConfigError("mcpFetch(fetch)", "expected a fetch function");
  return async (url, init) => {
    const response = await (fetch ?? globalThis.fetch)(url, init);
    if (!response.ok) {
      const attempt = attempts.getStore();
      if (attempt !== undefined && callsTool(init?.body, attempt.tool))
        attempt.failure = { status: response.status, headers: keptHeaders(response.headers) };
    }
    return response;
  };
}
