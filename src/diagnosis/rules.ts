import { SelfHealConfigError } from "../errors.js";
import { PATTERNS, STRATEGIES, type Pattern, type StrategyName } from "../telemetry/conventions.js";
import type { ErrorFacts } from "./error-facts.js";
import { compileLinear, MAX_MATCH_COST, type TextPattern } from "./linear-regex.js";

/**
 * What one rule looks for. Every field given must match (AND); a list matches when any of its
 * items does (OR). Codes and names compare lower-cased.
 */
export interface Matcher {
  /** HTTP status codes. */
  status?: readonly number[];
  /** Error codes or types: `rate_limit_exceeded`, `ECONNRESET`, `RESOURCE_EXHAUSTED`. */
  code?: readonly string[];
  /** Error class names: `RateLimitError`, `AbortError`. */
  name?: readonly string[];
  /**
   * Regexes over the error's text (message, body, causes; at most 4 KiB), run by a linear-time
   * engine (RE2 syntax: no lookaround, no backreferences; docs/diagnosis.md).
   */
  message?: readonly RegExp[];
  /** Header names that must be present, e.g. `retry-after`. */
  header?: readonly string[];
  /** Only while the tool's or provider's status page reports an incident. */
  statusPageDegraded?: true;
}

/**
 * One step of a recovery chain: a strategy, optionally with its number of attempts
 * (`{ strategy: "retry_with_longer_timeout", attempts: 2 }`).
 */
export type PlanStep = StrategyName | { strategy: StrategyName; attempts?: number };

/** The strategy of a plan step, with its attempts (undefined: the strategy's default). */
export function normalizeStep(step: PlanStep): {
  strategy: StrategyName;
  attempts: number | undefined;
} {
  return typeof step === "string"
    ? { strategy: step, attempts: undefined }
    : { strategy: step.strategy, attempts: step.attempts };
}

/** One row of the ordered rule table: the first rule that matches decides. */
export interface Rule {
  /** Stable id, written on the diagnosis span (ATTR_DIAGNOSIS_RULE). */
  name: string;
  pattern: Pattern;
  /** 0..1; below 0.5 selfheal does not act on the diagnosis and rethrows the original error. */
  confidence: number;
  /** Matches when any of the matchers matches. */
  match: Matcher | readonly Matcher[];
  /** Recovery chain to run, in order; default: the pattern's chain (DEFAULT_CHAINS). */
  strategies?: readonly PlanStep[];
  /**
   * How long other calls keep away from the failing route, ms, when the error carries no
   * Retry-After (which wins); default: the pattern's. Applied only on structured evidence.
   */
  cooldownMs?: number;
}

/**
 * Default recovery chain of each pattern. Non-retryable patterns never retry the same route.
 * Another route beats a longer wait: where a tool has a second provider, failover comes before
 * waiting; a step that cannot apply (no second provider, no time left) is skipped.
 */
export const DEFAULT_CHAINS: Record<Pattern, readonly PlanStep[]> = {
  RATE_LIMIT: [
    "retry_once",
    "failover_to_secondary",
    "exponential_backoff_with_jitter",
    "escalate_to_human",
  ],
  TIMEOUT: [
    "failover_to_secondary",
    { strategy: "retry_with_longer_timeout", attempts: 1 },
    "circuit_break",
    "escalate_to_human",
  ],
  SERVICE_DOWN: [
    "retry_once",
    "failover_to_secondary",
    "circuit_break",
    "degrade_to_readonly",
    "escalate_to_human",
  ],
  EMPTY_LLM_RESPONSE: ["exponential_backoff_with_jitter", "failover_to_secondary"],
  JSON_PARSE_ERROR: ["exponential_backoff_with_jitter", "failover_to_secondary"],
  AUTH: ["failover_to_secondary", "escalate_to_human"],
  BAD_REQUEST: [],
  CONTEXT_LENGTH: ["failover_to_secondary"],
  CONTENT_POLICY: [],
  // A stream that failed is retried or failed over whole (never continued from a prefill).
  // Another route first: the same one is likely still queued, stalled or cutting.
  STREAM_FIRST_TOKEN_TIMEOUT: ["failover_to_secondary", "retry_once", "escalate_to_human"],
  STREAM_STALLED: ["failover_to_secondary", "retry_once", "escalate_to_human"],
  STREAM_TRUNCATED: ["failover_to_secondary", "retry_once", "escalate_to_human"],
  // Run only under `recovery.unknown: "retry-once"` (the default), for calls that may run again.
  UNKNOWN: ["retry_once", "failover_to_secondary"],
};

