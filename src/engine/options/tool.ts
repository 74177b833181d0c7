import { SelfHealConfigError } from "../../errors.js";
import type { CallContext } from "../call-context.js";
import { plans, type Plans } from "./recovery.js";
import {
  knownKeys,
  ms,
  nonEmptyString,
  numbers,
  object,
  optionalChoice,
  optionalFunction,
  optionalString,
  show,
  typoOf,
} from "./validate.js";

export type ToolKind = "tool" | "llm";

/**
 * Where a call's tool-call span comes from: `child` starts the tool-call span under the active
 * span; `attach` writes selfheal's attributes on the active span (a framework's own tool span)
 * and hangs the error, diagnosis and recovery spans under it, with no second tool-call span.
 */
export type ToolSpanMode = "child" | "attach";

export interface ToolOptions<A = unknown, R = unknown> {
  /** Required: whether the tool only reads. Write tools are refused while health is critical. */
  readOnly: boolean;
  /** `llm` tools feed the empty-response signal. Default `tool`. */
  kind?: ToolKind;
  /** Abort an attempt after this many ms (the tool's signal is aborted, the attempt fails). */
  timeoutMs?: number;
  /** The longest a call may take, recovery included, ms (default `recovery.deadlineMs`). */
  deadlineMs?: number;
  /** Key that makes a write safe to repeat; reaches the tool on every attempt. */
  idempotencyKey?: (args: A) => string | undefined;
  /** For `llm` tools: whether a result counts as empty. Default: see `isEmptyResponse`. */
  isEmpty?: (result: R) => boolean;
  /** Provider behind the tool (`gen_ai.provider.name`), e.g. `openai`. */
  provider?: string;
  /** `gen_ai.tool.type` (`function`, `extension`, `datastore`); not set when omitted. */
  type?: string;
  /**
   * Providers this tool can use, primary first, each declared in `recovery.providers`: the call
   * context's `provider` says which one to call. Default: `[provider]` when set.
   */
  providers?: readonly string[];
  /** Recovery chains by pattern for this tool. */
  plans?: Plans;
  /**
   * A canned answer for when no route can answer: every route's circuit is open, or recovery
   * ran out of routes and the plan reached `circuit_break`. Not failover: another provider goes
   * in `providers`.
   */
  cannedAnswer?: (args: A, error: unknown) => R | Promise<R>;
  /**
   * `attach` when a framework already opens a span for each tool call: selfheal's attributes go
   * on that span instead of a child tool-call span (no double spans). With no recording span
   * active, a call opens its own span as with `child`. Default `child`.
   */
  span?: ToolSpanMode;
}

export type ToolFunction<A, R> = (args: A, context: CallContext) => R | Promise<R>;

const TOOL_KEYS = [
  "readOnly",
  "kind",
  "timeoutMs",
  "deadlineMs",
  "idempotencyKey",
  "isEmpty",
  "provider",
  "type",
  "providers",
  "plans",
  "cannedAnswer",
  "span",
] as const satisfies readonly (keyof ToolOptions)[];

const TOOL_KINDS: readonly ToolKind[] = ["tool", "llm"];
/** The values of `span` (and of the adapters' `spans`). */
export const SPAN_MODES: readonly ToolSpanMode[] = ["child", "attach"];
const TIME_RULES = { timeoutMs: ms(1), deadlineMs: ms(1) };

/**
 * The well-known values of `gen_ai.provider.name` (OpenTelemetry GenAI conventions): a `provider`
 * a letter away from one of them is a typo, not a name of its own.
 */
const WELL_KNOWN_PROVIDERS = [
  "anthropic",
  "aws.bedrock",
  "azure.ai.inference",
  "azure.ai.openai",
  "cohere",
  "deepseek",
  "gcp.gemini",
  "gcp.gen_ai",
  "gcp.vertex_ai",
  "groq",
  "ibm.watsonx.ai",
  "mistral_ai",
  "openai",
  "perplexity",
  "x_ai",
];

