/**
 * selfheal/mastra's healTools on tools built by hand, by the shape Mastra gives them (runs on
 * every Node; the suite with the real @mastra/core needs Node 22.13+): what it refuses, what a
 * healed execute passes on, the copy it makes, the call context, healing twice.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { callContextOf, healTools } from "../../src/adapters/mastra.js";
import { configError, NO_RECOVERY, recoveryInstance } from "../helpers/engine.js";
import { recordingProvider } from "../helpers/otel.js";

const otel = recordingProvider();
beforeEach(() => {
  otel.reset();
});

const MARK = Symbol.for("mastra.tool");

class MastraTool {
  readonly [MARK] = true;
  readonly id: string;
  constructor(
    id: string,
    readonly execute?: (input: unknown, context: Record<string, unknown>) => unknown,
  ) {
    this.id = id;
  }
  describe(): string {
    return `tool ${this.id}`;
  }
}

const attrs = () => otel.named("agent.tool_call").map((s) => s.attributes);

describe("selfheal/mastra healTools", () => {
  it("refuses options that would pass silently, with the set's names", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const tools = { search: new MastraTool("search", () => "x") };
    const misspelt = configError(() => healTools(sh, tools, { readOnly: ["serch"] }));
    expect(misspelt.field).toBe("healTools.options.readOnly");
    expect(misspelt.message).toContain(
      "is not a tool of this set (its names are the keys of the agent's tools)",
    );
    const cases: [unknown, string, string][] = [
      [
        { tools: { search: { readOnly: true } } },
        "healTools.options.tools.search.readOnly",
        "list read-only tools in the readOnly option of healTools",
      ],
      [
        { tools: { search: { kind: "llm" } } },
        "healTools.options.tools.search.kind",
        "Mastra tools are `tool`",
      ],
      [
        { tools: { search: { isEmpty: () => true } } },
        "healTools.options.tools.search.isEmpty",
        "empty answers are judged on model calls",
      ],
      [
        { tools: { search: { span: "attach" } } },
        "healTools.options.tools.search.span",
        "its own agent.tool_call span",
      ],
      [{ spans: "attach" }, "healTools.options.spans", "unknown option"],
    ];
    for (const [options, field, message] of cases) {
      const error = configError(() => healTools(sh, tools, options as never));
      expect([field, error.field]).toEqual([field, field]);
      expect(error.message).toContain(message);
    }
  });

  it("a healed tool is a copy (class, symbols, fields) whose execute gets the input and Mastra's context, with selfheal's signal", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY, { recordArguments: true });
    const seen: { input: unknown; context: Record<string, unknown>; self: unknown }[] = [];
    const search = new MastraTool("search", function (this: unknown, input, context) {
      seen.push({ input, context, self: this });
      return { hits: 1 };
    });
    const passive = new MastraTool("client-side");
    const healed = healTools(sh, { search, passive }, { readOnly: ["search"] });
    expect(healed.passive).toBe(passive);
    const copy = healed.search;
    expect(copy).not.toBe(search);
    expect(copy).toBeInstanceOf(MastraTool);
    expect(copy[MARK]).toBe(true);
    expect(copy.describe()).toBe("tool search");
    expect(Object.keys(copy)).toContain("execute");
    const run = new AbortController();
    const context = {
      agent: { toolCallId: "call_7" },
      requestContext: { user: "u1" },
      abortSignal: run.signal,
    };
    expect(await copy.execute?.({ q: "refunds" }, context)).toEqual({ hits: 1 });
    const [call] = seen;
    expect(call?.input).toEqual({ q: "refunds" });
    expect(call?.self).toBe(search);
    expect(call?.context.requestContext).toEqual({ user: "u1" });
    expect(call?.context.abortSignal).not.toBe(run.signal);
    expect(attrs()[0]).toMatchObject({
      "gen_ai.tool.name": "search",
      "gen_ai.tool.call.id": "call_7",
      "gen_ai.tool.call.arguments": '{"q":"refunds"}',
    });
  });

  it("the call id from the agent's context, else the AI SDK tool's; a blank one left out", async () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const healed = healTools(
      sh,
      { find: new MastraTool("find", () => "x") },
      { readOnly: ["find"] },
    );
    await healed.find.execute?.({}, { toolCallId: "sdk_1" });
    await healed.find.execute?.({}, { agent: { toolCallId: " " } });
    await healed.find.execute?.({}, undefined as never);
    expect(attrs().map((a) => a["gen_ai.tool.call.id"])).toEqual(["sdk_1", undefined, undefined]);
  });

  it("the run's abort reaches the tool; callContextOf finds the attempt from inside execute", async () => {
    const { sh, clock } = recoveryInstance(otel.provider, NO_RECOVERY);
    const contexts: unknown[] = [];
    let given: AbortSignal | undefined;
    const hang = new MastraTool("hang", (_input, context) => {
      given = context.abortSignal as AbortSignal;
      contexts.push(callContextOf(context)?.attempt);
      return new Promise((_resolve, reject) => {
        given?.addEventListener("abort", () => {
          reject(new Error("aborted"));
        });
      });
    });
    const healed = healTools(sh, { hang }, { readOnly: ["hang"] });
    const run = new AbortController();
    const call = healed.hang.execute?.({}, { abortSignal: run.signal });
    await clock.advance(1);
    run.abort("user left");
    await expect(call).rejects.toBeDefined();
    expect(given?.aborted).toBe(true);
    expect(contexts).toEqual([1]);
    expect(callContextOf({})).toBeUndefined();
    expect(callContextOf({ abortSignal: new AbortController().signal })).toBeUndefined();
  });

  it("heals a healed set no further, and keeps a tool's safety across heals", () => {
    const { sh } = recoveryInstance(otel.provider, NO_RECOVERY);
    const first = healTools(sh, { charge: new MastraTool("charge", () => "ok") });
    const again = healTools(sh, first);
    expect(again.charge).toBe(first.charge);
    const error = configError(() => healTools(sh, first, { readOnly: ["charge"] }));
    expect(error.message).toContain('tool "charge" was healed before as a write');
    const other = recoveryInstance(otel.provider, NO_RECOVERY).sh;
    expect(healTools(other, first).charge).not.toBe(first.charge);
  });
});
