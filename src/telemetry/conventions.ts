/**
 * The telemetry contract: every span name, attribute key, metric name and metric label that
 * selfheal emits. Dashboards and alert rules depend on these exact strings, so they are spelled
 * here and nowhere else.
 *
 * GenAI keys follow the OpenTelemetry GenAI semantic conventions (development status). They are
 * kept as our own constants because the npm `semantic-conventions` incubating constants are
 * deprecated and may be renamed.
 * @see https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/
 */

/** Resource attribute naming the service (OpenTelemetry semantic conventions, stable). */
export const ATTR_SERVICE_NAME = "service.name";

/** Instrumentation scope name for the tracer and the meter. */
export const INSTRUMENTATION_SCOPE = "selfheal";

// ---- Span names ----------------------------------------------------------------------------
export const SPAN_TOOL_CALL = "agent.tool_call";
export const SPAN_TOOL_CALL_ERROR = "agent.tool_call.error";
export const SPAN_DIAGNOSIS = "agent.diagnosis";
export const SPAN_RECOVERY = "agent.recovery";
/** A long run's heartbeat changed verdict (an instant span). */
export const SPAN_WATCHDOG_VERDICT = "agent.watchdog.verdict";
/** One watchdog tier at work, from its start until it proved progress or failed. */
export const SPAN_WATCHDOG_RECOVERY = "agent.watchdog.recovery";

// ---- Standard attributes (GenAI conventions and stable `error.type`) ----------------------
export const ATTR_GEN_AI_OPERATION_NAME = "gen_ai.operation.name";
export const ATTR_GEN_AI_TOOL_NAME = "gen_ai.tool.name";
export const ATTR_GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id";
export const ATTR_GEN_AI_TOOL_TYPE = "gen_ai.tool.type";
export const ATTR_GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments";
export const ATTR_GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result";
export const ATTR_GEN_AI_PROVIDER_NAME = "gen_ai.provider.name";
/** The model asked for (the provider's `model`): a model call's span and the GenAI metrics. */
export const ATTR_GEN_AI_REQUEST_MODEL = "gen_ai.request.model";
/** The model that answered, as the response names it (`gpt-4o-2024-08-06`). */
export const ATTR_GEN_AI_RESPONSE_MODEL = "gen_ai.response.model";
/** `true` on a model call made in streaming mode (`sh.stream` calls of `llm` kind). */
export const ATTR_GEN_AI_REQUEST_STREAM = "gen_ai.request.stream";
/** Seconds from the answering attempt's request to its stream's first chunk (any chunk). */
export const ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk";
/** `input` or `output`: which tokens a token usage point counts. */
export const ATTR_GEN_AI_TOKEN_TYPE = "gen_ai.token.type";
export const ATTR_GEN_AI_AGENT_NAME = "gen_ai.agent.name";
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens";
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens";
export const ATTR_ERROR_TYPE = "error.type";
/** The standard exception event and its attributes. */
export const EVENT_EXCEPTION = "exception";
export const ATTR_EXCEPTION_TYPE = "exception.type";
export const ATTR_EXCEPTION_MESSAGE = "exception.message";
export const ATTR_EXCEPTION_STACKTRACE = "exception.stacktrace";

/** `gen_ai.operation.name` value for a tool invocation. */
export const GEN_AI_OPERATION_EXECUTE_TOOL = "execute_tool";
/**
 * `gen_ai.operation.name` of an `llm` tool's call unless its attempts report another
 * (`ctx.reportModel`): a chat completion (OpenAI Chat Completions and Responses, Anthropic
 * Messages), as GenAI backends group model calls.
 */
export const GEN_AI_OPERATION_CHAT = "chat";
/** A multimodal generation (Gemini `generateContent`). */
export const GEN_AI_OPERATION_GENERATE_CONTENT = "generate_content";
/** A legacy text completion (OpenAI Completions). */
export const GEN_AI_OPERATION_TEXT_COMPLETION = "text_completion";
/** `gen_ai.operation.name` values of model calls (used to read foreign LLM spans). */
export const GEN_AI_LLM_OPERATIONS: readonly string[] = [
  GEN_AI_OPERATION_CHAT,
  GEN_AI_OPERATION_TEXT_COMPLETION,
  GEN_AI_OPERATION_GENERATE_CONTENT,
];
/**
 * Well-known `gen_ai.provider.name` values (the GenAI conventions' list) that selfheal's clients
 * and adapters report (`ctx.reportModel({ provider })`); a route without a report is named by
 * its selfheal provider name.
 */
