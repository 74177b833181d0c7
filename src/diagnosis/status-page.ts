import type { Clock } from "../clock.js";

/** What a status page said: `degraded` only on a clear, parsed incident indicator. */
export type StatusPageState = "operational" | "degraded" | "unknown";

export interface StatusPageOptions {
  clock: Clock;
  /** Per request, ms (default 2000). */
  timeoutMs?: number;
  /** How long an answer is reused, ms (default 30 s). */
  cacheMs?: number;
  /** Default global fetch; injectable for environments without one. */
  fetch?: typeof fetch;
}

export const DEFAULT_STATUS_PAGE_TIMEOUT_MS = 2_000;
export const DEFAULT_STATUS_PAGE_CACHE_MS = 30_000;

interface Entry {
  state: StatusPageState;
  at: number;
}

/**
 * Reads Atlassian Statuspage v2 pages (`/api/v2/status.json`, used by OpenAI, Anthropic and
 * most SaaS providers): `status.indicator` other than `none` means degraded.
 *
 * A page that is down, slow or returns junk says `unknown`, which counts as healthy: a broken
 * status page must never turn an ordinary timeout into an outage. Answers are cached, and
 * concurrent diagnoses share one request (single flight).
 */
export class StatusPageClient {
  private readonly cache = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<StatusPageState>>();
  private readonly timeoutMs: number;
  private readonly cacheMs: number;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: StatusPageOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_STATUS_PAGE_TIMEOUT_MS;
    this.cacheMs = options.cacheMs ?? DEFAULT_STATUS_PAGE_CACHE_MS;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** The page's state, from cache when fresh. `base` is the page's root URL. */
  state(base: string): Promise<StatusPageState> {
    const now = this.options.clock.now();
    const cached = this.cache.get(base);
    if (cached && now - cached.at < this.cacheMs) return Promise.resolve(cached.state);
    let pending = this.inflight.get(base);
    if (!pending) {
      pending = this.request(base).then((state) => {
        this.cache.set(base, { state, at: this.options.clock.now() });
        this.inflight.delete(base);
        return state;
      });
      this.inflight.set(base, pending);
    }
    return pending;
  }

  private async request(base: string): Promise<StatusPageState> {
    // Own controller and timer, referenced until settled (AbortSignal.timeout can be GC'd on Node 20).
    const controller = new AbortController();
    const cancel = this.options.clock.setTimer(this.timeoutMs, () => {
      controller.abort(new Error(`status page ${base} did not answer within ${this.timeoutMs} ms`));
    });
    try {
      const url = new URL("api/v2/status.json", base.endsWith("/") ? base : `${base}/`);
      const response = await this.fetch(url, {
        signal: controller.signal,
        headers: { accept: "application/json" },
      });
      if (!response.ok) return "unknown";
      const body = (await response.json()) as { status?: { indicator?: unknown } };
      const indicator = body.status?.indicator;
      if (typeof indicator !== "string") return "unknown";
      return indicator === "none" ? "operational" : "degraded";
    } catch {
      return "unknown";
    } finally {
      cancel();
    }
  }
}
