/**
 * The provider clients healed in one line, judged on the packed tarball: the scripts of
 * ./clients/ (one per API, each run by ./clients/harness.mjs in a project that installed the
 * tarball and the SDKs) print what every scenario came to, and `expected` says what the docs
 * promise for it: docs/clients/*.md, the chains of docs/diagnosis.md#default-chains-and-cooldowns
 * and the stream outcomes of docs/streams.md#what-the-reader-sees-by-afterfirsttoken.
 */

/** One API's script, what its SDK calls a finish cut at the token limit, its auth error's status. */
export interface ClientScript {
  /** The file in ./clients/. */
  file: string;
  /** The healed operation's tool name (`openai.chat`). */
  tool: string;
  /** The plain answer's finish when cut at the output token limit (`finish_length`). */
  truncatedFinish: string;
  /** The HTTP status of the API's answer to a bad key (Gemini's is a 400 INVALID_ARGUMENT). */
  authStatus: number;
}

export const CLIENT_SCRIPTS: readonly ClientScript[] = [
  { file: "openai-chat.mjs", tool: "openai.chat", truncatedFinish: "length", authStatus: 401 },
  {
    file: "openai-responses.mjs",
    tool: "openai.responses",
    truncatedFinish: "incomplete",
    authStatus: 401,
  },
  {
    file: "anthropic.mjs",
    tool: "anthropic.messages",
    truncatedFinish: "max_tokens",
    authStatus: 401,
  },
  {
    file: "google-genai.mjs",
    tool: "gemini.generate_content",
    truncatedFinish: "MAX_TOKENS",
    authStatus: 400,
  },
];

/** An error as harness.mjs describes it. */
export interface DescribedError {
  name: string;
  /** Made by the SDK (an instance of its base error class). */
  sdk?: boolean;
  code?: string;
  status?: number;
  pattern?: string;
  message: string;
  cause?: DescribedError;
}

/** What one scenario in one mode came to (harness.mjs prints a list of these). */
export interface ScenarioResult {
  client: string;
  scenario: string;
  mode: "plain" | "stream";
  answered: boolean;
  /** The answer's text: the plain answer's, or what the stream delivered (since a restart). */
  text: string;
  /** A plain answer's finish (finish_reason, status, stop_reason, finishReason). */
  finish?: string;
  error?: DescribedError;
  /** `onRestart` calls (`afterFirstToken: "restart"`). */
  restarts: number;
  /** Requests each fake provider received: the primary's base URL and the fallback route's. */
  requests: { primary: number; backup: number };
  /** The selfheal calls (`tool-call` events). */
  calls: { tool: string; outcome: string }[];
  /** The recoveries (`recovery` events): steps with `(skipped)` for those not run. */
  recoveries: {
    pattern: string;
    outcome: string;
    strategy?: string;
    provider?: string;
    steps: string[];
  }[];
}

/** Every scenario of harness.mjs in each of its modes, as `scenario/mode`. */
export const RUNS: readonly string[] = [
  "rate_limit/plain",
  "rate_limit/stream",
  "http_503/plain",
  "http_503/stream",
  "auth/plain",
  "auth/stream",
  "connection_reset/plain",
  "connection_reset/stream",
  "cut_body/plain",
  "hang/plain",
  "cut_before_first_token/stream",
  "cut_after_first_token/stream",
  "cut_after_first_token_restart/stream",
  "error_event_before_first_token/stream",
  "error_event_after_first_token/stream",
  "stall_before_first_token/stream",
  "stall_after_first_token/stream",
  "finish_length/plain",
  "finish_length/stream",
  "finish_length_before_first_token/stream",
];

/** The fake provider's whole reply, and its first two tokens (where the cut scenarios stop). */
const WHOLE = "Hello from the fake provider.";
const TWO_TOKENS = "Hello from";
const TRUNCATED = { name: "StreamTruncatedError", code: "SELFHEAL_STREAM_TRUNCATED" };

/** A call recovered on the route `provider` after `steps`, its pattern `pattern`. */
function recovered(pattern: string, provider: string, steps: string[]) {
  return {
    answered: true,
    text: WHOLE,
    recoveries: [{ pattern, outcome: "recovered", provider, steps }],
  };
}

/**
 * A stream that failed after its first token (afterFirstToken `fail`): the typed stream error,
 * its cause `cause` (itself caused by the SDK's error when the stream threw one).
 */
function interrupted(cause: object, pattern: string) {
  return {
    answered: false,
    text: TWO_TOKENS,
    error: {
      name: "StreamInterruptedError",
      code: "SELFHEAL_STREAM_INTERRUPTED",
      sdk: false,
      cause,
    },
    requests: { primary: 1, backup: 0 },
    recoveries: [
      {
        pattern,
        outcome: "failed",
        // Both would send the answer again: "part of the answer already reached the caller".
        steps: ["failover_to_secondary (skipped)", "retry_once (skipped)"],
      },
    ],
  };
}

/**
 * What `result` must match (`toMatchObject`) per the docs, for the API of `script`; undefined
 * for a scenario this table does not know (a test fails on it).
 */
