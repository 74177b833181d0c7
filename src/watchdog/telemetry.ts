import {
  SpanKind,
  SpanStatusCode,
  metrics,
  trace,
  type Attributes,
  type Counter,
  type MeterProvider,
  type Span,
  type TracerProvider,
} from "@opentelemetry/api";
import type { JsonlLog } from "../recovery/event-log.js";
import {
  ATTR_AGENT_NAME,
  ATTR_ERROR_TYPE,
  ATTR_WATCHDOG_GENERATION,
  ATTR_WATCHDOG_OUTCOME,
  ATTR_WATCHDOG_REASON,
  ATTR_WATCHDOG_SESSION_ID,
  ATTR_WATCHDOG_TIER,
  ATTR_WATCHDOG_VERDICT,
  INSTRUMENTATION_SCOPE,
  LABEL_AGENT,
  LABEL_OUTCOME,
  LABEL_STATE,
  LABEL_TIER,
  METRIC_WATCHDOG_RECOVERIES,
  METRIC_WATCHDOG_VERDICTS,
  SPAN_WATCHDOG_RECOVERY,
  SPAN_WATCHDOG_VERDICT,
  WATCHDOG_OUTCOMES,
  WATCHDOG_TIERS,
  WATCHDOG_VERDICTS,
  type Tier,
  type TierOutcome,
  type Verdict,
} from "../telemetry/conventions.js";
import { redact } from "../telemetry/redact.js";
import { spanTime } from "../telemetry/spans.js";

/** What the supervisor does, as it happens. */
export type SupervisorEvent =
  | {
      kind: "verdict";
      at: number;
      verdict: Verdict;
      reason: string;
      /** The generation of the process judged, and the pid its beat names (when read from one). */
      generation?: number;
      pid?: number;
    }
  | { kind: "tier"; at: number; tier: Tier; reason: string }
  | { kind: "tier_result"; at: number; tier: Tier; outcome: "recovered" | "failed" }
  /** `tier`: the one the restart intensity refused (default rotation). */
  | { kind: "gave_up"; at: number; reason: string; tier?: Tier };

/** A supervisor event's line of the event log: the event, with whose run it was. */
export type WatchdogEventLine = SupervisorEvent & {
  type: "watchdog";
  agent: string;
  session: string;
};

/**
 * How long a stage's steps took, over one minute: written for each stage in which the supervisor
 * saw steps complete, when a look falls in a later minute and when supervision stops. Log only (no
 * span, no metric): `selfheal report --suggest-thresholds` reads it to propose per-stage stall
 * limits.
 */
export interface WatchdogStepsLine {
  type: "watchdog";
  kind: "steps";
  /** Start of the minute the steps were seen complete in, on the supervisor's clock, ms. */
  at: number;
  /** The `agent` label (as on the supervisor's spans and metrics). */
  agent: string;
  /** The session supervised. */
  session: string;
  /**
   * The stage the run showed while each step was unmoved (the beat before the one whose
   * `stepIdx` moved): the stage a stall verdict on that step would have been judged on.
   */
  stage: string;
  /** Steps counted: the sum of `durationsMs`'s counts. */
  steps: number;
  /**
   * Their durations: `stepAt` of the beat that moved minus that of the beat before, over the
   * steps moved (each of them counted at that share), as log buckets `{ "<index>": count }`
   * (src/telemetry/log-buckets.ts). Never across two processes (a restart, a rotation).
   */
  durationsMs: Record<string, number>;
}

/**
 * The limits in effect, written once when supervision starts (the first look, or `start()`):
 * what the steps lines are compared with. Log only (no span, no metric).
 */
export interface WatchdogLimitsLine {
  type: "watchdog";
  kind: "limits";
  /** When supervision started, on the supervisor's clock, ms. */
  at: number;
  /** The `agent` label (as on the supervisor's spans and metrics). */
  agent: string;
  /** The session supervised. */
  session: string;
  /** `stepIdx` unmoved this long is a stall, ms, in any stage without its own limit. */
  stallMs: number;
  /** Stages with their own stall limit, ms (`{}` when none). */
  stageStallMs: Record<string, number>;
  /** No stall verdict this long after a process starts, ms. */
  graceMs: number;
  /** No heartbeat this long is a dead session, ms. */
  deadMs: number;
}

/** One watchdog line of the event log. */
export type WatchdogLogLine = WatchdogEventLine | WatchdogStepsLine | WatchdogLimitsLine;

/** A line's own fields: the telemetry adds `type`, `kind`, `agent` and `session`. */
type Own<T> = Omit<T, "type" | "kind" | "agent" | "session">;

export interface WatchdogTelemetryOptions {
  /** `agent` label and agent attribute (ATTR_AGENT_NAME). */
  agent: string;
  sessionId: string;
  /** Default: the global providers (no-ops until an SDK registers). */
  tracerProvider?: TracerProvider | undefined;
  meterProvider?: MeterProvider | undefined;
  /** Where each event is appended as a JSONL line, for `selfheal report`. */
  eventLog?: JsonlLog | undefined;
}

/** Longest reason put on a span or in the log: reasons are short sentences. */
const MAX_REASON_LENGTH = 512;

/**
 * The supervisor's events as telemetry: each verdict change is an instant span and a count of
 * the watchdog verdicts counter; each tier is a span from its start to its result and a count
 * of the watchdog recoveries counter by outcome; each event is a line of the event log. Every
 * state, tier and outcome starts at 0 so rates and ratios exist before the first incident.
 */
