import { SpanKind, SpanStatusCode, trace, type TracerProvider } from "@opentelemetry/api";
import { beforeEach, describe, expect, it } from "vitest";
import { isHealthCheckFailedError } from "../../src/index.js";
import { recordingProvider, tree } from "../helpers/otel.js";
import { virtualInstance } from "../helpers/engine.js";

const otel = recordingProvider();

function setup(options: Parameters<typeof virtualInstance>[0] = {}) {
  return virtualInstance({ tracerProvider: otel.provider, ...options });
}

describe("agent.tool_call spans (real OpenTelemetry SDK)", () => {
  beforeEach(() => {
    otel.reset();
  });

  it("a successful call is one span with the GenAI and selfheal attributes", async () => {
    const { sh } = setup();
    const search = sh.tool(
      "search",
      { readOnly: true, provider: "acme" },
      (q: string) => `results for ${q}`,
    );
    await expect(search("cats", { toolCallId: "call_1" })).resolves.toBe("results for cats");

    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
    const [span] = otel.spans();
    expect(span?.kind).toBe(SpanKind.INTERNAL);
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
    expect(span?.attributes).toEqual({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search",
      "gen_ai.tool.call.id": "call_1",
      "gen_ai.provider.name": "acme",
      "selfheal.agent.name": "test-agent",
      "selfheal.call.outcome": "success",
    });
    // A read-only tool, a healthy agent: neither flag is written (a write says read_only false).
  });

  it("is timed by the engine's clock, as are its children: durations agree with the metrics", async () => {
    const { sh, clock } = setup({ recovery: { random: () => 0 } });
    const started = clock.now();
    let calls = 0;
    const flaky = sh.tool("flaky", { readOnly: true }, async () => {
      await clock.sleep(250);
      if (++calls === 1) throw Object.assign(new Error("busy"), { status: 503 });
      return "ok";
    });
    const ended: { at: number; durationMs: number }[] = [];
    sh.on("tool-call", (e) => ended.push(e));
    await expect(clock.run(flaky(undefined))).resolves.toBe("ok");

    const ms = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;
    const spans = otel.spans();
    const call = spans.find((s) => s.name === "agent.tool_call");
    expect(ms(call?.startTime ?? [0, 0])).toBe(started);
    // The virtual clock moved, not the real one: the span lasts what the call took on it.
    expect(ms(call?.endTime ?? [0, 0])).toBe(ended[0]?.at);
    expect(ms(call?.duration ?? [0, 0])).toBe(ended[0]?.durationMs);
    expect(ended[0]?.durationMs).toBeGreaterThanOrEqual(500);
    const error = spans.find((s) => s.name === "agent.tool_call.error");
    expect(ms(error?.startTime ?? [0, 0])).toBe(started + 250);
    expect(error?.events[0]?.time).toEqual(error?.startTime);
    const recovery = spans.find((s) => s.name === "agent.recovery");
    expect(ms(recovery?.endTime ?? [0, 0])).toBe(ended[0]?.at);
    for (const s of spans) expect(ms(s.endTime)).toBeGreaterThanOrEqual(ms(s.startTime));
  });

  it("a failed call has an agent.tool_call.error child with a redacted exception event", async () => {
    const { sh } = setup();
    const charge = sh.tool(
      "charge",
      { readOnly: false, idempotencyKey: (a: { order: string }) => `charge-${a.order}` },
      () => {
        throw new TypeError(
          "upstream rejected key sk-proj-abcdefghijklmnopqrstuvwx for ops@example.com",
        );
      },
    );
    const thrown = await charge({ order: "42" }).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(TypeError);

    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.tool_call.error", "agent.diagnosis"] },
    ]);
    // Each child names its agent and tool in selfheal's names, so a trace query by agent or tool
    // finds it too; the GenAI names are the call span's alone (a backend counts one tool call).
    for (const name of ["agent.tool_call.error", "agent.diagnosis"]) {
      const attributes = otel.spans().find((s) => s.name === name)?.attributes ?? {};
      expect(attributes).toMatchObject({
        "selfheal.agent.name": "test-agent",
        "selfheal.tool.name": "charge",
      });
      expect(Object.keys(attributes).filter((key) => key.startsWith("gen_ai."))).toEqual([]);
    }
    expect(otel.spans().filter((s) => s.attributes["gen_ai.tool.name"] === "charge")).toHaveLength(
      1,
    );
    expect(otel.spans().find((s) => s.name === "agent.diagnosis")?.attributes).toEqual({
      "selfheal.agent.name": "test-agent",
      "selfheal.tool.name": "charge",
      "selfheal.diagnosis.pattern": "UNKNOWN",
      "selfheal.diagnosis.confidence": 0,
      "selfheal.diagnosis.rule": "none",
      "selfheal.diagnosis.cooldown_ms": 0,
      "selfheal.recovery.strategy": "none",
    });
    const parent = otel.spans().find((s) => s.name === "agent.tool_call");
    const child = otel.spans().find((s) => s.name === "agent.tool_call.error");
    const expected = "upstream rejected key [REDACTED_KEY] for [REDACTED_EMAIL]";
    expect(parent?.status).toEqual({ code: SpanStatusCode.ERROR, message: expected });
    expect(parent?.attributes["error.type"]).toBe("TypeError");
    expect(parent?.attributes["selfheal.call.outcome"]).toBe("error");
    expect(parent?.attributes["selfheal.idempotency_key"]).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(parent?.attributes)).not.toContain("charge-42");
    expect(child?.status).toEqual({ code: SpanStatusCode.ERROR, message: expected });
    expect(child?.attributes).toEqual({
      "selfheal.agent.name": "test-agent",
      "selfheal.tool.name": "charge",
      "error.type": "TypeError",
      "selfheal.error.message": expected,
      "selfheal.recovery.attempt": 1,
    });
    const event = child?.events[0];
    expect(event?.name).toBe("exception");
    expect(event?.attributes?.["exception.message"]).toBe(expected);
    expect(String(event?.attributes?.["exception.stacktrace"])).not.toContain("sk-proj-");
  });

  it("a blocked write is one agent.tool_call span with outcome blocked; the tool never runs", async () => {
    const { sh, clock } = setup({ health: { successRate: { minSamples: 4 } } });
    const failing = sh.tool("lookup", { readOnly: true }, () => {
      throw new Error("down");
    });
    for (let i = 0; i < 4; i++) await failing(undefined).catch(() => undefined);
    let ran = 0;
    const write = sh.tool("send_email", { readOnly: false }, () => ++ran);
    const read = sh.tool("read_inbox", { readOnly: true }, () => "inbox");
    await clock.advance(5_000); // past the status cache
    otel.reset();

    const refused = await write(undefined).catch((e: unknown) => e);
    expect(isHealthCheckFailedError(refused)).toBe(true);
    expect(ran).toBe(0);
    await expect(read(undefined)).resolves.toBe("inbox");

    expect(tree(otel.spans())).toEqual(["agent.tool_call", "agent.tool_call"]);
    const [blocked, allowed] = otel.spans();
    expect(blocked?.attributes["selfheal.call.outcome"]).toBe("blocked");
    expect(blocked?.attributes["selfheal.health.status"]).toBe("critical");
    expect(blocked?.attributes["selfheal.tool.read_only"]).toBe(false); // a write says so
    expect(allowed?.attributes).not.toHaveProperty("selfheal.tool.read_only");
    expect(blocked?.attributes["error.type"]).toBe("HealthCheckFailedError");
    expect(blocked?.status.code).toBe(SpanStatusCode.ERROR);
    expect(allowed?.attributes["selfheal.call.outcome"]).toBe("success");
    expect(allowed?.attributes["selfheal.health.status"]).toBe("critical");
  });

  it("an empty LLM response is a success marked selfheal.response.empty", async () => {
    const { sh } = setup();
    const complete = sh.tool(
      "complete",
      { readOnly: true, kind: "llm", provider: "openai" },
      () => ({
        choices: [{ message: { content: "  " } }],
      }),
    );
    const custom = sh.tool(
      "custom",
      { readOnly: true, kind: "llm", isEmpty: (r: number) => r === 0 },
      () => 0,
    );
    await complete(undefined);
    await custom(undefined);
    const calls = otel.spans().filter((s) => s.name === "agent.tool_call");
    const [a, b] = calls;
    expect(a?.attributes["selfheal.call.outcome"]).toBe("success");
    expect(a?.attributes["selfheal.response.empty"]).toBe(true);
    expect(b?.attributes["selfheal.response.empty"]).toBe(true);
    // Each empty answer is diagnosed under its call.
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": ["agent.diagnosis"] },
      { "agent.tool_call": ["agent.diagnosis"] },
    ]);
    const diagnosis = otel.spans().find((s) => s.name === "agent.diagnosis");
    expect(diagnosis?.attributes["selfheal.diagnosis.pattern"]).toBe("EMPTY_LLM_RESPONSE");
    expect(diagnosis?.attributes["selfheal.recovery.strategy"]).toBe(
      "exponential_backoff_with_jitter",
    );
  });

  it("spans the tool makes are children of agent.tool_call, and re-entrant calls nest", async () => {
    const { sh } = setup();
    const tracer = otel.provider.getTracer("user");
    const inner = sh.tool("inner", { readOnly: true }, () => {
      tracer.startSpan("http GET").end();
      return 1;
    });
    const outer = sh.tool("outer", { readOnly: true }, async (depth: number): Promise<number> =>
      depth === 0 ? inner(undefined) : 1 + (await outer(depth - 1)),
    );
    await expect(outer(1)).resolves.toBe(2);
    expect(tree(otel.spans())).toEqual([
      { "agent.tool_call": [{ "agent.tool_call": [{ "agent.tool_call": ["http GET"] }] }] },
    ]);
    const names = otel.spans().map((s) => s.attributes["gen_ai.tool.name"]);
    expect(names.filter(Boolean).sort()).toEqual(["inner", "outer", "outer"]);
  });

  it("arguments and results stay off spans unless opted in, and are redacted when on", async () => {
    const args = { to: "jane@example.com", body: "hello" };
    const off = setup();
    await off.sh.tool("send", { readOnly: true }, () => "sent to jane@example.com")(args);
    const on = setup({ recordArguments: true, recordResults: true });
    await on.sh.tool("send", { readOnly: true }, () => "sent to jane@example.com")(args);
    const [first, second] = otel.spans();
    expect(first?.attributes["gen_ai.tool.call.arguments"]).toBeUndefined();
    expect(first?.attributes["gen_ai.tool.call.result"]).toBeUndefined();
    expect(second?.attributes["gen_ai.tool.call.arguments"]).toBe(
      '{"to":"[REDACTED_EMAIL]","body":"hello"}',
    );
    expect(second?.attributes["gen_ai.tool.call.result"]).toBe('"sent to [REDACTED_EMAIL]"');
  });

  it("records what the arguments' own toJSON shows, on a tool call and on a stream alike", async () => {
    const { sh } = setup({ recordArguments: true });
    const args = { secret: "sk-live-0123456789abcdef", toJSON: () => ({ messages: 2 }) };
    await sh.tool("t", { readOnly: true }, () => "ok")(args);
    const format = { read: () => ({ token: true, answer: true }), completion: "end" as const };
    const stream = sh.stream("s", { readOnly: true, format }, () =>
      (async function* () {
        yield "ok";
        await Promise.resolve();
      })(),
    );
    const chunks: unknown[] = [];
    for await (const chunk of stream(args)) chunks.push(chunk);
    expect(chunks).toEqual(["ok"]);
    const recorded = otel.spans().map((s) => s.attributes["gen_ai.tool.call.arguments"]);
    expect(recorded).toEqual(['{"messages":2}', '{"messages":2}']);
  });

  it("works on the global no-op tracer when no SDK is installed", async () => {
    // With an SDK registered globally, an instance without a tracerProvider records into it...
    expect(trace.setGlobalTracerProvider(otel.provider)).toBe(true);
    try {
      const withSdk = virtualInstance();
      await expect(withSdk.sh.tool("t", { readOnly: true }, () => 7)(undefined)).resolves.toBe(7);
      expect(otel.spans().map((s) => s.name)).toEqual(["agent.tool_call"]);
    } finally {
      trace.disable();
    }
    // ...and with none, the same call goes through on the no-op tracer: no span, health still fed.
    otel.reset();
    const { sh, clock } = virtualInstance();
    await expect(sh.tool("t", { readOnly: true }, () => 7)(undefined)).resolves.toBe(7);
    expect(otel.spans()).toHaveLength(0);
    await clock.advance(5_000);
    expect((await sh.status()).tools.t?.signals[0]?.samples).toBe(1);
  });
});

