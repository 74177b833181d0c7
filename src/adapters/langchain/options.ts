import { SPAN_MODES } from "../../engine/options/tool.js";
import type { MessageContent } from "@langchain/core/messages";
import type { ModelRequest, ToolCallRequest } from "langchain";
import { SelfHealConfigError } from "../../errors.js";
import {
  knownKeys,
  ms,
  nonEmptyString,
  numbers,
  object,
  optionalChoice,
  optionalFunction,
  optionalList,
  optionalObject,
  show,
} from "../../engine/options/validate.js";
import type { Plans, SelfHealing, StreamMode, ToolSpanMode } from "../../index.js";
import { STREAM_MODES } from "../../telemetry/conventions.js";
import { STREAM_COMPLETIONS, type StreamCompletion } from "./stream-format.js";

/** The arguments of a LangChain tool call (`toolCall.args`). */
export type ToolArgs = Record<string, unknown>;

/** Per-tool selfheal settings, by LangChain tool name. */
export interface LangChainToolSettings {
  /** Abort an attempt after this many ms (the tool's `config.signal` is aborted). */
  timeoutMs?: number;
  /** The longest a call may take, recovery included, ms. */
  deadlineMs?: number;
  /**
   * A key that makes a write safe to repeat, from the call's arguments. Without one a write is
   * never sent twice: no retry, no failover. The tool must pass the same key to its API.
   */
  idempotencyKey?: (args: ToolArgs) => string | undefined;
  /** Recovery chains by pattern for this tool. */
  plans?: Plans;
  /** `gen_ai.provider.name` of the service behind the tool. */
  provider?: string;
  /** `gen_ai.tool.type` (`function`, `extension`, `datastore`). */
  type?: string;
}

/** A model the agent fails over to, on a provider declared in `recovery.providers`. */
export interface LangChainFallback {
  provider: string;
  /** A chat model, or a `provider:model` string for `initChatModel`. */
  model: ModelRequest["model"] | string;
}

/**
 * How a streamed model answer is bounded and checked, and what a failure after its first token
 * does. A model call streams when the agent is streamed (`agent.stream` with streamMode
 * `messages`, `streamEvents`) or when the model streams on its own (`streaming: true`).
 */
export interface LangChainStreamSettings<M extends StreamMode = StreamMode> {
  /** A streamed attempt with no token this long after it started fails (STREAM_FIRST_TOKEN_TIMEOUT). 20 000. */
  firstTokenMs?: number;
  /** A streamed attempt silent this long after a chunk, once a token came, fails (STREAM_STALLED). 15 000. */
  idleMs?: number;
  /**
   * What a failure after the first token does: `fail` (default) throws a StreamInterruptedError
   * saying how many chunks reached the caller; `restart` runs the model call again (next route
   * first) and sends the discard signal before the new answer's first token; `buffer` holds the
   * tokens back until the answer is complete, so any failure is retried or failed over unseen.
   */
  afterFirstToken?: M;
  /** Finish reasons that mean the answer is incomplete. `length`, `content_filter`, `content-filter`, `error`. */
  failOnFinish?: readonly string[];
  /** `finish` (default): complete only once a finish reason came; `end`: when the stream ends. */
  completion?: StreamCompletion;
}

/** A model's routes, time and plans, as the middleware and `healChatModelStream` take them. */
export interface ModelRouteSettings {
  /**
   * Provider of the model (`gen_ai.provider.name`); required with `fallbacks`, and then
   * declared in `recovery.providers`.
   */
  provider?: string;
  /** Models to fail over to, in order; each provider declared in `recovery.providers`. */
  fallbacks?: readonly LangChainFallback[];
  /** Bounds each attempt (a streamed one whole), ms; by default the limits and the deadline do. */
  timeoutMs?: number;
  deadlineMs?: number;
  plans?: Plans;
}

/** How the agent's model calls are healed. */
export interface LangChainModelOptions extends LangChainStreamSettings, ModelRouteSettings {
  /** The selfheal tool name of the model calls: health scope, breaker, metric label. `model`. */
  name?: string;
}