/** Default cooldown of each pattern, ms: only throttling keeps other calls away for a while. */
export const DEFAULT_COOLDOWNS: Record<Pattern, number> = {
  RATE_LIMIT: 5_000,
  TIMEOUT: 0,
  SERVICE_DOWN: 0,
  EMPTY_LLM_RESPONSE: 0,
  JSON_PARSE_ERROR: 0,
  AUTH: 0,
  BAD_REQUEST: 0,
  CONTEXT_LENGTH: 0,
  CONTENT_POLICY: 0,
  STREAM_FIRST_TOKEN_TIMEOUT: 0,
  STREAM_STALLED: 0,
  STREAM_TRUNCATED: 0,
  UNKNOWN: 0,
};

const TIMEOUT_NAMES = [
  "AbortError",
  "TimeoutError",
  "ToolTimeoutError",
  "APIConnectionTimeoutError",
];
const TIMEOUT_CODES = [
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "ECONNABORTED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "SELFHEAL_TOOL_TIMEOUT",
  "DEADLINE_EXCEEDED",
];
const TIMEOUT_TEXT = /\btimed? ?out\b|\btimeout\b|deadline exceeded/i;
const TIMEOUT: readonly Matcher[] = [
  { name: TIMEOUT_NAMES },
  { code: TIMEOUT_CODES },
  { status: [408] },
  { message: [TIMEOUT_TEXT] },
];
const withStatusPage = (matchers: readonly Matcher[]): Matcher[] =>
  matchers.map((m) => ({ ...m, statusPageDegraded: true }));

/**
 * Spent quota or billing: the account cannot pay for the call, so no retry on any route of that
 * account helps and a person must act. Told by codes and classes, never by a status alone: a 429
 * may be Google's per-minute quota (RESOURCE_EXHAUSTED, the same wording, and it passes), a bare
 * 402 a declined card (Stripe), which is no outage of ours to page about.
 */
const QUOTA_CODES = [
  "insufficient_quota", // OpenAI, 429
  "billing_hard_limit_reached", // OpenAI
  "billing_not_active", // OpenAI, 429
  "billing_error", // Anthropic, 402
  "contract_spend_limit_reached", // Anthropic details.error_code, 429
  "enforced_spend_limit_reached", // Anthropic details.error_code, 429
  "linked_organization_spend_limit_reached", // Anthropic, 402
  "linked_organization_billing_unavailable", // Anthropic, 402
];
const QUOTA_NAMES = [
  "PaymentRequiredError",
  "ContractSpendLimitReachedError",
  "EnforcedSpendLimitReachedError",
  "LinkedOrganizationSpendLimitReachedError",
  "LinkedOrganizationBillingUnavailableError",
];

/** Gemini's finish and block reasons that say a content policy withheld the answer (lower case). */
export const GEMINI_CONTENT_POLICY: readonly string[] = [
  "safety",
  "prohibited_content",
  "blocklist",
  "spii",
  "image_safety",
  "image_prohibited_content",
  "jailbreak",
  "model_armor",
];

/**
 * The default rule table, most specific first. Status codes come before wording: a 400 that
 * says "maximum context length" is CONTEXT_LENGTH, so those rules precede BAD_REQUEST.
 */
