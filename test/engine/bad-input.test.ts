import { describe, expect, it } from "vitest";
import {
  createSelfHealing,
  isSelfHealClosedError,
  isSelfHealConfigError,
  type SelfHealConfigError,
  type SelfHealingOptions,
} from "../../src/index.js";
import { systemClock } from "../../src/clock.js";
import { recordingProvider } from "../helpers/otel.js";
import { configError, virtualInstance } from "../helpers/engine.js";

describe("bad options are refused at construction, naming the field", () => {
  const cases: [string, unknown, string][] = [
    ["no options", undefined, "options"],
    ["missing agent", {}, "agent"],
    ["blank agent", { agent: "  " }, "agent"],
    ["unknown top-level option", { agent: "a", retries: 3 }, "retries"],
    [
      "typo in a health group",
      { agent: "a", health: { successRate: { warn: 0.8 } } },
      "health.successRate.warn",
    ],
    [
      "share above 1",
      { agent: "a", health: { successRate: { warning: 80 } } },
      "health.successRate.warning",
    ],
    [
      "NaN threshold",
      { agent: "a", health: { emptyResponses: { critical: Number.NaN } } },
      "health.emptyResponses.critical",
    ],
    [
      "fractional minSamples",
      { agent: "a", health: { latency: { minSamples: 2.5 } } },
      "health.latency.minSamples",
    ],
    [
      "latency factor below 1",
      { agent: "a", health: { latency: { warningFactor: 0.5 } } },
      "health.latency.warningFactor",
    ],
    ["unknown window", { agent: "a", health: { windows: { size: 3 } } }, "health.windows.size"],
    [
      "tiny window",
      { agent: "a", health: { windows: { callWindowMs: 10 } } },
      "health.windows.callWindowMs",
    ],
    [
      "recent longer than window",
      { agent: "a", health: { windows: { recentWindowMs: 3_600_000 } } },
      "health.windows.recentWindowMs",
    ],
    [
      "bad tool override",
      { agent: "a", health: { tools: { x: { latency: { baselineMs: -1 } } } } },
      "health.tools.x.latency.baselineMs",
    ],
    ["store without read()", { agent: "a", store: { recordCall() {}, recordTask() {} } }, "store"],
    [
      "clock without setTimer()",
      { agent: "a", clock: { now: () => 0, sleep: async () => {} } },
      "clock",
    ],
    ["non-boolean flag", { agent: "a", recordArguments: "yes" }, "recordArguments"],
    ["logger without warn()", { agent: "a", logger: {} }, "logger"],
    ["tracerProvider without getTracer()", { agent: "a", tracerProvider: {} }, "tracerProvider"],
    ["meterProvider without getMeter()", { agent: "a", meterProvider: {} }, "meterProvider"],
    ["null tracerProvider", { agent: "a", tracerProvider: null }, "tracerProvider"],
    ["store as an array", { agent: "a", store: [] }, "store"],
    [
      "inverted success rate",
      { agent: "a", health: { successRate: { warning: 0.5, critical: 0.8 } } },
      "health.successRate.warning",
    ],
    [
      "success warning below the default critical",
      { agent: "a", health: { successRate: { warning: 0.3 } } },
      "health.successRate.warning",
    ],
    [
      "inverted latency factors",
      { agent: "a", health: { latency: { warningFactor: 10, criticalFactor: 5 } } },
      "health.latency.warningFactor",
    ],
    [
      "inverted empty responses",
      { agent: "a", health: { emptyResponses: { warning: 0.5, critical: 0.2 } } },
      "health.emptyResponses.warning",
    ],
    [
      "inverted task completion",
      { agent: "a", health: { taskCompletion: { warning: 0.5, critical: 0.9 } } },
      "health.taskCompletion.warning",
    ],
    [
      "tool override inverted against the agent's levels",
      {
        agent: "a",
        health: {
          successRate: { critical: 0.6 },
          tools: { x: { successRate: { warning: 0.55 } } },
        },
      },
      "health.tools.x.successRate.warning",
    ],
  ];
  it.each(cases)("%s", (_name, options, field) => {
    const error = configError(() => createSelfHealing(options as SelfHealingOptions));
    expect(error.field).toBe(field);
    expect(error.message).toContain(`\`${field}\``);
  });
});