/**
 * A tracer provider over the real SDK that notes every attribute selfheal hands it, at span
 * start and by setAttribute, before the SDK filters anything.
 */
function attributeSpy() {
  const handed: [string, unknown][] = [];
  const provider: TracerProvider = {
    getTracer(name, version, options) {
      const tracer = otel.provider.getTracer(name, version, options);
      return {
        startSpan(spanName, spanOptions, ctx) {
          for (const entry of Object.entries(spanOptions?.attributes ?? {})) handed.push(entry);
          const span = tracer.startSpan(spanName, spanOptions, ctx);
          return new Proxy(span, {
            get(target, prop) {
              if (prop === "setAttribute") {
                return (key: string, value: unknown) => {
                  handed.push([key, value]);
                  return target.setAttribute(key, value as never);
                };
              }
              const member: unknown = Reflect.get(target, prop, target);
              return typeof member === "function"
                ? (member as (...a: unknown[]) => unknown).bind(target)
                : member;
            },
          });
        },
        startActiveSpan: tracer.startActiveSpan.bind(tracer),
      };
    },
  };
  return { provider, handed };
}

describe("agent.tool_call attributes that depend on the call", () => {
  beforeEach(() => {
    otel.reset();
  });

  const callSpan = () => otel.spans().find((s) => s.name === "agent.tool_call");

  it("carry the tool type, the task id and the timeout when there are any", async () => {
    const { sh } = setup();
    const t = sh.tool("lookup", { readOnly: true, type: "datastore", timeoutMs: 2_000 }, () => 1);
    await sh.task("task-7", () => t(undefined));
    expect(callSpan()?.attributes).toMatchObject({
      "gen_ai.tool.type": "datastore",
      "selfheal.task.id": "task-7",
      "selfheal.call.timeout_ms": 2_000,
    });
    otel.reset();
    await t(undefined, { timeoutMs: 500 });
    expect(callSpan()?.attributes["selfheal.call.timeout_ms"]).toBe(500);
    expect(callSpan()?.attributes["selfheal.task.id"]).toBeUndefined();
  });

  it("never hand the tracer an attribute without a value", async () => {
    const spy = attributeSpy();
    const { sh } = virtualInstance({ tracerProvider: spy.provider });
    await sh.tool("plain", { readOnly: true }, () => 1)(undefined);
    await sh
      .tool("failing", { readOnly: true }, () => {
        throw new Error("down");
      })(undefined)
      .catch(() => undefined);
    const names = new Set(spy.handed.map(([key]) => key));
    expect(names).toContain("selfheal.call.outcome");
    expect(spy.handed.filter(([, value]) => value === undefined)).toEqual([]);
    for (const absent of [
      "gen_ai.provider.name",
      "gen_ai.tool.type",
      "gen_ai.tool.call.id",
      "selfheal.task.id",
      "selfheal.call.timeout_ms",
      "selfheal.response.empty",
    ]) {
      expect(names).not.toContain(absent);
    }
  });

  it("an argument or result with no JSON form is recorded as an empty string", async () => {
    const { sh } = setup({ recordArguments: true, recordResults: true });
    await sh.tool("t", { readOnly: true }, () => undefined)(undefined);
    expect(callSpan()?.attributes["gen_ai.tool.call.arguments"]).toBe("");
    expect(callSpan()?.attributes["gen_ai.tool.call.result"]).toBe("");
  });

  it("an llm tool's call is a model call to GenAI backends: gen_ai.operation.name chat", async () => {
    const { sh } = setup();
    await sh.tool("answer", { readOnly: true, kind: "llm" }, () => "hi")(undefined);
    expect(callSpan()?.attributes["gen_ai.operation.name"]).toBe("chat");
  });

  it("a replayed write says so", async () => {
    const { sh } = setup();
    const charge = sh.tool("charge", { readOnly: false, idempotencyKey: () => "k" }, () => "ok");
    await charge(undefined);
    expect(callSpan()?.attributes["selfheal.idempotency.replayed"]).toBeUndefined();
    otel.reset();
    await charge(undefined);
    expect(callSpan()?.attributes["selfheal.idempotency.replayed"]).toBe(true);
    expect(callSpan()?.attributes["selfheal.call.outcome"]).toBe("success");
  });
});