export const DEFAULT_RULES: readonly Rule[] = [
  // A streamed call's own failures, measured by selfheal (structured evidence): first, so a cut
  // stream is told as one whatever its cause says (the cause is kept on the error).
  {
    // Finished by the provider's content filter (Anthropic: stop reason `refusal`; Gemini: a
    // content-policy finish or block reason): the same request is filtered again.
    name: "stream-content-filter",
    pattern: "CONTENT_POLICY",
    confidence: 0.95,
    match: {
      name: ["StreamTruncatedError"],
      code: ["content_filter", "content-filter", "refusal", ...GEMINI_CONTENT_POLICY],
    },
  },
  {
    name: "stream-truncated",
    pattern: "STREAM_TRUNCATED",
    confidence: 0.95,
    match: { code: ["SELFHEAL_STREAM_TRUNCATED"] },
  },
  {
    name: "stream-stalled",
    pattern: "STREAM_STALLED",
    confidence: 0.95,
    match: { code: ["SELFHEAL_STREAM_STALLED"] },
  },
  {
    name: "stream-first-token-timeout",
    pattern: "STREAM_FIRST_TOKEN_TIMEOUT",
    confidence: 0.95,
    match: { code: ["SELFHEAL_STREAM_FIRST_TOKEN_TIMEOUT"] },
  },
  {
    name: "quota-exhausted",
    pattern: "AUTH",
    confidence: 0.95,
    match: [
      { code: QUOTA_CODES },
      { name: QUOTA_NAMES },
      // Anthropic answers a spent credit balance with a plain 400 invalid_request_error: only
      // the wording tells it from a bad request, so the status and the type must agree too.
      {
        status: [400],
        code: ["invalid_request_error"],
        message: [/credit balance is too low/i],
      },
    ],
  },
  { name: "http-429", pattern: "RATE_LIMIT", confidence: 0.95, match: { status: [429] } },
  {
    // Some APIs throttle with another status (AWS: 400 ThrottlingException): the code tells.
    name: "rate-limit-code",
    pattern: "RATE_LIMIT",
    confidence: 0.9,
    match: [
      {
        code: [
          "rate_limit_exceeded",
          "rate_limit_error",
          "resource_exhausted",
          "ThrottlingException",
          "Throttling",
        ],
      },
      { name: ["ThrottlingException", "TooManyRequestsException", "RateLimitError"] },
    ],
  },
  {
    name: "auth",
    pattern: "AUTH",
    confidence: 0.95,
    match: [
      { status: [401, 403] },
      {
        code: [
          "invalid_api_key",
          "authentication_error",
          "permission_error",
          "unauthenticated",
          "permission_denied",
          "API_KEY_INVALID", // Google ErrorInfo reason, on a 400 INVALID_ARGUMENT
        ],
      },
      { name: ["AuthenticationError", "PermissionDeniedError"] },
      // Google answers a bad key with 400 INVALID_ARGUMENT: without its ErrorInfo, the wording.
      { message: [/api key not valid|invalid api key|incorrect api key|invalid x-api-key/i] },
    ],
  },
  {
    name: "context-length",
    pattern: "CONTEXT_LENGTH",
    confidence: 0.95,
    match: [
      { code: ["context_length_exceeded", "string_above_max_length"] },
      {
        message: [
          /maximum context length|context[ _]length[ _]exceeded|context window|prompt is too long|input is too long|too many (input )?tokens|exceeds the maximum number of tokens/i,
        ],
      },
    ],
  },
  {
    // 413: the request is too large for the route; another may take it (as a long context).
    name: "request-too-large",
    pattern: "CONTEXT_LENGTH",
    confidence: 0.9,
    match: [
      { status: [413] },
      { code: ["request_too_large", "request_body_too_large_after_decoding"] },
      { name: ["ContentTooLargeError", "RequestBodyTooLargeAfterDecodingError"] },
    ],
  },
  {
    name: "content-policy",
    pattern: "CONTENT_POLICY",
    confidence: 0.9,
    match: [
      { code: ["content_policy_violation", "content_filter", "safety", "invalid_prompt"] },
      {
        message: [
          /content[ _](management )?policy|content[ _]filter|flagged by (our|the) safety|blocked due to safety|rejected as a result of our safety system|flagged as potentially violating/i,
        ],
      },
    ],
  },
  {
    // 404: the model or resource is not there; the same request finds nothing again. Another
    // route may have it (a model name differs between providers).
    name: "not-found",
    pattern: "BAD_REQUEST",
    confidence: 0.9,
    match: [
      { status: [404] },
      { code: ["model_not_found", "not_found_error", "not_found"] },
      { name: ["NotFoundError"] },
    ],
    strategies: ["failover_to_secondary"],
  },
  {
    name: "http-400",
    pattern: "BAD_REQUEST",
    confidence: 0.9,
    match: [
      { status: [400, 422] },
      { name: ["BadRequestError", "UnprocessableEntityError"] },
      // The canonical code (gRPC, Google): selfheal/mcp gives it to JSON-RPC -32700/-32600/-32602.
      { code: ["INVALID_ARGUMENT"] },
    ],
  },
  {
    // A timeout while the upstream status page reports an incident is the service, not us.
    name: "timeout-during-incident",
    pattern: "SERVICE_DOWN",
    confidence: 0.9,
    match: withStatusPage(TIMEOUT),
  },
  {
    name: "http-5xx-unavailable",
    pattern: "SERVICE_DOWN",
    confidence: 0.9,
    match: [{ status: [502, 503, 504, 529] }, { code: ["overloaded_error", "unavailable"] }],
  },
  {
    name: "connection-failed",
    pattern: "SERVICE_DOWN",
    confidence: 0.85,
    match: [
      {
        code: [
          "ECONNREFUSED",
          "ECONNRESET",
          "EPIPE",
          "ENOTFOUND",
          "EAI_AGAIN",
          "EHOSTUNREACH",
          "ENETUNREACH",
          "ENETDOWN",
          "UND_ERR_SOCKET",
          "UND_ERR_CLOSED",
          "ERR_STREAM_PREMATURE_CLOSE",
        ],
      },
      { name: ["APIConnectionError"] },
      // axios: the connection dropped mid-body (its own fixed message, with its code).
      { code: ["ERR_BAD_RESPONSE"], message: [/stream has been aborted/i] },
      {
        message: [
          /socket hang up|other side closed|ECONNRESET|ECONNREFUSED|service unavailable|bad gateway|overloaded/i,
        ],
      },
    ],
  },
  { name: "timeout", pattern: "TIMEOUT", confidence: 0.9, match: TIMEOUT },
  {
    name: "http-500",
    pattern: "SERVICE_DOWN",
    confidence: 0.7,
    // Anthropic's `api_error` and OpenAI's `server_error` are their 500s' types; an `error`
    // event mid-stream carries the type and no status.
    match: [
      { status: [500] },
      { name: ["InternalServerError"] },
      { code: ["api_error", "server_error"] },
    ],
  },
  {
    name: "empty-response",
    pattern: "EMPTY_LLM_RESPONSE",
    confidence: 1,
    match: [{ code: ["SELFHEAL_EMPTY_RESPONSE"] }, { name: ["EmptyResponseError"] }],
  },
  {
    name: "json-parse",
    pattern: "JSON_PARSE_ERROR",
    confidence: 0.9,
    match: [
      { name: ["SyntaxError"], message: [/JSON|Unexpected (token|end)|position \d+/i] },
      {
        message: [
          /invalid json|malformed json|failed to parse (the )?(json|response)|not valid JSON/i,
        ],
      },
    ],
  },
  {
    name: "rate-limit-wording",
    pattern: "RATE_LIMIT",
    confidence: 0.85,
    match: {
      message: [
        /rate[ _-]?limit|too many requests|quota exceeded|exceeded (your|the) (current )?quota|resource (has been )?exhausted/i,
      ],
    },
  },
];

