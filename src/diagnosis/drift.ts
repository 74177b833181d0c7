import { OutcomeRing } from "../health/window.js";
import type { Pattern } from "../telemetry/conventions.js";
import type { AdviceOutcome } from "./advisor.js";

export interface DriftOptions {
  /** UNKNOWN share above which drift is reported (default 0.05). */
  threshold: number;
  /** How many recent diagnoses the share looks at, per tool and overall (default 100). */
  window: number;
  /** Fewer diagnoses than this say nothing (default 20). */
  minSamples: number;
  /** How many recent UNKNOWN texts are kept for review, per tool and overall (default 20). */
  keepSamples: number;
}

export const DEFAULT_DRIFT: DriftOptions = {
  threshold: 0.05,
  window: 100,
  minSamples: 20,
  keepSamples: 20,
};

/** A sample of an error nobody could classify: the text to write a rule for. */
export interface UnknownSample {
  at: number;
  tool: string;
  /** Redacted and cut. */
  text: string;
  /** The advisor's second opinion, when one is configured and answered. */
  advice?: AdviceOutcome;
}

/** The UNKNOWN share crossed the threshold (once per crossing; re-armed when it falls back). */
export interface DriftEvent {
  /** Undefined for the share over all tools. */
  tool: string | undefined;
  share: number;
  samples: number;
  threshold: number;
  /** The most recent UNKNOWN texts, newest last. */
  unknown: UnknownSample[];
}

interface Scope {
  ring: OutcomeRing;
  latest: UnknownSample[];
  alerting: boolean;
  /** The fleet's counts for this scope, last heard (a shared store). */
  fleet?: { total: number; hits: number };
}

/** Counts of a last-N window: events held, and how many were UNKNOWN. */
export interface DriftCounts {
  total: number;
  hits: number;
}

/**
 * The UNKNOWN share kept by a fleet (`selfheal/redis`): each diagnosis is pushed onto the fleet's
 * last-N windows (the tool's and the agent's), whose counts come back with the push.
 */
export interface DriftSync {
  push(tool: string, unknown: boolean): Promise<{ tool: DriftCounts; overall: DriftCounts }>;
}

/**
 * Watches the share of UNKNOWN diagnoses, per tool and overall. A rising share means providers
 * changed their error wording and the rule table needs a new line: the kept samples say which.
 */
export class DriftDetector {
  private readonly scopes = new Map<string | undefined, Scope>();

  constructor(
    private readonly options: DriftOptions,
    private readonly onDrift: (event: DriftEvent) => void,
    private readonly sync?: DriftSync,
  ) {}

  record(tool: string, pattern: Pattern, text: string, at: number): void {
    const unknown = pattern === "UNKNOWN";
    const sample = unknown ? { at, tool, text } : undefined;
    this.update(undefined, unknown, sample);
    this.update(tool, unknown, sample);
    if (!this.sync) return;
    // The fleet's share decides once it is heard; until then (or with Redis away) this process's.
    this.sync.push(tool, unknown).then(
      (counts) => {
        this.heard(undefined, counts.overall);
        this.heard(tool, counts.tool);
      },
      () => {
        // Redis away: this process's own counts decide again.
        for (const scope of [this.scopes.get(undefined), this.scopes.get(tool)]) {
          if (scope) delete scope.fleet;
        }
      },
    );
  }

  /** Files the advisor's answer with the sample it is about (the same object in every scope). */
  attachAdvice(tool: string, at: number, advice: AdviceOutcome): void {
    const sample = this.scopes.get(tool)?.latest.find((s) => s.at === at);
    if (sample) sample.advice = advice;
  }

  /** Recent UNKNOWN samples of one tool, or of all tools. */
  samples(tool?: string): UnknownSample[] {
    return [...(this.scopes.get(tool)?.latest ?? [])];
  }

  /**
   * The current UNKNOWN share of one tool, or overall (the fleet's, when shared); undefined below
   * the minimum sample count.
   */
  share(tool?: string): number | undefined {
    const scope = this.scopes.get(tool);
    const counts = scope?.fleet ?? scope?.ring.counts();
    if (!counts || counts.total < this.options.minSamples) return undefined;
    return counts.hits / counts.total;
  }

  private update(
    tool: string | undefined,
    unknown: boolean,
    sample: UnknownSample | undefined,
  ): void {
    let scope = this.scopes.get(tool);
    if (!scope) {
      scope = { ring: new OutcomeRing(this.options.window), latest: [], alerting: false };
      this.scopes.set(tool, scope);
    }
    scope.ring.add(unknown);
    if (sample) {
      scope.latest.push(sample);
      if (scope.latest.length > this.options.keepSamples) scope.latest.shift();
    }
    this.evaluate(tool, scope);
  }

  /** Counts of the fleet came back: they decide from now on. */
  private heard(tool: string | undefined, counts: DriftCounts): void {
    const scope = this.scopes.get(tool);
    if (!scope) return;
    scope.fleet = counts;
    this.evaluate(tool, scope);
  }

  /** Reports the crossing of the threshold, once per crossing. */
  private evaluate(tool: string | undefined, scope: Scope): void {
    const share = this.share(tool);
    if (share === undefined) return;
    if (!scope.alerting && share > this.options.threshold) {
      scope.alerting = true;
      this.onDrift({
        tool,
        share,
        samples: (scope.fleet ?? scope.ring.counts()).total,
        threshold: this.options.threshold,
        unknown: [...scope.latest],
      });
    } else if (scope.alerting && share <= this.options.threshold) {
      scope.alerting = false;
    }
  }
}
