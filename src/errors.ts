import type { HealthStatus, Pattern } from "./telemetry/conventions.js";
import { oneLine, redact } from "./telemetry/redact.js";

/**
 * Text that may carry user data (a task id, a bad option value) as a message shows it: redacted,
 * cut, on one line with control characters made visible, so a message never carries a secret
 * or forges a log line.
 */
const shown = (text: string, maxLength = 200): string => oneLine(redact(text, maxLength));

/** A name from the configuration (a tool, a provider, an option path): cut, on one line. */
const named = (text: string): string => oneLine(text.slice(0, 200));

/**
 * Marker that survives duplicate copies of the package (two versions in one `node_modules`):
 * guards test the marker and the stable `code`, never `instanceof`.
 */
const MARKER = Symbol.for("selfheal:error");

/** Stable codes of every error selfheal throws. */
export type SelfHealErrorCode =
  | "SELFHEAL_CONFIG"
  | "SELFHEAL_HEALTH_CHECK_FAILED"
  | "SELFHEAL_TOOL_TIMEOUT"
  | "SELFHEAL_CLOSED"
  | "SELFHEAL_EMPTY_RESPONSE"
  | "SELFHEAL_HTTP_RESPONSE"
  | "SELFHEAL_CIRCUIT_OPEN"
  | "SELFHEAL_ESCALATED"
  | "SELFHEAL_BUDGET_EXHAUSTED"
  | "SELFHEAL_READ_ONLY"
  | "SELFHEAL_IN_FLIGHT_ELSEWHERE"
  | "SELFHEAL_STREAM_FIRST_TOKEN_TIMEOUT"
  | "SELFHEAL_STREAM_STALLED"
  | "SELFHEAL_STREAM_TRUNCATED"
  | "SELFHEAL_STREAM_INTERRUPTED"
  | "SELFHEAL_FLEET_UNAVAILABLE";

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
    super(`selfheal: invalid option \`${named(field)}\`: ${shown(problem, 512)}`);
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
  ) {
    super(
      `selfheal: write tool "${named(tool)}" refused: the agent's health is ${status}; read-only mode until it recovers (nothing was sent, retrying later is safe)`,
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
    super(`selfheal: tool "${named(tool)}" timed out after ${timeoutMs} ms`);
  }
}
export const isToolTimeoutError = (e: unknown): e is ToolTimeoutError =>
  hasCode(e, "SELFHEAL_TOOL_TIMEOUT");

/** A call was made after `close()`. */
export class SelfHealClosedError extends SelfHealError {
  readonly code = "SELFHEAL_CLOSED";
  override readonly name = "SelfHealClosedError";
  constructor(what: string) {
    super(`selfheal: ${shown(what)} after close()`);
  }
}
export const isSelfHealClosedError = (e: unknown): e is SelfHealClosedError =>
  hasCode(e, "SELFHEAL_CLOSED");

/** An LLM tool answered with nothing (see `isEmpty`); diagnosed as EMPTY_LLM_RESPONSE. */
export class EmptyResponseError extends SelfHealError {
  readonly code = "SELFHEAL_EMPTY_RESPONSE";
  override readonly name = "EmptyResponseError";
  constructor(readonly tool: string) {
    super(`selfheal: LLM tool "${named(tool)}" returned an empty response`);
  }
}
export const isEmptyResponseError = (e: unknown): e is EmptyResponseError =>
  hasCode(e, "SELFHEAL_EMPTY_RESPONSE");

/** Most of a response body kept on an HttpResponseError (error bodies are short; junk is not). */
const MAX_BODY = 8 * 1024;

/**
 * A non-2xx HTTP response as an error, with what the diagnoser reads: `status`, `headers`
 * (Retry-After) and the start of the body (error codes and wording). Throw it from tools that
 * call HTTP APIs with `fetch`: `if (!res.ok) throw await HttpResponseError.from(res)`. The
 * message shows the body redacted and on one line (it may echo a key); `body` keeps it as sent.
 */
