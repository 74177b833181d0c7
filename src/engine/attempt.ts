import { context } from "@opentelemetry/api";
import type { Clock } from "../clock.js";
import type { ToolMetricLabels } from "../telemetry/metrics.js";
import { EmptyResponseError, isSelfHealError, ToolTimeoutError } from "../errors.js";
import { EXPIRE, type Deadline, type Expiring } from "../deadline.js";
import { attemptCost } from "../recovery/providers.js";
import { modelRequest } from "../telemetry/gen-ai.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import { errorType, recordAttemptError } from "../telemetry/spans.js";
import { AttemptContext } from "./call-context.js";
import { diagnoseFailure } from "./diagnose.js";
import type {
  AbortedOnce,
  AttemptSpec,
  CallState,
  Engine,
  FailedOnce,
  OnceResult,
  ToolRuntime,
} from "./engine.js";

/** What hears how an attempt ended: exactly one of its methods is called, once. */
export interface AttemptSink<R> {
  answered(value: R, ctx: AttemptContext): void;
  failed(error: unknown, ctx: AttemptContext): void;
}

/** What `#settle` is given for an attempt that answered (any other value is its failure). */
const ANSWERED = Symbol("answered");

/**
 * An attempt in flight: the context the tool sees, and whichever comes first of the tool's
 * answer, its throw, the deadline (a ToolTimeoutError) and the caller's abort (its reason)
 * settles it. One object holds what closures would (settle, abort, expire): the success path
 * allocates less, and the state sits in #private fields the tool cannot see.
 */
class RunningAttempt<R> extends AttemptContext implements Expiring {
  #done = false;
  #deadline: Deadline | undefined;
  #onAbort: (() => void) | undefined;
  /** When the tool was run (its request sent); undefined while it was not. */
  #sentAt: number | undefined;
  readonly #engine: Engine;
  readonly #tool: string;
  readonly #labels: ToolMetricLabels;
  readonly #signal: AbortSignal | undefined;
  readonly #sink: AttemptSink<R>;
  readonly #call: CallState;

  constructor(
    engine: Engine,
    tool: ToolRuntime<unknown, R>,
    c: CallState,
    spec: AttemptSpec,
    sink: AttemptSink<R>,
  ) {
    super(
      spec.timeoutMs,
      spec.provider,
      c.mode,
      spec.attempt,
      c.key,
      c.call.toolCallId,
      c.taskId,
      spec.provider === undefined
        ? undefined
        : engine.options.recovery.providers.get(spec.provider),
    );
    this.#engine = engine;
    this.#tool = tool.name;
    this.#labels = tool.labels;
    this.#signal = c.call.signal;
    this.#sink = sink;
    this.#call = c;
    // The call's span ends with what its last attempt reported (a model call's request).
    c.attempt = this;
  }

  get clock(): Clock {
    return this.#engine.options.clock;
  }

  commit(): void {
    this.#call.committed = true;
  }

