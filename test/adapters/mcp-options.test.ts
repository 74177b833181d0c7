/** healMcpClient's options on their own: defaults, each refusal by field, per-tool rules. */
import { describe, expect, it } from "vitest";
import { resolveSettings } from "../../src/adapters/mcp/options.js";
import { configError, virtualInstance } from "../helpers/engine.js";

const F = "healMcpClient(options)";
const client = { callTool: () => undefined, listTools: () => undefined };

describe("resolveSettings", () => {
  const { sh } = virtualInstance();

  it("defaults: no tool read-only, annotations trusted, names kept, refusals as results, context sent", () => {
    const s = resolveSettings(sh, client, undefined);
    expect(s.readOnly("search")).toBe(false);
    expect(s.trustAnnotations).toBe(true);
    expect(s.toolOptions("search")).toBeUndefined();
    expect(s.toolName("search")).toBe("search");
    expect(s.spans).toBeUndefined();
    expect(s.refusals).toBe("result");
    expect(s.propagateContext).toBe(true);
  });

  it("reads each option as given", () => {
    const shared = { timeoutMs: 5_000 };
    const s = resolveSettings(sh, client, {
      readOnly: ["search"],
      trustAnnotations: false,
      toolOptions: shared,
      toolName: (n: string) => `docs.${n}`,
      spans: "attach",
      refusals: "throw",
      propagateContext: false,
    });
    expect([s.readOnly("search"), s.readOnly("charge")]).toEqual([true, false]);
    expect(s.trustAnnotations).toBe(false);
    expect(s.toolOptions("anything")).toBe(shared);
    expect(s.toolName("search")).toBe("docs.search");
    expect([s.spans, s.refusals, s.propagateContext]).toEqual(["attach", "throw", false]);
    const byPredicate = resolveSettings(sh, client, {
      readOnly: (n: string) => (n === "a" ? true : "yes"),
    });
    expect([byPredicate.readOnly("a"), byPredicate.readOnly("b")]).toEqual([true, false]);
  });

  it("per-tool options from a function, each checked when asked for", () => {
    const s = resolveSettings(sh, client, {
      toolOptions: (name: string) => (name === "charge" ? { readOnly: true } : { timeoutMs: 1 }),
    });
    expect(s.toolOptions("search")).toEqual({ timeoutMs: 1 });
    const error = configError(() => s.toolOptions("charge"));
    expect(error.field).toBe(`${F}.toolOptions("charge").readOnly`);
    expect(error.message).toContain("set by the adapter");
  });

  it("names each mistake", () => {
    const cases: [unknown, unknown, unknown, string, string?][] = [
      [{}, client, undefined, "healMcpClient(sh)"],
      [sh, { callTool: () => 1 }, undefined, "healMcpClient(client)"],
      [sh, client, 3, F],
      [sh, client, { readonly: [] }, `${F}.readonly`],
      [
        sh,
        client,
        { readOnly: "search" },
        `${F}.readOnly`,
        "expected a list of MCP tool names or a function (toolName) => boolean",
      ],
      [sh, client, { readOnly: ["search", 2] }, `${F}.readOnly`],
      [sh, client, { trustAnnotations: "no" }, `${F}.trustAnnotations`],
      [sh, client, { toolName: "docs" }, `${F}.toolName`],
      [sh, client, { propagateContext: 0 }, `${F}.propagateContext`],
      [sh, client, { spans: "both" }, `${F}.spans`],
      [sh, client, { refusals: "drop" }, `${F}.refusals`],
      [sh, client, { toolOptions: 4 }, `${F}.toolOptions`],
      [sh, client, { toolOptions: { span: "attach" } }, `${F}.toolOptions.span`],
      [sh, client, { toolOptions: { kind: "llm" } }, `${F}.toolOptions.kind`],
      [sh, client, { toolOptions: { isEmpty: () => true } }, `${F}.toolOptions.isEmpty`],
    ];
    for (const [instance, c, options, field, message] of cases) {
      const error = configError(() => resolveSettings(instance, c, options));
      expect([field, error.field]).toEqual([field, field]);
      if (message !== undefined) expect(error.message).toContain(message);
    }
  });
});
