import type { Review } from "../../src/report/analyze.js";

/**
 * A review with every section filled, built by hand so the renderers are tested on their own:
 * shares that round (1/3, 1/6), durations with a second decimal, more bad lines than are named,
 * two tools with UNKNOWN texts.
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
  },
  rules: {
    file: { version: 1, source: "selfheal report", rules: [] },
    unclassified: [],
    texts: 0,
    leftOut: 0,
  },
};