export const GEN_AI_PROVIDERS = {
  openai: "openai",
  anthropic: "anthropic",
  azureOpenai: "azure.ai.openai",
  awsBedrock: "aws.bedrock",
  cohere: "cohere",
  deepseek: "deepseek",
  /** `generativelanguage.googleapis.com` (the Gemini API, AI Studio). */
  gcpGemini: "gcp.gemini",
  /** `aiplatform.googleapis.com`. */
  gcpVertexAi: "gcp.vertex_ai",
  /** Any Google GenAI endpoint, when which one is unknown. */
  gcpGenAi: "gcp.gen_ai",
  groq: "groq",
  mistralAi: "mistral_ai",
  perplexity: "perplexity",
  xAi: "x_ai",
} as const;
/**
 * A span's name under the GenAI conventions: `{gen_ai.operation.name} {target}`, the target being
 * the tool (`execute_tool search_docs`) or the model (`chat gpt-4o`). AI SDK 7's `@ai-sdk/otel`
 * names its spans so.
 */
export const genAiSpanName = (operation: string, target: string): string =>
  `${operation} ${target}`;
/** `error.type` value when the thrown value has no class name worth reporting. */
export const ERROR_TYPE_OTHER = "_OTHER";

// ---- Vercel AI SDK (`ai`) telemetry, read by the span processor and `selfheal/ai-sdk` -----
// Its spans carry no `gen_ai.operation.name`: the operation is `ai.operationId` (the span name).
/** Span of one tool execution (`ai.toolCall.name`, `ai.toolCall.id`). */
export const AI_SDK_SPAN_TOOL_CALL = "ai.toolCall";
/** Spans of one model call (one step of generateText / streamText / generateObject / streamObject). */
export const AI_SDK_MODEL_CALL_SPANS: readonly string[] = [
  "ai.generateText.doGenerate",
  "ai.streamText.doStream",
  "ai.generateObject.doGenerate",
  "ai.streamObject.doStream",
];
export const ATTR_AI_OPERATION_ID = "ai.operationId";
export const ATTR_AI_TOOL_CALL_NAME = "ai.toolCall.name";
export const ATTR_AI_MODEL_ID = "ai.model.id";
/** Output tokens of a model call: `ai.usage.outputTokens`, or `ai.usage.completionTokens` (generateObject; v4). */
export const ATTR_AI_USAGE_OUTPUT_TOKENS = "ai.usage.outputTokens";
export const ATTR_AI_USAGE_COMPLETION_TOKENS = "ai.usage.completionTokens";

// ---- Restart signals of streams (what a consumer matches on to discard a partial answer) ------
/** `rawValue.type` of the AI SDK `raw` part a restart becomes (`selfheal/ai-sdk`). */
export const AI_SDK_RESTART_TYPE = "selfheal.restart";
/** The custom stream chunk's `type` and callback event name of a restart (`selfheal/langchain`). */
export const LANGCHAIN_RESTART_EVENT = "selfheal_stream_restart";

// ---- selfheal attributes -------------------------------------------------------------------
/**
 * The agent (every selfheal span) and the tool (the `agent.tool_call.error`, `agent.diagnosis` and
 * `agent.recovery` children, and an `llm` call's own span), as the metrics' `agent` and `tool`
 * labels name them. A tool's own call span names it `gen_ai.tool.name` instead, as the GenAI
 * conventions define for an `execute_tool` span (and only there, so a GenAI backend counts each
 * tool call once); the conventions define `gen_ai.agent.name` on agent spans, none of selfheal's.
 * Span metrics and trace queries take the tool from `selfheal.tool.name`, else `gen_ai.tool.name`.
 */
