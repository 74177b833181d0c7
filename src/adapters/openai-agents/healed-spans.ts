import type { SelfHealing } from "../../index.js";

/**
 * The Agents SDK function spans of calls that went through a healed tool, with the instance
 * that counted them: the trace processor of that instance skips them (no double counting).
 * Weak, so a finished span is not kept alive by the mark.
 */
const healedSpans = new WeakMap<object, SelfHealing>();

/** Marks the SDK span of a call a healed tool is making (`getCurrentSpan()` in its invoke). */
export function markHealed(span: object, sh: SelfHealing): void {
  healedSpans.set(span, sh);
}

/** Whether `sh` already counted the call this SDK span records. */
export function countedBy(span: object, sh: SelfHealing): boolean {
  return healedSpans.get(span) === sh;
}
