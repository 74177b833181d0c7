import type { Attributes } from "@opentelemetry/api";
import { SelfHealConfigError } from "../../errors.js";
import { kindOf, ms, numbers, object, optionalString, type Plain } from "./validate.js";

/** Options passed by the caller of a wrapped tool, per call. */
export interface CallOptions {
  /** Aborting it aborts the call. */
  signal?: AbortSignal;
  /** Overrides the tool's `idempotencyKey(args)`. */
  idempotencyKey?: string;
  /** The model's id for this tool call (`gen_ai.tool.call.id`). */
  toolCallId?: string;
  /** Overrides the tool's `timeoutMs` for this call. */
  timeoutMs?: number;
  /** Overrides the tool's `deadlineMs` for this call: the whole call, recovery included. */
  deadlineMs?: number;
  /**
   * More attributes for this call's span (an adapter's `mcp.*`, say), written as it opens, so a
   * refused call carries them too. Never put arguments or secrets here: nothing is redacted.
   */
  attributes?: Attributes;
}

/** The default deadline of a call, ms, when its tool's timeout is at most a third of it. */
export const DEFAULT_DEADLINE_MS = 60_000;

/**
 * The longest a call may take, recovery included: the call's own `deadlineMs`, else the tool's,
 * else `recovery.deadlineMs`, else the larger of 60 s and 3 x the attempt timeout.
 */
export function deadlineOf(
  callMs: number | undefined,
  toolMs: number | undefined,
  recoveryMs: number | undefined,
  timeoutMs: number | undefined,
): number {
  return callMs ?? toolMs ?? recoveryMs ?? Math.max(DEFAULT_DEADLINE_MS, 3 * (timeoutMs ?? 0));
}

const CALL_KEYS = [
  "signal",
  "idempotencyKey",
  "toolCallId",
  "timeoutMs",
  "deadlineMs",
  "attributes",
] as const satisfies readonly (keyof CallOptions)[];
const TIME_RULES = { timeoutMs: ms(1), deadlineMs: ms(1) };

/** Shared by every call without options: no allocation on the hot path. */
const NO_CALL_OPTIONS: CallOptions = Object.freeze({});

const isAttributeValue = (v: unknown): boolean =>
  typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));

/**
 * Frozen attribute sets of scalars already checked: they cannot change, so a set passed on every
 * call (the healed clients' own) is checked once.
 */
const CHECKED_ATTRIBUTES = new WeakSet<object>();

/** Span attributes: a plain object of strings, finite numbers and booleans (or arrays of one). */
function checkAttributes(value: unknown, field: string): void {
  if (typeof value === "object" && value !== null && CHECKED_ATTRIBUTES.has(value)) return;
  const o = object(value, field);
  let scalars = true;
  for (const [key, v] of Object.entries(o)) {
    const array = Array.isArray(v);
    if (array) scalars = false;
    const ok = array ? v.every(isAttributeValue) : isAttributeValue(v);
    if (!ok)
      throw new SelfHealConfigError(
        `${field}.${key}`,
        "expected a string, a finite number, a boolean, or an array of them",
      );
  }
  if (scalars && Object.isFrozen(o)) CHECKED_ATTRIBUTES.add(o);
}

/**
 * What a wrong second argument is usually about: a wrapped tool takes its arguments as one value
 * (a plain-JS caller may pass them one by one, as to the function it wrapped).
 */
const ONE_ARGUMENT =
  "a wrapped tool takes one argument: pass several values as one object, tool({ query, limit }), " +
  "read by fn({ query, limit }, ctx); the second argument is only for call options";

const fieldOf = (tool: string): string => `${tool}(args, options)`;

/**
 * Validates per-call options of a wrapped tool. Every call with options passes here: the field
 * names of a refusal are built only when one is thrown.
 */
export function validateCallOptions(tool: string, input: unknown): CallOptions {
  if (input === undefined) return NO_CALL_OPTIONS;
  if (typeof input !== "object" || input === null || Array.isArray(input))
    throw new SelfHealConfigError(
      fieldOf(tool),
      `expected an object, got ${kindOf(input)}: ${ONE_ARGUMENT}`,
    );
  const o = input as Plain;
  for (const key in o) {
    if (!Object.hasOwn(o, key)) continue;
    if (!(CALL_KEYS as readonly string[]).includes(key)) {
      throw new SelfHealConfigError(
        `${fieldOf(tool)}.${key}`,
        `unknown option (known: ${CALL_KEYS.join(", ")}); ${ONE_ARGUMENT}`,
      );
    }
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw new SelfHealConfigError(`${fieldOf(tool)}.signal`, "expected an AbortSignal");
  }
  if (o.idempotencyKey !== undefined)
    optionalString(o.idempotencyKey, `${fieldOf(tool)}.idempotencyKey`);
  if (o.toolCallId !== undefined) optionalString(o.toolCallId, `${fieldOf(tool)}.toolCallId`);
  if (o.timeoutMs !== undefined || o.deadlineMs !== undefined)
    numbers(o, TIME_RULES, fieldOf(tool));
  if (o.attributes !== undefined) checkAttributes(o.attributes, `${fieldOf(tool)}.attributes`);
  return o;
}
