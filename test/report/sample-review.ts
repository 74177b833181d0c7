import type { Review } from "../../src/report/analyze.js";

const T0 = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;

/**
 * A review with every section filled, built by hand so the renderers are tested on their own:
 * shares that round (1/3, 1/6), durations with a second decimal, more bad lines than are named,
 * two tools with UNKNOWN texts, a period with lines left outside it, a quiet bar in the series,
 * unrecovered incidents of two kinds, two watchdog runs, one proposed rule and one template left
 * to a person. Its figures agree with one another (6 incidents, 3 recovered, $1.50).
 */
export const sampleReview: Review = {
  events: 6,
  malformed: 7,
  malformedSamples: [
    "line 2: not JSON",
    "line 3: not a JSON object",
    "line 4: at is not a time",
    "line 5: tool is not a string",
    "line 9: costUsd is not a number",
  ],
  from: "2026-01-01T00:00:00.000Z",
  to: "2026-01-01T06:00:00.000Z",
  patterns: [
    { pattern: "UNKNOWN", incidents: 3, share: 0.5 },
    { pattern: "RATE_LIMIT", incidents: 2, share: 1 / 3 },
    { pattern: "TIMEOUT", incidents: 1, share: 1 / 6 },
  ],
  tools: [
    { tool: "lookup", incidents: 3, unknown: 0, unknownShare: 0, samples: [] },
    {
      tool: "fetch",
      incidents: 2,
      unknown: 2,
      unknownShare: 1,
      samples: [
        { text: "disk full", count: 2 },
        { text: "out of memory", count: 1 },
      ],
    },
    {
      tool: "search",
      incidents: 1,
      unknown: 1,
      unknownShare: 1,
      samples: [{ text: "no route to host", count: 1 }],
    },
  ],
  strategies: [
    { strategy: "retry_once", runs: 3, recovered: 1, successRate: 1 / 3 },
    { strategy: "backoff", runs: 2, recovered: 1, successRate: 0.5 },
    { strategy: "failover", runs: 1, recovered: 0, successRate: 0 },
  ],
  outcomes: [
    { outcome: "recovered", incidents: 3, share: 0.5, p50Seconds: 2, p90Seconds: 3 },
    { outcome: "fallback", incidents: 2, share: 1 / 3, p50Seconds: 2, p90Seconds: 4 },
    { outcome: "failed", incidents: 1, share: 1 / 6, p50Seconds: 8, p90Seconds: 12.34 },
  ],
  mttrSeconds: { count: 3, p50: 2, p90: 3, p99: 3.46 },
  costUsd: 1.5,
  costPerIncidentUsd: 0.25,
  watchdog: {
    events: 9,
    sessions: 2,
    verdicts: [
      { verdict: "looping", count: 2 },
      { verdict: "dead", count: 1 },
    ],
    tiers: [
      { tier: "nudge", runs: 2, recovered: 1, failed: 1, successRate: 0.5 },
      { tier: "rotation", runs: 1, recovered: 0, failed: 1, successRate: 0 },
    ],
    gaveUp: 1,
    runs: [
      {
        agent: "planner",
        session: "night-2",
        lastAt: T0 + 5 * HOUR,
        steps: ["dead", "rotation: failed", "gave up"],
      },
      {
        agent: "planner",
        session: "night-1",
        lastAt: T0 + 3 * HOUR,
        steps: ["looping", "nudge: recovered"],
      },
    ],
  },
  thresholds: {
    signals: [
      {
        agent: "support",
        tool: "lookup",
        scope: "tool",
        signal: "latency_p95",
        samples: 9000,
        windows: 48,
        evidence: "P95 210 ms before 2026-01-01T04:00:00.000Z, 430 ms after (x2.05)",
        current: {
          setting: "learned baseline, warning at 3x",
          caught: 0,
          incidents: 24,
          falseAlarms: 0,
          quiet: 24,
        },
        suggested: {
          setting: "baseline 210 ms, warning at 1.2x",
          caught: 24,
          incidents: 24,
          falseAlarms: 0,
          quiet: 24,
        },
        overrides: { latency: { baselineMs: 210, warningFactor: 1.2 } },
        shift: { at: T0 + 4 * HOUR, beforeMs: 210, afterMs: 430, ratio: 2.05 },
        reason: "P95 rose x2.05 and the learned baseline followed it",
      },
      {
        agent: "support",
        tool: "lookup",
        scope: "tool",
        signal: "success_rate",
        samples: 9000,
        windows: 48,
        evidence: "lowest quiet success rate 0.990",
        current: {
          setting: "warning below 0.80",
          caught: 2,
          incidents: 2,
          falseAlarms: 0,
          quiet: 40,
        },
        reason: "the current setting does as well",
      },
    ],
    stages: [
      {
        agent: "planner",
        stage: "tool_call",
        steps: 120,
        quantile: 0.99,
        quantileMs: 140_000,
        maxMs: 150_000,
        currentMs: 90_000,
        currentOver: 30,
        suggestedMs: 210_000,
        suggestedOver: 0,
        reason: "30 steps took longer than the current limit: slow, not stuck",
      },
    ],
    health: {
      support: { tools: { lookup: { latency: { baselineMs: 210, warningFactor: 1.2 } } } },
    },
    watchdog: { planner: { stageStallMs: { tool_call: 210_000 } } },
    rollups: 480,
    untracked: 0,
  },
  rules: {
    file: {
      version: 1,
      source: "selfheal report",
      rules: [
        {
          name: "suggested-rate-limit-1",
          pattern: "RATE_LIMIT",
          confidence: 0.8,
          match: { status: [429], message: ["quota exceeded for \\S+"] },
          evidence: {
            tier: "structured",
            because: "status 429",
            samples: 2,
            firstSeen: "2026-01-01T01:00:00.000Z",
            lastSeen: "2026-01-01T02:00:00.000Z",
            examples: ["quota exceeded for gpt-x"],
            tools: ["fetch"],
            strategies: ["exponential_backoff_with_jitter", "failover_to_secondary"],
            recovered: 1,
            recoveredBy: { exponential_backoff_with_jitter: 1 },
          },
        },
      ],
    },
    unclassified: [{ template: "disk <*> full", samples: 1, examples: ["disk sda full"] }],
    texts: 3,
    leftOut: 0,
  },
  // 2-hour bars over the 8-hour period: the second one quiet.
  series: {
    widthMs: 2 * HOUR,
    bars: [
      {
        at: T0,
        incidents: 3,
        recovered: 2,
        costUsd: 0.75,
        patterns: [
          { pattern: "UNKNOWN", incidents: 2 },
          { pattern: "RATE_LIMIT", incidents: 1 },
        ],
      },
      { at: T0 + 2 * HOUR, incidents: 0, recovered: 0, costUsd: 0, patterns: [] },
      {
        at: T0 + 4 * HOUR,
        incidents: 2,
        recovered: 1,
        costUsd: 0.5,
        patterns: [
          { pattern: "RATE_LIMIT", incidents: 1 },
          { pattern: "TIMEOUT", incidents: 1 },
        ],
      },
      {
        at: T0 + 6 * HOUR,
        incidents: 1,
        recovered: 0,
        costUsd: 0.25,
        patterns: [{ pattern: "UNKNOWN", incidents: 1 }],
      },
    ],
  },
  mttrHistogram: [0, 1, 2, 5, 10, 30, 60, 120, 300, 600].map((fromSeconds) => ({
    fromSeconds,
    count: fromSeconds === 1 ? 1 : fromSeconds === 2 ? 2 : 0,
  })),
  byAgent: [
    {
      name: "planner",
      incidents: 4,
      recovered: 2,
      autoRecoveryRate: 0.5,
      unknown: 2,
      unknownShare: 0.5,
      costUsd: 1,
      mttrP50Seconds: 2,
      mttrP90Seconds: 3,
    },
    {
      name: "writer",
      incidents: 2,
      recovered: 1,
      autoRecoveryRate: 0.5,
      unknown: 1,
      unknownShare: 0.5,
      costUsd: 0.5,
      mttrP50Seconds: 1.25,
      mttrP90Seconds: 1.25,
    },
  ],
  byTool: [
    {
      name: "lookup",
      incidents: 3,
      recovered: 3,
      autoRecoveryRate: 1,
      unknown: 0,
      unknownShare: 0,
      costUsd: 0.75,
      mttrP50Seconds: 2,
      mttrP90Seconds: 3,
    },
    {
      name: "fetch",
      incidents: 2,
      recovered: 0,
      autoRecoveryRate: 0,
      unknown: 2,
      unknownShare: 1,
      costUsd: 0.5,
      mttrP50Seconds: null,
      mttrP90Seconds: null,
    },
    {
      name: "search",
      incidents: 1,
      recovered: 0,
      autoRecoveryRate: 0,
      unknown: 1,
      unknownShare: 1,
      costUsd: 0.25,
      mttrP50Seconds: null,
      mttrP90Seconds: null,
    },
  ],
  unrecovered: {
    total: 3,
    groups: 2,
    latest: [
      {
        firstAt: T0 + 4 * HOUR,
        lastAt: T0 + 6 * HOUR,
        count: 2,
        agent: "planner",
        tool: "fetch",
        pattern: "UNKNOWN",
        outcome: "fallback",
        error: "disk full",
        tried: ["retry_once", "backoff"],
      },
      {
        firstAt: T0 + HOUR,
        lastAt: T0 + HOUR,
        count: 1,
        agent: "writer",
        tool: "search",
        pattern: "UNKNOWN",
        outcome: "failed",
        error: "no route to host",
        tried: [],
      },
    ],
  },
  period: { since: "2026-01-01T00:00:00.000Z", until: "2026-01-01T08:00:00.000Z" },
  outsidePeriod: 4,
  autoRecoveryRate: 0.5,
  unknownShare: 0.5,
};

/**
 * The 8 hours before the sample's, for `--compare-previous`: more incidents, a lower recovery
 * rate, a slower MTTR, no spend per incident change, one agent not seen since.
 */
export const previousReview: Review = {
  ...sampleReview,
  events: 8,
  malformed: 0,
  malformedSamples: [],
  from: "2025-12-31T16:00:00.000Z",
  to: "2025-12-31T23:00:00.000Z",
  mttrSeconds: { count: 2, p50: 4, p90: 2, p99: 4 },
  costUsd: 2,
  costPerIncidentUsd: 0.2,
  byAgent: [
    { ...(sampleReview.byAgent[0] as Review["byAgent"][number]), incidents: 5 },
    { ...(sampleReview.byAgent[1] as Review["byAgent"][number]), name: "retired", incidents: 3 },
  ],
  unrecovered: { total: 6, groups: 1, latest: [] },
  period: { since: "2025-12-31T16:00:00.000Z", until: "2026-01-01T00:00:00.000Z" },
  outsidePeriod: 0,
  autoRecoveryRate: 0.25,
  unknownShare: 0.5,
};