/**
 * What a tool call that selfheal could not heal becomes: `continue` (default) an error
 * `ToolMessage` the model reads, as LangChain does without middleware and as
 * `toolRetryMiddleware` does; `error` rethrows (the run fails); a function returns the message
 * content, or undefined to rethrow.
 */
export type OnToolFailure =
  | "continue"
  | "error"
  | ((
      error: unknown,
      request: ToolCallRequest,
    ) => MessageContent | undefined | Promise<MessageContent | undefined>);

export interface SelfHealingMiddlewareOptions {
  /**
   * The tools that only read: a list of names or a test. Every other tool is a write, refused
   * while the agent is critical: a tool nobody declared is never assumed safe.
   */
  readOnly?: readonly string[] | ((toolName: string) => boolean);
  /** Per-tool settings by tool name; these tools are registered (and checked) at once. */
  tools?: Readonly<Record<string, LangChainToolSettings>>;
  /** Model-call healing; `false` leaves model calls alone. */
  model?: LangChainModelOptions | false;
  /** See `OnToolFailure`. Default `continue`. */
  onFailure?: OnToolFailure;
  /**
   * `attach` puts selfheal's attributes on the active span when an instrumentation opens one per
   * tool call and makes it active; LangChain opens none itself. Default `child`.
   */
  spans?: ToolSpanMode;
}

/** Options of `healChatModelStream`: the model's routes, the call's limits, the stream's settings. */
export interface HealChatModelStreamOptions<M extends StreamMode = StreamMode>
  extends LangChainStreamSettings<M>, ModelRouteSettings {
  /** The selfheal stream's name: health scope, breaker, metric label. `model.stream`. */
  name?: string;
}

export interface HealToolOptions extends LangChainToolSettings {
  /** Required: whether the tool only reads. Writes are refused while the agent is critical. */
  readOnly: boolean;
  /** See `SelfHealingMiddlewareOptions.spans`. */
  spans?: ToolSpanMode;
}

const MIDDLEWARE_KEYS = ["readOnly", "tools", "model", "onFailure", "spans"] as const;
const SETTINGS_KEYS = [
  "timeoutMs",
  "deadlineMs",
  "idempotencyKey",
  "plans",
  "provider",
  "type",
] as const satisfies readonly (keyof LangChainToolSettings)[];
const STREAM_KEYS = [
  "firstTokenMs",
  "idleMs",
  "afterFirstToken",
  "failOnFinish",
  "completion",
] as const satisfies readonly (keyof LangChainStreamSettings)[];
const MODEL_KEYS = [
  "name",
  "provider",
  "fallbacks",
  "timeoutMs",
  "deadlineMs",
  "plans",
  ...STREAM_KEYS,
] as const satisfies readonly (keyof LangChainModelOptions)[];
const STREAM_LIMITS = { firstTokenMs: ms(1), idleMs: ms(1) };
const FAILURE_MODES = ["continue", "error"] as const;

/** The instance must be a selfheal instance: the adapter calls `tool` on it. */
export function checkInstance(sh: unknown, field: string): asserts sh is SelfHealing {
  if (typeof (sh as Partial<SelfHealing> | undefined)?.tool !== "function")
    throw new SelfHealConfigError(field, "expected a selfheal instance (createSelfHealing())");
}

/** Validates the middleware's options (values the engine checks are checked on registration). */
export function checkMiddlewareOptions(
  input: unknown,
  field: string,
): SelfHealingMiddlewareOptions {
  const o = optionalObject(input, field);
  knownKeys(o, MIDDLEWARE_KEYS, field);
  checkReadOnly(o.readOnly, `${field}.readOnly`);
  const tools = optionalObject(o.tools, `${field}.tools`);
  for (const [name, settings] of Object.entries(tools)) {
    checkSettings(settings, `${field}.tools.${name}`);
  }
  if (o.model !== undefined && o.model !== false) checkModel(o.model, `${field}.model`);
  if (typeof o.onFailure !== "function")
    optionalChoice(o.onFailure, FAILURE_MODES, `${field}.onFailure`);
  optionalChoice(o.spans, SPAN_MODES, `${field}.spans`);
  return o;
}

