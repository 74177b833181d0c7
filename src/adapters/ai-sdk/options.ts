import { SPAN_MODES } from "../../engine/options/tool.js";
import { SelfHealConfigError } from "../../errors.js";
import type { Plans, StreamMode, StreamRestart, ToolSpanMode } from "../../index.js";
import {
  knownKeys,
  object,
  optionalChoice,
  optionalFunction,
  optionalString,
  show,
} from "../../engine/options/validate.js";
import { checkToolSetOptions, type ToolSetToolOptions } from "../tool-set.js";
import type { LanguageModel } from "./types.js";

/**
 * selfheal options for one AI SDK tool, by tool name: those of `sh.tool` except what the
 * adapter sets (`readOnly` comes from the `readOnly` option, `kind` is `tool`, `span` is
 * `spans`). `idempotencyKey` and `cannedAnswer` receive the tool's input.
 */
export type AiSdkToolOptions = ToolSetToolOptions;

export interface HealToolsOptions {
  /**
   * The tools that only read: a list of names, or a predicate. Every other tool is a write,
   * refused while the agent is critical (there is no default: a tool must be declared to read).
   */
  readOnly?: readonly string[] | ((toolName: string) => boolean);
  /** selfheal options per tool name (timeoutMs, plans, idempotencyKey, providers, ...). */
  tools?: Readonly<Record<string, AiSdkToolOptions>>;
  /**
   * `child` (default): each call is a tool-call span under the active one (the AI SDK's
   * `ai.toolCall` when its telemetry is on; AI SDK 7's `execute_tool {name}` with `@ai-sdk/otel`).
   * `attach`: selfheal writes on that span instead, with no second span; with the SDK's telemetry
   * off, `attach` acts as `child`.
   */
  spans?: ToolSpanMode;
}

/** A model with the provider name it is declared under in `recovery.providers`. */
export interface ModelRoute {
  provider: string;
  model: LanguageModel;
}

export interface HealModelOptions {
  /** The selfheal tool name of the model's calls (its health scope). Default: the model id. */
  name?: string;
  /** The primary's provider name (`gen_ai.provider.name`). Default: `model.provider`. */
  provider?: string;
  /**
   * Models to fail over to, in order. Each provider (the route's `provider`, else the model's
   * own `provider`) must be declared in `recovery.providers`, the primary's too.
   */
  fallback?: LanguageModel | ModelRoute | readonly (LanguageModel | ModelRoute)[];
  /** Per attempt: a generate call, or a whole stream (default: none; streams have the limits below). */
  timeoutMs?: number;
  /** A stream with no token (text, reasoning, tool input) this long after it started fails over (default 20 s). */
  firstTokenMs?: number;
  /** A stream silent this long after its first token fails (default 15 s). */
  idleMs?: number;
  /**
   * A stream that fails after parts reached the SDK: `fail` (default) errors the stream with a
   * StreamInterruptedError; `restart` streams the whole answer again from the next route, after
   * a `raw` part whose `rawValue` is a RestartRawValue (with `includeRawChunks`) and `onRestart`;
   * `buffer` passes parts on only once the stream is complete.
   */
  afterFirstToken?: StreamMode;
  /**
   * Unified finish reasons that mean the answer is incomplete (default length, content-filter,
   * error, and AI SDK 7's interrupted).
   */
  failOnFinish?: readonly string[];
  /** Called when a `restart` stream starts its answer again: discard what you rendered. */
  onRestart?: (restart: StreamRestart) => void;
  /** The whole call, recovery included. */
  deadlineMs?: number;
  /** Recovery chains by pattern for this model. */
  plans?: Plans;
  /**
   * As in `healTools`: `attach` writes on the SDK's `ai.*.doGenerate` / `doStream` span (AI SDK
   * 7 with `@ai-sdk/otel`: `chat {modelId}`).
   */
  spans?: ToolSpanMode;
}

const TOOLS_KEYS = ["readOnly", "tools", "spans"];
const MODEL_KEYS = [
  "name",
  "provider",
  "fallback",
  "timeoutMs",
  "deadlineMs",
  "plans",
  "spans",
  "firstTokenMs",
  "idleMs",
  "afterFirstToken",
  "failOnFinish",
  "onRestart",
] as const satisfies readonly (keyof HealModelOptions)[];
/** What the adapter sets itself; a per-tool value would silently change the tool's safety. */
const SET_BY_ADAPTER: Readonly<Record<string, string>> = {
  readOnly: "list read-only tools in the readOnly option",
  kind: "AI SDK tools are `tool`; model calls go through healModel",
  isEmpty: "empty answers are judged on model calls (healModel), not tools",
  span: "set `spans` in the options of healTools",
};

/** Validates healTools' arguments; names in `readOnly` and `tools` must be tools of the set. */
export function checkToolsOptions(tools: unknown, input: unknown): HealToolsOptions {
  const o = checkToolSetOptions(tools, input, {
    keys: TOOLS_KEYS,
    setByAdapter: SET_BY_ADAPTER,
    notATool: "is not a tool of this set",
  });
  optionalChoice(o["spans"], SPAN_MODES, "healTools.options.spans");
  return o;
}

/** The model specifications healed: `v3` (AI SDK 6 providers), `v4` (AI SDK 7 providers). */
const SPECIFICATIONS: readonly unknown[] = ["v3", "v4"];

/** An AI SDK language model by shape (the SDK's own check is `specificationVersion`). */
export function isModel(value: unknown): value is LanguageModel {
  const o = value as Partial<LanguageModel> | null;
  return (
    typeof o === "object" &&
    o !== null &&
    SPECIFICATIONS.includes(o.specificationVersion) &&
    typeof o.doGenerate === "function" &&
    typeof o.doStream === "function"
  );
}

export function checkModel(value: unknown, field: string): asserts value is LanguageModel {
  if (!isModel(value)) {
    throw new SelfHealConfigError(
      field,
      `expected an AI SDK language model object (specificationVersion "v3" or "v4", e.g. openai("gpt-4o")), got ${show(value)}`,
    );
  }
}

/** Validates healModel's options (or selfHealMiddleware's, named by `caller`). */
export function checkModelOptions(caller: string, input: unknown): HealModelOptions {
  const field = `${caller}.options`;
  const o = input === undefined ? {} : object(input, field);
  knownKeys(o, MODEL_KEYS, field);
  optionalString(o.name, `${field}.name`);
  optionalString(o.provider, `${field}.provider`);
  const fallback: unknown[] =
    o.fallback === undefined ? [] : Array.isArray(o.fallback) ? o.fallback : [o.fallback];
  fallback.forEach((route, i) => {
    checkRoute(route, `${field}.fallback${Array.isArray(o.fallback) ? `[${i}]` : ""}`);
  });
  optionalChoice(o.spans, SPAN_MODES, `${field}.spans`);
  optionalFunction(o.onRestart, `${field}.onRestart`);
  // The limits, timeoutMs, deadlineMs and plans are checked by sh.tool / sh.stream, under its name.
  return o;
}

function checkRoute(route: unknown, field: string): void {
  if (isModel(route)) return;
  const o = object(route, field);
  knownKeys(o, ["provider", "model"], field);
  optionalString(o.provider, `${field}.provider`);
  if (o.provider === undefined)
    throw new SelfHealConfigError(`${field}.provider`, "required with `model`");
  checkModel(o.model, `${field}.model`);
}