describe("per-call span attributes", () => {
  beforeEach(() => {
    otel.reset();
  });
  const callSpan = () => otel.named("agent.tool_call")[0];

  it("go on the call's span as it opens, a refused write's included", async () => {
    const { sh } = setup({
      health: { cacheMs: 0, successRate: { warning: 0.9, critical: 0.5, minSamples: 1 } },
    });
    const attributes = { "mcp.method.name": "tools/call", "network.transport": "pipe" };
    await sh.tool("read", { readOnly: true }, () => "ok")(undefined, { attributes });
    expect(callSpan()?.attributes).toMatchObject(attributes);
    const broken = sh.tool("broken", { readOnly: true }, () => {
      throw new Error("down");
    });
    for (let i = 0; i < 3; i++) await broken(undefined).catch(() => undefined);
    otel.reset();
    const write = sh.tool("write", { readOnly: false }, () => "written");
    await expect(write(undefined, { attributes })).rejects.toThrow(/refused/);
    expect(callSpan()?.attributes).toMatchObject({
      ...attributes,
      "selfheal.call.outcome": "blocked",
    });
  });
});

describe('span: "attach" (a framework already opens a span per tool call)', () => {
  beforeEach(() => {
    otel.reset();
  });

  const frameworkSpan = <T>(fn: () => Promise<T>) =>
    otel.provider.getTracer("framework").startActiveSpan("framework.tool", async (span) => {
      try {
        return await fn();
      } finally {
        span.end();
      }
    });

  it("writes selfheal's attributes on the framework's span: no second tool-call span", async () => {
    const { sh } = setup();
    const search = sh.tool("search", { readOnly: true, span: "attach" }, () => "ok");
    await expect(frameworkSpan(() => search(undefined))).resolves.toBe("ok");
    expect(tree(otel.spans())).toEqual(["framework.tool"]);
    expect(otel.spans()[0]?.attributes).toMatchObject({
      "gen_ai.tool.name": "search",
      "selfheal.call.outcome": "success",
    });
    // Healthy is the absence of the status: it is written only when the agent is not.
    expect(otel.spans()[0]?.attributes).not.toHaveProperty("selfheal.health.status");
  });

  it("hangs the error, diagnosis and recovery spans under the framework's span, which its owner ends", async () => {
    const { sh, clock } = setup({ recovery: { random: () => 0 } });
    let calls = 0;
    const flaky = sh.tool("flaky", { readOnly: true, span: "attach" }, () => {
      calls += 1;
      if (calls === 1) throw Object.assign(new Error("upstream down"), { status: 503 });
      return "ok";
    });
    await expect(
      clock.run(
        frameworkSpan(() => flaky(undefined)),
        { stepMs: 100 },
      ),
    ).resolves.toBe("ok");
    expect(tree(otel.spans())).toEqual([
      {
        "framework.tool": ["agent.tool_call.error", "agent.diagnosis", "agent.recovery"],
      },
    ]);
    const owner = otel.named("framework.tool")[0];
    expect(owner?.name).toBe("framework.tool");
    expect(owner?.attributes["selfheal.call.outcome"]).toBe("recovered");
  });

  it("opens its own span when no recording span is active", async () => {
    const { sh } = setup();
    await sh.tool("solo", { readOnly: true, span: "attach" }, () => "ok")(undefined);
    expect(tree(otel.spans())).toEqual(["agent.tool_call"]);
  });
});