/** Validates `healChatModelStream`'s options (values the engine checks are checked on registration). */
export function checkChatModelStreamOptions(
  input: unknown,
  field: string,
): HealChatModelStreamOptions {
  const o = optionalObject(input, field);
  knownKeys(o, MODEL_KEYS, field);
  checkRoutes(o, field);
  checkStreamSettings(o, field);
  return o;
}

/** Validates `healTool`'s options; `readOnly` has no default on purpose. */
export function checkHealToolOptions(input: unknown, field: string): HealToolOptions {
  const o = object(input, field);
  const { readOnly, spans, ...settings } = o;
  if (typeof readOnly !== "boolean") {
    throw new SelfHealConfigError(
      `${field}.readOnly`,
      "required: say whether the tool writes (readOnly: false) or only reads (readOnly: true)",
    );
  }
  optionalChoice(spans, SPAN_MODES, `${field}.spans`);
  checkSettings(settings, field);
  return o as unknown as HealToolOptions;
}

function checkReadOnly(value: unknown, field: string): void {
  if (value === undefined || typeof value === "function") return;
  const names = optionalList(value, field, "tool names, or a function (toolName) => boolean");
  for (const name of names) nonEmptyString(name, field);
}

function checkSettings(value: unknown, field: string): void {
  const o = object(value, field);
  knownKeys(o, SETTINGS_KEYS, field);
  optionalFunction(o.idempotencyKey, `${field}.idempotencyKey`);
}

function checkModel(value: unknown, field: string): void {
  const o = object(value, field);
  knownKeys(o, MODEL_KEYS, field);
  checkRoutes(o, field);
  checkStreamSettings(o, field);
}

/** The stream settings of model options: limits, mode, finish reasons, completion. */
function checkStreamSettings(o: Record<string, unknown>, field: string): void {
  numbers(o, STREAM_LIMITS, field);
  optionalChoice(o.afterFirstToken, STREAM_MODES, `${field}.afterFirstToken`);
  optionalChoice(o.completion, STREAM_COMPLETIONS, `${field}.completion`);
  const reasons = optionalList(o.failOnFinish, `${field}.failOnFinish`, "finish reasons");
  reasons.forEach((r, i) => {
    nonEmptyString(r, `${field}.failOnFinish[${i}]`);
  });
}

/** A model's name, provider and fallbacks. */
function checkRoutes(o: Record<string, unknown>, field: string): void {
  if (o.name !== undefined) nonEmptyString(o.name, `${field}.name`);
  const fallbacks = optionalList(o.fallbacks, `${field}.fallbacks`, "{ provider, model }");
  fallbacks.forEach((f, i) => {
    const entry = object(f, `${field}.fallbacks[${i}]`);
    knownKeys(entry, ["provider", "model"], `${field}.fallbacks[${i}]`);
    nonEmptyString(entry.provider, `${field}.fallbacks[${i}].provider`);
    if (entry.model === null || !["string", "object"].includes(typeof entry.model))
      throw new SelfHealConfigError(
        `${field}.fallbacks[${i}].model`,
        `expected a chat model or a "provider:model" string, got ${show(entry.model)}`,
      );
  });
  if (fallbacks.length > 0 && o.provider === undefined) {
    throw new SelfHealConfigError(
      `${field}.provider`,
      "required with fallbacks: name the agent's own model's provider (declared in recovery.providers), the primary route",
    );
  }
}

/** The read-only test the options describe: listed names, the user's test, or none. */
export function readOnlyTest(readOnly: SelfHealingMiddlewareOptions["readOnly"]) {
  if (typeof readOnly === "function") return readOnly;
  const names = new Set(readOnly ?? []);
  return (toolName: string) => names.has(toolName);
}