// ---- matching ------------------------------------------------------------------------------

/** A matcher with its lists turned into lower-cased sets, ready for the hot path. */
export interface CompiledMatcher {
  status?: ReadonlySet<number>;
  code?: ReadonlySet<string>;
  name?: ReadonlySet<string>;
  message?: readonly TextPattern[];
  header?: readonly string[];
  statusPageDegraded: boolean;
  /**
   * Whether a match rests on more than wording (a status, code, class, header or the status
   * page): only such evidence may act beyond the call itself.
   */
  structured: boolean;
}

export interface CompiledRule {
  name: string;
  pattern: Pattern;
  confidence: number;
  strategies: readonly PlanStep[];
  cooldownMs: number;
  matchers: readonly CompiledMatcher[];
}

const lower = (xs: readonly string[] | undefined) =>
  xs ? new Set(xs.map((x) => x.toLowerCase())) : undefined;

function anyIn(set: ReadonlySet<string>, values: readonly string[]): boolean {
  for (const v of values) if (set.has(v)) return true;
  return false;
}

/** Whether `m` matches, leaving out the status page condition. */
export function matchesFacts(m: CompiledMatcher, facts: ErrorFacts): boolean {
  if (m.status && (facts.status === undefined || !m.status.has(facts.status))) return false;
  if (m.code && !anyIn(m.code, facts.codes)) return false;
  if (m.name && !anyIn(m.name, facts.names)) return false;
  if (m.header && !m.header.every((h) => facts.headers.includes(h))) return false;
  if (m.message && !m.message.some((re) => re.test(facts.text))) return false;
  return true;
}

