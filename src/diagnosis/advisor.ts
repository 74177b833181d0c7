import type { Clock } from "../clock.js";
import { withDeadline } from "../deadline.js";
import { PATTERNS, type Pattern } from "../telemetry/conventions.js";
import { boundedJson, describeThrown, redact } from "../telemetry/redact.js";

/** A second opinion on an error the rules could not classify. */
export interface Advice {
  pattern: Pattern;
  confidence?: number;
  note?: string;
}

/**
 * The only place an LLM may look at errors: called for UNKNOWN diagnoses when configured, off
 * the call's path (the call is never held for it), within a time box. The answer is advisory:
 * recorded with the UNKNOWN sample and reported as an event, never used to pick a recovery.
 */
export type EscalateUnknown = (
  error: unknown,
  context: { tool: string; text: string; signal: AbortSignal },
) => Promise<Advice | undefined> | Advice | undefined;

export const DEFAULT_ADVICE_TIMEOUT_MS = 5_000;

/** What came of asking: the advice, or why there is none. */
export interface AdviceOutcome {
  tool: string;
  advice?: Advice;
  /** Why there is no advice: timeout, a throw, or an answer that names no known pattern. */
  failure?: string;
}

export async function askAdvisor(
  hook: EscalateUnknown,
  error: unknown,
  context: { tool: string; text: string },
  timeoutMs: number,
  clock: Clock,
): Promise<AdviceOutcome> {
  const controller = new AbortController();
  try {
    const advice = await withDeadline(
      () => hook(error, { ...context, signal: controller.signal }),
      {
        controller,
        timeoutMs,
        timeoutError: () => new Error(`escalateUnknown did not answer within ${timeoutMs} ms`),
        clock,
      },
    );
    if (advice === undefined) return { tool: context.tool, failure: "no advice" };
    if (!PATTERNS.includes(advice.pattern)) {
      return {
        tool: context.tool,
        // The advisor's answer is foreign text: bounded and redacted like any error text.
        failure: redact(`answered an unknown pattern ${boundedJson(advice.pattern, 200) ?? "?"}`),
      };
    }
    const kept: Advice = { pattern: advice.pattern };
    if (typeof advice.confidence === "number")
      kept.confidence = Math.min(1, Math.max(0, advice.confidence));
    if (typeof advice.note === "string") kept.note = redact(advice.note, 512);
    return { tool: context.tool, advice: kept };
  } catch (e) {
    return { tool: context.tool, failure: redact(describeThrown(e), 512) };
  }
}
