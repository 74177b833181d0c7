import { context, type Context } from "@opentelemetry/api";
import { withDeadline } from "../deadline.js";
import { EmptyResponseError, ToolTimeoutError } from "../errors.js";
import { attemptCost, type ProviderConfig } from "../recovery/providers.js";
import type { Failure } from "../recovery/strategy.js";
import type { ToolMetricLabels } from "../telemetry/metrics.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import { errorType, recordAttemptError } from "../telemetry/spans.js";
import { AttemptContext, type CallMode } from "./call-context.js";
import { diagnoseFailure } from "./diagnosis-step.js";
import type { ToolFunction } from "./options.js";
import type { Engine } from "./tool.js";

/** What every attempt of one tool shares, set up once at registration. */
export interface ToolRuntime<A, R> {
  name: string;
  fn: ToolFunction<A, R>;
  /** Undefined unless `kind: "llm"`. */
  isEmpty: ((result: R) => boolean) | undefined;
  /** Primary first; `[undefined]` for a tool without providers. */
  providers: readonly (string | undefined)[];
  /** Breakers open on their own only where another route can take the traffic. */
  canTrip: boolean;
  labels: ToolMetricLabels;
}

/** One attempt's parameters. */
export interface AttemptSpec {
  provider: string | undefined;
  timeoutMs: number | undefined;
  attempt: number;
  mode: CallMode;
  idempotencyKey: string | undefined;
  toolCallId: string | undefined;
  taskId: string | undefined;
  callerSignal: AbortSignal | undefined;
  /** Context the attempt's spans and the tool's own spans start in. */
  parent: Context;
}

export type OnceResult<R> =
  | { ok: true; value: R; costUsd: number }
  | { ok: false; failure: Failure; costUsd: number; errorType: string; message: string }
  /** The caller aborted: no diagnosis, no verdict on the route. */
  | { aborted: true; error: unknown; costUsd: number };

/** A user `isEmpty` that throws must not turn a good answer into a failure: count it as an answer. */
function safeIsEmpty<R>(isEmpty: (result: R) => boolean, result: R): boolean {
  try {
    return isEmpty(result);
  } catch {
    return false;
  }
}

/**
 * Runs the tool once: its call context, its deadline and the caller's signal, an empty-answer
 * check for LLM tools, and for a failure the `agent.tool_call.error` span and the diagnosis.
 */
export async function runOnce<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  spec: AttemptSpec,
): Promise<OnceResult<R>> {
  const { options, tracer } = engine;
  const { clock, maxErrorLength } = options;
  const needsController = spec.timeoutMs !== undefined || spec.callerSignal !== undefined;
  const controller = needsController ? new AbortController() : undefined;
  const ctx = new AttemptContext(
    spec.timeoutMs,
    spec.provider,
    spec.mode,
    spec.attempt,
    spec.idempotencyKey,
    spec.toolCallId,
    spec.taskId,
    controller,
  );
  const provider: ProviderConfig | undefined =
    spec.provider === undefined ? undefined : options.recovery.providers.get(spec.provider);
  const cost = () => attemptCost(provider, ctx.reportedUsd, ctx.usage);
  let value: R;
  try {
    value = controller
      ? await context.with(spec.parent, () =>
          withDeadline(() => tool.fn(args, ctx), {
            controller,
            timeoutMs: spec.timeoutMs,
            timeoutError: () => new ToolTimeoutError(tool.name, spec.timeoutMs ?? 0),
            callerSignal: spec.callerSignal,
            clock,
          }),
        )
      : await context.with(spec.parent, tool.fn, undefined, args, ctx);
  } catch (error) {
    if (spec.callerSignal?.aborted) return { aborted: true, error, costUsd: cost() };
    const type = errorType(error);
    const message = redact(describeThrown(error), maxErrorLength);
    recordAttemptError(tracer, spec.parent, error, type, message, spec.attempt, maxErrorLength);
    const diagnosis = await diagnoseFailure(
      engine,
      tool,
      spec.provider,
      error,
      message,
      spec.parent,
      spec.taskId,
      spec.attempt === 1,
    );
    return {
      ok: false,
      failure: { error, diagnosis, provider: spec.provider, timeoutMs: spec.timeoutMs },
      costUsd: cost(),
      errorType: type,
      message,
    };
  }
  if (tool.isEmpty && safeIsEmpty(tool.isEmpty, value)) {
    const error = new EmptyResponseError(tool.name);
    const diagnosis = await diagnoseFailure(
      engine,
      tool,
      spec.provider,
      error,
      error.message,
      spec.parent,
      spec.taskId,
      spec.attempt === 1,
    );
    return {
      ok: false,
      failure: {
        error,
        diagnosis,
        provider: spec.provider,
        timeoutMs: spec.timeoutMs,
        empty: { value },
      },
      costUsd: cost(),
      errorType: error.name,
      message: error.message,
    };
  }
  return { ok: true, value, costUsd: cost() };
}