describe("null, arrays and other non-objects are named in the message", () => {
  it.each([
    [null, "got null"],
    [[], "got an array"],
    ["a", "got string"],
  ])("options %j", (options, text) => {
    const error = configError(() => createSelfHealing(options as never));
    expect(error.field).toBe("options");
    expect(error.message).toContain(`expected an object, ${text}`);
  });

  it("a provider without its method says which method is missing", () => {
    const error = configError(() => createSelfHealing({ agent: "a", tracerProvider: {} as never }));
    expect(error.message).toContain("getTracer()");
    expect(
      configError(() => createSelfHealing({ agent: "a", meterProvider: {} as never })).message,
    ).toContain("getMeter()");
  });
});

describe("durations past the longest timer Node.js runs (2^31-1 ms) are refused", () => {
  const TOO_LONG = 2 ** 31;
  const cases: [string, unknown, string][] = [
    ["health.cacheMs", { health: { cacheMs: TOO_LONG } }, "health.cacheMs"],
    ["health.baselineTauMs", { health: { baselineTauMs: TOO_LONG } }, "health.baselineTauMs"],
    [
      "health.windows.taskWindowMs",
      { health: { windows: { taskWindowMs: TOO_LONG } } },
      "health.windows.taskWindowMs",
    ],
    [
      "diagnosis.statusPageTimeoutMs",
      { diagnosis: { statusPageTimeoutMs: TOO_LONG } },
      "diagnosis.statusPageTimeoutMs",
    ],
    [
      "diagnosis.statusPageCacheMs",
      { diagnosis: { statusPageCacheMs: TOO_LONG } },
      "diagnosis.statusPageCacheMs",
    ],
    [
      "diagnosis.escalateTimeoutMs",
      { diagnosis: { escalateTimeoutMs: TOO_LONG } },
      "diagnosis.escalateTimeoutMs",
    ],
    ["recovery.deadlineMs", { recovery: { deadlineMs: TOO_LONG } }, "recovery.deadlineMs"],
    ["recovery.baseTimeoutMs", { recovery: { baseTimeoutMs: TOO_LONG } }, "recovery.baseTimeoutMs"],
    ["recovery.throttleMs", { recovery: { throttleMs: TOO_LONG } }, "recovery.throttleMs"],
    [
      "recovery.notifyTimeoutMs",
      { recovery: { notifyTimeoutMs: TOO_LONG } },
      "recovery.notifyTimeoutMs",
    ],
    [
      "recovery.warmupIntervalMs",
      { recovery: { warmupIntervalMs: TOO_LONG } },
      "recovery.warmupIntervalMs",
    ],
    [
      "recovery.breaker.maxOpenMs",
      { recovery: { breaker: { maxOpenMs: TOO_LONG } } },
      "recovery.breaker.maxOpenMs",
    ],
    [
      "recovery.breaker.probeTimeoutMs",
      { recovery: { breaker: { probeTimeoutMs: TOO_LONG } } },
      "recovery.breaker.probeTimeoutMs",
    ],
    [
      "recovery.backoff.baseMs",
      { recovery: { backoff: { baseMs: TOO_LONG } } },
      "recovery.backoff.baseMs",
    ],
    [
      "recovery.ledger.ttlMs",
      { recovery: { ledger: { ttlMs: TOO_LONG } } },
      "recovery.ledger.ttlMs",
    ],
  ];
  it.each(cases)("%s", (_name, options, field) => {
    const error = configError(() => createSelfHealing({ agent: "a", ...(options as object) }));
    expect(error.field).toBe(field);
    expect(error.message).toContain("2147483647");
  });

  it("2^31-1 itself is accepted", () => {
    const { sh } = virtualInstance({ recovery: { deadlineMs: 2 ** 31 - 1 } });
    expect(() => sh.tool("t", { readOnly: true, timeoutMs: 2 ** 31 - 1 }, () => 1)).not.toThrow();
  });

  it("a longer delay derived from valid options (3 x a long timeout) waits, never fires at once", async () => {
    let fired = false;
    const cancel = systemClock.setTimer(3 * (2 ** 31 - 1), () => (fired = true), { unref: true });
    await new Promise((done) => setTimeout(done, 20));
    cancel();
    expect(fired).toBe(false);
  });

  it("tool and per-call timeouts too", async () => {
    const { sh } = virtualInstance();
    for (const key of ["timeoutMs", "deadlineMs"]) {
      const error = configError(() =>
        sh.tool(`t_${key}`, { readOnly: true, [key]: TOO_LONG }, () => 1),
      );
      expect(error.field).toBe(`tool("t_${key}").options.${key}`);
    }
    const t = sh.tool("t", { readOnly: true }, () => 1);
    for (const key of ["timeoutMs", "deadlineMs"]) {
      const error = await t(undefined, { [key]: TOO_LONG }).catch((e: unknown) => e);
      expect(isSelfHealConfigError(error)).toBe(true);
      expect((error as SelfHealConfigError).field).toBe(`t(args, options).${key}`);
    }
  });
});

