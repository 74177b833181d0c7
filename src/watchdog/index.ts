/**
 * `selfheal/watchdog`: heartbeats of long agent runs and the verdicts on them. (The supervisor,
 * its recovery tiers and `selfheal watch` are still to come.)
 */
export {
  heartbeat,
  heartbeatFile,
  HeartbeatError,
  HeartbeatWriter,
  writeAtomic,
  type Beat,
  type Heartbeat,
  type HeartbeatOptions,
  type Stage,
} from "./heartbeat.js";
export { readHeartbeat, type ReadResult, type Unreadable } from "./reader.js";
export {
  DEFAULT_LIMITS,
  evaluate,
  HeartbeatWatcher,
  type Evaluation,
  type Limits,
  type Verdict,
} from "./verdict.js";
