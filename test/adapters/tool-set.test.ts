/**
 * What the adapters healing a record of tools by name share (selfheal/ai-sdk, selfheal/mastra):
 * option checks against the record, read-only only when declared, one selfheal tool per name and
 * instance, and the tool's input handed to its own idempotencyKey and cannedAnswer.
 */
import { describe, expect, it } from "vitest";
import {
  checkSameSafety,
  checkToolSetOptions,
  inputToolOptions,
  isReadOnly,
  ToolRegistry,
  type ToolInput,
} from "../../src/adapters/tool-set.js";
import { configError, NO_RECOVERY, virtualInstance } from "../helpers/engine.js";

const RULES = {
  keys: ["readOnly", "tools", "spans"],
  setByAdapter: {
    readOnly: "list read-only tools in the readOnly option",
    kind: "set by the adapter",
  },
  notATool: "is not a tool of this record",
};
const TOOLS = { search: {}, charge: {} };

describe("checkToolSetOptions", () => {
  it("takes no options, or known keys naming tools of the record; returns them", () => {
    expect(checkToolSetOptions(TOOLS, undefined, RULES)).toEqual({});
    const options = { readOnly: ["search"], tools: { charge: { timeoutMs: 5 } } };
    expect(checkToolSetOptions(TOOLS, options, RULES)).toEqual(options);
    const predicate = { readOnly: (name: string) => name === "search" };
    expect(checkToolSetOptions(TOOLS, predicate, RULES)).toBe(predicate);
  });

  it("names each mistake by field", () => {
    const cases: [unknown, unknown, string, string?][] = [
      [null, {}, "healTools(tools)"],
      [TOOLS, 5, "healTools.options"],
      [TOOLS, { retries: 2 }, "healTools.options.retries"],
      [
        TOOLS,
        { readOnly: "search" },
        "healTools.options.readOnly",
        "expected a list of tool names or a function",
      ],
      [
        TOOLS,
        { readOnly: ["serch"] },
        "healTools.options.readOnly",
        '"serch" is not a tool of this record',
      ],
      [TOOLS, { readOnly: [7] }, "healTools.options.readOnly", "7 is not a tool of this record"],
      [
        TOOLS,
        { readOnly: ["toString"] },
        "healTools.options.readOnly",
        "is not a tool of this record",
      ],
      [TOOLS, { tools: 3 }, "healTools.options.tools"],
      [
        TOOLS,
        { tools: { serch: {} } },
        "healTools.options.tools.serch",
        "no tool of this name in the set (a typo?)",
      ],
      [TOOLS, { tools: { search: 1 } }, "healTools.options.tools.search"],
      [
        TOOLS,
        { tools: { search: { readOnly: true } } },
        "healTools.options.tools.search.readOnly",
        "list read-only tools in the readOnly option",
      ],
      [
        TOOLS,
        { tools: { search: { kind: "llm" } } },
        "healTools.options.tools.search.kind",
        "set by the adapter",
      ],
      [
        TOOLS,
        { tools: { charge: { idempotencyKey: "order-1" } } },
        "healTools.options.tools.charge.idempotencyKey",
      ],
      [
        TOOLS,
        { tools: { search: { cannedAnswer: [] } } },
        "healTools.options.tools.search.cannedAnswer",
      ],
    ];
    for (const [tools, options, field, message] of cases) {
      const error = configError(() => checkToolSetOptions(tools, options, RULES));
      expect([field, error.field]).toEqual([field, field]);
      if (message !== undefined) expect(error.message).toContain(message);
    }
  });
});

describe("isReadOnly", () => {
  it("only when declared: by list, or by a predicate answering a boolean", () => {
    expect(isReadOnly("search", undefined)).toBe(false);
    expect(isReadOnly("search", ["search"])).toBe(true);
    expect(isReadOnly("charge", ["search"])).toBe(false);
    expect(isReadOnly("search", (name) => name.startsWith("s"))).toBe(true);
    expect(isReadOnly("charge", (name) => name.startsWith("s"))).toBe(false);
    const error = configError(() => isReadOnly("charge", (() => "yes") as never));
    expect(error.field).toBe("healTools.options.readOnly");
    expect(error.message).toContain('expected true or false for tool "charge", got string');
  });
});

describe("ToolRegistry and checkSameSafety", () => {
  it("one selfheal tool per name and instance, declared the same way each time", async () => {
    const { sh } = virtualInstance({ recovery: NO_RECOVERY });
    const other = virtualInstance({ recovery: NO_RECOVERY }).sh;
    const registry = new ToolRegistry<ToolInput>();
    const run = (e: ToolInput) => `ran ${String(e.input)}`;
    const first = registry.register(sh, "search", { readOnly: true, kind: "tool" }, run);
    const again = registry.register(sh, "search", { readOnly: true, kind: "tool" }, run);
    expect(again).toBe(first);
    expect(first.readOnly).toBe(true);
    expect(await first.call({ input: "q" })).toBe("ran q");
    const elsewhere = registry.register(other, "search", { readOnly: false, kind: "tool" }, run);
    expect(elsewhere).not.toBe(first);
    expect(elsewhere.readOnly).toBe(false);
    const error = configError(() =>
      registry.register(sh, "search", { readOnly: false, kind: "tool" }, run),
    );
    expect(error.field).toBe("healTools.options.readOnly");
    expect(error.message).toContain(
      'tool "search" was healed before as read-only; a tool name is one tool on an instance',
    );
  });

  it("checkSameSafety names what the tool was before", () => {
    expect(() => {
      checkSameSafety("x", true, true);
    }).not.toThrow();
    expect(
      configError(() => {
        checkSameSafety("charge", false, true);
      }).message,
    ).toContain('tool "charge" was healed before as a write');
  });
});

describe("inputToolOptions", () => {
  it("the overrides, kind tool, readOnly as declared; idempotencyKey and cannedAnswer get the input", () => {
    const keys: unknown[] = [];
    const options = inputToolOptions<ToolInput>(false, {
      timeoutMs: 2_000,
      idempotencyKey: (input) => {
        keys.push(input);
        return "k-1";
      },
      cannedAnswer: (input, error) => ({ input, error }),
    });
    expect(options).toMatchObject({ timeoutMs: 2_000, readOnly: false, kind: "tool" });
    expect(options.idempotencyKey?.({ input: { order: 7 } })).toBe("k-1");
    expect(keys).toEqual([{ order: 7 }]);
    const error = new Error("down");
    expect(options.cannedAnswer?.({ input: "q" }, error)).toEqual({ input: "q", error });
    const bare = inputToolOptions<ToolInput>(true, undefined);
    expect(bare).toStrictEqual({ readOnly: true, kind: "tool" });
  });
});