describe("bad tool definitions", () => {
  const { sh } = virtualInstance();
  const define = (name: unknown, options: unknown, fn: unknown = () => 1) =>
    configError(() =>
      sh.tool(name as string, options as { readOnly: boolean }, fn as () => number),
    );

  it("a tool must say whether it writes: readOnly has no default", () => {
    const error = define("charge", {});
    expect(error.field).toBe('tool("charge").options.readOnly');
    expect(error.message).toMatch(/readOnly: false/);
    expect(define("charge", { readOnly: "no" }).field).toBe('tool("charge").options.readOnly');
  });

  it.each([
    ["", { readOnly: true }, "tool(name)"],
    ["t", undefined, 'tool("t").options'],
    ["t", { readOnly: true, retry: 3 }, 'tool("t").options.retry'],
    ["t", { readOnly: true, kind: "agent" }, 'tool("t").options.kind'],
    ["t", { readOnly: true, timeoutMs: 0 }, 'tool("t").options.timeoutMs'],
    ["t", { readOnly: true, isEmpty: "yes" }, 'tool("t").options.isEmpty'],
  ])("name %j with options %j", (name, options, field) => {
    expect(define(name, options).field).toBe(field);
  });

  it("a name is registered once: a second tool of that name is refused", () => {
    const { sh } = virtualInstance();
    sh.tool("x", { readOnly: true }, () => 1);
    const error = configError(() => sh.tool("x", { readOnly: false }, () => 2));
    expect(error.field).toBe('tool("x")');
    expect(error.message).toMatch(/already registered/);
  });

  it("the function is required", () => {
    expect(define("t", { readOnly: true }, "not a function").field).toBe('tool("t")');
  });

  it("bad per-call options are refused before the tool runs", async () => {
    let ran = false;
    const t = sh.tool("t", { readOnly: true }, () => (ran = true));
    const error = await t(undefined, { timeout: 5 } as never).catch((e: unknown) => e);
    expect(isSelfHealConfigError(error)).toBe(true);
    expect(ran).toBe(false);
  });
});

