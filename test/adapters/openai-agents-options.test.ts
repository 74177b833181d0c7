/**
 * The OpenAI Agents SDK adapter's options on their own: what `healTool` and `healTools` refuse,
 * by field, and how a read-only declaration is read; and what the model reads when recovery
 * gives up.
 */
import { hostedMcpTool, RunContext, tool } from "@openai/agents";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { healTool, healTools, healthTraceProcessor } from "../../src/adapters/openai-agents.js";
import { isReadOnly, validateHealOptions } from "../../src/adapters/openai-agents/options.js";
import {
  defaultToolErrorMessage,
  failureOutput,
  HiddenToolError,
  SDK_DEFAULT_TOOL_ERROR,
  ToolInputRejectedError,
} from "../../src/adapters/openai-agents/tool-output.js";
import { HealthCheckFailedError, HttpResponseError, ToolTimeoutError } from "../../src/errors.js";
import type { SelfHealing } from "../../src/index.js";
import { configError, NO_RECOVERY, recoveryInstance, virtualInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const lookup = (name = "lookup") =>
  tool({
    name,
    description: "Looks up",
    parameters: z.object({ q: z.string() }),
    errorFunction: null,
    execute: ({ q }) => q,
  });

describe("validateHealOptions", () => {
  it("takes nothing, or known keys with values of the right kind", () => {
    expect(validateHealOptions(undefined, "f")).toEqual({});
    const options = {
      readOnly: ["lookup"],
      idempotencyKey: () => "k",
      errorFunction: () => "failed",
      spans: "attach" as const,
      logger: { warn: () => undefined },
      timeoutMs: 5,
    };
    expect(validateHealOptions(options, "f", ["lookup"])).toBe(options);
    for (const readOnly of [true, false, () => true, ["anything"]])
      expect(() => validateHealOptions({ readOnly }, "f")).not.toThrow();
  });

  it("names each mistake", () => {
    const cases: [unknown, string, string?][] = [
      [5, "f"],
      [{ readonly: true }, "f.readonly"],
      [
        { readOnly: "lookup" },
        "f.readOnly",
        'expected a list of tool names, a function (toolName) => boolean or a boolean, got "lookup"',
      ],
      [{ readOnly: [3] }, "f.readOnly", "expected tool names, got 3"],
      [
        { readOnly: ["lokup"] },
        "f.readOnly",
        '"lokup" is not one of the tools (lookup, charge): a misspelt read would be treated as a write',
      ],
      [{ idempotencyKey: "k" }, "f.idempotencyKey"],
      [{ errorFunction: "text" }, "f.errorFunction"],
      [{ spans: "both" }, "f.spans"],
      [{ logger: {} }, "f.logger"],
      [{ logger: "console" }, "f.logger"],
    ];
    for (const [options, field, message] of cases) {
      const error = configError(() => validateHealOptions(options, "f", ["lookup", "charge"]));
      expect([field, error.field]).toEqual([field, field]);
      if (message !== undefined) expect(error.message).toContain(message);
    }
  });
});

describe("isReadOnly", () => {
  it("a boolean for all, a list, or a predicate; nothing declared is a write", () => {
    expect(isReadOnly(undefined, "lookup")).toBe(false);
    expect(isReadOnly(true, "charge")).toBe(true);
    expect(isReadOnly(false, "lookup")).toBe(false);
    expect(isReadOnly(["lookup"], "lookup")).toBe(true);
    expect(isReadOnly(["lookup"], "charge")).toBe(false);
    expect(isReadOnly((name) => name === "lookup", "lookup")).toBe(true);
    expect(isReadOnly((name) => name === "lookup", "charge")).toBe(false);
  });
});

describe("healTool and healTools refuse", () => {
  it("a list that is not one, a tool that is not a function tool, a predicate that does not answer", () => {
    const { sh } = virtualInstance();
    expect(configError(() => healTools(sh, "lookup" as never)).field).toBe("healTools(tools)");
    expect(configError(() => healTools(sh, { 0: lookup() } as never)).message).toContain(
      "expected a list of Agents SDK tools",
    );
    const hosted = hostedMcpTool({ serverLabel: "docs", serverUrl: "https://mcp.example" });
    for (const bad of [hosted, null, { type: "function" }, { type: "function", invoke: "x" }]) {
      const error = configError(() => healTool(sh, bad as never));
      expect(error.field).toBe("healTool(tool)");
      expect(error.message).toContain(
        "expected a function tool (made with tool() from @openai/agents)",
      );
    }
    const vague = configError(() =>
      healTool(sh, lookup("vague"), { readOnly: (() => "yes") as never }),
    );
    expect(vague.field).toBe('healTool("vague").options.readOnly');
    expect(vague.message).toContain('expected true or false for tool "vague", got string');
    const inList = configError(() =>
      healTools(sh, [lookup("listed")], { readOnly: (() => 1) as never }),
    );
    expect(inList.field).toBe("healTools(options).readOnly");
    expect(inList.message).toContain('for tool "listed", got number');
  });

  it("passes non-function tools of a list through, and heals a healed tool no further", () => {
    const { sh } = virtualInstance();
    const hosted = hostedMcpTool({ serverLabel: "docs", serverUrl: "https://mcp.example" });
    const [healed, passed] = healTools(sh, [lookup("once"), hosted], { readOnly: true });
    expect(passed).toBe(hosted);
    expect(healTools(sh, [healed as never])[0]).toBe(healed);
  });
});

describe("what the model reads when recovery gives up", () => {
  const span = () => {
    const errors: unknown[] = [];
    return { errors, span: { setError: (e: unknown) => errors.push(e) } };
  };
  const call = (s: { setError(e: unknown): void } | undefined, signal?: AbortSignal) => ({
    runContext: { context: {} },
    details: signal ? { signal } : undefined,
    span: s,
  });

  it("selfheal's refusals in its own words; bad arguments in the SDK's; else the error's type only", () => {
    const refusal = new HealthCheckFailedError("charge", "critical");
    expect(defaultToolErrorMessage("charge", refusal)).toBe(refusal.message);
    const http = new HttpResponseError(
      503,
      new Headers(),
      "upstream down for acct 42",
      "https://x",
    );
    expect(defaultToolErrorMessage("charge", http)).toBe(
      'Tool "charge" failed (HTTP 503) and could not be recovered now. Continue without it or try again later.',
    );
    expect(
      defaultToolErrorMessage("charge", new ToolInputRejectedError("charge", { cause: 1 })),
    ).toBe("An error occurred while parsing tool arguments. Please try again with valid JSON.");
    expect(defaultToolErrorMessage("t", new RangeError("secret 42"))).toContain("(RangeError)");
    expect(defaultToolErrorMessage("t", "text")).toContain("(string)");
    const rejected = new ToolInputRejectedError("t", { cause: "zod" });
    expect([rejected.code, rejected.name, rejected.cause]).toEqual([
      "INVALID_ARGUMENT",
      "ToolInputRejectedError",
      "zod",
    ]);
    const hidden = new HiddenToolError("t");
    expect(hidden.name).toBe("HiddenToolError");
    expect(hidden.message).toContain("create the tool with errorFunction: null");
  });

  it("failureOutput: marks the SDK span with the type only, then the errorFunction's text or the default", () => {
    const t = lookup("out");
    const s = span();
    const error = new TypeError("card 4242 declined");
    expect(failureOutput(t, {}, call(s.span) as never, error)).toContain(
      'Tool "out" failed (TypeError)',
    );
    expect(s.errors).toEqual([
      { message: "Error running tool (non-fatal)", data: { tool_name: "out", error: "TypeError" } },
    ]);
    const own = failureOutput(
      t,
      { errorFunction: (_ctx, e) => `own: ${(e as Error).name}` },
      call(undefined) as never,
      error,
    );
    expect(own).toBe("own: TypeError");
  });

  it("failureOutput: a cancelled run, a structured tool and a raise_exception timeout throw; a hidden error is the SDK's text", () => {
    const t = lookup("thrown");
    const error = new Error("x");
    expect(() =>
      failureOutput(t, {}, call(undefined, AbortSignal.abort()) as never, error),
    ).toThrow(error);
    expect(failureOutput(t, {}, call(undefined) as never, new HiddenToolError("thrown"))).toBe(
      SDK_DEFAULT_TOOL_ERROR,
    );
    const structured = { ...t, outputSchema: {} };
    expect(() => failureOutput(structured as never, {}, call(undefined) as never, error)).toThrow(
      error,
    );
    const timeout = new ToolTimeoutError("thrown", 5);
    const raising = { ...t, timeoutBehavior: "raise_exception" };
    expect(() => failureOutput(raising as never, {}, call(undefined) as never, timeout)).toThrow(
      timeout,
    );
    expect(failureOutput(t, {}, call(undefined) as never, timeout)).toBe(timeout.message);
    expect(
      failureOutput(t, {}, call(undefined, new AbortController().signal) as never, error),
    ).toContain("(Error)");
  });
});

describe("healthTraceProcessor: the SDK's spans as health records", () => {
  /** An instance stand-in whose span processor keeps what it is given. */
  function recorder() {
    const ended: {
      name: string;
      attributes: Record<string, unknown>;
      status: { code: number };
      duration: [number, number];
    }[] = [];
    const sh = { spanProcessor: () => ({ onEnd: (s: (typeof ended)[number]) => ended.push(s) }) };
    return { sh: sh as unknown as SelfHealing, ended };
  }
  const sdkSpan = (
    spanData: Record<string, unknown>,
    error: unknown = null,
    startedAt: string | null = "2026-12-03T10:00:00.000Z",
    endedAt: string | null = "2026-12-03T10:00:01.250Z",
  ) => ({ spanData, error, startedAt, endedAt }) as never;

  it("a function span is a tool call; a model span an LLM call, with output tokens when it has usage", async () => {
    const { sh, ended } = recorder();
    const processor = healthTraceProcessor(sh);
    await processor.onSpanEnd(sdkSpan({ type: "function", name: "lookup" }));
    await processor.onSpanEnd(sdkSpan({ type: "function", name: "lookup" }, { message: "boom" }));
    await processor.onSpanEnd(
      sdkSpan({ type: "generation", model: "gpt-4o", usage: { output_tokens: 0 } }),
    );
    await processor.onSpanEnd(sdkSpan({ type: "generation" }, null, null, null));
    await processor.onSpanEnd(
      sdkSpan({ type: "response", _response: { model: "gpt-5", usage: { output_tokens: 12 } } }),
    );
    await processor.onSpanEnd(
      sdkSpan({ type: "response", _response: { model: 5, usage: { output_tokens: "12" } } }),
    );
    await processor.onSpanEnd(sdkSpan({ type: "agent", name: "triage" }));
    expect(ended.map((s) => [s.name, s.attributes, s.status.code, s.duration])).toEqual([
      [
        "lookup",
        { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup" },
        0,
        [1, 250_000_000],
      ],
      [
        "lookup",
        { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup" },
        2,
        [1, 250_000_000],
      ],
      [
        "gpt-4o",
        { "gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 0 },
        0,
        [1, 250_000_000],
      ],
      ["generation", { "gen_ai.operation.name": "chat" }, 0, [0, 0]],
      [
        "gpt-5",
        { "gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 12 },
        0,
        [1, 250_000_000],
      ],
      ["response", { "gen_ai.operation.name": "chat" }, 0, [1, 250_000_000]],
    ]);
  });

  it("with models: false only tools count; bad timestamps give no duration; its other hooks do nothing", async () => {
    const { sh, ended } = recorder();
    const processor = healthTraceProcessor(sh, { models: false });
    await processor.onSpanEnd(sdkSpan({ type: "generation", model: "gpt-4o" }));
    await processor.onSpanEnd(
      sdkSpan({ type: "function", name: "t" }, null, "not a date", "2026-12-03T10:00:00Z"),
    );
    await processor.onSpanEnd(
      sdkSpan(
        { type: "function", name: "t" },
        null,
        "2026-12-03T10:00:05Z",
        "2026-12-03T10:00:00Z",
      ),
    );
    expect(ended.map((s) => [s.name, s.duration])).toEqual([
      ["t", [0, 0]],
      ["t", [0, 0]],
    ]);
    await expect(
      Promise.all([
        processor.onTraceStart({} as never),
        processor.onTraceEnd({} as never),
        processor.onSpanStart({} as never),
        processor.shutdown(),
        processor.forceFlush(),
      ]),
    ).resolves.toBeDefined();
    expect(ended).toHaveLength(2);
    expect(configError(() => healthTraceProcessor(sh, { model: true } as never)).field).toBe(
      "healthTraceProcessor(options).model",
    );
    expect(configError(() => healthTraceProcessor(sh, 3 as never)).field).toBe(
      "healthTraceProcessor(options)",
    );
  });
});

describe("a healed tool's invoke, called as the runner calls it", () => {
  const otel = recordingProvider();
  const invokeOf = (t: unknown) =>
    (t as { invoke: (ctx: unknown, input: string, details?: unknown) => Promise<unknown> }).invoke;

  it("its selfheal options: timeout (the option's, else the tool's), provider, the key from the parsed arguments", async () => {
    otel.reset();
    const { sh } = recoveryInstance(otel.provider, {
      ...NO_RECOVERY,
      providers: [{ name: "stripe" }],
    });
    const keys: unknown[] = [];
    const timed = tool({
      name: "charge",
      description: "charges",
      parameters: z.object({ order: z.string() }),
      errorFunction: null,
      timeoutMs: 7_000,
      execute: ({ order }) => `charged ${order}`,
    });
    const healed = healTool(sh, timed, {
      provider: "stripe",
      idempotencyKey: (args, name) => {
        keys.push([args, name]);
        return "order-1";
      },
    });
    expect((healed as { timeoutMs?: number }).timeoutMs).toBeUndefined();
    const out = await invokeOf(healed)(new RunContext({}), '{"order":"A-1"}', {
      toolCall: { callId: "call_42" },
    });
    expect(out).toBe("charged A-1");
    expect(keys).toEqual([[{ order: "A-1" }, "charge"]]);
    const [attributes] = otel.named("agent.tool_call").map((s) => s.attributes);
    expect(attributes).toMatchObject({
      "selfheal.call.timeout_ms": 7_000,
      "gen_ai.provider.name": "stripe",
      "gen_ai.tool.call.id": "call_42",
      "gen_ai.tool.type": "function",
    });
    otel.reset();
    const own = healTool(sh, lookup("own-timeout"), { readOnly: true, timeoutMs: 3_000 });
    await invokeOf(own)(new RunContext({}), '{"q":"x"}', { toolCall: { callId: "" } });
    const [second] = otel.named("agent.tool_call").map((s) => s.attributes);
    expect(second?.["selfheal.call.timeout_ms"]).toBe(3_000);
    expect(second?.["gen_ai.tool.call.id"]).toBeUndefined();
  });

  it("a key function gets arguments that are not JSON as they are", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const seen: unknown[] = [];
    const healed = healTool(sh, lookup("raw-args"), {
      idempotencyKey: (args) => {
        seen.push(args);
        return "k";
      },
    });
    await invokeOf(healed)(new RunContext({}), "not json");
    expect(seen).toEqual(["not json"]);
  });

  it("the runner's abort reaches the tool through selfheal's signal; a cancelled run throws", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    let given: AbortSignal | undefined;
    const hang = tool({
      name: "hang",
      description: "hangs",
      parameters: z.object({}),
      errorFunction: null,
      execute: (_input, _ctx, details) => {
        given = details?.signal;
        return new Promise((_resolve, reject) => {
          details?.signal?.addEventListener("abort", () => {
            reject(new Error("aborted"));
          });
        });
      },
    });
    const run = new AbortController();
    const call = invokeOf(healTool(sh, hang, { readOnly: true }))(new RunContext({}), "{}", {
      signal: run.signal,
    }).catch((e: unknown) => e);
    await clock.advance(1);
    run.abort("user left");
    expect(await call).toBeDefined();
    expect(given?.aborted).toBe(true);
    expect(given).not.toBe(run.signal);
  });

  it("a tool that keeps the SDK's default errorFunction: one warning however often it fails", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const warnings: string[] = [];
    const hiding = tool({
      name: "hiding",
      description: "fails",
      parameters: z.object({}),
      execute: () => {
        throw new Error("boom");
      },
    });
    const healed = healTool(sh, hiding, {
      readOnly: true,
      logger: { warn: (m) => warnings.push(m) },
    });
    expect(await invokeOf(healed)(new RunContext({}), "{}")).toBe(SDK_DEFAULT_TOOL_ERROR);
    expect(await invokeOf(healed)(new RunContext({}), "{}")).toBe(SDK_DEFAULT_TOOL_ERROR);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      'selfheal: tool "hiding" failed and the Agents SDK\'s default errorFunction',
    );
  });

  it("a name is one tool: a copy declared otherwise is refused, naming what it was", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    healTool(sh, lookup("same"), { readOnly: true });
    const error = configError(() => healTool(sh, lookup("same"), { readOnly: false }));
    expect(error.field).toBe('healTool("same").options.readOnly');
    expect(error.message).toContain('tool "same" was healed before as read-only');
    healTool(sh, lookup("w"));
    expect(configError(() => healTool(sh, lookup("w"), { readOnly: true })).message).toContain(
      "as a write",
    );
  });
});
