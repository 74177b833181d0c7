import type { Attributes, Context } from "@opentelemetry/api";
import { CircuitOpenError, RecoveryBudgetExhaustedError, SelfHealClosedError } from "../errors.js";
import type { HealthReport } from "../health/evaluator.js";
import { RecoveryBudget } from "../recovery/budget.js";
import type { Failure } from "../recovery/strategy.js";
import {
  ATTR_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_HEALTH_STATUS,
  ATTR_IDEMPOTENCY_KEY,
  ATTR_TOOL_NAME,
  ATTR_TOOL_READ_ONLY,
  GEN_AI_OPERATION_CHAT,
  GEN_AI_OPERATION_EXECUTE_TOOL,
} from "../telemetry/conventions.js";
import { hashKey } from "../telemetry/spans.js";
import { openCall, route, waitForRoute } from "./admit.js";
import {
  attemptEmpty,
  attemptFailed,
  isAnswer,
  runOnce,
  startAttempt,
  type AttemptSink,
} from "./attempt.js";
import type { AttemptContext } from "./call-context.js";
import {
  dependencyOf,
  attemptBound,
  type AbortedOnce,
  type AttemptSpec,
  type CallState,
  type Engine,
  type FailedOnce,
  type Route,
  type Routed,
  type ToolRuntime,
} from "./engine.js";
import { isEmptyResponse } from "./empty-response.js";
import { claimWrite, type Claimed } from "./fleet-claim.js";
import {
  endWithError,
  failCall,
  FIRST_ANSWER,
  replayed,
  succeedCall,
  type Answer,
} from "./finish.js";
import {
  deadlineOf,
  validateCallOptions,
  type CallOptions,
  type ToolFunction,
  type ToolOptions,
} from "./options.js";
import { recoverCall, recoveryPlan, type RecoveryResult } from "./recover.js";
import { recordOnRoute } from "./route-outcome.js";

/** A tool wrapped by selfheal: same arguments, plus optional per-call options. */
export interface WrappedTool<A, R> {
  (args: A, options?: CallOptions): Promise<R>;
  /** The same call, reporting how it went: which provider answered, whether it recovered. */
  detailed(args: A, options?: CallOptions): Promise<CallResult<R>>;
}

/** A call's answer with how it was obtained. */
export interface CallResult<R> {
  value: R;
  outcome: "success" | "recovered";
  /** The provider that answered (undefined for a tool without providers or a fallback answer). */
  provider: string | undefined;
  /** Attempts made, the first included (0 when replayed from the idempotency ledger). */
  attempts: number;
  /** Served from the idempotency ledger: the tool was not called again. */
  replayed: boolean;
}

/** The answer of a call whose every route was closed: the tool's canned answer. */
const CANNED: Answer = { outcome: "recovered", failedAttempts: 0, fallback: true };

/** Wraps `fn` so each call is a span, a health signal, a guarded write and a recoverable failure. */
export function instrumentTool<A, R>(
  engine: Engine,
  name: string,
  options: ToolOptions<A, R>,
  fn: ToolFunction<A, R>,
): WrappedTool<A, R> {
  return wrapRuntime(engine, toolRuntime(engine, name, options, fn));
}

/** The function a caller calls, over a tool's runtime. */
export function wrapRuntime<A, R>(engine: Engine, runtime: ToolRuntime<A, R>): WrappedTool<A, R> {
  const calls = new ToolCalls(engine, runtime);
  // The plain call resolves with the value itself: no CallResult built, no second promise.
  const wrapped = (args: A, callOptions?: CallOptions) =>
    calls.start(args, callOptions, false) as Promise<R>;
  wrapped.detailed = (args: A, callOptions?: CallOptions) =>
    calls.start(args, callOptions, true) as Promise<CallResult<R>>;
  return wrapped;
}

/** What a kind of call (a stream) adds to a tool's runtime. */
export interface RuntimeExtras<R> {
  /** More attributes every call's span starts with. */
  attributes?: Attributes;
  describe?: (value: R) => Attributes;
  describeError?: (error: unknown) => Attributes | undefined;
  streamed?: boolean;
}

