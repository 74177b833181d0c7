import { SelfHealConfigError } from "../errors.js";
import type { CallContext, SelfHealing, ToolOptions, WrappedTool } from "../index.js";
import {
  knownKeys,
  object,
  optionalFunction,
  show,
  type Plain,
} from "../engine/options/validate.js";

/**
 * What the adapters that heal a framework's record of tools by name share (selfheal/ai-sdk and
 * selfheal/mastra): options by tool name, validated against the record; explicit read-only; one
 * selfheal tool per name and instance; `idempotencyKey` and `cannedAnswer` of the tool's input.
 */

/**
 * selfheal options for one tool, by its name in the record: those of `sh.tool` except what the
 * adapter sets (`readOnly` comes from the `readOnly` option, `kind` is `tool`, the span mode is
 * the adapter's). `idempotencyKey` and `cannedAnswer` receive the tool's input.
 */
export type ToolSetToolOptions = Omit<ToolOptions, "readOnly" | "kind" | "isEmpty" | "span">;

/** The tools that only read: a list of names, or a predicate. */
export type ReadOnlyTools = readonly string[] | ((toolName: string) => boolean);

/** How an adapter's `healTools` options are checked. */
export interface ToolSetRules {
  /** The option keys `healTools` takes. */
  keys: readonly string[];
  /** Per-tool options the adapter sets itself, each with what to do instead. */
  setByAdapter: Readonly<Record<string, string>>;
  /** Said of a `readOnly` name that is not a tool of the record (where its names come from). */
  notATool: string;
}

/**
 * Validates `healTools(tools, options)`: known keys, and names in `readOnly` and `tools` that are
 * tools of the record (a misspelt read-only tool would be treated as a write). Returns the options
 * as a plain object for the adapter's own checks.
 */
export function checkToolSetOptions(tools: unknown, input: unknown, rules: ToolSetRules): Plain {
  const set = object(tools, "healTools(tools)");
  const field = "healTools.options";
  const o = input === undefined ? {} : object(input, field);
  knownKeys(o, rules.keys, field);
  checkReadOnly(o["readOnly"], set, `${field}.readOnly`, rules.notATool);
  if (o["tools"] !== undefined) {
    const overrides = object(o["tools"], `${field}.tools`);
    for (const [name, value] of Object.entries(overrides))
      checkToolOverrides(name, value, set, `${field}.tools.${name}`, rules.setByAdapter);
  }
  return o;
}

function checkReadOnly(value: unknown, tools: Plain, field: string, notATool: string): void {
  if (value === undefined || typeof value === "function") return;
  if (!Array.isArray(value))
    throw new SelfHealConfigError(field, "expected a list of tool names or a function");
  for (const name of value as unknown[]) {
    if (typeof name !== "string" || !Object.hasOwn(tools, name))
      throw new SelfHealConfigError(field, `${show(name)} ${notATool}`);
  }
}

function checkToolOverrides(
  name: string,
  value: unknown,
  tools: Plain,
  field: string,
  setByAdapter: Readonly<Record<string, string>>,
): void {
  if (!Object.hasOwn(tools, name))
    throw new SelfHealConfigError(field, "no tool of this name in the set (a typo?)");
  const o = object(value, field);
  for (const [key, why] of Object.entries(setByAdapter)) {
    if (o[key] !== undefined) throw new SelfHealConfigError(`${field}.${key}`, why);
  }
  // Wrapped to receive the input: checked here so a bad one fails now, not at the first call.
  optionalFunction(o["idempotencyKey"], `${field}.idempotencyKey`);
  optionalFunction(o["cannedAnswer"], `${field}.cannedAnswer`);
}

/**
 * Read-only only when declared: a tool it does not name is a write (refused while critical). A
 * predicate must answer with a boolean.
 */
export function isReadOnly(name: string, declared: ReadOnlyTools | undefined): boolean {
  if (declared === undefined) return false;
  if (typeof declared !== "function") return declared.includes(name);
  const verdict: unknown = declared(name);
  if (typeof verdict !== "boolean") {
    throw new SelfHealConfigError(
      "healTools.options.readOnly",
      `expected true or false for tool "${name}", got ${typeof verdict}`,
    );
  }
  return verdict;
}

/** An execution of a framework's tool: its input is what the tool's own options receive. */
export interface ToolInput {
  readonly input: unknown;
}

/** A tool's selfheal tool on one instance, and how it was declared. */
export interface Registration<E extends ToolInput> {
  readonly readOnly: boolean;
  readonly call: WrappedTool<E, unknown>;
}

/** The selfheal tools of an adapter, per instance and name: `sh.tool` takes a name once. */
export class ToolRegistry<E extends ToolInput> {
  private readonly registered = new WeakMap<SelfHealing, Map<string, Registration<E>>>();

  /**
   * The tool's registration on `sh`, made on first use (`sh.tool` with `options`, running `run`);
   * a second one must agree on `readOnly`.
   */
  register(
    sh: SelfHealing,
    name: string,
    options: ToolOptions<E> & { readOnly: boolean },
    run: (execution: E, ctx: CallContext) => unknown,
  ): Registration<E> {
    let byName = this.registered.get(sh);
    if (!byName) this.registered.set(sh, (byName = new Map<string, Registration<E>>()));
    const existing = byName.get(name);
    if (existing) {
      checkSameSafety(name, existing.readOnly, options.readOnly);
      return existing;
    }
    const call = sh.tool(name, options, run);
    const registration = { readOnly: options.readOnly, call };
    byName.set(name, registration);
    return registration;
  }
}

/** A tool healed before is declared the same way again: read-only or a write. */
export function checkSameSafety(name: string, before: boolean, now: boolean): void {
  if (before !== now) {
    throw new SelfHealConfigError(
      "healTools.options.readOnly",
      `tool "${name}" was healed before as ${before ? "read-only" : "a write"}; a tool name is one tool on an instance, declare it the same way everywhere`,
    );
  }
}

/** The options of `sh.tool` for a tool: the overrides, their functions moved onto the input. */
export function inputToolOptions<E extends ToolInput>(
  readOnly: boolean,
  overrides: ToolSetToolOptions | undefined,
): ToolOptions<E> & { readOnly: boolean } {
  const { idempotencyKey, cannedAnswer, ...rest } = overrides ?? {};
  return {
    ...rest,
    readOnly,
    kind: "tool",
    ...(idempotencyKey && { idempotencyKey: (e: E) => idempotencyKey(e.input) }),
    ...(cannedAnswer && { cannedAnswer: (e: E, error: unknown) => cannedAnswer(e.input, error) }),
  };
}
