import { existsSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";
import * as conventions from "../src/telemetry/conventions.js";
import { doc, docFiles, ROOT } from "./helpers/readme.js";

/** The values of the conventions' constants whose names start with `prefix`. */
const constants = (prefix: string): string[] =>
  Object.entries(conventions)
    .filter(([name, value]) => name.startsWith(prefix) && typeof value === "string")
    .map(([, value]) => value as string);

/** Where the telemetry reference lives: its span and metric tables. */
const TELEMETRY = "docs/telemetry.md";

/** The first column of a table of `page`, without its backticks. */
const names = (page: string, firstColumn: string): string[] =>
  doc(page)
    .table(firstColumn)
    .map(([cell]) => (cell ?? "").replace(/`/g, ""));

describe("the telemetry reference's tables match src/telemetry/conventions.ts", () => {
  it("spans: every SPAN_* constant is a row of the span table, and every row is one", () => {
    const spans = constants("SPAN_");
    expect(spans.length).toBeGreaterThan(0);
    expect(names(TELEMETRY, "span").sort()).toEqual([...spans].sort());
  });

  it("metrics: every METRIC_* constant is a row of the metric table, and every row is one", () => {
    expect(names(TELEMETRY, "metric").sort()).toEqual([...constants("METRIC_")].sort());
  });

  it("span names are written in full (no `.error` shorthand), in the status table too", () => {
    for (const span of constants("SPAN_")) expect(doc(TELEMETRY).text).toContain(`\`${span}\``);
    const status = doc("docs/README.md").section("What is built");
    for (const span of ["agent.tool_call", "agent.tool_call.error", "agent.diagnosis"])
      expect(status).toContain(`\`${span}\``);
    for (const page of docFiles()) expect(doc(page).text, page).not.toMatch(/\/ `\.error` \//);
  });
});

describe("the README is a front page", () => {
  const { lines } = doc("README.md");

  it("is under 400 lines", () => {
    expect(lines.length).toBeLessThan(400);
  });

  it("has no line over 200 characters", () => {
    const long = lines.flatMap((l, i) => (l.length > 200 ? [`line ${i + 1}: ${l.length}`] : []));
    expect(long).toEqual([]);
  });
});

/** The targets of a page's inline links and images, outside code (fences and code spans). */
function linkTargets(text: string): string[] {
  const prose = text
    .replace(/^```[\s\S]*?^```/gm, "")
    .replace(/(`+)[\s\S]*?\1/g, "``")
    .replace(/<!--[\s\S]*?-->/g, "");
  const targets: string[] = [];
  for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
    if (m[1]) targets.push(m[1]);
  return targets;
}

describe("links between the pages", () => {
  const pages = docFiles();

  it("finds the pages and their links", () => {
    expect(pages).toEqual(expect.arrayContaining(["README.md", "CONTRIBUTING.md"]));
    expect(pages.filter((p) => p.startsWith("docs/")).length).toBeGreaterThan(10);
    expect(linkTargets(doc("README.md").text).length).toBeGreaterThan(20);
  });

  it("every relative link points to a file that exists, and its anchor to a heading there", () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const target of linkTargets(doc(page).text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:...
        const [path = "", anchor] = target.split("#");
        const file = path === "" ? page : normalize(join(dirname(page), decodeURI(path)));
        const where = `${page} -> ${target}`;
        if (relative(ROOT, join(ROOT, file)).startsWith("..")) {
          broken.push(`${where}: outside the repository`);
          continue;
        }
        if (!existsSync(join(ROOT, file))) {
          broken.push(`${where}: no such file`);
          continue;
        }
        if (anchor === undefined || anchor === "") continue;
        if (!file.endsWith(".md") || statSync(join(ROOT, file)).isDirectory()) {
          broken.push(`${where}: an anchor into a file that is not Markdown`);
          continue;
        }
        if (!doc(file.replace(/\\/g, "/")).anchors().has(anchor))
          broken.push(`${where}: no heading with that anchor`);
      }
    }
    expect(broken).toEqual([]);
  });
});