/** What every call of a tool shares, worked out once at registration. */
export function toolRuntime<A, R>(
  engine: Engine,
  name: string,
  options: ToolOptions<A, R>,
  fn: ToolFunction<A, R>,
  extras: RuntimeExtras<R> = {},
): ToolRuntime<A, R> {
  const isLlm = options.kind === "llm";
  const listed = options.providers ?? [options.provider];
  // A provider listed twice (primary = fallback) is one route: tried once, one breaker.
  const providers: readonly (string | undefined)[] = [...new Set(listed)];
  if (providers.length < listed.length) {
    engine.options.logger.warn(
      `selfheal: tool "${name}" lists a provider more than once (${listed.join(", ")}); each is used once, in first-listed order`,
    );
  }
  const primary = providers[0];
  // The call's children name the agent and tool in selfheal's attributes; its own span in the
  // GenAI conventions' where they define one (a tool's name on an execute_tool span), so a GenAI
  // backend counts each tool call once. Never both: each costs a recording SDK 50-100 ns a call.
  const identity: Attributes = { [ATTR_AGENT_NAME]: engine.options.agent, [ATTR_TOOL_NAME]: name };
  const attributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: isLlm ? GEN_AI_OPERATION_CHAT : GEN_AI_OPERATION_EXECUTE_TOOL,
    [ATTR_AGENT_NAME]: engine.options.agent,
    ...extras.attributes,
  };
  // Attributes only where they say something. The read-only flag marks the write tools
  // (read-only ones, the common case, carry none).
  if (!options.readOnly) attributes[ATTR_TOOL_READ_ONLY] = false;
  if (primary !== undefined) attributes[ATTR_GEN_AI_PROVIDER_NAME] = primary;
  if (isLlm) {
    // A model call names its model, not a tool (the conventions' inference span): the primary
    // route's until the call ends with the request of the attempt that answered.
    attributes[ATTR_TOOL_NAME] = name;
    const config =
      primary === undefined ? undefined : engine.options.recovery.providers.get(primary);
    if (config?.model !== undefined) attributes[ATTR_GEN_AI_REQUEST_MODEL] = config.model;
  } else {
    attributes[ATTR_GEN_AI_TOOL_NAME] = name;
    if (options.type !== undefined) attributes[ATTR_GEN_AI_TOOL_TYPE] = options.type;
  }
  const routes = providers.map((provider) => {
    const r = { provider, breaker: engine.breakers.get(dependencyOf(name, provider)) } as Route;
    Object.assign(r, { asCall: { route: r, probe: false }, asProbe: { route: r, probe: true } });
    return r;
  });
  // Breakers open on their own only where another route can take the traffic.
  if (providers.length > 1) for (const r of routes) r.breaker.allowTrip();
  engine.routesByTool.set(
    name,
    routes.map((r) => r.breaker.dependency),
  );
  return {
    name,
    fn,
    options,
    readOnly: options.readOnly,
    isEmpty: isLlm ? (options.isEmpty ?? isEmptyResponse) : undefined,
    providers,
    routes,
    labels: engine.metrics.registerTool(name, isLlm ? (primary ?? "unknown") : undefined),
    identity,
    deadlineMs: deadlineOf(
      undefined,
      options.deadlineMs,
      engine.options.recovery.deadlineMs,
      options.timeoutMs,
    ),
    // The health status only when the agent is not healthy, as `error.type` only on a failure:
    // the common case carries one attribute less (~40-100 ns a call with a recording SDK).
    attributes: {
      healthy: attributes,
      warning: { ...attributes, [ATTR_HEALTH_STATUS]: "warning" },
      critical: { ...attributes, [ATTR_HEALTH_STATUS]: "critical" },
    },
    ...(extras.describe && { describe: extras.describe }),
    ...(extras.describeError && { describeError: extras.describeError }),
    ...(extras.streamed && { streamed: true }),
  };
}

