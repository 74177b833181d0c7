import { readFileSync } from "node:fs";
import { resolve } from "node:path";

export const README = readFileSync(resolve(import.meta.dirname, "../../README.md"), "utf8");

/** The text of the section under the heading `heading` (any level), to the next heading. */
export function readmeSection(heading: string): string {
  const lines = README.split("\n");
  const start = lines.findIndex((l) => /^#{2,4} /.test(l) && l.replace(/^#+ /, "") === heading);
  if (start < 0) throw new Error(`README has no heading "${heading}"`);
  const end = lines.findIndex((l, i) => i > start && /^#{2,4} /.test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
}

/** The first ```ts block of a README section. */
export function readmeBlock(heading: string): string {
  const match = /```ts\n([\s\S]*?)```/.exec(readmeSection(heading));
  if (!match?.[1]) throw new Error(`README section "${heading}" has no ts block`);
  return match[1];
}

/** The rows of the first table whose header's first cell is `firstColumn`, as cell lists. */
export function readmeTable(firstColumn: string): string[][] {
  const lines = README.split("\n");
  const header = lines.findIndex((l) => new RegExp(`^\\|\\s*${firstColumn}\\s*\\|`).test(l));
  if (header < 0) throw new Error(`README has no table starting with "${firstColumn}"`);
  const rows: string[][] = [];
  for (let i = header + 2; i < lines.length && lines[i]?.startsWith("|"); i++) {
    rows.push(
      (lines[i] ?? "")
        .split("|")
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

export interface ReadmeBlock {
  /** The heading (any level from 2 to 4) the block sits under. */
  heading: string;
  /** 1 for the first block of this language under that heading, 2 for the next... */
  index: number;
  /** The 1-based line of its opening fence. */
  line: number;
  code: string;
}

/** Every fenced block of `language` (```ts: "ts"), in order; headings inside fences ignored. */
export function readmeBlocks(language: string): ReadmeBlock[] {
  const lines = README.split("\n");
  const blocks: ReadmeBlock[] = [];
  let heading = "";
  let count = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (/^#{2,4} /.test(line)) {
      heading = line.replace(/^#+ /, "");
      count = 0;
    } else if (line.startsWith("```")) {
      const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
      if (end < 0) throw new Error(`README line ${i + 1}: a fence that is never closed`);
      if (line.slice(3).trim() === language)
        blocks.push({
          heading,
          index: ++count,
          line: i + 1,
          code: lines.slice(i + 1, end).join("\n"),
        });
      i = end;
    }
  }
  return blocks;
}
