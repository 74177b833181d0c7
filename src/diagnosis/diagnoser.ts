import type { Clock } from "../clock.js";
import { NON_RETRYABLE_PATTERNS, type Pattern } from "../telemetry/conventions.js";
import { readErrorFacts, type ErrorFacts } from "./error-facts.js";
import { DEFAULT_CHAINS, matchesFacts, type CompiledRule, type PlanStep } from "./rules.js";
import type { StatusPageClient, StatusPageState } from "./status-page.js";

/** Below this confidence selfheal does not act on a diagnosis: the original error is rethrown. */
export const MIN_ACTIONABLE_CONFIDENCE = 0.5;

export type Evidence = "structured" | "wording" | "none";

/**
 * Patterns where the route answered: it refused the request for what it is (4xx) or asked to
 * slow down (throttling is not an outage). They say nothing about the route's health.
 */
export const ROUTE_ANSWERED: ReadonlySet<Pattern> = new Set([
  "RATE_LIMIT",
  "BAD_REQUEST",
  "CONTEXT_LENGTH",
  "CONTENT_POLICY",
]);

/** Whether a diagnosis is evidence that its route is unwell (what breakers may act on). */
export const isRouteFault = (d: Diagnosis): boolean =>
  d.evidence === "structured" && !ROUTE_ANSWERED.has(d.pattern);

/** What went wrong, and what to do about it. Deterministic: the same error gives the same answer. */
export interface Diagnosis {
  pattern: Pattern;
  /** 0..1; 0 for UNKNOWN. */
  confidence: number;
  /** Name of the rule that matched; `none` for UNKNOWN. */
  rule: string;
  /** The recovery chain, in order (may be empty: the error is passed on). */
  strategies: readonly PlanStep[];
  cooldownMs: number;
  /** False for patterns that must never be retried on the same route. */
  retryable: boolean;
  /** Confidence reaches MIN_ACTIONABLE_CONFIDENCE. */
  actionable: boolean;
  /**
   * What the diagnosis rests on: `structured` (status, code, class, header, status page) may
   * act beyond the call (breakers, cooldowns, read-only mode, pages); `wording` (a message
   * regex alone) may only shape this call's own retries; `none` for UNKNOWN.
   */
  evidence: Evidence;
  /** From `retry-after-ms` / `Retry-After`, for the backoff. */
  retryAfterMs: number | undefined;
  /** HTTP status of the error, when it had one. */
  status: number | undefined;
  /** What the status page said, when a rule asked it. */
  statusPage: StatusPageState | undefined;
}

/** Where the error happened: picks the status page to consult. */
export interface DiagnoseContext {
  tool: string;
  provider?: string | undefined;
}

export interface DiagnoserOptions {
  rules: readonly CompiledRule[];
  clock: Clock;
  /** Status page root URL by tool name or provider name. */
  statusPages: Readonly<Record<string, string>>;
  statusPageClient: StatusPageClient;
}

const UNKNOWN: Omit<Diagnosis, "retryAfterMs" | "status" | "statusPage"> = {
  pattern: "UNKNOWN",
  confidence: 0,
  rule: "none",
  strategies: DEFAULT_CHAINS.UNKNOWN,
  cooldownMs: 0,
  retryable: true,
  actionable: false,
  evidence: "none",
};

/**
 * Classifies errors with an ordered rule table: the first matching rule decides. No LLM on this
 * path. The status page is read only when a rule that needs it has matched on everything else,
 * so the common path (a 429) never waits on the network.
 */
export class Diagnoser {
  constructor(private readonly options: DiagnoserOptions) {}

  async diagnose(error: unknown, context: DiagnoseContext): Promise<Diagnosis> {
    const facts = readErrorFacts(error, this.options.clock.now());
    let statusPage: StatusPageState | undefined;
    for (const rule of this.options.rules) {
      for (const matcher of rule.matchers) {
        if (!matchesFacts(matcher, facts)) continue;
        if (matcher.statusPageDegraded) {
          statusPage ??= await this.statusPage(context);
          if (statusPage !== "degraded") continue;
        }
        return this.result(rule, matcher.structured, facts, statusPage);
      }
    }
    return { ...UNKNOWN, retryAfterMs: facts.retryAfterMs, status: facts.status, statusPage };
  }

  private result(
    rule: CompiledRule,
    structured: boolean,
    facts: ErrorFacts,
    statusPage: StatusPageState | undefined,
  ): Diagnosis {
    return {
      pattern: rule.pattern,
      confidence: rule.confidence,
      rule: rule.name,
      strategies: rule.strategies,
      cooldownMs: rule.cooldownMs,
      retryable: !NON_RETRYABLE_PATTERNS.includes(rule.pattern),
      actionable: rule.confidence >= MIN_ACTIONABLE_CONFIDENCE,
      evidence: structured ? "structured" : "wording",
      retryAfterMs: facts.retryAfterMs,
      status: facts.status,
      statusPage,
    };
  }

  /** `unknown` when no page is configured for the tool or its provider. */
  private statusPage(context: DiagnoseContext): Promise<StatusPageState> {
    const pages = this.options.statusPages;
    const url =
      (Object.hasOwn(pages, context.tool) ? pages[context.tool] : undefined) ??
      (context.provider !== undefined && Object.hasOwn(pages, context.provider)
        ? pages[context.provider]
        : undefined);
    return url === undefined
      ? Promise.resolve("unknown")
      : this.options.statusPageClient.state(url);
  }
}