// ---- validation ----------------------------------------------------------------------------

/**
 * The regexes of the default table: they run on V8 (fast, and checked by recheck in the suite);
 * any other regex runs on the linear engine. Known by identity, so a default rule reused in a
 * table keeps its regexes on V8 and nothing a user builds does.
 */
export const BUILT_IN_REGEXES: ReadonlySet<RegExp> = new Set(
  DEFAULT_RULES.flatMap((rule) =>
    (Array.isArray(rule.match) ? rule.match : [rule.match]).flatMap(
      (m: Matcher) => m.message ?? [],
    ),
  ),
);

function check(condition: boolean, field: string, problem: string): asserts condition {
  if (!condition) throw new SelfHealConfigError(field, problem);
}

function stringList(value: unknown, field: string): void {
  check(
    Array.isArray(value) &&
      value.length > 0 &&
      value.every((v) => typeof v === "string" && v !== ""),
    field,
    "expected a non-empty list of strings",
  );
}

const MATCHER_KEYS = ["status", "code", "name", "message", "header", "statusPageDegraded"];

/** Cost per character of the user regexes compiled so far, against MAX_MATCH_COST. */
interface Budget {
  used: number;
}

/** A rule's regex as the matcher runs it: built-ins on V8, anything else on the linear engine. */
function userPattern(re: RegExp, field: string, budget: Budget): TextPattern {
  if (BUILT_IN_REGEXES.has(re)) return re;
  const linear = compileLinear(re);
  if ("reason" in linear) throw new SelfHealConfigError(field, `${linear.reason}: /${re.source}/`);
  budget.used += linear.cost;
  check(
    budget.used <= MAX_MATCH_COST,
    field,
    `the rules' regexes together cost ${budget.used} threads a character of an error's text, past the linear engine's bound of ${MAX_MATCH_COST} (which keeps a call under 10 ms on any error; docs/diagnosis.md): drop or merge rules`,
  );
  return linear.pattern;
}

function compileMatcher(value: unknown, field: string, budget: Budget): CompiledMatcher {
  check(
    typeof value === "object" && value !== null && !Array.isArray(value),
    field,
    "expected a matcher object",
  );
  const m = value as Record<string, unknown>;
  const keys = Object.keys(m);
  for (const key of keys)
    check(
      MATCHER_KEYS.includes(key),
      `${field}.${key}`,
      `unknown matcher field (known: ${MATCHER_KEYS.join(", ")})`,
    );
  check(
    keys.some((k) => k !== "statusPageDegraded"),
    field,
    "a matcher needs at least one of status, code, name, message, header",
  );
  if (m.status !== undefined) {
    check(
      Array.isArray(m.status) &&
        m.status.length > 0 &&
        m.status.every((s) => Number.isInteger(s) && (s as number) >= 100 && (s as number) <= 599),
      `${field}.status`,
      "expected a non-empty list of HTTP status codes",
    );
  }
  for (const key of ["code", "name", "header"] as const)
    if (m[key] !== undefined) stringList(m[key], `${field}.${key}`);
  if (m.message !== undefined) {
    check(
      Array.isArray(m.message) && m.message.length > 0,
      `${field}.message`,
      "expected a non-empty list of RegExp",
    );
    (m.message as unknown[]).forEach((re, i) => {
      check(
        re instanceof RegExp,
        `${field}.message[${i}]`,
        "expected a RegExp (a string is not compiled for you)",
      );
      check(
        !re.global && !re.sticky,
        `${field}.message[${i}]`,
        "the g and y flags make test() stateful; drop them",
      );
    });
  }
  check(
    m.statusPageDegraded === undefined || m.statusPageDegraded === true,
    `${field}.statusPageDegraded`,
    "expected true",
  );
  const compiled: CompiledMatcher = {
    statusPageDegraded: m.statusPageDegraded === true,
    structured: keys.some((k) => k !== "message"),
  };
  if (m.status) compiled.status = new Set(m.status as number[]);
  const code = lower(m.code as string[] | undefined);
  if (code) compiled.code = code;
  const name = lower(m.name as string[] | undefined);
  if (name) compiled.name = name;
  if (m.message)
    compiled.message = (m.message as RegExp[]).map((re, i) =>
      userPattern(re, `${field}.message[${i}]`, budget),
    );
  if (m.header) compiled.header = (m.header as string[]).map((h) => h.toLowerCase());
  return compiled;
}

