import { SpanKind, type Attributes, type Context } from "@opentelemetry/api";
import { askAdvisor } from "../diagnosis/advisor.js";
import type { Diagnosis } from "../diagnosis/diagnoser.js";
import { normalizeStep } from "../diagnosis/rules.js";
import {
  ATTR_DIAGNOSIS_CONFIDENCE,
  ATTR_DIAGNOSIS_COOLDOWN_MS,
  ATTR_DIAGNOSIS_PATTERN,
  ATTR_DIAGNOSIS_RETRY_AFTER_MS,
  ATTR_DIAGNOSIS_RULE,
  ATTR_DIAGNOSIS_STATUS_PAGE,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_RECOVERY_STRATEGY,
  SPAN_DIAGNOSIS,
} from "../telemetry/conventions.js";
import type { ToolMetricLabels } from "../telemetry/metrics.js";
import { spanTime } from "../telemetry/spans.js";
import type { Engine } from "./engine.js";

/** The tool a diagnosis is about. */
export interface DiagnosedTool {
  name: string;
  labels: ToolMetricLabels;
  identity: Attributes;
}

/**
 * Diagnoses one failure and records it everywhere it belongs: a diagnosis span under
 * the call's span, the diagnosis and incident counters, the drift watch and the `diagnosis`
 * event. For an UNKNOWN error it asks the optional advisor without waiting for it.
 */
export async function diagnoseFailure(
  engine: Engine,
  tool: DiagnosedTool,
  provider: string | undefined,
  error: unknown,
  /** Redacted, cut text of the error (already made for the error span). */
  message: string,
  parent: Context,
  taskId: string | undefined,
  /** The call's first failure (an incident), not a recovery attempt's. */
  incident: boolean,
): Promise<Diagnosis> {
  const { options, diagnoser, tracer, events } = engine;
  const diagnosis = await diagnoser.diagnose(error, { tool: tool.name, provider });
  const at = options.clock.now();

  const time = spanTime(at);
  const span = tracer.startSpan(
    SPAN_DIAGNOSIS,
    { kind: SpanKind.INTERNAL, attributes: tool.identity, startTime: time },
    parent,
  );
  span.setAttribute(ATTR_DIAGNOSIS_PATTERN, diagnosis.pattern);
  span.setAttribute(ATTR_DIAGNOSIS_CONFIDENCE, diagnosis.confidence);
  span.setAttribute(ATTR_DIAGNOSIS_RULE, diagnosis.rule);
  span.setAttribute(ATTR_DIAGNOSIS_COOLDOWN_MS, diagnosis.cooldownMs);
  const first = diagnosis.actionable ? diagnosis.strategies[0] : undefined;
  span.setAttribute(
    ATTR_RECOVERY_STRATEGY,
    first === undefined ? "none" : normalizeStep(first).strategy,
  );
  if (diagnosis.retryAfterMs !== undefined)
    span.setAttribute(ATTR_DIAGNOSIS_RETRY_AFTER_MS, diagnosis.retryAfterMs);
  if (diagnosis.status !== undefined)
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, diagnosis.status);
  if (diagnosis.statusPage !== undefined)
    span.setAttribute(ATTR_DIAGNOSIS_STATUS_PAGE, diagnosis.statusPage);
  span.end(time);

  engine.metrics.diagnosis(tool.labels, diagnosis.pattern, incident);
  engine.drift.record(tool.name, diagnosis.pattern, message, at);
  if (events.has("diagnosis")) {
    events.emit("diagnosis", {
      ...diagnosis,
      agent: options.agent,
      tool: tool.name,
      at,
      message,
      taskId,
    });
  }
  const hook = options.escalateUnknown;
  if (diagnosis.pattern === "UNKNOWN" && hook) {
    void askAdvisor(
      hook,
      error,
      { tool: tool.name, text: message },
      options.escalateTimeoutMs,
      options.clock,
    ).then((outcome) => {
      engine.drift.attachAdvice(tool.name, at, outcome);
      events.emit("diagnosis-advice", { ...outcome, agent: options.agent, at });
    });
  }
  return diagnosis;
}