export class WatchdogTelemetry {
  private readonly verdicts: Counter;
  private readonly recoveries: Counter;
  private readonly verdictLabels: Record<Verdict, Attributes>;
  private readonly recoveryLabels: Record<Tier, Record<TierOutcome, Attributes>>;
  private readonly base: Attributes;
  private open: { tier: Tier; span: Span } | undefined;

  constructor(private readonly options: WatchdogTelemetryOptions) {
    const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(
      INSTRUMENTATION_SCOPE,
    );
    this.verdicts = meter.createCounter(METRIC_WATCHDOG_VERDICTS, {
      description: "Verdicts on long runs' heartbeats, counted when a run's verdict changes.",
    });
    this.recoveries = meter.createCounter(METRIC_WATCHDOG_RECOVERIES, {
      description: "Watchdog tiers run, by outcome (recovered, failed, gave_up).",
    });
    const agent = { [LABEL_AGENT]: options.agent };
    this.verdictLabels = {} as Record<Verdict, Attributes>;
    for (const state of WATCHDOG_VERDICTS) {
      this.verdictLabels[state] = { ...agent, [LABEL_STATE]: state };
      this.verdicts.add(0, this.verdictLabels[state]);
    }
    this.recoveryLabels = {} as Record<Tier, Record<TierOutcome, Attributes>>;
    for (const tier of WATCHDOG_TIERS) {
      this.recoveryLabels[tier] = {} as Record<TierOutcome, Attributes>;
      for (const outcome of WATCHDOG_OUTCOMES) {
        this.recoveryLabels[tier][outcome] = {
          ...agent,
          [LABEL_TIER]: tier,
          [LABEL_OUTCOME]: outcome,
        };
        this.recoveries.add(0, this.recoveryLabels[tier][outcome]);
      }
    }
    // selfheal's name of the agent: a watchdog span is no GenAI operation.
    this.base = {
      [ATTR_AGENT_NAME]: options.agent,
      [ATTR_WATCHDOG_SESSION_ID]: options.sessionId,
    };
  }

  private get tracer() {
    return (this.options.tracerProvider ?? trace.getTracerProvider()).getTracer(
      INSTRUMENTATION_SCOPE,
    );
  }

  record(event: SupervisorEvent): void {
    this.options.eventLog?.append({
      type: "watchdog",
      agent: this.options.agent,
      session: this.options.sessionId,
      ...event,
      ...("reason" in event && { reason: redact(event.reason, MAX_REASON_LENGTH) }),
    } satisfies WatchdogEventLine);
    switch (event.kind) {
      case "verdict": {
        this.verdicts.add(1, this.verdictLabels[event.verdict]);
        this.tracer
          .startSpan(SPAN_WATCHDOG_VERDICT, {
            kind: SpanKind.INTERNAL,
            startTime: spanTime(event.at),
            attributes: {
              ...this.base,
              [ATTR_WATCHDOG_VERDICT]: event.verdict,
              [ATTR_WATCHDOG_REASON]: redact(event.reason, MAX_REASON_LENGTH),
              ...(event.generation !== undefined && {
                [ATTR_WATCHDOG_GENERATION]: event.generation,
              }),
            },
          })
          .end(spanTime(event.at));
        return;
      }
      case "tier": {
        // A tier started over one still open (a crash during its proof) ended that one.
        if (this.open) this.finish(this.open.tier, "failed", event.at);
        const span = this.tracer.startSpan(SPAN_WATCHDOG_RECOVERY, {
          kind: SpanKind.INTERNAL,
          startTime: spanTime(event.at),
          attributes: {
            ...this.base,
            [ATTR_WATCHDOG_TIER]: event.tier,
            [ATTR_WATCHDOG_REASON]: redact(event.reason, MAX_REASON_LENGTH),
          },
        });
        this.open = { tier: event.tier, span };
        return;
      }
      case "tier_result":
        this.finish(event.tier, event.outcome, event.at);
        return;
      case "gave_up":
        this.finish(event.tier ?? "rotation", "gave_up", event.at);
        return;
    }
  }

  /** A steps line, in the event log only (no span, no metric); nothing without a log. */
  recordSteps(line: Own<WatchdogStepsLine>): void {
    const { at, stage, steps, durationsMs } = line;
    this.log({ type: "watchdog", kind: "steps", at, ...this.whose(), stage, steps, durationsMs });
  }

  /** A limits line, in the event log only (no span, no metric); nothing without a log. */
  recordLimits(line: Own<WatchdogLimitsLine>): void {
    const { at, stallMs, stageStallMs, graceMs, deadMs } = line;
    this.log({
      type: "watchdog",
      kind: "limits",
      at,
      ...this.whose(),
      stallMs,
      stageStallMs,
      graceMs,
      deadMs,
    });
  }

  private whose(): { agent: string; session: string } {
    return { agent: this.options.agent, session: this.options.sessionId };
  }

  private log(line: WatchdogStepsLine | WatchdogLimitsLine): void {
    this.options.eventLog?.append(line);
  }

  private finish(tier: Tier, outcome: TierOutcome, at: number): void {
    this.recoveries.add(1, this.recoveryLabels[tier][outcome]);
    const open = this.open;
    this.open = undefined;
    if (!open) return;
    open.span.setAttribute(ATTR_WATCHDOG_OUTCOME, outcome);
    if (outcome !== "recovered") {
      // `failed` or `gave_up`: the low-cardinality class of a failed span (`error.type`).
      open.span.setAttribute(ATTR_ERROR_TYPE, outcome);
      open.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    open.span.end(spanTime(at));
  }
}