export const ATTR_AGENT_NAME = "selfheal.agent.name";
export const ATTR_TOOL_NAME = "selfheal.tool.name";
/** `false` on the call spans of write tools; absent on read-only tools (the common case). */
export const ATTR_TOOL_READ_ONLY = "selfheal.tool.read_only";
export const ATTR_CALL_OUTCOME = "selfheal.call.outcome";
export const ATTR_CALL_TIMEOUT_MS = "selfheal.call.timeout_ms";
export const ATTR_RESPONSE_EMPTY = "selfheal.response.empty";
export const ATTR_TASK_ID = "selfheal.task.id";
/** On a tool-call span only when the agent was admitted `warning` or `critical` (absent: healthy). */
export const ATTR_HEALTH_STATUS = "selfheal.health.status";
export const ATTR_ERROR_MESSAGE = "selfheal.error.message";
export const ATTR_DIAGNOSIS_PATTERN = "selfheal.diagnosis.pattern";
export const ATTR_DIAGNOSIS_CONFIDENCE = "selfheal.diagnosis.confidence";
export const ATTR_DIAGNOSIS_RULE = "selfheal.diagnosis.rule";
export const ATTR_DIAGNOSIS_RETRY_AFTER_MS = "selfheal.diagnosis.retry_after_ms";
export const ATTR_DIAGNOSIS_COOLDOWN_MS = "selfheal.diagnosis.cooldown_ms";
export const ATTR_DIAGNOSIS_STATUS_PAGE = "selfheal.diagnosis.status_page";
export const ATTR_HTTP_RESPONSE_STATUS_CODE = "http.response.status_code";
export const ATTR_RECOVERY_STRATEGY = "selfheal.recovery.strategy";
export const ATTR_RECOVERY_ATTEMPT = "selfheal.recovery.attempt";
export const ATTR_RECOVERY_WAIT_MS = "selfheal.recovery.wait_ms";
export const ATTR_RECOVERY_OUTCOME = "selfheal.recovery.outcome";
export const ATTR_RECOVERY_COST_USD = "selfheal.recovery.cost_usd";
export const ATTR_IDEMPOTENCY_KEY = "selfheal.idempotency_key";
export const ATTR_IDEMPOTENCY_REPLAYED = "selfheal.idempotency.replayed";
export const ATTR_RECOVERY_PROVIDER = "selfheal.recovery.provider";
export const ATTR_RECOVERY_SKIPPED = "selfheal.recovery.skipped";
export const ATTR_RECOVERY_WASTED = "selfheal.recovery.wasted";
export const ATTR_RECOVERY_COST_DIFFERENTIAL_USD =
  "selfheal.recovery.failover_cost_differential_usd";
export const ATTR_CIRCUIT_PROBE = "selfheal.circuit.probe";
/** A streamed call (`sh.stream`): what the caller chose after the first token (fail, restart, buffer). */
export const ATTR_STREAM_MODE = "selfheal.stream.mode";
/** Time from the answering attempt's start to its first token, ms. */
export const ATTR_STREAM_FIRST_TOKEN_MS = "selfheal.stream.first_token_ms";
/** Chunks of the answer (the answering attempt's), or those delivered before a stream failed. */
export const ATTR_STREAM_CHUNKS = "selfheal.stream.chunks";
/** Times the caller was told to discard a partial answer (`afterFirstToken: "restart"`). */
export const ATTR_STREAM_RESTARTS = "selfheal.stream.restarts";
/** GenAI convention: the finish reasons of the answer (string[]). */
export const ATTR_GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons";

// ---- MCP attributes (selfheal/mcp; OpenTelemetry MCP conventions, development status) -----
/** @see https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/ */
export const ATTR_MCP_METHOD_NAME = "mcp.method.name";
export const ATTR_MCP_SESSION_ID = "mcp.session.id";
export const ATTR_MCP_PROTOCOL_VERSION = "mcp.protocol.version";
/** Stable network convention: `pipe` for stdio, `tcp` for HTTP. */
export const ATTR_NETWORK_TRANSPORT = "network.transport";
/** `mcp.method.name` of a tool call. */
export const MCP_METHOD_TOOLS_CALL = "tools/call";
/** `error.type` of a tool call answered with `isError: true` (the MCP conventions' value). */
export const MCP_ERROR_TYPE_TOOL_ERROR = "tool_error";
export const ATTR_WATCHDOG_SESSION_ID = "selfheal.watchdog.session_id";
export const ATTR_WATCHDOG_VERDICT = "selfheal.watchdog.verdict";
export const ATTR_WATCHDOG_REASON = "selfheal.watchdog.reason";
export const ATTR_WATCHDOG_TIER = "selfheal.watchdog.tier";
export const ATTR_WATCHDOG_OUTCOME = "selfheal.watchdog.outcome";
/** The generation of the run's process a verdict or tier is about (1, then one more per restart). */
export const ATTR_WATCHDOG_GENERATION = "selfheal.watchdog.generation";

/** Values of `selfheal.call.outcome`. */
export const CALL_OUTCOMES = ["success", "error", "blocked", "recovered"] as const;
export type CallOutcome = (typeof CALL_OUTCOMES)[number];

