import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveOptions } from "../../src/engine/options.js";
import {
  createSelfHealing,
  isHumanEscalationRequiredError,
  isSelfHealConfigError,
  ToolTimeoutError,
  type CallContext,
  type SelfHealConfigError,
  type SelfHealingOptions,
  type SignalStore,
} from "../../src/index.js";
import type { Alert, Notifier } from "../../src/notify/index.js";
import { thrownFault } from "../../src/testing/index.js";
import { configError, virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

/** Builds an instance from options on top of `{ agent: "a" }`, and closes it again. */
function build(options: object): void {
  const sh = createSelfHealing({ agent: "a", ...options });
  void sh.close();
}

const refusal = (options: object) =>
  configError(() => {
    build(options);
  });

/** A store with every method selfheal calls (it is never read in these tests). */
const store = (): SignalStore =>
  ({ recordCall() {}, recordTask() {}, read() {} }) as unknown as SignalStore;

const TOO_LONG = 2 ** 31;

describe("createSelfHealing refuses a bad option, naming the field and the problem", () => {
  const cases: [string, object, string, RegExp][] = [
    // top level
    ["unknown option", { retries: 3 }, "retries", /unknown option \(known: agent, store, clock,/],
    ["agent not a string", { agent: 42 }, "agent", /expected a non-empty string, got 42/],
    ["store not an object", { store: "redis" }, "store", /expected an object, got string/],
    [
      "store without read()",
      { store: { recordCall() {}, recordTask() {} } },
      "store",
      /missing method read\(\)/,
    ],
    ["clock not an object", { clock: 5 }, "clock", /expected an object, got number/],
    [
      "clock without setTimer()",
      { clock: { now: () => 0, sleep: () => Promise.resolve() } },
      "clock",
      /missing method setTimer\(\)/,
    ],
    ["recordArguments not a boolean", { recordArguments: "yes" }, "recordArguments", /got "yes"/],
    [
      "recordResults not a boolean",
      { recordResults: 1 },
      "recordResults",
      /expected true or false, got 1/,
    ],
    ["maxErrorLength below 16", { maxErrorLength: 15 }, "maxErrorLength", /must be >= 16, got 15/],
    [
      "fractional maxErrorLength",
      { maxErrorLength: 16.5 },
      "maxErrorLength",
      /expected an integer, got 16.5/,
    ],
    ["maxErrorLength not a number", { maxErrorLength: "64" }, "maxErrorLength", /finite number/],
    ["logger without warn()", { logger: { log() {} } }, "logger", /missing method warn\(\)/],
    ["logger not an object", { logger: "console" }, "logger", /expected an object, got string/],

    // health
    ["health not an object", { health: 1 }, "health", /expected an object, got number/],
    ["unknown health option", { health: { size: 1 } }, "health.size", /unknown option/],
    [
      "a threshold group that is not an object",
      { health: { latency: 5 } },
      "health.latency",
      /expected an object, got number/,
    ],
    [
      "a share that is not a number",
      { health: { successRate: { warning: "high" } } },
      "health.successRate.warning",
      /expected a finite number or null, got high/,
    ],
    [
      "a share above 1",
      { health: { successRate: { warning: 80 } } },
      "health.successRate.warning",
      /must be <= 1, got 80/,
    ],
    [
      "a negative share",
      { health: { emptyResponses: { warning: -0.1 } } },
      "health.emptyResponses.warning",
      /must be >= 0, got -0.1/,
    ],
    [
      "a count that is not a number",
      { health: { successRate: { minSamples: "10" } } },
      "health.successRate.minSamples",
      /expected a finite number, got 10$/,
    ],
    [
      "a null count",
      { health: { successRate: { minSamples: null } } },
      "health.successRate.minSamples",
      /expected a finite number, got null/,
    ],
    [
      "critical latency factor below 1",
      { health: { latency: { criticalFactor: 0.5 } } },
      "health.latency.criticalFactor",
      /must be >= 1/,
    ],
    [
      "negative latency baseline",
      { health: { latency: { baselineMs: -1 } } },
      "health.latency.baselineMs",
      /must be >= 0/,
    ],
    [
      "empty-response critical above 1",
      { health: { emptyResponses: { critical: 1.5 } } },
      "health.emptyResponses.critical",
      /must be <= 1/,
    ],
    [
      "fractional empty-response minSamples",
      { health: { emptyResponses: { minSamples: 2.5 } } },
      "health.emptyResponses.minSamples",
      /expected an integer/,
    ],
    [
      "task completion critical above 1",
      { health: { taskCompletion: { critical: 2 } } },
      "health.taskCompletion.critical",
      /must be <= 1/,
    ],
    [
      "negative task minSamples",
      { health: { taskCompletion: { minSamples: -1 } } },
      "health.taskCompletion.minSamples",
      /must be >= 0/,
    ],
    ["negative cacheMs", { health: { cacheMs: -1 } }, "health.cacheMs", /must be >= 0, got -1/],
    ["cacheMs not a number", { health: { cacheMs: "5s" } }, "health.cacheMs", /finite number/],
    [
      "zero baselineTauMs",
      { health: { baselineTauMs: 0 } },
      "health.baselineTauMs",
      /must be >= 1/,
    ],
    ["windows not an object", { health: { windows: 60 } }, "health.windows", /expected an object/],
    [
      "a task window under 1 s",
      { health: { windows: { taskWindowMs: 999 } } },
      "health.windows.taskWindowMs",
      /must be >= 1000, got 999/,
    ],
    [
      "a recent window under 1 s",
      { health: { windows: { recentWindowMs: 999 } } },
      "health.windows.recentWindowMs",
      /must be >= 1000/,
    ],
    [
      "a recent window longer than the call window",
      { health: { windows: { callWindowMs: 60_000, recentWindowMs: 60_001 } } },
      "health.windows.recentWindowMs",
      /must not exceed callWindowMs \(60000\), got 60001/,
    ],
    [
      "zero buckets",
      { health: { windows: { buckets: 0 } } },
      "health.windows.buckets",
      /must be >= 1/,
    ],
    [
      "more than 3600 buckets",
      { health: { windows: { buckets: 3_601 } } },
      "health.windows.buckets",
      /must be <= 3600/,
    ],
    [
      "fractional buckets",
      { health: { windows: { buckets: 1.5 } } },
      "health.windows.buckets",
      /expected an integer/,
    ],
    [
      "zero llmSampleSize",
      { health: { windows: { llmSampleSize: 0 } } },
      "health.windows.llmSampleSize",
      /must be >= 1/,
    ],
    [
      "llmSampleSize over 100000",
      { health: { windows: { llmSampleSize: 100_001 } } },
      "health.windows.llmSampleSize",
      /must be <= 100000/,
    ],
    [
      "fractional llmSampleSize",
      { health: { windows: { llmSampleSize: 2.5 } } },
      "health.windows.llmSampleSize",
      /expected an integer/,
    ],
    ["tools not an object", { health: { tools: 5 } }, "health.tools", /expected an object/],
    [
      "window sizes next to a store of one's own",
      { store: store(), health: { windows: { callWindowMs: 60_000 } } },
      "health.windows",
      /set window sizes on the store you pass/,
    ],

    // diagnosis
    ["diagnosis not an object", { diagnosis: 5 }, "diagnosis", /expected an object/],
    ["unknown diagnosis option", { diagnosis: { rule: [] } }, "diagnosis.rule", /unknown option/],
    [
      "statusPages not an object",
      { diagnosis: { statusPages: "https://status.openai.com" } },
      "diagnosis.statusPages",
      /expected an object/,
    ],
    [
      "a status page that is not http(s)",
      { diagnosis: { statusPages: { openai: "ftp://status.openai.com" } } },
      "diagnosis.statusPages.openai",
      /expected an http\(s\) URL, got "ftp:\/\/status.openai.com"/,
    ],
    [
      "a status page whose scheme only ends in http",
      { diagnosis: { statusPages: { openai: "xhttp://status.openai.com" } } },
      "diagnosis.statusPages.openai",
      /expected an http\(s\) URL/,
    ],
    [
      "a status page that is not a string",
      { diagnosis: { statusPages: { openai: 5 } } },
      "diagnosis.statusPages.openai",
      /expected an http\(s\) URL, got 5/,
    ],
    [
      "zero statusPageTimeoutMs",
      { diagnosis: { statusPageTimeoutMs: 0 } },
      "diagnosis.statusPageTimeoutMs",
      /must be >= 1, got 0/,
    ],
    [
      "zero statusPageCacheMs",
      { diagnosis: { statusPageCacheMs: 0 } },
      "diagnosis.statusPageCacheMs",
      /must be >= 1/,
    ],
    [
      "zero escalateTimeoutMs",
      { diagnosis: { escalateTimeoutMs: 0 } },
      "diagnosis.escalateTimeoutMs",
      /must be >= 1/,
    ],
    [
      "statusPageTimeoutMs not a number",
      { diagnosis: { statusPageTimeoutMs: "2s" } },
      "diagnosis.statusPageTimeoutMs",
      /finite number/,
    ],
    ["drift not an object", { diagnosis: { drift: 0.1 } }, "diagnosis.drift", /expected an object/],
    [
      "unknown drift option",
      { diagnosis: { drift: { limit: 1 } } },
      "diagnosis.drift.limit",
      /unknown option \(known: threshold/,
    ],
    [
      "negative drift threshold",
      { diagnosis: { drift: { threshold: -0.1 } } },
      "diagnosis.drift.threshold",
      /must be >= 0/,
    ],
    [
      "drift threshold above 1",
      { diagnosis: { drift: { threshold: 1.5 } } },
      "diagnosis.drift.threshold",
      /must be <= 1/,
    ],
    [
      "drift threshold not a number",
      { diagnosis: { drift: { threshold: "5%" } } },
      "diagnosis.drift.threshold",
      /finite number/,
    ],
    ...(["window", "minSamples", "keepSamples"] as const).flatMap(
      (key): [string, object, string, RegExp][] => [
        [
          `zero drift ${key}`,
          { diagnosis: { drift: { [key]: 0 } } },
          `diagnosis.drift.${key}`,
          /must be >= 1/,
        ],
        [
          `drift ${key} over 100000`,
          { diagnosis: { drift: { [key]: 100_001 } } },
          `diagnosis.drift.${key}`,
          /must be <= 100000/,
        ],
        [
          `fractional drift ${key}`,
          { diagnosis: { drift: { [key]: 1.5 } } },
          `diagnosis.drift.${key}`,
          /expected an integer/,
        ],
      ],
    ),
    [
      "escalateUnknown not a function",
      { diagnosis: { escalateUnknown: "gpt" } },
      "diagnosis.escalateUnknown",
      /expected a function, got string/,
    ],
    [
      "fetch not a function",
      { diagnosis: { fetch: {} } },
      "diagnosis.fetch",
      /expected a function, got object/,
    ],

    // recovery
    ["recovery not an object", { recovery: true }, "recovery", /expected an object, got boolean/],
    ["unknown recovery option", { recovery: { retries: 3 } }, "recovery.retries", /unknown option/],
    [
      "providers not a list",
      { recovery: { providers: { name: "openai" } } },
      "recovery.providers",
      /expected a list of providers/,
    ],
    [
      "a provider that is not an object",
      { recovery: { providers: ["openai"] } },
      "recovery.providers[0]",
      /expected an object, got string/,
    ],
    [
      "an unknown provider field",
      { recovery: { providers: [{ name: "openai", price: 1 }] } },
      "recovery.providers[0].price",
      /unknown option \(known: name, model, baseUrl/,
    ],
    [
      "a provider without a name",
      { recovery: { providers: [{ model: "gpt" }] } },
      "recovery.providers[0].name",
      /expected a non-empty string/,
    ],
    [
      "a blank provider model",
      { recovery: { providers: [{ name: "openai", model: " " }] } },
      "recovery.providers[0].model",
      /expected a non-empty string/,
    ],
    [
      "a provider baseUrl that is not a URL",
      { recovery: { providers: [{ name: "openai", baseUrl: "api.openai.com" }] } },
      "recovery.providers[0].baseUrl",
      /expected a URL, got "api.openai.com"/,
    ],
    [
      "a provider baseUrl that is not a string",
      { recovery: { providers: [{ name: "openai", baseUrl: 443 }] } },
      "recovery.providers[0].baseUrl",
      /expected a URL, got 443/,
    ],
    [
      "a provider listed twice",
      { recovery: { providers: [{ name: "openai" }, { name: "openai" }] } },
      "recovery.providers[1].name",
      /"openai" is listed twice/,
    ],
    [
      "a negative price per 1k tokens",
      { recovery: { providers: [{ name: "openai", usdPer1kTokens: -1 }] } },
      "recovery.providers[0].usdPer1kTokens",
      /must be >= 0/,
    ],
    [
      "a negative price per call",
      { recovery: { providers: [{ name: "openai", usdPerCall: -0.01 }] } },
      "recovery.providers[0].usdPerCall",
      /must be >= 0/,
    ],
    [
      "a price that is not a number",
      { recovery: { providers: [{ name: "openai", usdPerCall: "1c" }] } },
      "recovery.providers[0].usdPerCall",
      /finite number/,
    ],
    [
      "a warmup that is not a function",
      { recovery: { providers: [{ name: "openai", warmup: true }] } },
      "recovery.providers[0].warmup",
      /expected a function, got boolean/,
    ],
    ["plans not an object", { recovery: { plans: [] } }, "recovery.plans", /expected an object/],
    [
      "a plan for an unknown pattern",
      { recovery: { plans: { OUTAGE: [] } } },
      "recovery.plans.OUTAGE",
      /unknown pattern \(known: RATE_LIMIT, TIMEOUT,/,
    ],
    [
      "a plan with an unknown strategy",
      { recovery: { plans: { TIMEOUT: ["wait_and_see"] } } },
      "recovery.plans.TIMEOUT[0]",
      /unknown strategy "wait_and_see"/,
    ],
    [
      "backoff not an object",
      { recovery: { backoff: 3 } },
      "recovery.backoff",
      /expected an object/,
    ],
    [
      "unknown backoff option",
      { recovery: { backoff: { retries: 3 } } },
      "recovery.backoff.retries",
      /unknown option \(known: baseMs, factor, maxAttempts, jitter, maxRetryAfterMs\)/,
    ],
    [
      "zero backoff baseMs",
      { recovery: { backoff: { baseMs: 0 } } },
      "recovery.backoff.baseMs",
      /must be >= 1/,
    ],
    [
      "backoff factor below 1",
      { recovery: { backoff: { factor: 0.5 } } },
      "recovery.backoff.factor",
      /must be >= 1/,
    ],
    [
      "zero backoff maxAttempts",
      { recovery: { backoff: { maxAttempts: 0 } } },
      "recovery.backoff.maxAttempts",
      /must be >= 1/,
    ],
    [
      "more than 100 backoff attempts",
      { recovery: { backoff: { maxAttempts: 101 } } },
      "recovery.backoff.maxAttempts",
      /must be <= 100/,
    ],
    [
      "fractional backoff maxAttempts",
      { recovery: { backoff: { maxAttempts: 2.5 } } },
      "recovery.backoff.maxAttempts",
      /expected an integer/,
    ],
    [
      "backoff jitter above 1",
      { recovery: { backoff: { jitter: 1.5 } } },
      "recovery.backoff.jitter",
      /must be <= 1/,
    ],
    [
      "negative backoff jitter",
      { recovery: { backoff: { jitter: -0.1 } } },
      "recovery.backoff.jitter",
      /must be >= 0/,
    ],
    [
      "negative maxRetryAfterMs",
      { recovery: { backoff: { maxRetryAfterMs: -1 } } },
      "recovery.backoff.maxRetryAfterMs",
      /must be >= 0/,
    ],
    [
      "backoff baseMs not a number",
      { recovery: { backoff: { baseMs: "1s" } } },
      "recovery.backoff.baseMs",
      /finite number/,
    ],
    [
      "breaker not an object",
      { recovery: { breaker: "on" } },
      "recovery.breaker",
      /expected an object/,
    ],
    [
      "the old fixed breaker openMs",
      { recovery: { breaker: { openMs: 30_000 } } },
      "recovery.breaker.openMs",
      /set baseOpenMs .* and maxOpenMs/,
    ],
    [
      "unknown breaker option",
      { recovery: { breaker: { threshold: 5 } } },
      "recovery.breaker.threshold",
      /unknown option \(known: baseOpenMs, maxOpenMs,/,
    ],
    [
      "zero breaker baseOpenMs",
      { recovery: { breaker: { baseOpenMs: 0 } } },
      "recovery.breaker.baseOpenMs",
      /must be >= 1/,
    ],
    [
      "zero breaker maxOpenMs",
      { recovery: { breaker: { maxOpenMs: 0, baseOpenMs: 1 } } },
      "recovery.breaker.maxOpenMs",
      /must be >= 1, got 0/,
    ],
    [
      "zero breaker probeTimeoutMs",
      { recovery: { breaker: { probeTimeoutMs: 0 } } },
      "recovery.breaker.probeTimeoutMs",
      /must be >= 1/,
    ],
    [
      "breaker failureRate above 1",
      { recovery: { breaker: { failureRate: 1.5 } } },
      "recovery.breaker.failureRate",
      /must be <= 1/,
    ],
    [
      "negative breaker failureRate",
      { recovery: { breaker: { failureRate: -0.5 } } },
      "recovery.breaker.failureRate",
      /must be >= 0/,
    ],
    [
      "zero breaker minimumAttempts",
      { recovery: { breaker: { minimumAttempts: 0 } } },
      "recovery.breaker.minimumAttempts",
      /must be >= 1/,
    ],
    [
      "fractional breaker minimumAttempts",
      { recovery: { breaker: { minimumAttempts: 2.5 } } },
      "recovery.breaker.minimumAttempts",
      /expected an integer/,
    ],
    [
      "a breaker window under 1 s",
      { recovery: { breaker: { windowMs: 999 } } },
      "recovery.breaker.windowMs",
      /must be >= 1000/,
    ],
    [
      "a breaker cap below its first open period",
      { recovery: { breaker: { baseOpenMs: 10_000, maxOpenMs: 9_999 } } },
      "recovery.breaker.maxOpenMs",
      /must be >= baseOpenMs \(10000\), got 9999/,
    ],
    [
      "a breaker cap below the default first open period (5 s)",
      { recovery: { breaker: { maxOpenMs: 4_000 } } },
      "recovery.breaker.maxOpenMs",
      /must be >= baseOpenMs \(5000\), got 4000/,
    ],
    [
      "zero recovery deadlineMs",
      { recovery: { deadlineMs: 0 } },
      "recovery.deadlineMs",
      /must be >= 1/,
    ],
    [
      "an unknown policy for UNKNOWN errors",
      { recovery: { unknown: "retry-twice" } },
      "recovery.unknown",
      /expected "retry-once" or "none", got "retry-twice"/,
    ],
    [
      "ledger not an object",
      { recovery: { ledger: [] } },
      "recovery.ledger",
      /expected an object, got an array/,
    ],
    [
      "unknown ledger option",
      { recovery: { ledger: { size: 10 } } },
      "recovery.ledger.size",
      /unknown option \(known: ttlMs, maxEntries, whenFleetDown, fleetWaitMs\)/,
    ],
    [
      "zero ledger ttlMs",
      { recovery: { ledger: { ttlMs: 0 } } },
      "recovery.ledger.ttlMs",
      /must be >= 1/,
    ],
    [
      "zero ledger maxEntries",
      { recovery: { ledger: { maxEntries: 0 } } },
      "recovery.ledger.maxEntries",
      /must be >= 1/,
    ],
    [
      "fractional ledger maxEntries",
      { recovery: { ledger: { maxEntries: 10.5 } } },
      "recovery.ledger.maxEntries",
      /expected an integer/,
    ],
    [
      "zero maxTimeoutDoublings",
      { recovery: { maxTimeoutDoublings: 0 } },
      "recovery.maxTimeoutDoublings",
      /must be >= 1/,
    ],
    [
      "more than 10 timeout doublings",
      { recovery: { maxTimeoutDoublings: 11 } },
      "recovery.maxTimeoutDoublings",
      /must be <= 10/,
    ],
    [
      "fractional maxTimeoutDoublings",
      { recovery: { maxTimeoutDoublings: 1.5 } },
      "recovery.maxTimeoutDoublings",
      /expected an integer/,
    ],
    [
      "zero baseTimeoutMs",
      { recovery: { baseTimeoutMs: 0 } },
      "recovery.baseTimeoutMs",
      /must be >= 1/,
    ],
    [
      "negative maxProbeWaitMs",
      { recovery: { maxProbeWaitMs: -1 } },
      "recovery.maxProbeWaitMs",
      /must be >= 0, got -1/,
    ],
    [
      "maxProbeWaitMs not a number",
      { recovery: { maxProbeWaitMs: "2s" } },
      "recovery.maxProbeWaitMs",
      /expected a finite number, got 2s/,
    ],
    [
      "maxProbeWaitMs past the longest timer",
      { recovery: { maxProbeWaitMs: TOO_LONG } },
      "recovery.maxProbeWaitMs",
      /must be <= 2147483647/,
    ],
    ["negative budgetUsd", { recovery: { budgetUsd: -1 } }, "recovery.budgetUsd", /must be >= 0/],
    [
      "budgetUsd not a number",
      { recovery: { budgetUsd: "1" } },
      "recovery.budgetUsd",
      /finite number/,
    ],
    [
      "negative throttleMs",
      { recovery: { throttleMs: -1 } },
      "recovery.throttleMs",
      /must be >= 0/,
    ],
    [
      "zero notifyTimeoutMs",
      { recovery: { notifyTimeoutMs: 0 } },
      "recovery.notifyTimeoutMs",
      /must be >= 1/,
    ],
    [
      "a warm-up interval under 1 s",
      { recovery: { warmupIntervalMs: 999 } },
      "recovery.warmupIntervalMs",
      /must be >= 1000/,
    ],
    [
      "notifiers not a list",
      { recovery: { notifiers: { channel: "slack" } } },
      "recovery.notifiers",
      /expected a list of notifiers/,
    ],
    [
      "a notifier that is not an object",
      { recovery: { notifiers: ["slack"] } },
      "recovery.notifiers[0]",
      /expected an object, got string/,
    ],
    [
      "a notifier without send()",
      { recovery: { notifiers: [{ channel: "slack" }] } },
      "recovery.notifiers[0]",
      /expected \{ channel, send\(\) \} \(see selfheal\/notify\)/,
    ],
    [
      "a notifier without a channel",
      { recovery: { notifiers: [{ send: () => Promise.resolve() }] } },
      "recovery.notifiers[0]",
      /expected \{ channel, send\(\) \}/,
    ],
    [
      "a second notifier that is broken",
      {
        recovery: {
          notifiers: [{ channel: "a", send: () => Promise.resolve() }, { channel: "b" }],
        },
      },
      "recovery.notifiers[1]",
      /expected \{ channel, send\(\) \}/,
    ],
    [
      "a blank eventLog path",
      { recovery: { eventLog: "" } },
      "recovery.eventLog",
      /expected a non-empty string/,
    ],
    [
      "an eventLog object without a path",
      { recovery: { eventLog: { maxBytes: 10 } } },
      "recovery.eventLog.path",
      /expected a non-empty string, got undefined/,
    ],
    [
      "an eventLog key that is not one",
      { recovery: { eventLog: { path: "/tmp/x.jsonl", keepFiles: 3 } } },
      "recovery.eventLog.keepFiles",
      /unknown option/,
    ],
    [
      "an eventLog maxBytes of 0",
      { recovery: { eventLog: { path: "/tmp/x.jsonl", maxBytes: 0 } } },
      "recovery.eventLog.maxBytes",
      /must be >= 1, got 0/,
    ],
    [
      "an eventLog keeping 1,001 files",
      { recovery: { eventLog: { path: "/tmp/x.jsonl", keep: 1001 } } },
      "recovery.eventLog.keep",
      /must be <= 1000, got 1001/,
    ],
    [
      "an eventLog keeping 1.5 files",
      { recovery: { eventLog: { path: "/tmp/x.jsonl", keep: 1.5 } } },
      "recovery.eventLog.keep",
      /expected an integer, got 1.5/,
    ],
    [
      "an eventLog in a folder that does not exist",
      { recovery: { eventLog: "/nonexistent-selfheal-dir/events.jsonl" } },
      "recovery.eventLog",
      /cannot write: folder \/nonexistent-selfheal-dir does not exist$/,
    ],
    [
      "an eventLog object in a folder that does not exist",
      { recovery: { eventLog: { path: "/nonexistent-selfheal-dir/events.jsonl", keep: 2 } } },
      "recovery.eventLog",
      /cannot write: folder \/nonexistent-selfheal-dir does not exist$/,
    ],
    [
      "random not a function",
      { recovery: { random: 0.5 } },
      "recovery.random",
      /expected a function, got number/,
    ],
  ];

  it.each(cases)("%s", (_name, options, field, problem) => {
    const error = refusal(options);
    expect(error.field).toBe(field);
    expect(error.message).toContain(`\`${field}\``);
    expect(error.message).toMatch(problem);
  });

  it("an unknown top-level option is named on its own, not under a prefix", () => {
    const error = refusal({ tracer: {} });
    expect(error.field).toBe("tracer");
    expect(error.message).toMatch(/known: .*meterProvider, health, diagnosis, recovery/);
  });

  it("a finite number is required, and NaN and Infinity are not", () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const error = refusal({ recovery: { budgetUsd: bad } });
      expect(error.message).toMatch(new RegExp(`expected a finite number, got ${String(bad)}`));
    }
  });

  it("durations past the longest timer name the limit in Node.js terms", () => {
    const error = refusal({ recovery: { notifyTimeoutMs: TOO_LONG } });
    expect(error.message).toMatch(/must be <= 2147483647 \(the longest timer Node.js runs/);
    // Other maximums say only the number.
    expect(refusal({ recovery: { maxTimeoutDoublings: 11 } }).message).not.toMatch(/Node\.js/);
  });
});

describe("createSelfHealing accepts every value at the edges of the allowed ranges", () => {
  const notifier: Notifier = { channel: "memory", send: () => Promise.resolve() };
  const cases: [string, object][] = [
    ["no optional option at all", {}],
    ["a store with every method", { store: store() }],
    ["recordArguments and recordResults", { recordArguments: true, recordResults: false }],
    ["maxErrorLength of 16", { maxErrorLength: 16 }],
    ["a logger with warn()", { logger: { warn() {} } }],
    [
      "latency factors turned off",
      { health: { latency: { warningFactor: null, criticalFactor: null } } },
    ],
    ["a fixed latency baseline of 0", { health: { latency: { baselineMs: 0 } } }],
    ["latency baseline learned (null)", { health: { latency: { baselineMs: null } } }],
    [
      "a critical latency factor of 1",
      { health: { latency: { warningFactor: 1, criticalFactor: 1 } } },
    ],
    [
      "every level of a share group, off and at the edges",
      {
        health: {
          successRate: { warning: 1, critical: 0, minSamples: 0 },
          emptyResponses: { warning: 0, critical: 1, minSamples: 0 },
          taskCompletion: { warning: null, critical: null, minSamples: 1 },
        },
      },
    ],
    ["a status cache of 0 (off)", { health: { cacheMs: 0 } }],
    ["a baseline time constant of 1 ms", { health: { baselineTauMs: 1 } }],
    [
      "windows at their lower edges",
      {
        health: {
          windows: {
            callWindowMs: 1_000,
            taskWindowMs: 1_000,
            recentWindowMs: 1_000,
            buckets: 1,
            llmSampleSize: 1,
          },
        },
      },
    ],
    [
      "a recent window as long as the call window",
      { health: { windows: { callWindowMs: 120_000, recentWindowMs: 120_000 } } },
    ],
    [
      "windows at their upper edges",
      { health: { windows: { buckets: 3_600, llmSampleSize: 100_000 } } },
    ],
    ["per-tool overrides", { health: { tools: { search: { successRate: { minSamples: 3 } } } } }],
    [
      "http and https status pages",
      {
        diagnosis: {
          statusPages: { openai: "https://status.openai.com", local: "http://localhost:8080" },
        },
      },
    ],
    [
      "diagnosis durations of 1 ms",
      { diagnosis: { statusPageTimeoutMs: 1, statusPageCacheMs: 1, escalateTimeoutMs: 1 } },
    ],
    [
      "drift at its lower edges",
      { diagnosis: { drift: { threshold: 0, window: 1, minSamples: 1, keepSamples: 1 } } },
    ],
    [
      "drift at its upper edges",
      {
        diagnosis: {
          drift: { threshold: 1, window: 100_000, minSamples: 100_000, keepSamples: 100_000 },
        },
      },
    ],
    [
      "diagnosis functions",
      { diagnosis: { escalateUnknown: () => Promise.resolve(undefined), fetch: globalThis.fetch } },
    ],
    [
      "fully described providers",
      {
        recovery: {
          providers: [
            {
              name: "openai",
              model: "gpt-4o",
              baseUrl: "https://api.openai.com/v1",
              usdPer1kTokens: 0,
              usdPerCall: 0,
              warmup: () => Promise.resolve(),
            },
            { name: "anthropic" },
          ],
        },
      },
    ],
    ["plans for known patterns", { recovery: { plans: { TIMEOUT: ["retry_once"], UNKNOWN: [] } } }],
    [
      "backoff at its edges",
      {
        recovery: {
          backoff: { baseMs: 1, factor: 1, maxAttempts: 100, jitter: 1, maxRetryAfterMs: 0 },
        },
      },
    ],
    ["backoff without jitter", { recovery: { backoff: { jitter: 0, maxAttempts: 1 } } }],
    [
      "breaker at its edges",
      {
        recovery: {
          breaker: {
            baseOpenMs: 1,
            maxOpenMs: 1,
            probeTimeoutMs: 1,
            failureRate: 1,
            minimumAttempts: 1,
            windowMs: 1_000,
          },
        },
      },
    ],
    [
      "a breaker cap equal to the first open period",
      { recovery: { breaker: { baseOpenMs: 60_000, maxOpenMs: 60_000 } } },
    ],
    ["a breaker failure rate of 0", { recovery: { breaker: { failureRate: 0 } } }],
    ['unknown: "retry-once"', { recovery: { unknown: "retry-once" } }],
    ['unknown: "none"', { recovery: { unknown: "none" } }],
    ["ledger at its edges", { recovery: { ledger: { ttlMs: 1, maxEntries: 1 } } }],
    [
      "recovery numbers at their lower edges",
      {
        recovery: {
          maxTimeoutDoublings: 1,
          baseTimeoutMs: 1,
          budgetUsd: 0,
          throttleMs: 0,
          notifyTimeoutMs: 1,
          warmupIntervalMs: 1_000,
          deadlineMs: 1,
        },
      },
    ],
    ["ten timeout doublings", { recovery: { maxTimeoutDoublings: 10 } }],
    ["notifiers", { recovery: { notifiers: [notifier, { ...notifier, channel: "other" }] } }],
    ["no notifiers", { recovery: { notifiers: [] } }],
    ["a random source", { recovery: { random: () => 0.5 } }],
  ];

  it.each(cases)("%s", (_name, options) => {
    expect(() => {
      build(options);
    }).not.toThrow();
  });
});

describe("tool() refuses bad tool options, naming the field and the problem", () => {
  const providers = [{ name: "openai" }, { name: "anthropic" }];
  const define = (options: object, fn: unknown = () => 1) => {
    const { sh } = virtualInstance({ recovery: { providers } });
    return configError(() => sh.tool("t", { readOnly: true, ...options }, fn as never));
  };

  const cases: [string, object, string, RegExp][] = [
    ["the old fallback option", { fallback: () => 1 }, "fallback", /renamed to cannedAnswer/],
    ["an unknown option", { retries: 3 }, "retries", /unknown option \(known: readOnly, kind,/],
    ["an unknown kind", { kind: "agent" }, "kind", /expected "tool" or "llm", got "agent"/],
    ["a zero timeoutMs", { timeoutMs: 0 }, "timeoutMs", /must be >= 1, got 0/],
    ["a zero deadlineMs", { deadlineMs: 0 }, "deadlineMs", /must be >= 1, got 0/],
    ["a deadlineMs that is not a number", { deadlineMs: "1m" }, "deadlineMs", /finite number/],
    [
      "an idempotencyKey that is not a function",
      { idempotencyKey: "id" },
      "idempotencyKey",
      /expected a function, got string/,
    ],
    [
      "an isEmpty that is not a function",
      { isEmpty: true },
      "isEmpty",
      /expected a function, got boolean/,
    ],
    ["a blank provider", { provider: "" }, "provider", /expected a non-empty string, got ""/],
    ["a blank type", { type: " " }, "type", /expected a non-empty string/],
    ["a type that is not a string", { type: 3 }, "type", /expected a non-empty string, got 3/],
    [
      "providers as a string",
      { providers: "openai" },
      "providers",
      /expected a non-empty list of provider names, primary first/,
    ],
    ["an empty providers list", { providers: [] }, "providers", /expected a non-empty list/],
    [
      "an undeclared provider",
      { providers: ["openai", "mistral"] },
      "providers",
      /"mistral" is not declared in recovery.providers/,
    ],
    [
      "a provider that is not a string",
      { providers: [7] },
      "providers",
      /7 is not declared in recovery.providers/,
    ],
    [
      "plans that are not an object",
      { plans: ["retry_once"] },
      "plans",
      /expected an object, got an array/,
    ],
    [
      "a plan for an unknown pattern",
      { plans: { OUTAGE: ["retry_once"] } },
      "plans.OUTAGE",
      /unknown pattern \(known: RATE_LIMIT/,
    ],
    [
      "a plan that is not a list",
      { plans: { TIMEOUT: "retry_once" } },
      "plans.TIMEOUT",
      /expected a list of strategies/,
    ],
    [
      "a cannedAnswer that is not a function",
      { cannedAnswer: "sorry" },
      "cannedAnswer",
      /expected a function, got string/,
    ],
  ];

  it.each(cases)("%s", (_name, options, key, problem) => {
    const error = define(options);
    const field = `tool("t").options.${key}`;
    expect(error.field).toBe(field);
    expect(error.message).toContain(`\`${field}\``);
    expect(error.message).toMatch(problem);
  });

  it("a name that is not a string is refused before anything else", () => {
    const { sh } = virtualInstance();
    const error = configError(() => sh.tool(5 as never, { readOnly: true }, () => 1));
    expect(error.field).toBe("tool(name)");
    expect(error.message).toMatch(/expected a non-empty string, got 5/);
  });

  it("options that are not an object are named", () => {
    const { sh } = virtualInstance();
    const error = configError(() => sh.tool("t", "read-only" as never, () => 1));
    expect(error.field).toBe('tool("t").options');
    expect(error.message).toMatch(/expected an object, got string/);
  });

  it("the last argument must be the tool function", () => {
    const error = define({}, { run: () => 1 });
    expect(error.field).toBe('tool("t")');
    expect(error.message).toMatch(/the last argument must be the tool function/);
  });

  it.each([
    ["a plain tool", {}],
    ["kind tool", { kind: "tool" }],
    ["kind llm", { kind: "llm", isEmpty: () => false }],
    ["timeouts of 1 ms", { timeoutMs: 1, deadlineMs: 1 }],
    ["provider and type", { provider: "openai", type: "function" }],
    ["declared providers", { providers: ["anthropic", "openai"] }],
    ["own plans", { plans: { RATE_LIMIT: ["exponential_backoff_with_jitter"] } }],
    ["functions", { idempotencyKey: () => "k", cannedAnswer: () => 0 }],
  ])("accepts %s", (_name, options) => {
    const { sh } = virtualInstance({ recovery: { providers } });
    expect(() => sh.tool("t", { readOnly: true, ...options } as never, () => 1)).not.toThrow();
  });
});

describe("a wrapped tool refuses bad per-call options before it runs", () => {
  const cases: [string, object, string, RegExp][] = [
    [
      "an unknown option",
      { timeout: 5 },
      "timeout",
      /unknown option \(known: signal, idempotencyKey, toolCallId, timeoutMs, deadlineMs, attributes\)/,
    ],
    [
      "a signal that is not an AbortSignal",
      { signal: { aborted: false } },
      "signal",
      /expected an AbortSignal/,
    ],
    [
      "a blank idempotencyKey",
      { idempotencyKey: "" },
      "idempotencyKey",
      /expected a non-empty string/,
    ],
    ["a blank toolCallId", { toolCallId: " " }, "toolCallId", /expected a non-empty string/],
    [
      "a toolCallId that is not a string",
      { toolCallId: 12 },
      "toolCallId",
      /expected a non-empty string, got 12/,
    ],
    ["a zero timeoutMs", { timeoutMs: 0 }, "timeoutMs", /must be >= 1, got 0/],
    ["a zero deadlineMs", { deadlineMs: 0 }, "deadlineMs", /must be >= 1, got 0/],
    [
      "attributes that are not an object",
      { attributes: "mcp" },
      "attributes",
      /expected an object/,
    ],
    [
      "an attribute that is an object",
      { attributes: { "mcp.session.id": { id: 1 } } },
      "attributes.mcp.session.id",
      /expected a string, a finite number, a boolean, or an array of them/,
    ],
    [
      "an attribute array with a NaN",
      { attributes: { sizes: [1, Number.NaN] } },
      "attributes.sizes",
      /expected a string, a finite number/,
    ],
  ];

  it.each(cases)("%s", async (_name, callOptions, key, problem) => {
    const { sh } = virtualInstance();
    let ran = false;
    const t = sh.tool("lookup", { readOnly: true }, () => (ran = true));
    const error = await t(undefined, callOptions as never).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error)).toBe(true);
    const field = `lookup(args, options).${key}`;
    expect((error as SelfHealConfigError).field).toBe(field);
    expect((error as SelfHealConfigError).message).toMatch(problem);
    expect(ran).toBe(false);
  });

  it("a frozen attribute set is checked once; a bad one, or one with an array (which may change), every call", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("lookup", { readOnly: true }, () => 1);
    const good = Object.freeze({ "mcp.method.name": "tools/call", "mcp.request.id": 3 });
    for (let i = 0; i < 2; i++) expect(await t(undefined, { attributes: good })).toBe(1);
    const bad = Object.freeze({ "mcp.session.id": Number.NaN });
    for (let i = 0; i < 2; i++) {
      const error = await t(undefined, { attributes: bad }).catch((e: unknown) => e);
      expect(isSelfHealConfigError(error)).toBe(true);
    }
    const sizes = [1, 2];
    const withArray = Object.freeze({ sizes });
    expect(await t(undefined, { attributes: withArray })).toBe(1);
    sizes.push(Number.NaN);
    const error = await t(undefined, { attributes: withArray }).catch((e: unknown) => e);
    expect((error as SelfHealConfigError).field).toBe("lookup(args, options).attributes.sizes");
  });

  it("per-call options that are not an object are named", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("lookup", { readOnly: true }, () => 1);
    for (const options of ["fast", null, [{ timeoutMs: 5 }], 5]) {
      const error = await t(undefined, options as never).catch((e: unknown) => e);
      expect((error as SelfHealConfigError).field, JSON.stringify(options)).toBe(
        "lookup(args, options)",
      );
    }
  });

  it("attributes of each kind are taken; a non-finite number or a nested value is not", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("lookup", { readOnly: true }, () => 1);
    const attributes = {
      s: "x",
      yes: true,
      no: false,
      n: 0,
      list: ["a", "b"],
      flags: [true],
      sizes: [1, 2.5],
      empty: [],
    };
    await expect(t(undefined, { attributes })).resolves.toBe(1);
    for (const bad of [Infinity, Number.NaN, null, undefined, 1n, [["nested"]], [null]]) {
      const error = await t(undefined, { attributes: { bad } } as never).catch((e: unknown) => e);
      expect((error as SelfHealConfigError).field, String(bad)).toBe(
        "lookup(args, options).attributes.bad",
      );
    }
  });

  it("valid per-call options reach the tool", async () => {
    const { sh } = virtualInstance();
    const seen: CallContext[] = [];
    const t = sh.tool("lookup", { readOnly: false }, (_: undefined, ctx: CallContext) => {
      seen.push(ctx);
      return "ok";
    });
    const signal = new AbortController().signal;
    await expect(
      t(undefined, {
        signal,
        idempotencyKey: "k1",
        toolCallId: "call_1",
        timeoutMs: 1,
        deadlineMs: 1,
      }),
    ).resolves.toBe("ok");
    expect(seen[0]).toMatchObject({ idempotencyKey: "k1", timeoutMs: 1 });
  });
});

describe("defaults and overrides, as behaviour shows them", () => {
  it("status is reused for 5 s by default, then computed again", async () => {
    const { sh, clock } = virtualInstance();
    const first = await sh.status();
    await clock.advance(4_999);
    expect((await sh.status()).at).toBe(first.at);
    await clock.advance(1);
    expect((await sh.status()).at).toBe(first.at + 5_000);
  });

  it("health.cacheMs sets how long a status is reused", async () => {
    const { sh, clock } = virtualInstance({ health: { cacheMs: 1_000 } });
    const first = await sh.status();
    await clock.advance(999);
    expect((await sh.status()).at).toBe(first.at);
    await clock.advance(1);
    expect((await sh.status()).at).toBe(first.at + 1_000);
  });

  it("health.baselineTauMs sets how fast the learned latency baseline follows the P95", async () => {
    /** The learned baseline after 20 calls of 100 ms, then (a minute later) 40 of 250 ms. */
    async function learnedBaseline(options: Partial<SelfHealingOptions>): Promise<{
      before: number;
      after: number;
    }> {
      const { sh, clock } = virtualInstance({
        health: { cacheMs: 0, latency: { minSamples: 1 } },
        ...options,
      });
      let ms = 100;
      const t = sh.tool("t", { readOnly: true }, () => clock.sleep(ms));
      const baseline = async () =>
        (await sh.status()).signals.find((s) => s.signal === "latency_p95")?.baselineMs ?? 0;
      for (let i = 0; i < 20; i++) await clock.run(t(undefined), { stepMs: 10 });
      await sh.status(); // learns the first baseline
      const before = await baseline();
      await clock.advance(60_000);
      ms = 250;
      for (let i = 0; i < 40; i++) await clock.run(t(undefined), { stepMs: 10 });
      await sh.status(); // still healthy (under 3x): moves the baseline
      return { before, after: await baseline() };
    }
    const fast = await learnedBaseline({
      health: { cacheMs: 0, latency: { minSamples: 1 }, baselineTauMs: 1 },
    });
    expect(fast.before).toBeGreaterThan(0);
    expect(fast.after - fast.before).toBeGreaterThan(50); // follows the new P95 at once
    const slow = await learnedBaseline({}); // default: 1 h
    expect(slow.before).toBe(fast.before);
    expect(slow.after - slow.before).toBeGreaterThan(0);
    expect(slow.after - slow.before).toBeLessThan(10); // a minute moves it under 2 %
  });

  it("maxErrorLength cuts the error text on spans (default 1024)", async () => {
    const otel = recordingProvider();
    const fail = () => {
      throw new Error("x".repeat(5_000));
    };
    const message = async (options: Partial<SelfHealingOptions>) => {
      otel.reset();
      const { sh } = virtualInstance({ tracerProvider: otel.provider, ...options });
      await sh
        .tool(
          "t",
          { readOnly: true },
          fail,
        )(undefined)
        .catch(() => undefined);
      return otel.spans().find((s) => s.name === "agent.tool_call")?.status.message ?? "";
    };
    expect(await message({ maxErrorLength: 100 })).toHaveLength(100);
    expect(await message({})).toHaveLength(1024);
  });

  it("a store passed in is the caller's: close() leaves it open", async () => {
    let closed = 0;
    const own: SignalStore = {
      ...store(),
      close: () => {
        closed++;
        return Promise.resolve();
      },
    };
    const sh = createSelfHealing({ agent: "a", store: own, logger: { warn() {} } });
    await sh.close();
    expect(closed).toBe(0);
  });

  describe("status pages", () => {
    /** A status page fetch that counts requests and reports an incident. */
    function incidentPage() {
      const page = { requests: 0 };
      const fetch = (() => {
        page.requests++;
        return Promise.resolve(
          new Response(JSON.stringify({ status: { indicator: "major" } }), { status: 200 }),
        );
      }) as typeof globalThis.fetch;
      return { page, fetch };
    }
    const timeout = new ToolTimeoutError("complete", 1_000);

    it("are cached for 30 s by default", async () => {
      const { page, fetch } = incidentPage();
      const { sh, clock } = virtualInstance({
        diagnosis: { statusPages: { complete: "https://status.example.com" }, fetch },
      });
      expect(await sh.diagnose(timeout, { tool: "complete" })).toMatchObject({
        pattern: "SERVICE_DOWN",
      });
      await clock.advance(29_999);
      await sh.diagnose(timeout, { tool: "complete" });
      expect(page.requests).toBe(1);
      await clock.advance(1);
      await sh.diagnose(timeout, { tool: "complete" });
      expect(page.requests).toBe(2);
    });

    it("statusPageCacheMs sets how long an answer is reused", async () => {
      const { page, fetch } = incidentPage();
      const { sh, clock } = virtualInstance({
        diagnosis: {
          statusPages: { complete: "https://status.example.com" },
          statusPageCacheMs: 1_000,
          fetch,
        },
      });
      await sh.diagnose(timeout, { tool: "complete" });
      await clock.advance(999);
      await sh.diagnose(timeout, { tool: "complete" });
      expect(page.requests).toBe(1);
      await clock.advance(1);
      await sh.diagnose(timeout, { tool: "complete" });
      expect(page.requests).toBe(2);
    });

    it("statusPageTimeoutMs bounds a page that does not answer", async () => {
      const hanging = ((_url: URL, init: RequestInit) =>
        new Promise((_resolve, reject) => {
          init.signal?.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        })) as unknown as typeof globalThis.fetch;
      const { sh, clock } = virtualInstance({
        diagnosis: {
          statusPages: { complete: "https://status.example.com" },
          statusPageTimeoutMs: 100,
          fetch: hanging,
        },
      });
      let settled = false;
      const diagnosis = sh.diagnose(timeout, { tool: "complete" }).finally(() => {
        settled = true;
      });
      await clock.advance(99);
      expect(settled).toBe(false);
      await clock.advance(1);
      expect(settled).toBe(true);
      await expect(diagnosis).resolves.toMatchObject({ pattern: "TIMEOUT", statusPage: "unknown" });
    });
  });

  describe("recovery", () => {
    /** Timeouts of each attempt of a 1 s tool that never answers, under a plan of longer timeouts. */
    async function attemptTimeouts(recovery: object): Promise<(number | undefined)[]> {
      const { sh, clock } = virtualInstance({
        recovery: { plans: { TIMEOUT: ["retry_with_longer_timeout"] }, ...recovery },
      });
      const seen: (number | undefined)[] = [];
      const t = sh.tool(
        "slow",
        { readOnly: true, timeoutMs: 1_000 },
        (_: undefined, ctx: CallContext) => {
          seen.push(ctx.timeoutMs);
          return clock.sleep(10 ** 9, ctx.signal);
        },
      );
      await clock.run(t(undefined), { stepMs: 1_000 }).catch(() => undefined);
      return seen;
    }

    it("retry_with_longer_timeout doubles the tool's timeout 3 times by default", async () => {
      expect(await attemptTimeouts({})).toEqual([1_000, 2_000, 4_000, 8_000]);
    });

    it("recovery.maxTimeoutDoublings sets how many times", async () => {
      expect(await attemptTimeouts({ maxTimeoutDoublings: 1 })).toEqual([1_000, 2_000]);
    });

    it('an UNKNOWN error is retried once by default, and not at all under unknown: "none"', async () => {
      const calls = async (recovery: object) => {
        const { sh, clock } = virtualInstance({ recovery: { random: () => 0, ...recovery } });
        let n = 0;
        const t = sh.tool("t", { readOnly: true }, () => {
          n++;
          throw new Error("something odd happened");
        });
        await clock.run(t(undefined)).catch(() => undefined);
        return n;
      };
      expect(await calls({})).toBe(2);
      expect(await calls({ unknown: "retry-once" })).toBe(2);
      expect(await calls({ unknown: "none" })).toBe(1);
    });

    /** Escalates a 503 under a plan that only escalates; returns the error and the warnings. */
    async function escalate(recovery: object) {
      const { sh, clock, warnings } = virtualInstance({
        recovery: { plans: { SERVICE_DOWN: ["escalate_to_human"] }, ...recovery },
      });
      const t = sh.tool("t", { readOnly: true }, () => {
        throw thrownFault("http_503");
      });
      const error = await clock.run(t(undefined), { stepMs: 50 }).catch((e: unknown) => e);
      expect(isHumanEscalationRequiredError(error)).toBe(true);
      return { error: error as { notified: boolean }, warnings };
    }

    it("no notifiers by default: an escalation notifies no one, and its error and the log say so, naming recovery.notifiers", async () => {
      const { error, warnings } = await escalate({});
      expect(error.notified).toBe(false);
      expect((error as unknown as Error).message).toMatch(
        /no notifier is configured, so nobody was alerted/,
      );
      expect(warnings).toEqual([
        expect.stringMatching(/no notifier is configured.*recovery\.notifiers/),
      ]);
    });

    /** A notifier that never answers (until aborted). */
    const hanging = (): Notifier => ({
      channel: "pager",
      send: (_alert: Alert, signal?: AbortSignal) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        }),
    });

    it("each send is bounded by 5 s by default, or recovery.notifyTimeoutMs", async () => {
      const byDefault = await escalate({ notifiers: [hanging()] });
      expect(byDefault.error.notified).toBe(false);
      expect(byDefault.warnings.join("\n")).toMatch(/pager notifier failed.*within 5000 ms/);
      const short = await escalate({ notifiers: [hanging()], notifyTimeoutMs: 100 });
      expect(short.warnings.join("\n")).toMatch(/pager notifier failed.*within 100 ms/);
    });

    it("warm-up probes run every 15 min by default", async () => {
      let warmups = 0;
      const { sh, clock } = virtualInstance({
        recovery: {
          providers: [
            {
              name: "backup",
              warmup: () => {
                warmups++;
                return Promise.resolve();
              },
            },
          ],
        },
      });
      await clock.advance(15 * 60_000 - 1);
      expect(warmups).toBe(0);
      await clock.advance(1);
      expect(warmups).toBe(1);
      await sh.close();
    });
  });
});

describe("recovery.eventLog", () => {
  const path = join(tmpdir(), `selfheal-options-${process.pid}.jsonl`);
  const quiet = { warn: () => undefined };

  it("a path alone rotates at 50 MiB and keeps 5 files; an object sets both", () => {
    const resolve = (eventLog: unknown) =>
      resolveOptions({ agent: "a", logger: quiet, recovery: { eventLog } as never }).recovery
        .eventLog;
    expect(resolve(path)).toEqual({ path, maxBytes: 50 * 1024 * 1024, keep: 5 });
    expect(resolve({ path })).toEqual({ path, maxBytes: 50 * 1024 * 1024, keep: 5 });
    expect(resolve({ path, maxBytes: 1_000, keep: 1 })).toEqual({ path, maxBytes: 1_000, keep: 1 });
  });
});
