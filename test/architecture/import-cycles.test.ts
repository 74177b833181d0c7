import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/**
 * The relative imports of each file, type-only ones included: a circle of types is still a
 * circle a reader has to untangle (it is how the engine's files grew into one).
 */
function importGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    graph.set(
      file,
      importedFiles
        .map((f) => f.fileName)
        .filter((name) => name.startsWith("."))
        .map((name) => resolve(dirname(file), name.replace(/\.js$/, ".ts"))),
    );
  }
  return graph;
}

/** The cycles of a graph, each once, as paths that start and end at the same file. */
export function findCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return cycles;
}

describe("imports in src/", () => {
  it("form no cycle (type-only imports included)", () => {
    const cycles = findCycles(importGraph(sources(SRC))).map((cycle) =>
      cycle.map((file) => relative(SRC, file)).join(" -> "),
    );
    expect(cycles).toEqual([]);
  });

  it("the check finds a cycle when there is one", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(findCycles(graph)).toEqual([["a.ts", "b.ts", "c.ts", "a.ts"]]);
  });
});