/** Values of the `outcome` label of `selfheal_tasks`. */
export const TASK_OUTCOMES = ["completed", "failed"] as const;
export type TaskOutcome = (typeof TASK_OUTCOMES)[number];

/**
 * Diagnosis patterns (the `pattern` label). Alerts divide by these: each series starts at 0.
 * The STREAM_* patterns are a streamed call's own: no first token in time, a silent gap between
 * chunks, and an end without the terminal signal (or with a finish reason the caller did not
 * expect, such as `length`).
 */
export const PATTERNS = [
  "RATE_LIMIT",
  "TIMEOUT",
  "SERVICE_DOWN",
  "EMPTY_LLM_RESPONSE",
  "JSON_PARSE_ERROR",
  "AUTH",
  "BAD_REQUEST",
  "CONTEXT_LENGTH",
  "CONTENT_POLICY",
  "STREAM_FIRST_TOKEN_TIMEOUT",
  "STREAM_STALLED",
  "STREAM_TRUNCATED",
  "UNKNOWN",
] as const;
export type Pattern = (typeof PATTERNS)[number];

/** Patterns that must never be retried on the same route: the same request fails the same way. */
export const NON_RETRYABLE_PATTERNS: readonly Pattern[] = [
  "AUTH",
  "BAD_REQUEST",
  "CONTEXT_LENGTH",
  "CONTENT_POLICY",
];

/** Recovery strategies (the `strategy` label), in the order a plan usually escalates. */
export const STRATEGIES = [
  "retry_once",
  "exponential_backoff_with_jitter",
  "retry_with_longer_timeout",
  "failover_to_secondary",
  "circuit_break",
  "degrade_to_readonly",
  "escalate_to_human",
] as const;
export type StrategyName = (typeof STRATEGIES)[number];

/** `outcome` of `selfheal_recoveries`: what one strategy step or attempt came to. */
export const RECOVERY_STEP_OUTCOMES = ["success", "failure", "applied", "skipped"] as const;
export type RecoveryStepOutcome = (typeof RECOVERY_STEP_OUTCOMES)[number];

/** `outcome` of a whole recovery (`selfheal_recovery_duration_seconds`, the recovery event). */
export const RECOVERY_OUTCOMES = ["recovered", "failed", "escalated", "budget_exhausted"] as const;
export type RecoveryOutcome = (typeof RECOVERY_OUTCOMES)[number];

/** Values of the `selfheal_circuit_state` gauge. */
export const CIRCUIT_STATES = ["closed", "half_open", "open"] as const;

/** What the watchdog says of a long run's heartbeat (`state` label of the verdicts counter). */
export const WATCHDOG_VERDICTS = [
  "healthy",
  // A process just started, inside its first-beat allowance: nothing to judge yet.
  "starting",
  "stalled",
  "session_dead",
  "context_bloat",
  "unreadable",
] as const;
export type Verdict = (typeof WATCHDOG_VERDICTS)[number];
/** The watchdog's recovery tiers, in the order they are tried. */
export const WATCHDOG_TIERS = ["nudge", "context_reset", "rotation"] as const;
export type Tier = (typeof WATCHDOG_TIERS)[number];
/** How a tier ended: the run showed progress, it did not, or rotations hit the intensity limit. */
export const WATCHDOG_OUTCOMES = ["recovered", "failed", "gave_up"] as const;
export type TierOutcome = (typeof WATCHDOG_OUTCOMES)[number];

/** Health states, in order of severity; the index is the `selfheal_health_status` gauge value. */
export const HEALTH_STATUSES = ["healthy", "warning", "critical"] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];

