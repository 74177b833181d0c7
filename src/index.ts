export { createSelfHealing } from "./engine/self-healing.js";
export type { SelfHealing, TaskContext } from "./engine/self-healing.js";
export type {
  CallOptions,
  HealthOptions,
  Logger,
  SelfHealingOptions,
  ToolFunction,
  ToolKind,
  ToolOptions,
} from "./engine/options.js";
export type { CallContext, CallMode } from "./engine/call-context.js";
export type { WrappedTool } from "./engine/tool.js";
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
export {
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
