import { withDeadline } from "../deadline.js";
import { FleetUnavailableError, InFlightElsewhereError } from "../errors.js";
import type { Claim, FleetWrite } from "../recovery/idempotency.js";
import type { CallState, Engine } from "./engine.js";

/** How often a call asks again about a write another worker is sending, ms. */
const FLEET_POLL_MS = 100;

/** How soon a keyed write asks the fleet again when it could not be asked, ms. */
const FLEET_RETRY_MS = 100;

/** What a call may go on with after its claim. */
export type Claimed = Extract<Claim, { kind: "mine" | "done" }>;

/**
 * The fleet's claim on a keyed write: this call sends it (`mine`), another worker already did
 * (its result), or, while another sends it (`busy`), ask again within the call's deadline. A
 * fleet that cannot be asked (an ask failed or went unanswered, or Redis is still taking back
 * what a restart lost) is waited for up to `recovery.ledger.fleetWaitMs` after its last answer,
 * and never past the deadline: `"refuse"` asks again every FLEET_RETRY_MS, then throws
 * FleetUnavailableError; `"local"` decides alone (undefined). A call that heard another worker
 * holds the key never decides alone, whatever the mode.
 *
 * Each ask is raced against the call's own timer for that limit (and the caller's signal), so an
 * ask the store would wait out longer (its command timeout, or a ledger that never answers)
 * does not hold the call past it.
 */
export async function claimWrite(
  engine: Engine,
  tool: string,
  write: FleetWrite,
  c: CallState,
): Promise<Claimed | undefined> {
  const { clock } = engine.options;
  const { whenFleetDown, ttlMs, fleetWaitMs } = engine.options.recovery.ledger;
  const strict = whenFleetDown === "refuse";
  const fleet = engine.options.store.fleet?.ledger;
  const started = clock.now();
  /** The fleet's last answer that another worker holds the key (or when the claim began). */
  let answeredAt = started;
  /** The fleet said another worker holds the key. */
  let heldElsewhere = false;
  /** An ask failed: it may still land in Redis and take the key for this call. */
  let uncertain = false;
  try {
    for (;;) {
      if (!strict && !heldElsewhere && fleet?.away()) return undefined; // no timeout waited
      const now = clock.now();
      const giveUpAt = Math.min(c.deadlineAt, answeredAt + fleetWaitMs);
      const left = Math.max(1, Math.ceil(c.deadlineAt - now));
      let claim: Claim | undefined;
      let trouble: unknown;
      try {
        claim = await withDeadline(() => write.claim(left, strict ? ttlMs : undefined), {
          controller: new AbortController(),
          timeoutMs: Math.max(0, giveUpAt - now),
          timeoutError: () =>
            new Error(`the fleet's ledger did not answer within ${Math.round(giveUpAt - now)} ms`),
          callerSignal: c.call.signal,
          clock,
        });
      } catch (error) {
        uncertain = true;
        if (c.call.signal?.aborted) throw error; // the caller's abort, as any call's
        if (!strict && !heldElsewhere) return undefined;
        trouble = error;
      }
      if (claim?.kind === "mine" || claim?.kind === "done") return claim;
      // A sender that vanished mid-write: it may have charged. Never sent again from here.
      if (claim?.kind === "lost") throw new InFlightElsewhereError(tool);
      if (claim?.kind === "busy") {
        heldElsewhere = true;
        answeredAt = clock.now();
      }
      // Waiting on another worker's send ends at the deadline; on a fleet that cannot answer,
      // at fleetWaitMs after its last answer too.
      const limit = claim?.kind === "busy" ? c.deadlineAt : giveUpAt;
      const waitMs = claim ? Math.max(1, Math.min(FLEET_POLL_MS, claim.retryMs)) : FLEET_RETRY_MS;
      if (clock.now() + waitMs >= limit) {
        if (claim?.kind === "busy") throw new InFlightElsewhereError(tool);
        throw new FleetUnavailableError(tool, heldElsewhere, {
          ...(trouble !== undefined && { cause: trouble }),
          waitedMs: clock.now() - started,
        });
      }
      await clock.sleep(waitMs, c.call.signal);
    }
  } catch (error) {
    // An ask that timed out may still land in Redis: let go of whatever it took.
    if (uncertain) write.release();
    throw error;
  }
}