  firstToken(ms: number): void {
    const { metrics } = this.#engine;
    // A tool that streams only sometimes (a framework's model calls) gets its series then.
    if (!this.#labels.stream) metrics.registerStream(this.#labels);
    metrics.streamFirstToken(this.#labels, ms);
  }

  start<A>(fn: ToolRuntime<A, R>["fn"], args: A, spec: AttemptSpec, now: number): void {
    const signal = this.#signal;
    if (signal) {
      if (signal.aborted) {
        this.#abort(signal.reason);
        return;
      }
      this.#onAbort = () => {
        this.#abort(signal.reason);
      };
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
    if (this.timeoutMs !== undefined)
      this.#deadline = this.#engine.deadlines.add(this.timeoutMs, now, this);
    let result: R | Promise<R>;
    this.#sentAt = now;
    try {
      result = spec.enter ? context.with(spec.parent, fn, undefined, args, this) : fn(args, this);
    } catch (error) {
      this.#fail(error); // a throw before returning a promise
      return;
    }
    // A native promise is used as is; a value or a thenable is adopted.
    Promise.resolve(result).then(
      (value) => {
        if (this.#settle(ANSWERED)) this.#sink.answered(value, this);
      },
      (error: unknown) => {
        this.#fail(error);
      },
    );
  }

  /**
   * The tool threw. A thrown promise is an `await` left out (`throw HttpResponseError.from(res)`):
   * the error it resolves to is what the tool meant to throw, so it is awaited (the attempt's
   * deadline and the caller's abort still apply) and that error is diagnosed and passed on; the
   * log says once per tool how to fix the tool. A promise that resolves to anything else, or
   * rejects, stays the thrown value.
   */
  #fail(error: unknown): void {
    if (this.#done) return;
    const thrown = thenable(error);
    if (!thrown) {
      if (this.#settle(error)) this.#sink.failed(error, this);
      return;
    }
    this.#engine.warnOnce(
      `${this.#tool}\0thenable`,
      `selfheal: tool "${this.#tool}" threw a Promise, not an error: an await is missing (write \`throw await HttpResponseError.from(res)\`, not \`throw HttpResponseError.from(res)\`). selfheal awaited it and diagnosed the error it resolved to; add the await so the tool throws the error itself.`,
    );
    thrown.then(
      (value) => {
        const failure = isErrorLike(value) ? value : error;
        if (this.#settle(failure)) this.#sink.failed(failure, this);
      },
      () => {
        if (this.#settle(error)) this.#sink.failed(error, this);
      },
    );
  }

  [EXPIRE](): void {
    this.#abort(new ToolTimeoutError(this.#tool, this.timeoutMs ?? 0));
  }

  /**
   * True the first time only: later outcomes (a late answer after the deadline) are dropped.
   * `outcome`: ANSWERED, or what failed the attempt.
   */
  #settle(outcome: unknown): boolean {
    if (this.#done) return false;
    this.#done = true;
    if (this.#deadline) this.#engine.deadlines.clear(this.#deadline);
    if (this.#onAbort) this.#signal?.removeEventListener("abort", this.#onAbort);
    // A model request (an LLM tool's, or one that reported its model or tokens): its duration,
    // tokens and cost, now that it has reported all it will. A priced API that is not a model
    // (payments) is not model spend.
    if (
      this.#engine.metrics.recordsModelRequests &&
      (this.#labels.llm !== undefined || this.usage !== undefined || this.model !== undefined)
    )
      this.#engine.metrics.modelRequest(this.#labels, {
        request: modelRequest(this.model, this.provider, this.providerConfig?.model),
        durationMs:
          this.#sentAt === undefined ? undefined : this.#engine.options.clock.now() - this.#sentAt,
        errorType: outcome === ANSWERED ? undefined : errorType(outcome),
        usage: this.usage,
        usd: attemptCost(this.providerConfig, this.reportedUsd, this.usage),
        route: this.provider,
      });
    return true;
  }

  #abort(reason: unknown): void {
    if (!this.#settle(reason)) return;
    this.abort(reason);
    this.#sink.failed(reason, this);
  }
}

/**
 * A thrown value that is a promise or thenable, adopted as a native promise; undefined for any
 * other value. A hostile value (a getter that throws, a Proxy) is no thenable.
 */
function thenable(value: unknown): Promise<unknown> | undefined {
  if ((typeof value !== "object" && typeof value !== "function") || value === null)
    return undefined;
  try {
    if (typeof (value as { then?: unknown }).then !== "function") return undefined;
    // A thenable's `then` runs here, once; one that throws makes the promise reject.
    return Promise.resolve(value as PromiseLike<unknown>);
  } catch {
    return undefined;
  }
}

/** What a tool meant to throw: an Error, or selfheal's own (from any copy of the package). */
function isErrorLike(value: unknown): boolean {
  return value instanceof Error || isSelfHealError(value);
}

/** Starts one run of the tool; `sink` hears how it ended. */
export function startAttempt<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  c: CallState,
  spec: AttemptSpec,
  now: number,
  sink: AttemptSink<R>,
): void {
  new RunningAttempt(engine, tool as ToolRuntime<unknown, R>, c, spec, sink).start(
    tool.fn,
    args,
    spec,
    now,
  );
}

/** A user `isEmpty` that throws must not turn a good answer into a failure: count it as an answer. */
function safeIsEmpty<R>(isEmpty: (result: R) => boolean, result: R): boolean {
  try {
    return isEmpty(result);
  } catch {
    return false;
  }
}

function costOf(engine: Engine, spec: AttemptSpec, ctx: AttemptContext): number {
  if (spec.provider === undefined && ctx.reportedUsd === undefined) return 0;
  const provider =
    spec.provider === undefined ? undefined : engine.options.recovery.providers.get(spec.provider);
  return attemptCost(provider, ctx.reportedUsd, ctx.usage);
}

/** Whether an answer is a real one: any answer of a plain tool, a non-empty one of an LLM tool. */
export function isAnswer<A, R>(tool: ToolRuntime<A, R>, value: R): boolean {
  return !tool.isEmpty || !safeIsEmpty(tool.isEmpty, value);
}

/** The verdict on an empty answer of an LLM tool: a failure, diagnosed. */
export function attemptEmpty<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  spec: AttemptSpec,
  ctx: AttemptContext,
  value: R,
): Promise<FailedOnce> {
  const error = new EmptyResponseError(tool.name);
  return diagnoseFailure(
    engine,
    tool,
    spec.provider,
    error,
    error.message,
    spec.parent,
    c.taskId,
    spec.attempt === 1,
  ).then((diagnosis) => ({
    ok: false as const,
    failure: {
      error,
      diagnosis,
      provider: spec.provider,
      timeoutMs: spec.requestedMs,
      empty: { value },
    },
    costUsd: costOf(engine, spec, ctx),
    errorType: error.name,
    message: error.message,
  }));
}

/** The verdict on a throw: the caller's abort, or a failure with its error span and diagnosis. */
export async function attemptFailed<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  c: CallState,
  spec: AttemptSpec,
  ctx: AttemptContext,
  error: unknown,
): Promise<FailedOnce | AbortedOnce> {
  const costUsd = costOf(engine, spec, ctx);
  if (c.call.signal?.aborted) return { aborted: true, error, costUsd };
  const { tracer, options } = engine;
  const type = errorType(error);
  const message = redact(describeThrown(error), options.maxErrorLength);
  recordAttemptError(
    tracer,
    spec.parent,
    options.clock.now(),
    error,
    type,
    message,
    spec.attempt,
    options.maxErrorLength,
    tool.identity,
  );
  const diagnosis = await diagnoseFailure(
    engine,
    tool,
    spec.provider,
    error,
    message,
    spec.parent,
    c.taskId,
    spec.attempt === 1,
  );
  return {
    ok: false,
    failure: { error, diagnosis, provider: spec.provider, timeoutMs: spec.requestedMs },
    costUsd,
    errorType: type,
    message,
  };
}

/** Runs the tool once, to its verdict: recovery's attempts (the first attempt is inlined). */
export function runOnce<A, R>(
  engine: Engine,
  tool: ToolRuntime<A, R>,
  args: A,
  c: CallState,
  spec: AttemptSpec,
): Promise<OnceResult<R>> {
  return new Promise<OnceResult<R>>((resolve, reject) => {
    startAttempt(engine, tool, args, c, spec, engine.options.clock.now(), {
      answered(value, ctx) {
        try {
          resolve(
            isAnswer(tool, value)
              ? { ok: true, value, costUsd: costOf(engine, spec, ctx) }
              : attemptEmpty(engine, tool, c, spec, ctx, value),
          );
        } catch (error) {
          reject(error);
        }
      },
      failed(error, ctx) {
        resolve(attemptFailed(engine, tool, c, spec, ctx, error));
      },
    });
  });
}
