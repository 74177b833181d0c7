import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import type { World } from "./world.js";

/** The per-call timeouts of the fleet's calls, the same for every policy, ms. */
export const LLM_TIMEOUT_MS = 10_000;
export const PAYMENT_TIMEOUT_MS = 5_000;

/** What only a policy can tell about itself (everything else is measured by the world). */
export interface PolicyFigures {
  /** Breakers opened on a dependency that had no fault at the time. */
  falseTrips: number;
  driftEvents: number;
  /** Diagnoses made, by pattern (a policy that diagnoses nothing leaves it out). */
  diagnoses?: Record<string, number>;
}

/**
 * A way of calling the fleet's dependencies: selfheal, or what users would pick instead. Each
 * method gets the call's id (the question, the order) and passes it with every request it makes
 * (`world.behave`), so the world can tell the requests of one call apart.
 */
export interface Policy {
  complete(question: string): Promise<string>;
  charge(order: string): Promise<string>;
  figures(): PolicyFigures;
  close(): Promise<void>;
}

export interface PolicyContext {
  world: World;
  /** Where selfheal's spans and metrics go (default: nowhere). */
  telemetry: Telemetry;
  /** selfheal's recovery event log (`recovery.eventLog`), when the run should write one. */
  eventLog?: string | undefined;
  /** Diagnosis rule files selfheal loads (`diagnosis.ruleFile`), e.g. `--suggest-rules` output. */
  ruleFile?: string | undefined;
}

export type PolicyFactory = (context: PolicyContext) => Policy;

export interface Telemetry {
  tracerProvider?: TracerProvider | undefined;
  meterProvider?: MeterProvider | undefined;
}