/**
 * The calls of one tool, stage by stage: admit (guard, span, deadline), the idempotency ledger,
 * route, the first attempt, recovery, finish. Up to the first attempt a call runs synchronously,
 * and its success path allocates one promise of selfheal's own: the one the caller awaits.
 */
class ToolCalls<A, R> {
  constructor(
    readonly engine: Engine,
    readonly tool: ToolRuntime<A, R>,
  ) {}

  start(args: A, callOptions: CallOptions | undefined, detailed: boolean): Promise<unknown> {
    try {
      if (this.engine.closed())
        throw new SelfHealClosedError(`tool "${this.tool.name}" was called`);
      const call = validateCallOptions(this.tool.name, callOptions);
      const started = this.engine.options.clock.now();
      const report = this.engine.health.current(started);
      if (report instanceof Promise) {
        return report.then((r) => this.admitted(args, call, started, r, detailed));
      }
      return this.admitted(args, call, started, report, detailed);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Opens the call (a refused write throws here), then the ledger or straight to a route. */
  private admitted(
    args: A,
    call: CallOptions,
    started: number,
    report: HealthReport,
    detailed: boolean,
  ): Promise<unknown> {
    const { engine, tool } = this;
    const c = openCall(engine, tool, args, call, started, report);
    try {
      c.key = call.idempotencyKey ?? tool.options.idempotencyKey?.(args);
    } catch (error) {
      failCall(engine, tool, c, error, 0, false); // the tool never ran
    }
    if (c.key === undefined) return this.routed(args, c, detailed);
    c.span.setAttribute(ATTR_IDEMPOTENCY_KEY, hashKey(c.key));
    return tool.readOnly
      ? this.routed(args, c, detailed)
      : this.keyedWrite(args, c, c.key, detailed);
  }

  /**
   * A write with a key: already written, or in flight, its outcome is shared rather than the
   * write sent twice. In a fleet the key is claimed first (one round trip the call waits for);
   * the result is shared after the answer, without the caller waiting for it.
   */
  private async keyedWrite(
    args: A,
    c: CallState,
    key: string,
    detailed: boolean,
  ): Promise<unknown> {
    const { engine, tool } = this;
    const shared = engine.ledger.find(tool.name, key, c.started);
    if (shared) {
      let value: R;
      try {
        value = (await shared).value as R;
      } catch (error) {
        return failCall(engine, tool, c, error, 0, false);
      }
      return this.replay(c, value, detailed);
    }
    let settle!: { resolve: (r: CallResult<R>) => void; reject: (e: unknown) => void };
    const inflight = new Promise<CallResult<R>>((resolve, reject) => {
      settle = { resolve, reject };
    });
    inflight.catch(() => undefined); // a rejection reaches the first caller; copies handle their own
    const forget = engine.ledger.track(tool.name, key, inflight);
    const write = engine.options.store.fleet?.ledger?.write(tool.name, key);
    try {
      let claim: Claimed | undefined;
      try {
        claim = write && (await claimWrite(engine, tool.name, write, c));
      } catch (error) {
        // Refused before anything was sent: the call ends here, no health signal.
        return failCall(engine, tool, c, error, 0, false);
      }
      if (claim?.kind === "done") {
        const result = this.replay(c, claim.value as R, true) as CallResult<R>;
        settle.resolve(result);
        return detailed ? result : result.value;
      }
      let result: CallResult<R>;
      try {
        result = (await this.routed(args, c, true)) as CallResult<R>;
      } catch (error) {
        write?.release();
        throw error;
      }
      // Fired, not awaited: until it lands the claim keeps the key held, so no other worker
      // sends it meanwhile (see FleetWrite.complete). A result decided alone is shared too.
      write?.complete(result.value, engine.options.recovery.ledger.ttlMs);
      settle.resolve(result);
      return detailed ? result : result.value;
    } catch (error) {
      settle.reject(error);
      throw error;
    } finally {
      forget();
    }
  }

  /** Ends a call answered by a write already made (here or by another worker). */
  private replay(c: CallState, value: R, detailed: boolean): unknown {
    replayed(this.engine, this.tool, c);
    const result: CallResult<R> = {
      value,
      outcome: "success",
      provider: undefined,
      attempts: 0,
      replayed: true,
    };
    return detailed ? result : value;
  }

  private routed(args: A, c: CallState, detailed: boolean): Promise<unknown> {
    const routed = route(this.tool, c.started);
    if (routed instanceof CircuitOpenError) return this.whenRoutesClosed(args, c, routed, detailed);
    return this.first(args, c, routed, c.started, detailed);
  }

  /** Every route closed: wait for one within the deadline, else the canned answer or fail fast. */
  private async whenRoutesClosed(
    args: A,
    c: CallState,
    closed: CircuitOpenError,
    detailed: boolean,
  ): Promise<unknown> {
    const { engine, tool } = this;
    const { clock } = engine.options;
    try {
      const routed = await waitForRoute(engine, tool, c, closed);
      if (!(routed instanceof CircuitOpenError))
        return await this.first(args, c, routed, clock.now(), detailed);
      const canned = tool.options.cannedAnswer;
      // Failing fast says nothing new about health.
      if (!canned) return failCall(engine, tool, c, routed, 0, false);
      const value = await canned(args, routed);
      succeedCall(engine, tool, c, value, CANNED, clock.now());
      return detailed ? result(value, "recovered", undefined, 0) : value;
    } catch (error) {
      // Whatever escaped (an abort mid-wait, a canned answer that throws) still ends the call.
      if (!c.ended) endWithError(engine, tool, c, error, 0, false);
      throw error;
    }
  }

  /** The first attempt: an answer ends the call here; a failure goes on to recovery. */
  private first(
    args: A,
    c: CallState,
    routed: Routed,
    now: number,
    detailed: boolean,
  ): Promise<unknown> {
    const first = new FirstAttempt(this, args, c, routed, now, detailed);
    return new Promise((resolve, reject) => {
      first.resolve = resolve;
      first.reject = reject;
      startAttempt(this.engine, this.tool, args, c, first, now, first);
    });
  }

  /** A failed first attempt: its verdict on the route, then recovery, then the call's end. */
  async failed(
    args: A,
    c: CallState,
    routed: Routed,
    verdict: Promise<FailedOnce | AbortedOnce>,
    detailed: boolean,
  ): Promise<unknown> {
    const { engine, tool } = this;
    try {
      const first = await verdict;
      // The caller gave up: no verdict on the route.
      if ("aborted" in first) return failCall(engine, tool, c, first.error, 0, false);
      const { clock } = engine.options;
      recordOnRoute(routed.route.breaker, clock.now(), first.failure.diagnosis, routed.probe);
      const { plan, noResend } = recoveryPlan(engine, tool, c, first.failure.diagnosis);
      const canned = tool.options.cannedAnswer;
      const recovery = await recoverCall(engine, {
        tool,
        call: c,
        runOnce: (spec) => runOnce(engine, tool, args, c, spec),
        first: first.failure,
        firstMessage: first.message,
        plan,
        noResend,
        budget:
          engine.tasks.getStore()?.budget ?? new RecoveryBudget(engine.options.recovery.budgetUsd),
        firstCostUsd: first.costUsd,
        firstErrorAt: clock.now(),
        fallback: canned && (async () => ({ value: await canned(args, first.failure.error) })),
      });
      const answered = this.verdict(c, recovery);
      return detailed ? answered : answered.value;
    } catch (error) {
      if (!c.ended) endWithError(engine, tool, c, error, 0, false);
      throw error;
    }
  }

  /** Ends a recovered or failed call by how its recovery went. */
  private verdict(c: CallState, recovery: RecoveryResult): CallResult<R> {
    const { engine, tool } = this;
    const now = engine.options.clock.now();
    const failedAttempts = 1 + recovery.failedAttempts;
    const chain = recovery.chain;
    switch (chain.outcome) {
      case "recovered": {
        // Health evidence: failures on other routes count in full (the primary is down), retries
        // that the answering route itself absorbed count once (throttling is not an outage).
        const elsewhere = recovery.failedRoutes.filter((r) => r !== chain.provider).length;
        const value = chain.value as R;
        succeedCall(
          engine,
          tool,
          c,
          value,
          {
            outcome: "recovered",
            failedAttempts: Math.max(1, elsewhere),
            fallback: chain.fallback,
          },
          now,
        );
        return result(value, "recovered", chain.provider, 1 + recovery.attempts);
      }
      case "stopped":
        return failCall(engine, tool, c, chain.error, failedAttempts);
      case "budget":
        return failCall(
          engine,
          tool,
          c,
          new RecoveryBudgetExhaustedError(tool.name, chain.spentUsd, chain.limitUsd, {
            cause: recovery.last.error,
          }),
          failedAttempts,
        );
      case "exhausted":
        return this.giveUp(c, recovery.last, 1 + recovery.attempts, now);
    }
  }

  /** Gives up with the last failure; an empty answer nothing improved on is still the answer. */
  private giveUp(c: CallState, failure: Failure, attempts: number, now: number): CallResult<R> {
    const { engine, tool } = this;
    if (!failure.empty) return failCall(engine, tool, c, failure.error, attempts);
    const value = failure.empty.value as R;
    succeedCall(
      engine,
      tool,
      c,
      value,
      {
        outcome: "success",
        failedAttempts: attempts - 1,
        empty: true,
      },
      now,
    );
    return result(value, "success", failure.provider, attempts);
  }
}

/**
 * Hears how a call's first attempt ended and settles the promise its caller awaits: an answer
 * ends the call here (the success path), a failure or an empty answer goes on to recovery.
 */
class FirstAttempt<A, R> implements AttemptSink<R>, AttemptSpec {
  readonly provider: string | undefined;
  readonly timeoutMs: number | undefined;
  readonly requestedMs: number | undefined;
  readonly attempt = 1;
  readonly parent: Context;
  readonly enter: boolean;
  resolve!: (value: unknown) => void;
  reject!: (error: unknown) => void;

  /** The attempt's spec too: one object where two would be made on every call. */
  constructor(
    private readonly calls: ToolCalls<A, R>,
    private readonly args: A,
    private readonly c: CallState,
    private readonly routed: Routed,
    now: number,
    private readonly detailed: boolean,
  ) {
    const bounded = attemptBound(calls.tool, routed.probe, c.timeoutMs, calls.engine.options);
    const left = c.deadlineAt - now;
    this.provider = routed.route.provider;
    // The attempt's own timeout, cut to the call's deadline.
    this.timeoutMs = bounded === undefined || bounded > left ? left : bounded;
    // What later attempts start from: the call's own timeout, not a probe's bound.
    this.requestedMs = c.timeoutMs;
    this.parent = c.context;
    this.enter = c.enter;
  }

  answered(value: R, ctx: AttemptContext): void {
    const { engine, tool } = this.calls;
    const { c, routed } = this;
    try {
      if (!isAnswer(tool, value)) {
        const empty = attemptEmpty(engine, tool, c, this, ctx, value);
        this.resolve(this.calls.failed(this.args, c, routed, empty, this.detailed));
        return;
      }
      const end = engine.options.clock.now();
      // A success only matters to a breaker that may trip (for any tool on the route) or is probing.
      const { breaker } = routed.route;
      if (breaker.canTrip || routed.probe) breaker.record(end, true, routed.probe);
      succeedCall(engine, tool, c, value, FIRST_ANSWER, end);
      this.resolve(this.detailed ? result(value, "success", routed.route.provider, 1) : value);
    } catch (error) {
      if (!c.ended) endWithError(engine, tool, c, error, 0, false);
      this.reject(error);
    }
  }

  failed(error: unknown, ctx: AttemptContext): void {
    const { engine, tool } = this.calls;
    const verdict = attemptFailed(engine, tool, this.c, this, ctx, error);
    this.resolve(this.calls.failed(this.args, this.c, this.routed, verdict, this.detailed));
  }
}

function result<R>(
  value: R,
  outcome: CallResult<R>["outcome"],
  provider: string | undefined,
  attempts: number,
): CallResult<R> {
  return { value, outcome, provider, attempts, replayed: false };
}
