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
/** What every attempt of one call shares. */
export interface CallBase {
  mode: CallMode;
  idempotencyKey: string | undefined;
  toolCallId: string | undefined;
  taskId: string | undefined;
  callerSignal: AbortSignal | undefined;
}

/**
 * One attempt's own parameters. Kept apart from CallBase on purpose: merging them with an object
 * spread on the per-call path measured ~7 µs a call (V8's clone slow path).
 */
export interface AttemptSpec {
  provider: string | undefined;
  timeoutMs: number | undefined;
  attempt: number;
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

/** An attempt under way: its context (for cost reports) and the tool's promise. */
export interface Started<R> {
  ctx: AttemptContext;
  result: Promise<R>;
}

/** Starts one attempt: its call context, its deadline and the caller's signal. */
export function startAttempt<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  base: CallBase,
  spec: AttemptSpec,
): Started<R> {
  const needsController = spec.timeoutMs !== undefined || base.callerSignal !== undefined;
  const controller = needsController ? new AbortController() : undefined;
  const providers = engine.options.recovery.providers;
  const ctx = new AttemptContext(
    spec.timeoutMs,
    spec.provider,
    base.mode,
    spec.attempt,
    base.idempotencyKey,
    base.toolCallId,
    base.taskId,
    spec.provider === undefined ? undefined : providers.get(spec.provider),
    controller,
  );
  let result: Promise<R>;
  try {
    result = controller
      ? context.with(spec.parent, () =>
          withDeadline(() => tool.fn(args, ctx), {
            controller,
            timeoutMs: spec.timeoutMs,
            timeoutError: () => new ToolTimeoutError(tool.name, spec.timeoutMs ?? 0),
            callerSignal: base.callerSignal,
            clock: engine.options.clock,
          }),
        )
      : Promise.resolve(context.with(spec.parent, tool.fn, undefined, args, ctx));
  } catch (error) {
    result = Promise.reject(error); // a tool that throws before returning a promise
  }
  return { ctx, result };
}

function costOf(engine: Engine, spec: AttemptSpec, ctx: AttemptContext): number {
  const provider: ProviderConfig | undefined =
    spec.provider === undefined ? undefined : engine.options.recovery.providers.get(spec.provider);
  return attemptCost(provider, ctx.reportedUsd, ctx.usage);
}

/** The verdict on an answer: fine, or (for an LLM tool) empty, which is diagnosed as a failure. */
export function attemptAnswered<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  base: CallBase,
  spec: AttemptSpec,
  started: Started<R>,
  value: R,
): OnceResult<R> | Promise<OnceResult<R>> {
  if (!tool.isEmpty || !safeIsEmpty(tool.isEmpty, value)) {
    return { ok: true, value, costUsd: costOf(engine, spec, started.ctx) };
  }
  const error = new EmptyResponseError(tool.name);
  return diagnoseFailure(
    engine,
    tool,
    spec.provider,
    error,
    error.message,
    spec.parent,
    base.taskId,
    spec.attempt === 1,
  ).then((diagnosis) => ({
    ok: false as const,
    failure: {
      error,
      diagnosis,
      provider: spec.provider,
      timeoutMs: spec.timeoutMs,
      empty: { value },
    },
    costUsd: costOf(engine, spec, started.ctx),
    errorType: error.name,
    message: error.message,
  }));
}

/** The verdict on a throw: the caller's abort, or a failure with its error span and diagnosis. */
export async function attemptFailed<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  base: CallBase,
  spec: AttemptSpec,
  started: Started<R>,
  error: unknown,
): Promise<OnceResult<R>> {
  const costUsd = costOf(engine, spec, started.ctx);
  if (base.callerSignal?.aborted) return { aborted: true, error, costUsd };
  const { tracer, options } = engine;
  const type = errorType(error);
  const message = redact(describeThrown(error), options.maxErrorLength);
  recordAttemptError(
    tracer,
    spec.parent,
    error,
    type,
    message,
    spec.attempt,
    options.maxErrorLength,
  );
  const diagnosis = await diagnoseFailure(
    engine,
    tool,
    spec.provider,
    error,
    message,
    spec.parent,
    base.taskId,
    spec.attempt === 1,
  );
  return {
    ok: false,
    failure: { error, diagnosis, provider: spec.provider, timeoutMs: spec.timeoutMs },
    costUsd,
    errorType: type,
    message,
  };
}

/**
 * Runs the tool once: its call context, its deadline and the caller's signal, an empty-answer
 * check for LLM tools, and for a failure the `agent.tool_call.error` span and the diagnosis.
 * (The first attempt of a call does the same steps inline, to spare the per-call path a promise.)
 */
export async function runOnce<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  base: CallBase,
  spec: AttemptSpec,
): Promise<OnceResult<R>> {
  const started = startAttempt(engine, tool, args, base, spec);
  let value: R;
  try {
    value = await started.result;
  } catch (error) {
    return attemptFailed(engine, tool, base, spec, started, error);
  }
  return attemptAnswered(engine, tool, base, spec, started, value);
}