export class HttpResponseError extends SelfHealError {
  readonly code = "SELFHEAL_HTTP_RESPONSE";
  override readonly name = "HttpResponseError";
  constructor(
    readonly status: number,
    readonly headers: Headers,
    /** The first 8 KiB of the body. */
    readonly body: string,
    readonly url: string,
  ) {
    super(`HTTP ${status}${body ? `: ${shown(body, 512)}` : ""}`);
    this.error = parseErrorBody(body);
  }

  /** The body's `error` object (OpenAI-compatible APIs: `{ error: { message, type, code } }`). */
  readonly error: Record<string, unknown> | undefined;

  /**
   * Reads the start of the body (at most 8 KiB, the rest is cancelled, never buffered) and
   * builds the error; a body that cannot be read still leaves the status and headers.
   */
  static async from(response: Response): Promise<HttpResponseError> {
    let body = "";
    const reader = response.body?.getReader();
    if (reader) {
      const decoder = new TextDecoder();
      try {
        while (body.length < MAX_BODY) {
          const chunk = await reader.read();
          if (chunk.done) break;
          body += decoder.decode(chunk.value as Uint8Array, { stream: true });
        }
      } catch {
        // Keep what was read.
      } finally {
        void reader.cancel().catch(() => undefined);
      }
    }
    return new HttpResponseError(
      response.status,
      response.headers,
      body.slice(0, MAX_BODY),
      response.url,
    );
  }
}
function parseErrorBody(body: string): Record<string, unknown> | undefined {
  if (!body.startsWith("{")) return undefined;
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === "object" && parsed.error !== null
      ? (parsed.error as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export const isHttpResponseError = (e: unknown): e is HttpResponseError =>
  hasCode(e, "SELFHEAL_HTTP_RESPONSE");

/** The dependency's circuit is open: the call failed fast, nothing was sent. */
export class CircuitOpenError extends SelfHealError {
  readonly code = "SELFHEAL_CIRCUIT_OPEN";
  override readonly name = "CircuitOpenError";
  constructor(
    readonly dependency: string,
    /** When the breaker lets a probe through, ms from now. */
    readonly retryAfterMs: number,
  ) {
    super(
      `selfheal: circuit for "${named(dependency)}" is open; next probe in ${Math.ceil(retryAfterMs / 1000)} s`,
    );
  }
}
export const isCircuitOpenError = (e: unknown): e is CircuitOpenError =>
  hasCode(e, "SELFHEAL_CIRCUIT_OPEN");

/**
 * Another worker of the fleet was still sending a write with the same idempotency key when this
 * call's deadline came: this call sent nothing (the write may yet succeed there).
 */
export class InFlightElsewhereError extends SelfHealError {
  readonly code = "SELFHEAL_IN_FLIGHT_ELSEWHERE";
  override readonly name = "InFlightElsewhereError";
  constructor(readonly tool: string) {
    super(
      `selfheal: a write of "${named(tool)}" with this idempotency key is still in flight on another worker; nothing was sent`,
    );
  }
}
export const isInFlightElsewhereError = (e: unknown): e is InFlightElsewhereError =>
  hasCode(e, "SELFHEAL_IN_FLIGHT_ELSEWHERE");

/**
 * Recovery ran out of options and the failure needs a person. `notified` says whether a notifier
 * took the alert; `notifierConfigured` whether `recovery.notifiers` has any (without one, nobody
 * is told: the message says so and names the option). `cause` is the last error.
 */
export class HumanEscalationRequiredError extends SelfHealError {
  readonly code = "SELFHEAL_ESCALATED";
  override readonly name = "HumanEscalationRequiredError";
  /** Whether `recovery.notifiers` has a notifier (false: the escalation reached nobody). */
  readonly notifierConfigured: boolean;
  constructor(
    readonly tool: string,
    readonly pattern: Pattern,
    /** Whether a notification went out (false when throttled, failed or no notifier is set). */
    readonly notified: boolean,
    options: { cause: unknown; notifierConfigured?: boolean },
  ) {
    const configured = options.notifierConfigured ?? true;
    const what = notified
      ? "escalated to a human"
      : configured
        ? "it needs a human, but no alert went out for it (one of its kind was sent within recovery.throttleMs, or the notifiers failed: see the log)"
        : "it needs a human, but no notifier is configured, so nobody was alerted (set recovery.notifiers: slackNotifier, webhookNotifier or pushoverNotifier from selfheal/notify)";
    super(`selfheal: "${named(tool)}" failed with ${pattern} and could not be recovered; ${what}`, {
      cause: options.cause,
    });
    this.notifierConfigured = configured;
  }
}
export const isHumanEscalationRequiredError = (e: unknown): e is HumanEscalationRequiredError =>
  hasCode(e, "SELFHEAL_ESCALATED");

/** The task's recovery budget would be exceeded by another attempt. `cause` is the last error. */
export class RecoveryBudgetExhaustedError extends SelfHealError {
  readonly code = "SELFHEAL_BUDGET_EXHAUSTED";
  override readonly name = "RecoveryBudgetExhaustedError";
  constructor(
    readonly tool: string,
    readonly spentUsd: number,
    readonly budgetUsd: number,
    options: { cause: unknown },
  ) {
    super(
      `selfheal: recovery budget of $${budgetUsd.toFixed(4)} for this task is spent ($${spentUsd.toFixed(4)}); "${named(tool)}" not retried`,
      options,
    );
  }
}
export const isRecoveryBudgetExhaustedError = (e: unknown): e is RecoveryBudgetExhaustedError =>
  hasCode(e, "SELFHEAL_BUDGET_EXHAUSTED");

/** Recovery degraded the agent to read-only; writes are refused until health recovers. */
export class ReadOnlyModeError extends SelfHealError {
  readonly code = "SELFHEAL_READ_ONLY";
  override readonly name = "ReadOnlyModeError";
  constructor(readonly tool: string) {
    super(
      `selfheal: write tool "${named(tool)}" refused: recovery degraded the agent to read-only until health recovers (nothing was sent)`,
    );
  }
}
export const isReadOnlyModeError = (e: unknown): e is ReadOnlyModeError =>
  hasCode(e, "SELFHEAL_READ_ONLY");

/** What a stream had done when it failed: chunks read, and whether a token had come. */
export interface StreamProgress {
  /** Chunks the attempt read (every kind: tokens, metadata, finish). */
  readonly chunks: number;
  /** Time from the attempt's start to its first token, ms (undefined: no token came). */
  readonly firstTokenMs: number | undefined;
}

/**
 * A streamed attempt sent no token within `firstTokenMs` (a queue, a cold model, a hung
 * connection); diagnosed as STREAM_FIRST_TOKEN_TIMEOUT. Its signal was aborted.
 */
export class StreamFirstTokenTimeoutError extends SelfHealError {
  readonly code = "SELFHEAL_STREAM_FIRST_TOKEN_TIMEOUT";
  override readonly name = "StreamFirstTokenTimeoutError";
  constructor(
    readonly tool: string,
    readonly firstTokenMs: number,
    readonly progress: StreamProgress,
  ) {
    super(`selfheal: stream "${named(tool)}" sent no token within ${firstTokenMs} ms`);
  }
}
export const isStreamFirstTokenTimeoutError = (e: unknown): e is StreamFirstTokenTimeoutError =>
  hasCode(e, "SELFHEAL_STREAM_FIRST_TOKEN_TIMEOUT");

/**
 * A streamed attempt went silent for `idleMs` after its first token; diagnosed as STREAM_STALLED.
 * Its signal was aborted.
 */
export class StreamStalledError extends SelfHealError {
  readonly code = "SELFHEAL_STREAM_STALLED";
  override readonly name = "StreamStalledError";
  constructor(
    readonly tool: string,
    readonly idleMs: number,
    readonly progress: StreamProgress,
  ) {
    super(
      `selfheal: stream "${named(tool)}" stalled: no chunk for ${idleMs} ms after ${progress.chunks} chunks`,
    );
  }
}
export const isStreamStalledError = (e: unknown): e is StreamStalledError =>
  hasCode(e, "SELFHEAL_STREAM_STALLED");

/**
 * A streamed attempt ended without its terminal signal (a cut connection, no finish reason), or
 * with a finish reason the caller counts as incomplete (`length`; `content_filter` is diagnosed
 * CONTENT_POLICY). Diagnosed as STREAM_TRUNCATED; `cause` is what the source threw, if anything.
 */
export class StreamTruncatedError extends SelfHealError {
  readonly code = "SELFHEAL_STREAM_TRUNCATED";
  override readonly name = "StreamTruncatedError";
  constructor(
    readonly tool: string,
    /** `cut` (no terminal signal) or the finish reason (`length`, `content_filter`, ...). */
    readonly type: string,
    readonly progress: StreamProgress,
    options?: { cause: unknown },
  ) {
    super(
      type !== "cut"
        ? `selfheal: stream "${named(tool)}" finished with reason "${named(type)}" after ${progress.chunks} chunks`
        : options === undefined
          ? `selfheal: stream "${named(tool)}" ended without its terminal signal after ${progress.chunks} chunks`
          : // The source threw mid-answer (a cut socket, the provider's error event): say so, not
            // that it ended quietly; what it threw is the cause.
            `selfheal: stream "${named(tool)}" broke after ${progress.chunks} chunks: its source threw (see cause)`,
      options,
    );
  }
}
export const isStreamTruncatedError = (e: unknown): e is StreamTruncatedError =>
  hasCode(e, "SELFHEAL_STREAM_TRUNCATED");

/**
 * A stream failed after part of its answer had reached the caller, and recovery could not give a
 * whole one (`afterFirstToken: "fail"`, or `"restart"` with every route spent): what the caller
 * holds is incomplete. `cause` is the failure (a StreamStalledError, StreamTruncatedError,
 * ToolTimeoutError, ...).
 */
export class StreamInterruptedError extends SelfHealError {
  readonly code = "SELFHEAL_STREAM_INTERRUPTED";
  override readonly name = "StreamInterruptedError";
  constructor(
    readonly tool: string,
    /** Chunks the caller received of the answer it holds (since the last restart signal). */
    readonly delivered: number,
    options: { cause: unknown },
  ) {
    super(
      `selfheal: stream "${named(tool)}" failed after ${delivered} chunks reached the caller; the answer is incomplete`,
      options,
    );
  }
}
export const isStreamInterruptedError = (e: unknown): e is StreamInterruptedError =>
  hasCode(e, "SELFHEAL_STREAM_INTERRUPTED");

/**
 * A write with an idempotency key could not ask the fleet's ledger (`selfheal/redis`) whether
 * another worker sent it, within `recovery.ledger.fleetWaitMs` or the call's deadline, whichever
 * came first: Redis was away, too slow, or still taking back what it lost in a restart. Nothing
 * was sent; retrying later with the same key is safe. Thrown under
 * `recovery.ledger.whenFleetDown: "refuse"` (the default), and in every mode by a call that had
 * heard another worker was sending it. `cause` is the last failure to ask.
 */
export class FleetUnavailableError extends SelfHealError {
  readonly code = "SELFHEAL_FLEET_UNAVAILABLE";
  override readonly name = "FleetUnavailableError";
  /** How long the call waited for the fleet before giving up, ms (on the engine's clock). */
  readonly waitedMs: number | undefined;
  constructor(
    readonly tool: string,
    /** The fleet had said another worker was sending this write (it may have succeeded there). */
    readonly inFlightElsewhere: boolean,
    options?: { cause?: unknown; waitedMs?: number },
  ) {
    const waited = options?.waitedMs;
    super(
      `selfheal: write "${named(tool)}" not sent: the fleet's idempotency ledger could not be asked ${waited === undefined ? "within the call's deadline" : `within ${Math.round(waited)} ms`}${inFlightElsewhere ? " (another worker was sending it when last asked)" : ""}; nothing was sent`,
      options && "cause" in options ? { cause: options.cause } : undefined,
    );
    this.waitedMs = waited;
  }
}
export const isFleetUnavailableError = (e: unknown): e is FleetUnavailableError =>
  hasCode(e, "SELFHEAL_FLEET_UNAVAILABLE");
