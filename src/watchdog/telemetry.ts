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
  ATTR_GEN_AI_AGENT_NAME,
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
  | { kind: "gave_up"; at: number; reason: string };

/** One line of the event log: the event, with whose run it was. */
export type WatchdogLogLine = SupervisorEvent & {
  type: "watchdog";
  agent: string;
  session: string;
};

export interface WatchdogTelemetryOptions {
  /** `agent` label and `gen_ai.agent.name`. */
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
    this.base = {
      [ATTR_GEN_AI_AGENT_NAME]: options.agent,
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
    } satisfies WatchdogLogLine);
    switch (event.kind) {
      case "verdict": {
        this.verdicts.add(1, this.verdictLabels[event.verdict]);
        this.tracer
          .startSpan(SPAN_WATCHDOG_VERDICT, {
            kind: SpanKind.INTERNAL,
            startTime: event.at,
            attributes: {
              ...this.base,
              [ATTR_WATCHDOG_VERDICT]: event.verdict,
              [ATTR_WATCHDOG_REASON]: redact(event.reason, MAX_REASON_LENGTH),
              ...(event.generation !== undefined && {
                [ATTR_WATCHDOG_GENERATION]: event.generation,
              }),
            },
          })
          .end(event.at);
        return;
      }
      case "tier": {
        // A tier started over one still open (a crash during its proof) ended that one.
        if (this.open) this.finish(this.open.tier, "failed", event.at);
        const span = this.tracer.startSpan(SPAN_WATCHDOG_RECOVERY, {
          kind: SpanKind.INTERNAL,
          startTime: event.at,
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
        this.finish("rotation", "gave_up", event.at);
        return;
    }
  }

  private finish(tier: Tier, outcome: TierOutcome, at: number): void {
    this.recoveries.add(1, this.recoveryLabels[tier][outcome]);
    const open = this.open;
    this.open = undefined;
    if (!open) return;
    open.span.setAttribute(ATTR_WATCHDOG_OUTCOME, outcome);
    if (outcome !== "recovered") open.span.setStatus({ code: SpanStatusCode.ERROR });
    open.span.end(at);
  }
}