// ---- Metrics -------------------------------------------------------------------------------
// Counters carry no `_total`: the Prometheus paths add it (collector/README.md, "Metric names on
// each export path"); over OTLP to Honeycomb they keep these names. Histograms carry their unit.
export const METRIC_TOOL_CALLS = "selfheal_tool_calls";
export const METRIC_TOOL_CALL_DURATION = "selfheal_tool_call_duration_seconds";
export const METRIC_LLM_RESPONSES = "selfheal_llm_responses";
export const METRIC_TASKS = "selfheal_tasks";
export const METRIC_INCIDENTS = "selfheal_incidents";
export const METRIC_DIAGNOSES = "selfheal_diagnoses";
export const METRIC_RECOVERIES = "selfheal_recoveries";
export const METRIC_RECOVERY_DURATION = "selfheal_recovery_duration_seconds";
export const METRIC_RECOVERY_COST = "selfheal_recovery_cost_usd";
export const METRIC_WASTED_RETRIES = "selfheal_wasted_retries";
export const METRIC_FAILOVER_COST_DIFFERENTIAL = "selfheal_failover_cost_differential_usd";
export const METRIC_ESCALATIONS = "selfheal_escalations";
export const METRIC_HEALTH_STATUS = "selfheal_health_status";
export const METRIC_CIRCUIT_STATE = "selfheal_circuit_state";
/** 1 while the agent's write tools are refused (critical, or read-only after recovery), else 0. */
export const METRIC_READ_ONLY = "selfheal_read_only";
/** 1 while a shared signal store (Redis) is away and this worker runs on local memory, else 0 (always 0 with the in-memory store). */
export const METRIC_STORE_DEGRADED = "selfheal_store_degraded";
export const METRIC_WATCHDOG_VERDICTS = "selfheal_watchdog_verdicts";
export const METRIC_WATCHDOG_RECOVERIES = "selfheal_watchdog_recoveries";
/** Time to first token of streamed calls' attempts (histogram, seconds). */
export const METRIC_STREAM_FIRST_TOKEN = "selfheal_stream_time_to_first_token_seconds";
/** Failed attempts of streamed calls, by diagnosed pattern. */
export const METRIC_STREAM_FAILURES = "selfheal_stream_failures";
/**
 * Tokens of each model request (attempt), by type (OpenTelemetry GenAI semantic conventions; in
 * Prometheus `gen_ai_client_token_usage_bucket{gen_ai_token_type, gen_ai_operation_name,
 * gen_ai_provider_name, gen_ai_request_model, gen_ai_response_model, agent, tool}`), from what
 * the attempt reports (`ctx.reportUsage`, the clients and adapters).
 */
export const METRIC_GEN_AI_TOKEN_USAGE = "gen_ai.client.token.usage";
/**
 * Duration of each model request (attempt), seconds, `error.type` on a failed one (GenAI
 * conventions; in Prometheus `gen_ai_client_operation_duration_seconds_bucket`, the unit added by
 * every Prometheus path, selfheal/otel's own exporter included).
 */
export const METRIC_GEN_AI_OPERATION_DURATION = "gen_ai.client.operation.duration";
/** What model calls cost, USD, by agent, tool, provider and model (reported or priced). */
export const METRIC_LLM_COST = "selfheal_llm_cost_usd";
/** The token usage histogram's buckets (the GenAI conventions' advice: powers of 4). */
export const TOKEN_BUCKETS: readonly number[] = Array.from({ length: 14 }, (_, i) => 4 ** i);
/** The operation duration histogram's buckets, seconds (the GenAI conventions' advice: 10 ms doubling to 81.92 s). */
export const GEN_AI_DURATION_BUCKETS_SECONDS: readonly number[] = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/** Values of `gen_ai.token.type`. */
export const GEN_AI_TOKEN_INPUT = "input";
export const GEN_AI_TOKEN_OUTPUT = "output";

// Metric labels (Prometheus label names).
export const LABEL_AGENT = "agent";
export const LABEL_TOOL = "tool";
export const LABEL_OUTCOME = "outcome";
export const LABEL_PROVIDER = "provider";
export const LABEL_EMPTY = "empty";
export const LABEL_PATTERN = "pattern";
export const LABEL_STRATEGY = "strategy";
export const LABEL_FROM = "from";
export const LABEL_TO = "to";
export const LABEL_CHANNEL = "channel";
export const LABEL_SUPPRESSED = "suppressed";
export const LABEL_DEPENDENCY = "dependency";
export const LABEL_STATE = "state";
export const LABEL_TIER = "tier";
export const LABEL_MODEL = "model";

/** Stream modes (`afterFirstToken`): what happens when a stream fails after its first token. */
export const STREAM_MODES = ["fail", "restart", "buffer"] as const;
export type StreamMode = (typeof STREAM_MODES)[number];
/** The patterns of a streamed call's own failures (each `selfheal_stream_failures` series starts at 0). */
export const STREAM_PATTERNS: readonly Pattern[] = [
  "STREAM_FIRST_TOKEN_TIMEOUT",
  "STREAM_STALLED",
  "STREAM_TRUNCATED",
];

/** Histogram buckets in seconds for call and recovery durations (10 ms to 10 min). */
export const DURATION_BUCKETS_SECONDS: readonly number[] = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];