/** `providers`: a non-empty list, each name declared in `recovery.providers`. */
function checkProviders(
  value: unknown,
  field: string,
  knownProviders: ReadonlyMap<string, unknown>,
): void {
  if (!Array.isArray(value) || value.length === 0) {
    throw new SelfHealConfigError(
      field,
      "expected a non-empty list of provider names, primary first",
    );
  }
  for (const p of value as unknown[]) {
    if (typeof p !== "string" || !knownProviders.has(p)) {
      const typo = typeof p === "string" ? typoOf(p, knownProviders.keys()) : undefined;
      const hint = typo === undefined ? "" : ` (did you mean "${typo}"?)`;
      throw new SelfHealConfigError(
        field,
        `${show(p)} is not declared in recovery.providers${hint}`,
      );
    }
  }
}

/**
 * `provider`: any name of the provider behind the tool (it is written on spans and is the tool's
 * one route), but not a misspelling of a provider declared in `recovery.providers` or of a
 * well-known one: `provider: "opnai"` would otherwise pass silently, as a route of its own with no
 * price, no failover and no `ctx.providerConfig`. A name declared in `recovery.providers` is
 * always taken as it is.
 */
function checkProvider(
  value: unknown,
  field: string,
  knownProviders: ReadonlyMap<string, unknown>,
): void {
  optionalString(value, field);
  if (typeof value !== "string" || knownProviders.has(value)) return;
  const declared = typoOf(value, knownProviders.keys());
  const typo =
    declared ??
    (WELL_KNOWN_PROVIDERS.some((p) => p === value.toLowerCase())
      ? undefined
      : typoOf(value, WELL_KNOWN_PROVIDERS));
  if (typo === undefined) return;
  throw new SelfHealConfigError(
    field,
    `${show(value)} looks like a misspelling of "${typo}": fix the name, or list the tool's routes ` +
      `in \`providers\` (plural, each declared in recovery.providers), e.g. providers: ["${typo}"]. ` +
      `If ${show(value)} is its real name, declare it: recovery.providers: [{ name: ${show(value)} }].`,
  );
}

/** Validates the options of one tool; `readOnly` has no default on purpose. */
export function validateToolOptions(
  name: unknown,
  input: unknown,
  fn: unknown,
  knownProviders: ReadonlyMap<string, unknown>,
): void {
  nonEmptyString(name, "tool(name)");
  const field = `tool("${name}").options`;
  const o = object(input, field);
  // Before the unknown-key check, so the old name gets a migration hint, not "unknown option".
  if (o.fallback !== undefined) {
    throw new SelfHealConfigError(
      `${field}.fallback`,
      "renamed to cannedAnswer (the answer given when no route can answer); failover to another provider is `providers`",
    );
  }
  knownKeys(o, TOOL_KEYS, field);
  if (typeof o.readOnly !== "boolean") {
    throw new SelfHealConfigError(
      `${field}.readOnly`,
      "required: say whether the tool writes (readOnly: false) or only reads (readOnly: true); write tools are refused while health is critical",
    );
  }
  optionalChoice(o.kind, TOOL_KINDS, `${field}.kind`);
  numbers(o, TIME_RULES, field);
  optionalFunction(o.idempotencyKey, `${field}.idempotencyKey`);
  optionalFunction(o.isEmpty, `${field}.isEmpty`);
  checkProvider(o.provider, `${field}.provider`, knownProviders);
  optionalString(o.type, `${field}.type`);
  if (o.providers !== undefined) checkProviders(o.providers, `${field}.providers`, knownProviders);
  if (o.plans !== undefined) plans(o.plans, `${field}.plans`);
  optionalFunction(o.cannedAnswer, `${field}.cannedAnswer`);
  optionalChoice(o.span, SPAN_MODES, `${field}.span`);
  if (typeof fn !== "function")
    throw new SelfHealConfigError(`tool("${name}")`, "the last argument must be the tool function");
}
