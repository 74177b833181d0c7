/**
 * `selfheal/watchdog`: heartbeats of long agent runs, the verdicts on them, the agent's side of
 * supervision (inbox, snapshot), and the supervisor that recovers a run in tiers (what
 * `selfheal watch` runs), with its spans, metrics and event log.
 */
export {
  heartbeat,
  cleanStaleTemps,
  heartbeatFile,
  HeartbeatError,
  HeartbeatWriter,
  writeAtomic,
  type Beat,
  type Heartbeat,
  type HeartbeatOptions,
  type Stage,
} from "./heartbeat.js";
export {
  MAX_HEARTBEAT_BYTES,
  MAX_SKEW_MS,
  readHeartbeat,
  type ReadResult,
  type Unreadable,
} from "./reader.js";
export {
  DEFAULT_LIMITS,
  evaluate,
  HeartbeatWatcher,
  type Evaluation,
  type Launch,
  type Limits,
  type Verdict,
} from "./verdict.js";
export {
  ackFile,
  inboxFile,
  keepAliveFor,
  lastGeneration,
  readAck,
  sendToInbox,
  snapshotFile,
  SnapshotError,
  Supervised,
  supervised,
  WATCH_ENV,
  type InboxAck,
  type InboxMessage,
  type SupervisedOptions,
} from "./agent.js";
export {
  DEFAULT_INTENSITY,
  RestartIntensity,
  type IntensityOptions,
  type RestartDecision,
} from "./intensity.js";
export { headAndTail, type Summariser } from "./summarise.js";
export {
  Supervisor,
  type RunChannel,
  type RunControl,
  type SupervisorEvent,
  type SupervisorOptions,
  type Tier,
} from "./supervisor.js";
export {
  WatchdogTelemetry,
  type WatchdogEventLine,
  type WatchdogLimitsLine,
  type WatchdogLogLine,
  type WatchdogStepsLine,
} from "./telemetry.js";
