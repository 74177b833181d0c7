import type { StrategyName } from "../../telemetry/conventions.js";
import type { Strategy } from "../strategy.js";
import { exponentialBackoff } from "./backoff.js";
import { circuitBreak } from "./circuit-break.js";
import { degradeToReadOnly } from "./degrade.js";
import { escalateToHuman } from "./escalate.js";
import { failover } from "./failover.js";
import { longerTimeout } from "./longer-timeout.js";
import { retryOnce } from "./retry-once.js";

/** Every strategy by name: a new strategy is a new file and a line here. */
export const STRATEGY_REGISTRY: Record<StrategyName, Strategy> = {
  retry_once: retryOnce,
  exponential_backoff_with_jitter: exponentialBackoff,
  retry_with_longer_timeout: longerTimeout,
  failover_to_secondary: failover,
  circuit_break: circuitBreak,
  degrade_to_readonly: degradeToReadOnly,
  escalate_to_human: escalateToHuman,
};
