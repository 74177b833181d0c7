import type { HealthStatus } from "./telemetry/conventions.js";

/**
 * Marker that survives duplicate copies of the package (two versions in one `node_modules`):
 * guards test the marker and the stable `code`, never `instanceof`.
 */
const MARKER = Symbol.for("selfheal:error");

/** Stable codes of every error selfheal throws. */
export type SelfHealErrorCode =
  "SELFHEAL_CONFIG" | "SELFHEAL_HEALTH_CHECK_FAILED" | "SELFHEAL_TOOL_TIMEOUT" | "SELFHEAL_CLOSED";

/** Base class of every error selfheal throws. */
export abstract class SelfHealError extends Error {
  abstract readonly code: SelfHealErrorCode;
  readonly [MARKER] = true;
}

function hasCode(e: unknown, code: SelfHealErrorCode): boolean {
  return (
    typeof e === "object" &&
    e !== null &&
    (e as Record<symbol, unknown>)[MARKER] === true &&
    (e as { code?: unknown }).code === code
  );
}

/** True for any error thrown by selfheal, from any copy of the package. */
export function isSelfHealError(e: unknown): e is SelfHealError {
  return typeof e === "object" && e !== null && (e as Record<symbol, unknown>)[MARKER] === true;
}

/** Invalid configuration; the message names the bad field. Thrown at construction, never later. */
export class SelfHealConfigError extends SelfHealError {
  readonly code = "SELFHEAL_CONFIG";
  override readonly name = "SelfHealConfigError";
  constructor(
    /** Dotted path of the bad field, e.g. `health.successRate.warning`. */
    readonly field: string,
    problem: string,
  ) {
    super(`selfheal: invalid option \`${field}\`: ${problem}`);
  }
}
export const isSelfHealConfigError = (e: unknown): e is SelfHealConfigError =>
  hasCode(e, "SELFHEAL_CONFIG");

/**
 * A write tool was refused because health is critical (read-only mode). Reads still run.
 * Nothing was sent to the tool, so retrying later is always safe.
 */
export class HealthCheckFailedError extends SelfHealError {
  readonly code = "SELFHEAL_HEALTH_CHECK_FAILED";
  override readonly name = "HealthCheckFailedError";
  constructor(
    readonly tool: string,
    readonly status: HealthStatus,
    /** The tool whose own health is critical; undefined when the whole agent is. */
    readonly criticalTool: string | undefined,
  ) {
    super(
      `selfheal: write tool "${tool}" refused: health of ${criticalTool === undefined ? "the agent" : `tool "${criticalTool}"`} is ${status}; read-only mode until it recovers (nothing was sent, retrying later is safe)`,
    );
  }
}
export const isHealthCheckFailedError = (e: unknown): e is HealthCheckFailedError =>
  hasCode(e, "SELFHEAL_HEALTH_CHECK_FAILED");

/** The tool did not settle within its `timeoutMs`; its `AbortSignal` was aborted. */
export class ToolTimeoutError extends SelfHealError {
  readonly code = "SELFHEAL_TOOL_TIMEOUT";
  override readonly name = "ToolTimeoutError";
  constructor(
    readonly tool: string,
    readonly timeoutMs: number,
  ) {
    super(`selfheal: tool "${tool}" timed out after ${timeoutMs} ms`);
  }
}
export const isToolTimeoutError = (e: unknown): e is ToolTimeoutError =>
  hasCode(e, "SELFHEAL_TOOL_TIMEOUT");

/** A call was made after `close()`. */
export class SelfHealClosedError extends SelfHealError {
  readonly code = "SELFHEAL_CLOSED";
  override readonly name = "SelfHealClosedError";
  constructor(what: string) {
    super(`selfheal: ${what} after close()`);
  }
}
export const isSelfHealClosedError = (e: unknown): e is SelfHealClosedError =>
  hasCode(e, "SELFHEAL_CLOSED");