describe("whatever a tool throws or returns", () => {
  const otel = recordingProvider();

  it.each([
    ["a string", "rate limited"],
    ["a plain object", { status: 429, body: { error: "slow down" } }],
    ["undefined", undefined],
    ["null", null],
    ["a number", 42],
    [
      "an object with a hostile getter",
      Object.defineProperty({}, "message", {
        get: () => {
          throw new Error("boom");
        },
      }),
    ],
  ])("rethrows %s unchanged and records it", async (_name, thrown) => {
    otel.reset();
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const t = sh.tool("t", { readOnly: true }, () => {
      // Tools throw non-Errors in the wild; that is what this test feeds.
      // eslint-disable-next-line @typescript-eslint/only-throw-error
      throw thrown;
    });
    const caught = await t(undefined).then(
      () => "resolved",
      (e: unknown) => ({ e }),
    );
    expect(caught).toEqual({ e: thrown });
    if (typeof thrown === "object" && thrown !== null)
      expect((caught as { e: unknown }).e).toBe(thrown);
    const span = otel.spans().find((s) => s.name === "agent.tool_call");
    expect(span?.attributes["selfheal.call.outcome"]).toBe("error");
    expect(span?.attributes["error.type"]).toBe("_OTHER");
    expect(typeof span?.status.message).toBe("string");
  });

  it("a tool returning undefined is a success (and an empty response for an llm tool)", async () => {
    otel.reset();
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    await expect(
      sh.tool("t", { readOnly: true }, () => undefined)(undefined),
    ).resolves.toBeUndefined();
    await expect(
      sh.tool("m", { readOnly: true, kind: "llm" }, () => undefined)(undefined),
    ).resolves.toBeUndefined();
    const [t, m] = otel.spans().filter((s) => s.name === "agent.tool_call");
    expect(t?.attributes["selfheal.call.outcome"]).toBe("success");
    expect(t?.attributes["selfheal.response.empty"]).toBeUndefined();
    expect(m?.attributes["selfheal.response.empty"]).toBe(true);
  });

  it("a 1 MB error string is redacted and cut to the limit on the span", async () => {
    otel.reset();
    const { sh } = virtualInstance({ tracerProvider: otel.provider });
    const huge = `Bearer abcdefghijklmnop ${"x".repeat(1_000_000)}`;
    const t = sh.tool("t", { readOnly: true }, () => {
      throw new Error(huge);
    });
    const caught = await t(undefined).catch((e: unknown) => e);
    expect((caught as Error).message).toBe(huge); // the caller loses nothing
    const span = otel.spans().find((s) => s.name === "agent.tool_call");
    const message = span?.status.message ?? "";
    expect(message.length).toBeLessThanOrEqual(1024);
    expect(message.startsWith("Bearer [REDACTED]")).toBe(true);
  });

  it("an isEmpty that throws does not fail the call", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool(
      "m",
      {
        readOnly: true,
        kind: "llm",
        isEmpty: () => {
          throw new Error("bug in isEmpty");
        },
      },
      () => "answer",
    );
    await expect(t(undefined)).resolves.toBe("answer");
  });
});

describe("listeners and lifecycle", () => {
  it("a listener that throws never breaks a tool call, and is reported", async () => {
    const { sh, warnings } = virtualInstance();
    sh.on("tool-call", () => {
      throw new Error("listener bug with token=supersecretvalue");
    });
    const seen: string[] = [];
    sh.on("tool-call", (e) => seen.push(e.outcome));
    await expect(sh.tool("t", { readOnly: true }, () => "ok")(undefined)).resolves.toBe("ok");
    expect(seen).toEqual(["success"]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("token=[REDACTED]");
  });

  it("on() returns an unsubscribe function", async () => {
    const { sh } = virtualInstance();
    const seen: string[] = [];
    const off = sh.on("tool-call", (e) => seen.push(e.tool));
    const t = sh.tool("t", { readOnly: true }, () => 1);
    await t(undefined);
    off();
    await t(undefined);
    expect(seen).toEqual(["t"]);
  });

  it("close() twice is safe; calls after close fail with a typed error", async () => {
    const { sh } = virtualInstance();
    const t = sh.tool("t", { readOnly: true }, () => 1);
    const first = sh.close();
    expect(sh.close()).toBe(first);
    await first;
    expect(isSelfHealClosedError(await t(undefined).catch((e: unknown) => e))).toBe(true);
    expect(isSelfHealClosedError(await sh.task("x", () => 1).catch((e: unknown) => e))).toBe(true);
    expect(() => sh.tool("u", { readOnly: true }, () => 1)).toThrow(/after close/);
  });

  it("a store that throws on record loses the signal, not the call", async () => {
    const { sh, warnings } = virtualInstance({
      store: {
        recordCall: () => {
          throw new Error("store down");
        },
        recordTask: () => {
          throw new Error("store down");
        },
        read: () => ({
          agent: {
            calls: { ok: 0, failed: 0, latency: new Float64Array(104) },
            recent: { ok: 0, failed: 0 },
            llm: { total: 0, empty: 0 },
            tasks: { completed: 0, failed: 0 },
          },
          tools: new Map(),
        }),
      },
    });
    await expect(
      sh.task("x", () => sh.tool("t", { readOnly: true }, () => 5)(undefined)),
    ).resolves.toBe(5);
    expect(warnings.map((w) => w.split(":")[1]?.trim())).toEqual([
      "signal store failed to record a call",
      "signal store failed to record a task",
    ]);
  });
});