/** Validates a recovery chain: known strategy names, optional whole `attempts` >= 1. */
export function checkPlan(plan: unknown, field: string): void {
  check(Array.isArray(plan), field, "expected a list of strategies");
  (plan as unknown[]).forEach((step, i) => {
    const name =
      typeof step === "object" && step !== null ? (step as { strategy?: unknown }).strategy : step;
    check(
      STRATEGIES.includes(name as StrategyName),
      `${field}[${i}]`,
      `unknown strategy ${JSON.stringify(name)} (known: ${STRATEGIES.join(", ")})`,
    );
    if (typeof step === "object" && step !== null) {
      for (const key of Object.keys(step))
        check(
          key === "strategy" || key === "attempts",
          `${field}[${i}].${key}`,
          "unknown step field (known: strategy, attempts)",
        );
      const attempts = (step as { attempts?: unknown }).attempts;
      check(
        attempts === undefined ||
          (Number.isInteger(attempts) && (attempts as number) >= 1 && (attempts as number) <= 100),
        `${field}[${i}].attempts`,
        "expected a whole number from 1 to 100",
      );
    }
  });
}

const RULE_KEYS = ["name", "pattern", "confidence", "match", "strategies", "cooldownMs"];

/** Validates a rule table and prepares it for matching; a bad rule is named in the error. */
export function compileRules(rules: unknown): CompiledRule[] {
  check(Array.isArray(rules), "diagnosis.rules", "expected a list of rules");
  const seen = new Set<string>();
  const budget: Budget = { used: 0 };
  return (rules as unknown[]).map((value, i) => {
    check(
      typeof value === "object" && value !== null,
      `diagnosis.rules[${i}]`,
      "expected a rule object",
    );
    const r = value as Record<string, unknown>;
    check(
      typeof r.name === "string" && r.name !== "",
      `diagnosis.rules[${i}].name`,
      "expected a non-empty string",
    );
    const field = `diagnosis.rules["${r.name}"]`;
    check(!seen.has(r.name), field, "two rules have this name");
    seen.add(r.name);
    for (const key of Object.keys(r))
      check(
        RULE_KEYS.includes(key),
        `${field}.${key}`,
        `unknown rule field (known: ${RULE_KEYS.join(", ")})`,
      );
    check(
      PATTERNS.includes(r.pattern as Pattern),
      `${field}.pattern`,
      `unknown pattern ${JSON.stringify(r.pattern)} (known: ${PATTERNS.join(", ")})`,
    );
    const pattern = r.pattern as Pattern;
    check(
      typeof r.confidence === "number" && r.confidence >= 0 && r.confidence <= 1,
      `${field}.confidence`,
      "expected a number from 0 to 1",
    );
    if (r.strategies !== undefined) checkPlan(r.strategies, `${field}.strategies`);
    if (r.cooldownMs !== undefined) {
      check(
        typeof r.cooldownMs === "number" && Number.isFinite(r.cooldownMs) && r.cooldownMs >= 0,
        `${field}.cooldownMs`,
        "expected a number of ms >= 0",
      );
    }
    const list = Array.isArray(r.match) ? (r.match as unknown[]) : [r.match];
    check(list.length > 0, `${field}.match`, "expected at least one matcher");
    const matchers = list.map((m, j) =>
      compileMatcher(m, Array.isArray(r.match) ? `${field}.match[${j}]` : `${field}.match`, budget),
    );
    return {
      name: r.name,
      pattern,
      confidence: r.confidence,
      strategies: (r.strategies as StrategyName[] | undefined) ?? DEFAULT_CHAINS[pattern],
      cooldownMs: r.cooldownMs ?? DEFAULT_COOLDOWNS[pattern],
      matchers,
    };
  });
}