export function expected(script: ClientScript, result: ScenarioResult): object | undefined {
  const primary = providerOf(script);
  const outcome = (o: string) => ({ calls: [{ tool: toolOf(script, result), outcome: o }] });
  switch (result.scenario) {
    // RATE_LIMIT's quick retry waits the Retry-After on the one route: the SDK's own retries off,
    // one 429 is exactly two requests.
    case "rate_limit":
      return {
        ...recovered("RATE_LIMIT", primary, ["retry_once"]),
        requests: { primary: 2, backup: 0 },
        ...outcome("recovered"),
      };
    // SERVICE_DOWN: quick retry, then the fallback route (another base URL).
    case "http_503":
      return {
        ...recovered("SERVICE_DOWN", "backup", ["retry_once", "failover_to_secondary"]),
        requests: { primary: 2, backup: 1 },
        ...outcome("recovered"),
      };
    // AUTH with no other route: failover skipped, escalation (no notifier: nobody told), at once;
    // the SDK's own error is the cause.
    case "auth":
      return {
        answered: false,
        error: {
          name: "HumanEscalationRequiredError",
          code: "SELFHEAL_ESCALATED",
          cause: { sdk: true, status: script.authStatus },
        },
        requests: { primary: 1, backup: 0 },
        recoveries: [
          {
            pattern: "AUTH",
            outcome: "escalated",
            steps: ["failover_to_secondary (skipped)", "escalate_to_human"],
          },
        ],
        ...outcome("error"),
      };
    // A reset connection, before any answer: SERVICE_DOWN's quick retry on the same route.
    case "connection_reset":
      return {
        ...recovered("SERVICE_DOWN", primary, ["retry_once"]),
        requests: { primary: 2, backup: 0 },
        ...outcome("recovered"),
      };
    // A body cut mid-JSON: JSON_PARSE_ERROR's backoff, the same route answers.
    case "cut_body":
      return {
        ...recovered("JSON_PARSE_ERROR", primary, ["exponential_backoff_with_jitter"]),
        requests: { primary: 2, backup: 0 },
        ...outcome("recovered"),
      };
    // No answer within timeoutMs: TIMEOUT fails over first.
    case "hang":
      return {
        ...recovered("TIMEOUT", "backup", ["failover_to_secondary"]),
        requests: { primary: 1, backup: 1 },
        ...outcome("recovered"),
      };
    // Cut before the first token: "retried or failed over as any call" (a dropped connection
    // is SERVICE_DOWN: its quick retry).
    case "cut_before_first_token":
      return {
        ...recovered("SERVICE_DOWN", primary, ["retry_once"]),
        requests: { primary: 2, backup: 0 },
        ...outcome("recovered"),
      };
    case "cut_after_first_token":
      return { ...interrupted(TRUNCATED, "STREAM_TRUNCATED"), ...outcome("error") };
    // afterFirstToken "restart": onRestart once, then the whole answer from the next route.
    case "cut_after_first_token_restart":
      return {
        ...recovered("STREAM_TRUNCATED", "backup", ["failover_to_secondary"]),
        restarts: 1,
        requests: { primary: 1, backup: 1 },
        ...outcome("recovered"),
      };
    // The API's error event (an overload) before any token: retried as any call (SERVICE_DOWN
    // on every API: openai's server_error as Anthropic's api_error and Gemini's UNAVAILABLE).
    case "error_event_before_first_token":
      return {
        answered: true,
        text: WHOLE,
        requests: { primary: 2, backup: 0 },
        recoveries: [{ outcome: "recovered", provider: primary, steps: ["retry_once"] }],
        ...outcome("recovered"),
      };
    // After it: the typed stream error, the SDK's error as the truncation's cause.
    case "error_event_after_first_token":
      return {
        ...interrupted({ ...TRUNCATED, cause: { sdk: true } }, "STREAM_TRUNCATED"),
        ...outcome("error"),
      };
    // No token within firstTokenMs: failover, nothing shown.
    case "stall_before_first_token":
      return {
        ...recovered("STREAM_FIRST_TOKEN_TIMEOUT", "backup", ["failover_to_secondary"]),
        requests: { primary: 1, backup: 1 },
        ...outcome("recovered"),
      };
    case "stall_after_first_token":
      return {
        ...interrupted({ name: "StreamStalledError" }, "STREAM_STALLED"),
        ...outcome("error"),
      };
    // A plain answer cut at the token limit is the SDK's answer as it is, its finish saying so;
    // a streamed one fails (failOnFinish) after its first token.
    case "finish_length":
      return result.mode === "plain"
        ? {
            answered: true,
            text: TWO_TOKENS,
            finish: script.truncatedFinish,
            requests: { primary: 1, backup: 0 },
            recoveries: [],
            ...outcome("success"),
          }
        : { ...interrupted(TRUNCATED, "STREAM_TRUNCATED"), ...outcome("error") };
    // Truncated before any token: STREAM_TRUNCATED fails over before anything was shown.
    case "finish_length_before_first_token":
      return {
        ...recovered("STREAM_TRUNCATED", "backup", ["failover_to_secondary"]),
        requests: { primary: 1, backup: 1 },
        ...outcome("recovered"),
      };
    default:
      return undefined;
  }
}

/** The primary's provider name: the SDK's default (`gen_ai.provider.name`). */
function providerOf(script: ClientScript): string {
  const prefix = script.tool.split(".")[0];
  return prefix === "gemini" ? "gcp.gemini" : (prefix ?? "");
}

/** The selfheal tool a call of `result` runs as: `openai.chat`, `openai.chat:stream`. */
function toolOf(script: ClientScript, result: ScenarioResult): string {
  return result.mode === "stream" ? `${script.tool}:stream` : script.tool;
}
