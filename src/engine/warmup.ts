import type { Clock } from "../clock.js";
import { withDeadline } from "../deadline.js";
import type { BreakerRegistry, CircuitBreaker } from "../recovery/breaker.js";
import { describeThrown, redact } from "../telemetry/redact.js";
import type { ResolvedRecovery } from "./options.js";

/**
 * Calls each provider's `warmup` every `warmupIntervalMs` on unref'd timers (they never keep the
 * process alive), bounded by the breaker's probe timeout; outcomes count in the provider's
 * breaker. Returns the function that stops them (close()).
 */
export function startWarmups(
  recovery: ResolvedRecovery,
  breakers: BreakerRegistry,
  clock: Clock,
  logger: { warn(message: string): void },
  onResult: (provider: string, ok: boolean, error?: string) => void,
): () => void {
  const cancels = new Map<string, () => void>();
  let stopped = false;
  for (const provider of recovery.providers.values()) {
    const warmup = provider.warmup;
    if (!warmup) continue;
    const schedule = () => {
      cancels.set(
        provider.name,
        clock.setTimer(
          recovery.warmupIntervalMs,
          () => {
            const controller = new AbortController();
            void withDeadline(() => warmup(controller.signal), {
              controller,
              timeoutMs: recovery.breaker.probeTimeoutMs,
              timeoutError: () => new Error(`warm-up of ${provider.name} timed out`),
              clock,
            })
              .then(
                () => {
                  recordWarmup(breakers.get(provider.name), clock.now(), true);
                  onResult(provider.name, true);
                },
                (error: unknown) => {
                  const message = redact(describeThrown(error));
                  recordWarmup(breakers.get(provider.name), clock.now(), false);
                  logger.warn(
                    `selfheal: warm-up of provider "${provider.name}" failed: ${message}`,
                  );
                  onResult(provider.name, false, message);
                },
              )
              .finally(() => {
                if (!stopped) schedule();
              });
          },
          { unref: true },
        ),
      );
    };
    schedule();
  }
  return () => {
    stopped = true;
    for (const cancel of cancels.values()) cancel();
  };
}

/** A warm-up's verdict: on a half-open breaker (no probe out) it is the probe. */
function recordWarmup(breaker: CircuitBreaker, now: number, ok: boolean): void {
  const probe = breaker.state(now) === "half_open" && breaker.admit(now) === "probe";
  breaker.record(now, ok, probe);
}
