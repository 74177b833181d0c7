export { createSelfHealing } from "./engine/self-healing.js";
export type { SelfHealing, TaskContext } from "./engine/self-healing.js";
export type { AgentStatus, ToolStatus } from "./engine/agent-status.js";
export type {
  CallOptions,
  HealthOptions,
  Logger,
  SelfHealingOptions,
  StepReporter,
  ToolFunction,
  ToolKind,
  ToolOptions,
  ToolSpanMode,
} from "./engine/options.js";
export type { CallContext, CallMode } from "./engine/call-context.js";
export type { ModelReport } from "./telemetry/gen-ai.js";
export type { WrappedTool, CallResult } from "./engine/tool.js";
export type { RecoveryEvent } from "./engine/events.js";
export type { Plans, RecoveryOptions, UnknownPolicy } from "./engine/options.js";
export type { EventLogOptions } from "./recovery/event-log.js";
export type { ProviderConfig, Usage } from "./recovery/providers.js";
export type { BackoffOptions } from "./recovery/backoff.js";
export type { BreakerOptions, BreakerState } from "./recovery/breaker.js";
export type { LedgerOptions } from "./recovery/idempotency.js";
export type { PlanStep } from "./diagnosis/rules.js";
export type { SelfHealEvents, ToolCallEvent, Listener } from "./engine/events.js";
export type {
  HealthReport,
  ScopeHealth,
  SignalName,
  SignalReading,
  StatusChangeEvent,
} from "./health/evaluator.js";
export type {
  AgentSignals,
  CallRecord,
  ScopeSignals,
  SignalStore,
  SignalWindows,
  TaskRecord,
} from "./health/store.js";
export type { HealthThresholds, ThresholdOverrides } from "./health/thresholds.js";
export type { FinishedSpan, HealthSpanProcessor } from "./health/span-processor.js";
export type { WindowTotals } from "./health/window.js";
export type { Clock } from "./clock.js";
export type { CallOutcome, HealthStatus, TaskOutcome } from "./telemetry/conventions.js";
export type { Diagnosis, DiagnoseContext, Evidence } from "./diagnosis/diagnoser.js";
export type { Matcher, Rule } from "./diagnosis/rules.js";
export type { DriftEvent, DriftOptions, UnknownSample } from "./diagnosis/drift.js";
export type { Advice, AdviceOutcome, EscalateUnknown } from "./diagnosis/advisor.js";
export type { StatusPageState } from "./diagnosis/status-page.js";
export type { DiagnosisEvent } from "./engine/events.js";
export type { DiagnosisOptions } from "./engine/options.js";
export type { Pattern, StrategyName } from "./telemetry/conventions.js";
export {
  CircuitOpenError,
  FleetUnavailableError,
  isFleetUnavailableError,
  HumanEscalationRequiredError,
  InFlightElsewhereError,
  isInFlightElsewhereError,
  ReadOnlyModeError,
  RecoveryBudgetExhaustedError,
  isCircuitOpenError,
  isHumanEscalationRequiredError,
  isReadOnlyModeError,
  isRecoveryBudgetExhaustedError,
  EmptyResponseError,
  HttpResponseError,
  isEmptyResponseError,
  isHttpResponseError,
  HealthCheckFailedError,
  SelfHealClosedError,
  SelfHealConfigError,
  SelfHealError,
  ToolTimeoutError,
  isHealthCheckFailedError,
  isSelfHealClosedError,
  isSelfHealConfigError,
  isSelfHealError,
  isToolTimeoutError,
} from "./errors.js";
export type { SelfHealErrorCode } from "./errors.js";
export type {
  HealedStream,
  HealedStreamFunction,
  StreamItem,
  StreamResult,
} from "./engine/stream.js";
export type {
  ChunkInfo,
  StreamFormat,
  StreamFunction,
  StreamOptions,
} from "./engine/options/stream.js";
export type { StreamMode } from "./telemetry/conventions.js";
export { StreamRestart, isStreamRestart } from "./engine/stream-channel.js";
export {
  StreamFirstTokenTimeoutError,
  StreamInterruptedError,
  StreamStalledError,
  StreamTruncatedError,
  isStreamFirstTokenTimeoutError,
  isStreamInterruptedError,
  isStreamStalledError,
  isStreamTruncatedError,
} from "./errors.js";
export type { StreamProgress } from "./errors.js";
